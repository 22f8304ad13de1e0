#!/usr/bin/env python3
"""The ceilings behind docs/performance.md's floors, measured on this GPU with PyTorch:
the f32 matrix rate (cuBLAS SGEMM, TF32 off, 8192^3), the bf16 one (the same product in
bf16, f32 accumulation), the device's copy bandwidth (a 1 GiB
device-to-device copy, bytes read plus written), and the pageable host-to-device and
device-to-host copy times of each model input/output size ([1, S, 512] f32), the way both
sides of the comparison copy. Medians of CUDA-event timings after warm-up. Prints one JSON
line (bench/compare.sh appends it to its results file); bench/report_compare.py divides
each model's FLOPs and bytes by these.

  python3 bench/floors.py [--seqs 128,2048] [--width 512] [--smoke]

--smoke (bench/compare.sh --smoke): a 1024^3 product, a 64 MiB copy, 3 timed runs each;
the same JSON with "smoke": true (its figures are not the ceilings).
"""
import argparse
import json
import statistics
import time

import torch


def median_ms(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def host_ms(fn, iters):
    for _ in range(3):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seqs", default="128,2048")
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--smoke", action="store_true")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    n = 1024 if a.smoke else 8192
    runs = 3 if a.smoke else None
    x = torch.randn(n, n, device=dev)
    y = torch.randn(n, n, device=dev)
    gemm_ms = median_ms(lambda: torch.mm(x, y), runs or 10)
    x, y = x.bfloat16(), y.bfloat16()
    bf16_gemm_ms = median_ms(lambda: torch.mm(x, y), runs or 20)
    del x, y
    copy_elements = (1 << 24) if a.smoke else (1 << 28)  # 64 MiB or 1 GiB of f32
    big = torch.empty(copy_elements, device=dev)
    copy_ms = median_ms(lambda: big.clone(), runs or 10)
    del big
    copies = {}
    for s in (int(v) for v in a.seqs.split(",")):
        host = torch.randn(1, s, a.width)
        on_dev = host.to(dev)
        copies[str(s)] = {"host_to_device_ms": host_ms(lambda: host.to(dev), runs or 20),
                          "device_to_host_ms": host_ms(lambda: on_dev.cpu(), runs or 20)}
    print(json.dumps({
        "bench": "floors", "device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
        "f32_matrix_tflops": 2 * n ** 3 / (gemm_ms * 1e-3) / 1e12,
        "bf16_matrix_tflops": 2 * n ** 3 / (bf16_gemm_ms * 1e-3) / 1e12,
        "copy_bandwidth_gbps": 2 * copy_elements * 4 / (copy_ms * 1e-3) / 1e9,
        "pageable_copies": copies, "smoke": a.smoke,
    }))


if __name__ == "__main__":
    main()
