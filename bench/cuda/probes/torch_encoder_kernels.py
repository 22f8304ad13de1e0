#!/usr/bin/env python3
"""Which kernels PyTorch runs, and for how long, on issue 18's model: a 12-block pre-norm
GELU nn.TransformerEncoder (d 512, 8 heads, FFN 2048, batch 1), eager and under
torch.compile (default, reduce-overhead), f32 (TF32 off) and bf16, at the given S.
torch.profiler around --iterations forwards after warm-ups; per kernel name, the GPU time
per forward, one JSON line per (mode, dtype, S) with the top kernels and the total.
On the GPU machine: python3 bench/cuda/probes/torch_encoder_kernels.py [--seqs 1 128 2048]
Figures in bench/results/torch_encoder_kernels.jsonl (what planrt's kernels are measured
against in docs/performance.md)."""
import argparse
import json
import time
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile


def model(dtype):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, activation="gelu",
                                             batch_first=True, norm_first=True)
    m = torch.nn.TransformerEncoder(layer, 12, enable_nested_tensor=False).eval()
    return m.to("cuda", dtype)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", type=int, nargs="+", default=[128])
    ap.add_argument("--dtypes", nargs="+", default=["f32", "bf16"])
    ap.add_argument("--modes", nargs="+", default=["eager", "default", "reduce-overhead"])
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for dname in a.dtypes:
        dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dname]
        for mode in a.modes:
            m = model(dtype)
            fwd = m if mode == "eager" else torch.compile(m, mode=mode)
            for seq in a.seqs:
                x = torch.randn(1, seq, 512, device="cuda", dtype=dtype)
                with torch.inference_mode():
                    for _ in range(5):
                        fwd(x)
                    torch.cuda.synchronize()
                    host = []
                    for _ in range(20):
                        t0 = time.perf_counter()
                        fwd(x).float().cpu()
                        host.append((time.perf_counter() - t0) * 1e3)
                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        for _ in range(a.iterations):
                            fwd(x)
                        torch.cuda.synchronize()
                per = defaultdict(lambda: [0.0, 0])
                for e in prof.events():
                    if e.device_type == torch.autograd.DeviceType.CUDA:
                        per[e.name][0] += e.device_time_total / 1e3 / a.iterations
                        per[e.name][1] += 1
                total = sum(v[0] for v in per.values())
                top = sorted(per.items(), key=lambda kv: -kv[1][0])[: a.top]
                host.sort()
                print(json.dumps({"probe": "torch_encoder_kernels", "torch": torch.__version__,
                                  "gpu": torch.cuda.get_device_name(), "mode": mode, "dtype": dname,
                                  "seq": seq, "host_to_host_median_ms": host[len(host) // 2],
                                  "kernel_ms_per_forward": total,
                                  "kernels_per_forward": sum(v[1] for v in per.values()) / a.iterations,
                                  "top": [{"name": k[:140], "ms": v[0], "count": v[1] / a.iterations}
                                          for k, v in top]}), flush=True)


if __name__ == "__main__":
    main()
