"""planrt.build: each model source, the options, and the errors of each."""
import os
import pathlib
import subprocess

import numpy as np
import pytest

import planrt

NODE_TESTS = pathlib.Path(os.environ.get("PLANRT_ONNX_NODE_DIR",
                                         "/usr/share/libonnx-testdata/data/node"))


def test_template_builds_and_reports_its_plan(encoder):
    (plan,) = encoder.plans
    assert plan["method"] == "forward" and plan["device"] == "cpu"
    assert plan["planned_bytes"] >= plan["lower_bound_bytes"] > 0
    assert plan["ratio"] == pytest.approx(plan["planned_bytes"] / plan["lower_bound_bytes"])
    assert encoder.num_constants > 0 and encoder.constants_bytes > 0


def test_json_model_builds_saves_and_loads(mlp_json, tmp_path):
    built = planrt.build(mlp_json)
    path = tmp_path / "mlp.prog"
    built.save(path)
    from_file = planrt.Module(path)
    from_bytes = planrt.Module(built.to_bytes())
    from_built = planrt.Module(built)
    x = np.ones((2, 16), np.float32)
    outs = [m.run("forward", [x])[0] for m in (from_file, from_bytes, from_built)]
    assert outs[0].shape == (2, 4)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])


def test_external_weights_are_written_beside_the_program(mlp_json, tmp_path):
    built = planrt.build(mlp_json, external_weights=True)
    built.save(tmp_path / "m.prog")
    assert (tmp_path / "m.safetensors").exists()
    assert planrt.Module(tmp_path / "m.prog").run("forward", [np.ones((1, 16), np.float32)])[0].shape == (1, 4)
    with pytest.raises(planrt.Error):
        built.to_bytes()  # external weights need save()


def test_onnx_model_builds_with_its_dims(tmp_path):
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()
    path = tmp_path / "mlp.onnx"
    x = torch.randn(5, 8)
    torch.onnx.export(model, (x,), str(path), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}}, opset_version=14)
    with pytest.raises(planrt.InvalidArgumentError, match=r"pass dims=\{'batch': \(MIN, MAX\)\}") as info:
        planrt.build(path)  # a dim without a bound names the keyword, in Python's terms
    assert "--dim" not in str(info.value)
    with pytest.raises(planrt.InvalidArgumentError, match="dims names 'foo'"):
        planrt.build(path, dims={"batch": (1, 4), "foo": 2})
    with pytest.raises(planrt.InvalidArgumentError, match="input_values names 'y'"):
        planrt.build(path, dims={"batch": (1, 4)}, input_values={"y": tmp_path / "y.npy"})
    module = planrt.Module(planrt.build(path, dims={"batch": (1, 16)}))
    meta = module.method_meta("forward")
    assert [d.name for d in meta.dims] == ["batch"] and (meta.dims[0].min, meta.dims[0].max) == (1, 16)
    (y,) = module.run("forward", [x.numpy()])
    with torch.no_grad():
        np.testing.assert_allclose(y, model(x).numpy(), rtol=1e-5, atol=1e-6)
    fixed = planrt.Module(planrt.build(path, dims={"batch": 5}, method="infer"))
    assert fixed.method_names() == ["infer"]
    assert fixed.method_meta("infer").inputs[0].shape == [5, 8]


@pytest.mark.skipif(not (NODE_TESTS / "test_relu").exists(), reason="libonnx-testdata not installed")
def test_onnx_node_test_through_python():
    from onnx import numpy_helper, TensorProto
    case = NODE_TESTS / "test_relu"
    module = planrt.Module(planrt.build(case / "model.onnx"))

    def read(p):
        t = TensorProto()
        t.ParseFromString(p.read_bytes())
        return numpy_helper.to_array(t)

    (y,) = module.run("forward", [read(case / "test_data_set_0" / "input_0.pb")])
    np.testing.assert_array_equal(y, read(case / "test_data_set_0" / "output_0.pb"))


@pytest.mark.parametrize("kwargs, error, text", [
    (dict(), planrt.InvalidArgumentError, "either a model file"),
    (dict(model="m.json", template="transformer"), planrt.InvalidArgumentError, "not both"),
    (dict(template="resnet"), planrt.InvalidArgumentError, "unknown template 'resnet'"),
    (dict(template="transformer", attention="flash"), planrt.InvalidArgumentError, "attention='flash'"),
    (dict(template="transformer", dtype="f64"), planrt.InvalidArgumentError, "f64"),
    (dict(template="transformer", partition="sideways"), planrt.InvalidArgumentError, "sideways"),
    (dict(template="transformer", heads=7), planrt.InvalidArgumentError, "heads"),
    (dict(template="transformer", dims={"S": 4}), planrt.InvalidArgumentError, "ONNX"),
    (dict(model="/nonexistent/m.json"), planrt.IoError, "/nonexistent/m.json"),
    (dict(model="/nonexistent/m.onnx"), planrt.NotFoundError, "/nonexistent/m.onnx"),
])
def test_bad_build_arguments_raise_the_error_of_their_code(kwargs, error, text):
    with pytest.raises(error, match=text) as info:
        planrt.build(**kwargs)
    assert isinstance(info.value, planrt.Error)
    assert info.value.code == error.code


