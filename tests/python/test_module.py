"""planrt.Module: metadata, loading, runs on NumPy and DLPack inputs, outputs, errors."""
import gc
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import planrt


def x_of(rng, s=8, d=64):
    return rng.standard_normal((1, s, d)).astype(np.float32)


def test_method_meta_answers_before_loading(encoder):
    m = planrt.Module(encoder)
    assert m.method_names() == ["forward"]
    meta = m.method_meta("forward")
    assert not m.is_method_loaded("forward")
    assert [(d.name, d.min, d.max) for d in meta.dims] == [("S", 1, 32)]
    (x,) = meta.inputs
    assert (x.name, x.dtype, x.shape) == ("x", "f32", [1, "S", 64])
    assert meta.outputs[0].shape == [1, "S", 64]
    assert meta.planned_buffers and all(b.device == "cpu" for b in meta.planned_buffers)
    (estimate,) = meta.memory
    assert estimate.device == "cpu"
    assert estimate.planned_bytes == sum(b.size_bytes for b in meta.planned_buffers)
    assert estimate.weights_bytes == m.constants_bytes
    assert estimate.total_bytes == estimate.planned_bytes + estimate.weights_bytes
    assert not meta.uses_device_memory and meta.num_instructions > 0
    assert "TensorSpec(name='x'" in repr(meta)


def test_load_unload_and_run_by_order_name_or_alone(encoder, rng):
    m = planrt.Module(encoder)
    m.load_method("forward")
    assert m.is_method_loaded("forward") and m.loaded_methods() == ["forward"]
    x = x_of(rng)
    (a,) = m.run("forward", [x])
    (b,) = m.run("forward", {"x": x})
    (c,) = m.run("forward", x)
    (d,) = m.run("forward", (x,))
    for other in (b, c, d):
        np.testing.assert_array_equal(a, other)
    assert a.shape == (1, 8, 64) and a.dtype == np.float32 and a.flags.writeable
    assert m.run_stats("forward")["runs"] == 4
    m.unload_method("forward")
    assert not m.is_method_loaded("forward")
    with pytest.raises(planrt.NotFoundError, match="not loaded"):
        m.unload_method("forward")
    with pytest.raises(planrt.NotFoundError, match="not loaded"):
        m.run_stats("forward")
    (again,) = m.run("forward", [x])  # loads on first use
    np.testing.assert_array_equal(a, again)


def test_step_profile_times_every_step_of_every_run(encoder, rng):
    m = planrt.Module(encoder, profile_steps=True)
    x = x_of(rng)
    for _ in range(3):
        m.run("forward", [x])
    steps = m.step_profile("forward")
    assert len(steps) > 5
    assert {s["kind"] for s in steps} == {"kernel"}
    assert all(s["calls"] == 3 and s["total_ms"] >= 0 and s["op"] and s["node"] for s in steps)
    assert "linear" in {s["op"] for s in steps}
    assert sum(s["total_ms"] for s in steps) > 0
    plain = planrt.Module(encoder)
    plain.run("forward", [x])
    assert plain.step_profile("forward") == []


def test_lists_become_arrays_of_the_input_dtype(mlp_json):
    m = planrt.Module(planrt.build(mlp_json))
    (y,) = m.run("forward", [[[0.5] * 16]])
    (z,) = m.run("forward", [np.full((1, 16), 0.5, np.float32)])
    np.testing.assert_array_equal(y, z)


def test_non_contiguous_arrays_are_copied_first(mlp_json, rng):
    m = planrt.Module(planrt.build(mlp_json))
    big = rng.standard_normal((4, 32)).astype(np.float32)
    view = big[:, ::2]
    assert not view.flags.c_contiguous
    np.testing.assert_array_equal(m.run("forward", [view])[0], m.run("forward", [view.copy()])[0])


def test_torch_tensors_go_in_through_dlpack(encoder, rng):
    torch = pytest.importorskip("torch")
    m = planrt.Module(encoder)
    x = x_of(rng)
    (expected,) = m.run("forward", [x])
    (from_torch,) = m.run("forward", [torch.from_numpy(x)])
    np.testing.assert_array_equal(expected, from_torch)


