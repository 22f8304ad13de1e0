"""Runs from several Python threads, the memory report, and the pools' statistics."""
import gc
import threading

import numpy as np
import pytest

import planrt


def run_threads(module, method, inputs, threads=4, repeats=5):
    results = [[None] * repeats for _ in range(threads)]
    errors = []

    def work(t):
        try:
            for r in range(repeats):
                results[t][r] = module.run(method, [inputs[(t + r) % len(inputs)]])[0]
        except Exception as e:  # reported by the main thread
            errors.append(e)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert not errors, errors
    return results


@pytest.mark.parametrize("share", [True, False])
def test_concurrent_runs_give_the_serial_results(encoder, rng, share):
    m = planrt.Module(encoder, share_memory_arenas=share)
    inputs = [rng.standard_normal((1, s, 64)).astype(np.float32) for s in (3, 8, 17, 32)]
    serial = [m.run("forward", [x])[0] for x in inputs]
    results = run_threads(m, "forward", inputs)
    for t, row in enumerate(results):
        for r, y in enumerate(row):
            np.testing.assert_array_equal(y, serial[(t + r) % len(inputs)])


TWO_HOST_METHODS = """{
  "format": "planrt-model/1",
  "weights": {"random": {"seed": 3, "std": 0.1}},
  "constants": {"w": {"dtype": "f32", "shape": [32, 16]}, "v": {"dtype": "f32", "shape": [16, 32]}},
  "methods": [
    {"name": "expand", "backend": "cpu", "dims": {"B": {"min": 1, "max": 8}},
     "inputs": [{"name": "x", "dtype": "f32", "shape": ["B", 16]}], "outputs": ["y"],
     "nodes": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["h"]},
               {"op": "relu", "inputs": ["h"], "outputs": ["y"]}]},
    {"name": "shrink", "backend": "cpu", "dims": {"B": {"min": 1, "max": 8}},
     "inputs": [{"name": "x", "dtype": "f32", "shape": ["B", 32]}], "outputs": ["y"],
     "nodes": [{"op": "linear", "inputs": ["x", "v"], "outputs": ["h"]},
               {"op": "relu", "inputs": ["h"], "outputs": ["y"]}]}
  ]
}"""


def test_concurrent_runs_of_two_methods_with_unloads(tmp_path, rng):
    (tmp_path / "two.json").write_text(TWO_HOST_METHODS)
    m = planrt.Module(planrt.build(tmp_path / "two.json"))
    names = m.method_names()
    assert len(names) == 2
    metas = {n: m.method_meta(n) for n in names}
    inputs = {}
    for n in names:
        spec = metas[n].inputs[0]
        shape = [d if isinstance(d, int) else 2 for d in spec.shape]
        inputs[n] = rng.standard_normal(shape).astype(np.float32)
    serial = {n: m.run(n, [inputs[n]])[0] for n in names}
    errors = []

    def work(n):
        try:
            for _ in range(10):
                np.testing.assert_array_equal(m.run(n, [inputs[n]])[0], serial[n])
        except Exception as e:
            errors.append(e)

    def unloader():
        for _ in range(10):
            try:
                m.unload_method(names[0])
            except planrt.NotFoundError:
                pass  # not loaded again yet

    pool = [threading.Thread(target=work, args=(n,)) for n in names * 2]
    pool.append(threading.Thread(target=unloader))
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert not errors, errors


def test_memory_report_names_weights_arenas_and_scratch(rng):
    built = planrt.build(template="transformer", layers=2, d_model=64, heads=4, ffn=128,
                         max_seq=32, partition="engine-per-block", device="cpu")
    m = planrt.Module(built)
    meta = m.method_meta("forward")
    # Before the first run: nothing held, and the method's estimate, not an empty report.
    before = m.memory_report()
    (cpu_before,) = before["devices"]
    assert cpu_before["device"] == "cpu" and cpu_before["weights_bytes"] == cpu_before["planned_bytes"] == 0
    assert before["methods"]["forward"]["loaded"] is False
    assert before["methods"]["forward"]["estimate"][0]["planned_bytes"] == meta.memory[0].planned_bytes
    m.run("forward", [rng.standard_normal((1, 8, 64)).astype(np.float32)])
    report = m.memory_report()
    (cpu,) = report["devices"]
    (estimate,) = meta.memory
    assert cpu["device"] == "cpu"
    assert cpu["weights_bytes"] == estimate.weights_bytes
    assert cpu["planned_bytes"] == report["shared_host_arena_bytes"] == estimate.planned_bytes
    assert report["shared_host_arenas_allocated"]
    scratch = cpu["engine_scratch"]
    assert scratch["private_contexts"] == 2
    assert {c["segment"] for c in scratch["contexts"]} == {"block0", "block1"}
    assert scratch["private_scratch_bytes"] == sum(c["scratch_bytes"] for c in scratch["contexts"]) > 0
    assert report["methods"]["forward"]["estimate"][0]["planned_bytes"] == estimate.planned_bytes
    assert report["methods"]["forward"]["loaded"] is True
    assert cpu["warm_pool"] is None and cpu["device_used_bytes"] is None
    assert cpu["ledger"] is None  # the ledger is a CUDA device's
    del m
    gc.collect()
    assert planrt.engine_scratch_stats("cpu")["private_contexts"] == 0


def test_engine_scratch_pool_trims(rng):
    built = planrt.build(template="transformer", layers=2, d_model=64, heads=4, ffn=128,
                         max_seq=32, partition="engine-per-block", device="cpu",
                         shared_scratch=True)
    m = planrt.Module(built)
    m.run("forward", [rng.standard_normal((1, 16, 64)).astype(np.float32)])
    stats = planrt.engine_scratch_stats("cpu")
    assert stats["pooled_contexts"] == 2 and stats["pool_capacity_bytes"] > 0
    planrt.trim_engine_scratch_pool("cpu")
    assert planrt.engine_scratch_stats("cpu")["pool_capacity_bytes"] == 0
    with pytest.raises(planrt.InvalidArgumentError, match="tpu"):
        planrt.engine_scratch_stats("tpu:0")


def test_cuda_figures_without_a_gpu_are_errors():
    if planrt.has_cuda:
        try:
            planrt.device_memory("cuda:0")
            pytest.skip("a GPU is present: tests/python/test_cuda.py covers it")
        except planrt.Error:
            pass
    for call in (planrt.warm_pool_stats, planrt.trim_warm_pool, planrt.device_memory,
                 lambda device: planrt.device_memory_ledger(device, 0)):
        with pytest.raises(planrt.NotSupportedError):
            call("cuda:0")


def test_the_ledger_is_for_cuda_devices_only():
    # A CUDA build says the device is not CUDA; a build without CUDA says so.
    with pytest.raises((planrt.InvalidArgumentError, planrt.NotSupportedError), match="CUDA"):
        planrt.device_memory_ledger("cpu", 0)
