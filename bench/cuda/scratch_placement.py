#!/usr/bin/env python3
"""Where delegate scratch lives, measured with `planrt run --json` (issue 19, docs/design.md §6).

For the 12-block encoder (d 512, 8 heads, FFN 2048, S up to 2048, f32), each of:
  cuda      --cuda-scratch pool      intermediates from the warm pool per call (the old form)
  cuda      --cuda-scratch planned   one scratch per segment in the method's arena (default)
  engine    --engine-scratch private
  engine    --engine-scratch planned
at S = 128 and 2048: the device-used delta after the runs (cudaMemGetInfo, above the figure
before loading) less the weights, the planned bytes, the warm pool's reserve and high-water
use, private engine scratch, and the median latency. Modes alternate within each row, two
rounds each, so a latency ratio compares runs made side by side. Checked on every run (also
--smoke, the GPU lane's): the planned cuda form allocates nothing from the warm pool, and
each planned form's output statistics equal its unplanned twin's to rounding (same kernels;
the cuBLASLt algorithms each process times may differ).
Exit 0: checks hold; 2: a check failed; 77: no GPU (a skip, as ctest reads it).

    bench/cuda/scratch_placement.py PLANRT [--out bench/results/scratch_placement.jsonl]
                                     [--seqs 128,2048] [--iterations 50] [--smoke]
"""
import argparse
import json
import shutil
import os
import statistics
import subprocess
import sys
import tempfile

MiB = 1 << 20
FORMS = [
    ("cuda", ["--partition", "cuda", "--cuda-scratch", "pool"], "pool"),
    ("cuda", ["--partition", "cuda", "--cuda-scratch", "planned"], "planned"),
    ("engine", ["--partition", "engine", "--engine-scratch", "private"], "private"),
    ("engine", ["--partition", "engine", "--engine-scratch", "planned"], "planned"),
]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"scratch_placement: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout


def stats_agree(a, b):
    """Output min/max/mean of two runs equal to rounding: each process times its own cuBLASLt
    algorithms (docs/design.md "gemm-algorithms"), so two runs agree to rounding, not bit for
    bit; a misplaced buffer gives garbage, far outside this."""
    for sa, sb in zip(a, b):
        scale = max(abs(v) for v in sa + sb if v is not None) or 1.0
        if any(x is None or y is None or abs(x - y) > 1e-5 * scale for x, y in zip(sa, sb)):
            return False
    return len(a) == len(b)


def measure(planrt, prog, seq, iterations):
    out = run([planrt, "run", prog, "--random-inputs", "1", "--dim", f"S={seq}", "--warmup", "5",
               "--iterations", str(iterations), "--json"])
    r = json.loads(out)
    dev = next(d for d in r["memory"]["devices"] if d["device"].startswith("cuda"))
    pool = dev.get("pool", {})
    return {
        "median_ms": r["latency_ms"]["median"],
        "delta_bytes": dev["device_used_after_run_bytes"] - dev["device_used_before_load_bytes"],
        "weights_bytes": dev["weights_bytes"],
        "planned_bytes": dev["planned_bytes"],
        "pool_reserved_bytes": pool.get("reserved_bytes", 0),
        "pool_used_high_bytes": pool.get("used_high_bytes", 0),
        "pool_allocations": pool.get("allocations", 0),
        "scratch_private_bytes": dev["scratch_private_bytes"],
        "output_stats": [[o.get("min"), o.get("max"), o.get("mean")] for o in r["outputs"]],
    }


def have_gpu():
    smi = shutil.which("nvidia-smi")
    return smi is not None and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("planrt")
    ap.add_argument("--out", default=None)
    ap.add_argument("--seqs", default="128,2048")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if a.smoke:
        a.seqs, a.iterations, a.layers = "64", 3, 2
    if not have_gpu():
        print("scratch_placement: no GPU visible (skipped)")
        sys.exit(77)
    commit = os.environ.get("PLANRT_COMMIT", "unknown")
    failures = []
    seqs = [int(s) for s in a.seqs.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        progs = []
        for partition, flags, form in FORMS:
            prog = os.path.join(tmp, f"{partition}-{form}.prog")
            run([a.planrt, "build", "--template", "transformer", "--layers", str(a.layers),
                 "--d-model", "512", "--heads", "8", "--ffn", "2048", "--max-seq", str(max(seqs)),
                 "--weights", "random:1", *flags, "-o", prog])
            progs.append((partition, form, prog))
        lines = []
        for seq in seqs:
            rounds = {}
            for _ in range(2):
                for partition, form, prog in progs:
                    rounds.setdefault((partition, form), []).append(measure(a.planrt, prog, seq, a.iterations))
            for (partition, form), rs in rounds.items():
                first = rs[0]
                line = {"bench": "scratch_placement", "commit": commit, "partition": partition,
                        "scratch": form, "seq": seq, "layers": a.layers, "dtype": "f32",
                        "median_ms": statistics.median(r["median_ms"] for r in rs),
                        "median_ms_per_round": [r["median_ms"] for r in rs],
                        "above_weights_bytes": first["delta_bytes"] - first["weights_bytes"],
                        **first, "smoke": a.smoke,
                        "command": " ".join(sys.argv)}
                lines.append(line)
                print(f"S={seq:5d} {partition:6s} {form:8s} above weights {line['above_weights_bytes'] / MiB:8.1f} MiB"
                      f"  planned {first['planned_bytes'] / MiB:7.1f}  pool reserved {first['pool_reserved_bytes'] / MiB:6.1f}"
                      f" (high {first['pool_used_high_bytes'] / MiB:6.2f}, {first['pool_allocations']} allocations)"
                      f"  private scratch {first['scratch_private_bytes'] / MiB:6.1f}  {line['median_ms']:.3f} ms")
            by = {(l["partition"], l["scratch"]): l for l in lines if l["seq"] == seq}
            if by[("cuda", "planned")]["pool_allocations"] != 0:
                failures.append(f"S={seq}: the planned cuda form allocated from the warm pool")
            for partition, plain in (("cuda", "pool"), ("engine", "private")):
                if not stats_agree(by[(partition, "planned")]["output_stats"], by[(partition, plain)]["output_stats"]):
                    failures.append(f"S={seq}: {partition} planned and {plain} outputs differ")
        if a.out:
            with open(a.out, "a") as f:
                for line in lines:
                    f.write(json.dumps(line) + "\n")
    for f in failures:
        print("scratch_placement: " + f)
    sys.exit(2 if failures else 0)


if __name__ == "__main__":
    main()
