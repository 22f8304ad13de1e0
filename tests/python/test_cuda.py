"""The module on a GPU (the GPU lane runs these with PLANRT_REQUIRE_GPU=1, where a missing
GPU fails instead of skipping): CUDA tensors in through DLPack without a host round trip,
bf16, the memory report's device figures, and device memory given back with a Module."""
import gc
import os

import numpy as np
import pytest

import planrt

torch = pytest.importorskip("torch")

HAVE_GPU = planrt.has_cuda and torch.cuda.is_available()
if not HAVE_GPU and os.environ.get("PLANRT_REQUIRE_GPU") == "1":
    raise RuntimeError("PLANRT_REQUIRE_GPU=1 but planrt has no CUDA support or torch sees no GPU")
pytestmark = pytest.mark.skipif(not HAVE_GPU, reason="needs planrt with CUDA and a GPU")

MIB = 1 << 20


@pytest.fixture(scope="module")
def cuda_encoder():
    return planrt.build(template="transformer", layers=2, d_model=64, heads=4, ffn=128,
                        max_seq=64, partition="cuda", device="cuda:0")


def test_a_cuda_tensor_goes_in_without_a_host_round_trip(cuda_encoder):
    m = planrt.Module(cuda_encoder)
    x = torch.randn(1, 16, 64)
    (from_host,) = m.run("forward", [x.numpy()])
    before = m.run_stats("forward")
    assert before["host_to_device_bytes"] == x.numel() * 4
    (from_device,) = m.run("forward", [x.cuda()])
    after = m.run_stats("forward")
    assert after["host_to_device_bytes"] == before["host_to_device_bytes"]  # no host copy in
    assert after["device_to_device_bytes"] - before["device_to_device_bytes"] == x.numel() * 4
    assert after["inputs_from_device"] == before["inputs_from_device"] + 1
    np.testing.assert_array_equal(from_host, from_device)


def test_a_cuda_input_made_on_another_stream_is_read_after_it_is_written(cuda_encoder):
    m = planrt.Module(cuda_encoder)
    side = torch.cuda.Stream()
    torch.manual_seed(0)
    with torch.cuda.stream(side):
        busy = torch.randn(4096, 4096, device="cuda")
        for _ in range(8):  # queued work ahead of x: a read that does not wait sees stale memory
            busy = torch.tanh(busy @ busy)
        x = (torch.arange(64 * 64, device="cuda", dtype=torch.float32).reshape(1, 64, 64) % 97) / 97
        (y,) = m.run("forward", [x])
    side.synchronize()
    (expected,) = m.run("forward", [x.cpu().numpy()])
    np.testing.assert_array_equal(y, expected)


def test_a_cuda_tensor_on_the_host_method_is_refused():
    m = planrt.Module(planrt.build(template="transformer", layers=1, d_model=64, heads=4, ffn=128,
                                   max_seq=16))
    with pytest.raises(planrt.InvalidArgumentError, match="reads it on the host"):
        m.run("forward", [torch.zeros(1, 4, 64, device="cuda")])


def test_bf16_takes_float32_or_bf16_and_gives_both_back():
    built = planrt.build(template="transformer", layers=1, d_model=128, heads=2, ffn=256,
                         max_seq=32, partition="cuda", device="cuda:0", dtype="bf16")
    m = planrt.Module(built)
    assert m.method_meta("forward").inputs[0].dtype == "bf16"
    x = torch.randn(1, 8, 128)
    (from_f32,) = m.run("forward", [x.numpy()])
    assert from_f32.dtype == np.float32
    (from_bf16,) = m.run("forward", [x.to(torch.bfloat16).cuda()])
    np.testing.assert_array_equal(from_f32, from_bf16)
    (t,) = m.run("forward", [x.numpy()], outputs="dlpack")
    assert t.dtype == "bf16"
    tt = torch.from_dlpack(t)
    assert tt.dtype == torch.bfloat16
    np.testing.assert_array_equal(tt.float().numpy(), from_f32)


def test_memory_report_has_the_devices_figures(cuda_encoder):
    # The warm-pool form, so the report's pool figures have something in them (the default,
    # planned scratch, takes nothing from the pool).
    cuda_encoder = planrt.build(template="transformer", layers=2, d_model=64, heads=4, ffn=128,
                                max_seq=64, partition="cuda", device="cuda:0", cuda_scratch="pool")
    m = planrt.Module(cuda_encoder)
    m.run("forward", [np.ones((1, 32, 64), np.float32)])
    report = m.memory_report()
    devices = {d["device"]: d for d in report["devices"]}
    gpu = devices["cuda:0"]
    meta = {e.device: e for e in m.method_meta("forward").memory}
    assert gpu["weights_bytes"] == meta["cuda:0"].weights_bytes > 0
    assert gpu["planned_bytes"] == meta["cuda:0"].planned_bytes
    assert gpu["warm_pool"]["pool_created"] and gpu["warm_pool"]["used_high_bytes"] > 0
    assert gpu["device_used_bytes"] > 0 and gpu["device_total_bytes"] >= gpu["device_used_bytes"]
    # The ledger: the device's use since the Module opened its program, split by owner.
    ledger = gpu["ledger"]
    lines = {line["name"]: line["bytes"] for line in ledger["lines"]}
    assert set(lines) == {"weights", "arenas", "engine scratch", "scratch pool", "warm pool",
                          "library handles", "CUDA graphs"}
    assert lines["weights"] == gpu["weights_bytes"]
    assert lines["warm pool"] == gpu["warm_pool"]["reserved_bytes"]
    assert ledger["named_bytes"] == sum(lines.values())
    assert ledger["measured_bytes"] == ledger["used_bytes"] - ledger["baseline_used_bytes"]
    assert ledger["remainder_bytes"] == ledger["measured_bytes"] - ledger["named_bytes"]
    assert abs(ledger["remainder_bytes"]) <= 8 << 20, ledger
    again = planrt.device_memory_ledger("cuda:0", ledger["baseline_used_bytes"])
    assert [line["name"] for line in again["lines"]] == [line["name"] for line in ledger["lines"]]
    planrt.trim_warm_pool("cuda:0")
    assert planrt.warm_pool_stats("cuda:0")["trims"] >= 1
    assert planrt.device_memory("cuda:0")["total_bytes"] == gpu["device_total_bytes"]


def test_device_memory_comes_back_when_a_module_is_dropped():
    # Large enough that its weights and planned arena show in cudaMemGetInfo's 2 MiB steps.
    cuda_encoder = planrt.build(template="transformer", layers=2, d_model=256, heads=4, ffn=1024,
                                max_seq=1024, partition="cuda", device="cuda:0")
    x = np.ones((1, 64, 256), np.float32)

    def cycle():
        m = planrt.Module(cuda_encoder)
        m.run("forward", [x])
        del m
        gc.collect()
        planrt.trim_warm_pool("cuda:0")
        return planrt.device_memory("cuda:0")["used_bytes"]

    cycle()  # the process's first CUDA context, cuBLAS and kernel images stay loaded
    base = planrt.device_memory("cuda:0")["used_bytes"]
    m = planrt.Module(cuda_encoder)
    m.run("forward", [x])
    assert planrt.device_memory("cuda:0")["used_bytes"] > base  # the module holds memory
    del m
    gc.collect()
    planrt.trim_warm_pool("cuda:0")
    assert planrt.device_memory("cuda:0")["used_bytes"] - base <= 2 * MIB
    assert cycle() - base <= 2 * MIB
