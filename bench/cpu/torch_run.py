#!/usr/bin/python3
"""Times one model in PyTorch on the CPU for bench/cpu_compare.py and prints one JSON line.

  torch_run.py MODEL X.npy THREADS ITERATIONS WARMUP OUT.npy
"""
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402


def main():
    name, x_path, threads, iterations, warmup, out_path = sys.argv[1:7]
    torch.set_num_threads(int(threads))
    module = models.build(name)
    x = torch.from_numpy(np.load(x_path))
    times = []
    with torch.inference_mode():
        for i in range(int(warmup) + int(iterations)):
            t0 = time.perf_counter()
            y = module(x)
            if i >= int(warmup):
                times.append((time.perf_counter() - t0) * 1e3)
    np.save(out_path, y.numpy())
    print(json.dumps({"times_ms": times, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
