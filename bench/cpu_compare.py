#!/usr/bin/python3
"""planrt on the CPU against ONNX Runtime's CPU provider and PyTorch (issue 23's benchmark).

For each model and size (sequence length S of an encoder, batch N of a torchvision
classifier at 224x224): the model is built in PyTorch from a seed (bench/cpu/models.py; an
encoder's layers each get their own weights, as a trained model's do; "<name>-tied", e.g.
bert6-tied, gives every layer the same ones, which the exporter stores once),
exported once with torch.onnx.export (S or N dynamic), built with `planrt build model.onnx`, and run by each runtime in a process of its own, at each thread count, in
rounds that alternate the runtimes' order, so that all figures of a row come from one run:

  planrt       `planrt run --backend-option cpu.num_threads=T` (host to host, as it times)
  onnxruntime  onnxruntime-node (npm, installed under --ort-dir, never in the repository),
               graph optimisations all, T intra-op threads (bench/cpu/ort_run.mjs)
  torch        Debian's PyTorch, torch.set_num_threads(T), inference_mode (bench/cpu/torch_run.py)

Reported per runtime: median and p90 latency over every timed iteration of every round, peak
RSS of its process (GNU time's maximum resident set), and the relative error of its output against the
module in float64 (max |y - y64| / max |y64|). planrt's ratio to ONNX Runtime is the target's
measure (issue 23: at most 0.9).

  /usr/bin/python3 bench/cpu_compare.py --planrt build/cpu/tools/planrt \\
      [--models encoder bert6 resnet18 mobilenet_v3_small bert6-tied] [--seq 1 16 128 512]
      [--batch 1 8] [--threads 1 2] [--iterations 30]
      [--warmup 3] [--rounds 2] [--ort-dir ~/.cache/planrt/onnxruntime-node] [--out FILE.jsonl]
      [--smoke]   # one tiny block at S 16 and mobilenet_v3_small at N 1, 1 thread, 3
                  # iterations: checks both kinds of model and the outputs (relative error
                  # <= 1e-4), judges no speed; ONNX Runtime only when already installed

Exit 1 when a runtime fails or an output disagrees with float64 by more than 1e-4.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "cpu"))
import models  # noqa: E402

ORT_PACKAGE = "onnxruntime-node@1.30.0"
TOLERANCE = 1e-4


def run_measured(cmd):
    """Runs cmd under GNU time; returns (stdout, peak RSS of that process in MiB).

    Through /usr/bin/time rather than wait4 from here: a child forked from this process (which
    holds PyTorch) would count this process's pages in its own peak."""
    r = subprocess.run(["/usr/bin/time", "-f", "PLANRT_MAXRSS_KB %M"] + cmd, capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    rss = [line for line in lines if line.startswith("PLANRT_MAXRSS_KB ")]
    if r.returncode != 0 or not rss:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r.stdout, int(rss[-1].split()[1]) / 1024.0


def ensure_ort(ort_dir, install):
    mod = os.path.join(ort_dir, "node_modules", "onnxruntime-node")
    if os.path.isdir(mod):
        return True
    if not install or shutil.which("npm") is None:
        return False
    os.makedirs(ort_dir, exist_ok=True)
    # --ignore-scripts: the package's install script only fetches GPU parts, which cannot be
    # had here; its CPU library ships inside the package.
    r = subprocess.run(["npm", "install", "--prefix", ort_dir, "--ignore-scripts", "--no-audit",
                        "--no-fund", ORT_PACKAGE], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"npm install {ORT_PACKAGE} failed: {r.stderr.strip()[-500:]}", file=sys.stderr)
        return False
    return os.path.isdir(mod)


def export(name, path, max_size):
    module = models.build(name)
    x = torch.randn(*models.input_shape(name, min(2 if models.is_vision(name) else 8, max_size)))
    axis, dim = models.dynamic_dim(name)  # the output's dynamic axis is the input's
    torch.onnx.export(module, (x,), path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {axis: dim}, "y": {axis: dim}}, opset_version=14)