def test_dlpack_outputs_are_shared_not_copied(encoder, rng):
    torch = pytest.importorskip("torch")
    m = planrt.Module(encoder)
    x = x_of(rng)
    (t,) = m.run("forward", [x], outputs="dlpack")
    assert isinstance(t, planrt.Tensor)
    assert (t.shape, t.dtype, t.device, t.nbytes) == ((1, 8, 64), "f32", "cpu", 8 * 64 * 4)
    tt = torch.from_dlpack(t)
    a = np.asarray(t)
    assert tt.data_ptr() == a.ctypes.data  # one buffer: planrt's tensor, no copy
    np.testing.assert_array_equal(a, m.run("forward", [x])[0])
    np.testing.assert_array_equal(np.from_dlpack(t), a)
    del t, a
    gc.collect()
    assert tt.sum().item() == pytest.approx(float(m.run("forward", [x])[0].sum()), rel=1e-6)
    with pytest.raises(planrt.InvalidArgumentError, match="outputs='torch'"):
        m.run("forward", [x], outputs="torch")


def test_outputs_outlive_the_module(encoder, rng):
    m = planrt.Module(encoder)
    x = x_of(rng)
    (y,) = m.run("forward", [x])
    keep = y.copy()
    del m
    gc.collect()
    np.testing.assert_array_equal(y, keep)


def test_input_reference_counts_are_unchanged(encoder, rng):
    m = planrt.Module(encoder)
    x = x_of(rng)
    before = sys.getrefcount(x)
    for _ in range(3):
        m.run("forward", [x])
    assert sys.getrefcount(x) == before


def test_outputs_equal_the_clis(encoder, rng, tmp_path):
    cli = os.environ.get("PLANRT_CLI")
    if not cli:
        pytest.skip("PLANRT_CLI not set")
    prog = tmp_path / "enc.prog"
    encoder.save(prog)
    x = x_of(rng, s=5)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([cli, "run", str(prog), "--input", f"x={tmp_path / 'x.npy'}",
                    "--output-dir", str(tmp_path / "out")], check=True, capture_output=True)
    from_cli = np.load(tmp_path / "out" / "y.npy")
    (from_python,) = planrt.Module(prog).run("forward", [x])
    np.testing.assert_array_equal(from_cli, from_python)


@pytest.mark.parametrize("inputs, error, text", [
    ([np.zeros((1, 8, 64))], planrt.InvalidArgumentError, "float64"),
    ([np.zeros((1, 8, 64), np.int32)], planrt.InvalidArgumentError, "is i32, expected f32"),
    ([np.zeros((8, 64), np.float32)], planrt.InvalidArgumentError, "rank"),
    ([np.zeros((1, 8, 32), np.float32)], planrt.InvalidArgumentError, "input 0 'x'"),
    ([np.zeros((1, 33, 64), np.float32)], planrt.OutOfRangeError, "33"),
    ([], planrt.InvalidArgumentError, "takes 1 inputs, got 0"),
    ({"y": np.zeros((1, 8, 64), np.float32)}, planrt.NotFoundError, "no input 'y'"),
    ({}, planrt.InvalidArgumentError, "input 'x' is missing"),
    ([np.zeros((1, 8, 64), np.bool_)], planrt.InvalidArgumentError, "bool"),
])
def test_bad_inputs_raise_the_error_of_their_code(encoder, inputs, error, text):
    m = planrt.Module(encoder)
    with pytest.raises(error, match=text) as info:
        m.run("forward", inputs)
    assert info.value.code == error.code
    (y,) = m.run("forward", [np.zeros((1, 4, 64), np.float32)])  # the module still runs
    assert y.shape == (1, 4, 64)


def test_errors_derive_from_the_builtin_of_their_kind():
    assert issubclass(planrt.InvalidArgumentError, ValueError)
    assert issubclass(planrt.NotFoundError, LookupError)
    assert issubclass(planrt.OutOfRangeError, IndexError)
    assert issubclass(planrt.IoError, OSError)
    assert issubclass(planrt.OutOfMemoryError, MemoryError)
    for cls in (planrt.InvalidProgramError, planrt.NotSupportedError, planrt.InternalError):
        assert issubclass(cls, planrt.Error)


def test_unknown_method_lists_the_programs(encoder):
    m = planrt.Module(encoder)
    with pytest.raises(planrt.NotFoundError, match="method 'backward' not found; the program has: forward"):
        m.method_meta("backward")
    with pytest.raises(planrt.NotFoundError):
        m.run("backward", [])
    with pytest.raises(planrt.NotFoundError):
        m.load_method("backward")


