"""What the GPU benchmarks against PyTorch share (bench/onnx_encoder.py,
bench/vision_models.py): running `planrt`, reading `planrt run --json`, and timing a
PyTorch callable host to host (input on the host -> output on the host, synchronized)."""
import json
import os
import statistics
import subprocess
import time

import numpy as np
import torch


def planrt_out(cmd):
    """stdout of a planrt command; RuntimeError with its stderr when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def run_planrt(planrt, prog, x_path, out_dir, iterations, warmup, extra_args=()):
    """Runs `prog` on input x (with `planrt run` flags extra_args); (median ms, device bytes
    used above the weights, the cuda:0 memory report, output y) as `planrt run --json` reports
    them."""
    j = json.loads(planrt_out([planrt, "run", prog, "--input", f"x={x_path}", "--output-dir", out_dir,
                               "--iterations", str(iterations), "--warmup", str(warmup), "--json",
                               *extra_args]))
    cuda = next(d for d in j["memory"]["devices"] if d["device"] == "cuda:0")
    above = (cuda.get("device_used_after_run_bytes", 0) - cuda.get("device_used_before_load_bytes", 0)
             - cuda["weights_bytes"])
    return j["latency_ms"]["median"], above, cuda, np.load(os.path.join(out_dir, "y.npy"))


def time_torch(fn, x_host, iterations, warmup):
    """Median ms of fn over `iterations` after `warmup`, host to host; and the last output."""
    times, out = [], None
    for i in range(warmup + iterations):
        t0 = time.perf_counter()
        out = fn(x_host.to("cuda", non_blocking=False)).to("cpu")
        torch.cuda.synchronize()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), out