def test_json_model_refuses_onnx_and_template_options(mlp_json):
    with pytest.raises(planrt.InvalidArgumentError, match="ONNX"):
        planrt.build(mlp_json, dims={"B": (1, 4)})
    with pytest.raises(planrt.InvalidArgumentError, match="device"):
        planrt.build(mlp_json, device="cpu")


def test_bad_dim_bounds_are_refused(tmp_path):
    with pytest.raises(planrt.InvalidArgumentError, match="1 <= MIN <= MAX"):
        planrt.build(tmp_path / "m.onnx", dims={"S": (8, 2)})
    with pytest.raises(planrt.InvalidArgumentError, match="N or"):
        planrt.build(tmp_path / "m.onnx", dims={"S": "big"})


def test_malformed_model_json_is_an_invalid_program(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "planrt-model/1", "methods": [')
    with pytest.raises(planrt.Error) as info:
        planrt.build(bad)
    assert "bad.json" in str(info.value)


def test_save_to_a_missing_folder_is_an_io_error(encoder, tmp_path):
    with pytest.raises(planrt.IoError):
        encoder.save(tmp_path / "no" / "such" / "dir" / "m.prog")


def test_planned_engine_scratch_is_in_the_plan_and_runs_like_private():
    kw = dict(template="transformer", partition="engine-per-block", device="cpu", layers=2,
              d_model=64, heads=4, ffn=128, max_seq=32, weights="random:3")
    private = planrt.Module(planrt.build(**kw))
    planned = planrt.Module(planrt.build(**kw, engine_scratch="planned"))
    meta = planned.method_meta("forward")
    assert all(s.planned_scratch for s in meta.segments)
    assert not any(s.planned_scratch for s in private.method_meta("forward").segments)
    x = np.sin(np.arange(1 * 20 * 64, dtype=np.float32)).reshape(1, 20, 64)
    np.testing.assert_array_equal(planned.run("forward", [x])[0], private.run("forward", [x])[0])
    assert planrt.engine_scratch_stats("cpu")["planned_contexts"] >= 2
    with pytest.raises(planrt.InvalidArgumentError, match="engine_scratch='sometimes'"):
        planrt.build(**kw, engine_scratch="sometimes")
    with pytest.raises(planrt.InvalidArgumentError, match="cuda_scratch='gpu'"):
        planrt.build(**kw, cuda_scratch="gpu")
    with pytest.raises(planrt.InvalidArgumentError, match="disagree"):
        planrt.build(**kw, engine_scratch="planned", shared_scratch=True)
    with pytest.raises(planrt.InvalidArgumentError, match="disagree"):
        planrt.build(**kw, engine_scratch="private", shared_scratch=True)


def test_the_estimate_predicts_the_library_handles_of_a_cuda_method():
    built = planrt.build(template="transformer", partition="cuda", device="cuda:0", layers=1,
                         d_model=64, heads=4, ffn=128, max_seq=32)
    est = {e.device: e for e in planrt.Module(built).method_meta("forward").memory}
    gpu = est["cuda:0"]
    assert gpu.library_bytes == 4 << 20 and not gpu.uses_warm_pool
    assert gpu.predicted_bytes == gpu.total_bytes + gpu.library_bytes + gpu.page_rounding_bytes
    assert est["cpu"].library_bytes == 0


def test_onnx_model_as_bytes_or_model_proto_builds_like_its_file(tmp_path):
    torch = pytest.importorskip("torch")
    onnx = pytest.importorskip("onnx")
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
    path = tmp_path / "m.onnx"
    x = torch.randn(2, 8)
    torch.onnx.export(model, (x,), str(path), input_names=["x"], output_names=["y"], opset_version=14)
    want = planrt.Module(planrt.build(path)).run("forward", [x.numpy()])[0]
    for source in (path.read_bytes(), bytearray(path.read_bytes()), onnx.load(str(path))):
        (y,) = planrt.Module(planrt.build(source)).run("forward", [x.numpy()])
        np.testing.assert_array_equal(y, want)
    with pytest.raises(planrt.InvalidArgumentError, match="not an ONNX model"):
        planrt.build(b"\x00\x01 not protobuf")


@pytest.mark.parametrize("kwargs, text", [
    (dict(model=7), "model must be a path"),
    (dict(template="transformer", device=7), "device must be a str, not int"),
    (dict(template="transformer", ffn="a"), "ffn must be an int or a list"),
    (dict(template="transformer", ffn=[128, "a"]), "each ffn width must be an int, not str"),
    (dict(model="m.onnx", dims={"seq": 2**70}), r"dims\['seq'\] = 1180591620717411303424 does not fit in 64 bits"),
    (dict(model="m.onnx", dims={"seq": (1, 2.5)}), r"dims\['seq'\] MAX must be an int, not float"),
])
def test_wrong_typed_arguments_say_what_to_pass(kwargs, text):
    with pytest.raises(planrt.InvalidArgumentError, match=text):
        planrt.build(**kwargs)