def test_bad_sources_and_options(tmp_path, encoder):
    with pytest.raises(planrt.NotFoundError, match="nothing.prog"):
        planrt.Module(tmp_path / "nothing.prog")
    with pytest.raises(planrt.InvalidProgramError):
        planrt.Module(b"not a program at all, just some bytes")
    truncated = encoder.to_bytes()[:200]
    with pytest.raises(planrt.InvalidProgramError):
        planrt.Module(truncated)
    with pytest.raises(planrt.InvalidArgumentError, match="not int"):
        planrt.Module(42)
    with pytest.raises(planrt.InvalidArgumentError, match="BACKEND.KEY"):
        planrt.Module(encoder, backend_options={"use_cuda_graphs": True})
    with pytest.raises(planrt.InvalidArgumentError, match="must be a dict"):
        planrt.Module(encoder, backend_options=["cuda"])
    with pytest.raises(planrt.InvalidArgumentError, match="engine.x"):
        planrt.Module(encoder, backend_options={"engine": {"x": [1]}})


def test_planned_limit_is_an_out_of_memory_error(encoder):
    m = planrt.Module(encoder, max_planned_bytes_per_device=1024)
    with pytest.raises(planrt.OutOfMemoryError, match="1024"):
        m.load_method("forward")
    assert not m.is_method_loaded("forward")


def test_backend_options_reach_the_engine(rng):
    built = planrt.build(template="transformer", layers=2, d_model=64, heads=4, ffn=128,
                         max_seq=32, partition="engine-per-block", device="cpu")
    for options in ({"engine": {"use_shared_activation_scratch": True}},
                    {"engine.use_shared_activation_scratch": "true"}):
        m = planrt.Module(built, backend_options=options)
        m.run("forward", [x_of(rng)])
        stats = planrt.engine_scratch_stats("cpu")
        assert stats["pooled_contexts"] == 2
        del m
        gc.collect()
    with pytest.raises(planrt.InvalidArgumentError, match="use_shared_activation_scratch"):
        planrt.Module(built, backend_options={"engine": {"use_shared_activation_scratch": "maybe"}}).load_method("forward")


def test_memory_is_released_when_a_module_is_dropped(rng):
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    built = planrt.build(template="transformer", layers=1, d_model=256, heads=4, ffn=1024, max_seq=16)
    data = built.to_bytes()  # ~3 MB of weights: every leaked module would keep them
    x = x_of(rng, d=256)
    planrt.Module(data).run("forward", [x])
    gc.collect()
    start = rss()
    for _ in range(30):
        m = planrt.Module(data)
        m.run("forward", [x])
        del m
    gc.collect()
    assert rss() - start < 10 * len(data), (rss() - start, len(data))


def test_bool_and_uint8_arrays_go_in_and_come_out(tmp_path):
    model = {
        "format": "planrt-model/1",
        "methods": [{
            "name": "forward", "dims": {"S": {"min": 1, "max": 8}},
            "inputs": [{"name": "x", "dtype": "f32", "shape": ["S"]},
                       {"name": "keep", "dtype": "bool", "shape": ["S"]},
                       {"name": "code", "dtype": "u8", "shape": ["S"]}],
            "outputs": ["y", "big"],
            "nodes": [{"op": "where", "inputs": ["keep", "x", "x0"], "outputs": ["y"]},
                      {"op": "greater", "inputs": ["code", "c100"], "outputs": ["big"]}],
        }],
        "weights": {"random": {"seed": 1}},
        "constants": {"x0": {"dtype": "f32", "shape": [1], "init": "zeros"},
                      "c100": {"dtype": "u8", "shape": [1], "init": "ones"}},
    }
    path = tmp_path / "m.json"
    path.write_text(__import__("json").dumps(model))
    m = planrt.Module(planrt.build(path))
    x = np.array([1.5, -2.0, 3.0], np.float32)
    keep = np.array([True, False, True])
    code = np.array([0, 1, 200], np.uint8)
    y, big = m.run("forward", [x, keep, code])
    np.testing.assert_array_equal(y, [1.5, 0.0, 3.0])
    assert big.dtype == np.bool_
    np.testing.assert_array_equal(big, [False, False, True])