def rel_error(y, ref):
    return float(np.max(np.abs(y.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))


def summarize(times):
    times = sorted(times)
    p90 = times[min(len(times) - 1, int(round(0.9 * (len(times) - 1))))]
    return statistics.median(times), p90


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--planrt", required=True)
    ap.add_argument("--models", nargs="+", default=["encoder", "bert6", "resnet18", "mobilenet_v3_small"])
    ap.add_argument("--seq", nargs="+", type=int, default=None, help="encoders' sequence lengths")
    ap.add_argument("--batch", nargs="+", type=int, default=[1, 8], help="classifiers' batch sizes")
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ort-dir", default=os.path.expanduser("~/.cache/planrt/onnxruntime-node"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    if args.smoke:
        args.models, args.threads, args.iterations, args.warmup, args.rounds = (
            ["tiny", "mobilenet_v3_small"], [1], 3, 1, 1)
        seqs = {"tiny": [16], "mobilenet_v3_small": [1]}
    else:
        seqs = {m: args.batch if models.is_vision(m) else args.seq or ([1, 16, 128, 512] if m == "encoder" else [128])
                for m in args.models}
    have_ort = ensure_ort(args.ort_dir, install=not args.smoke)
    if not have_ort:
        print("onnxruntime-node not available: ONNX Runtime skipped", file=sys.stderr)
    commit = os.environ.get("PLANRT_COMMIT") or subprocess.run(
        ["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()

    failures = []
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            onnx_path = os.path.join(tmp, f"{name}.onnx")
            prog = os.path.join(tmp, f"{name}.prog")
            max_seq = max(seqs[name])
            export(name, onnx_path, max_seq)
            dim = models.dynamic_dim(name)[1]
            subprocess.run([args.planrt, "build", onnx_path, "-o", prog, "--dim", f"{dim}=1..{max(max_seq, 2)}"],
                           check=True, capture_output=True)
            module64 = models.build(name).double()
            for seq in seqs[name]:
                gen = torch.Generator().manual_seed(seq)
                x = torch.randn(*models.input_shape(name, seq), generator=gen)
                x_npy = os.path.join(tmp, f"x_{name}_{seq}.npy")
                x_raw = os.path.join(tmp, f"x_{name}_{seq}.f32")
                np.save(x_npy, x.numpy())
                x.numpy().tofile(x_raw)
                with torch.inference_mode():
                    ref = module64(x.double()).numpy()
                for threads in args.threads:
                    runtimes = ["planrt", "onnxruntime", "torch"] if have_ort else ["planrt", "torch"]
                    samples = {r: [] for r in runtimes}
                    rss = {r: 0.0 for r in runtimes}
                    err = {}
                    for rnd in range(args.rounds):
                        order = runtimes if rnd % 2 == 0 else list(reversed(runtimes))
                        for r in order:
                            out_dir = os.path.join(tmp, f"out_{r}")
                            os.makedirs(out_dir, exist_ok=True)
                            if r == "planrt":
                                out, peak = run_measured([
                                    args.planrt, "run", prog, "--input", f"x={x_npy}", "--iterations",
                                    str(args.iterations), "--warmup", str(args.warmup), "--output-dir",
                                    out_dir, "--backend-option", f"cpu.num_threads={threads}", "--json"])
                                samples[r] += json.loads(out)["latency_ms"]["samples"]
                                y = np.load(os.path.join(out_dir, "y.npy"))
                            elif r == "onnxruntime":
                                y_raw = os.path.join(out_dir, "y.f32")
                                out, peak = run_measured([
                                    "node", os.path.join(HERE, "cpu", "ort_run.mjs"), args.ort_dir, onnx_path,
                                    x_raw, ",".join(map(str, x.shape)), str(threads), str(args.iterations),
                                    str(args.warmup), y_raw])
                                samples[r] += json.loads(out)["times_ms"]
                                y = np.fromfile(y_raw, dtype=np.float32).reshape(ref.shape)
                            else:
                                y_npy = os.path.join(out_dir, "y.npy")
                                out, peak = run_measured([
                                    sys.executable, os.path.join(HERE, "cpu", "torch_run.py"), name, x_npy,
                                    str(threads), str(args.iterations), str(args.warmup), y_npy])
                                samples[r] += json.loads(out)["times_ms"]
                                y = np.load(y_npy)
                            rss[r] = max(rss[r], peak)
                            err[r] = max(err.get(r, 0.0), rel_error(y, ref))
                    row = {"bench": "cpu_compare", "commit": commit, "model": name,
                           ("batch" if models.is_vision(name) else "seq"): seq,
                           "threads": threads, "iterations": args.iterations * args.rounds,
                           "smoke": args.smoke, "cpu": cpu_name(), "runtimes": {}}
                    for r in runtimes:
                        med, p90 = summarize(samples[r])
                        row["runtimes"][r] = {"median_ms": round(med, 4), "p90_ms": round(p90, 4),
                                              "peak_rss_mib": round(rss[r], 1),
                                              "rel_error_vs_f64": err[r]}
                        if err[r] > TOLERANCE:
                            failures.append(f"{name} size {seq} T={threads}: {r} relative error {err[r]:.2e}")
                    if have_ort:
                        row["planrt_over_onnxruntime"] = round(
                            row["runtimes"]["planrt"]["median_ms"] / row["runtimes"]["onnxruntime"]["median_ms"], 3)
                    row["planrt_over_torch"] = round(
                        row["runtimes"]["planrt"]["median_ms"] / row["runtimes"]["torch"]["median_ms"], 3)
                    rows.append(row)
                    print(format_row(row), flush=True)
    if args.out:
        with open(args.out, "a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        print(f"appended {len(rows)} lines to {args.out}")
    for f in failures:
        print("FAILED: " + f, file=sys.stderr)
    return 1 if failures else 0


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def format_row(row):
    size = f"N={row['batch']:<4d}" if "batch" in row else f"S={row['seq']:<4d}"
    parts = [f"{row['model']:8s} {size} T={row['threads']}"]
    for r, v in row["runtimes"].items():
        parts.append(f"{r} {v['median_ms']:.3f} ms (p90 {v['p90_ms']:.3f}, {v['peak_rss_mib']:.0f} MiB, "
                     f"err {v['rel_error_vs_f64']:.1e})")
    if "planrt_over_onnxruntime" in row:
        parts.append(f"planrt/ort {row['planrt_over_onnxruntime']:.3f}")
    return " | ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
