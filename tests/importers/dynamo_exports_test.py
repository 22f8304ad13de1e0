#!/usr/bin/python3
"""Models exported by torch 2.11's default exporter (torch.onnx.export, dynamo=True: opset
20, Gelu, the packed QKV split as Gather over a transposed projection, attention scaled on
both sides), kept in tests/data/onnx/dynamo because Debian's torch 1.13 cannot write them.
The modules are torch_models_test.py's (seed 1234); each is built with `planrt build` (batch
and sequence dims bounded), run with `planrt run` and compared with torch's own output
(relative error ≤ 1e-5) at the export's size and, where the data holds them
(NAME_sizes.npz), at more sizes within the bounds.

  dynamo_exports_test.py PLANRT NAME [--gpu]   exit 0 on success; --gpu: cuda and
                                               engine-per-block on cuda:0 (77 without a GPU)
  dynamo_exports_test.py --list
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "onnx", "dynamo")
TOLERANCE = 1e-5
# name -> (dims the input has, output names)
MODELS = {
    "mlp": (("b",), ("y",)),
    "encoder_post_norm_relu": (("b", "s"), ("y",)),
    "encoder_pre_norm_gelu": (("b", "s"), ("y",)),
    "encoder_seq_first_gelu": (("b", "s"), ("y",)),
    "bert_like": (("b", "s"), ("hidden", "pooled")),
    "gpt_like": (("b", "s"), ("logits",)),
}
BOUNDS = {"b": "1..8", "s": "1..64"}
PARTITIONS = (["--partition", "cpu"], ["--partition", "engine-per-block", "--device", "cpu"])
GPU_PARTITIONS = (["--partition", "cuda", "--device", "cuda:0"],
                  ["--partition", "engine-per-block", "--device", "cuda:0"])


def cases(name, outputs):
    """(label, x, {output: reference}) at the export's size and at each stored size."""
    yield "export size", np.load(os.path.join(DATA, f"{name}_x.npy")), {
        o: np.load(os.path.join(DATA, f"{name}_{o}.npy")) for o in outputs}
    sizes = os.path.join(DATA, f"{name}_sizes.npz")
    if os.path.exists(sizes):
        z = np.load(sizes)
        for key in sorted(k for k in z.files if k.startswith("x_")):
            suffix = key[2:]
            yield f"size {suffix}", z[key], {o: z[f"{o}_{suffix}"] for o in outputs}


def gpu_visible():
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True) if any(
        os.access(os.path.join(p, "nvidia-smi"), os.X_OK) for p in os.environ.get("PATH", "").split(":")) else None
    return r is not None and r.returncode == 0 and "GPU" in r.stdout


def check(planrt, name, gpu):
    dims, outputs = MODELS[name]
    bounds = [f for d in dims for f in ("--dim", f"{d}={BOUNDS[d]}")]
    worst, runs = 0.0, 0
    with tempfile.TemporaryDirectory() as work:
        for partition in GPU_PARTITIONS if gpu else PARTITIONS:
            prog = os.path.join(work, "m.prog")
            r = subprocess.run([planrt, "build", os.path.join(DATA, f"{name}.onnx"), "-o", prog] + bounds + partition,
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name} {' '.join(partition)}: build failed: {r.stderr.strip()}")
                return 1
            for label, x, refs in cases(name, outputs):
                np.save(os.path.join(work, "x.npy"), x)
                out = os.path.join(work, "out")
                r = subprocess.run([planrt, "run", prog, "--input", f"x={os.path.join(work, 'x.npy')}",
                                    "--output-dir", out], capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"{name} {' '.join(partition)} {label}: run failed: {r.stderr.strip()}")
                    return 1
                for o, ref in refs.items():
                    got = np.load(os.path.join(out, f"{o}.npy"))
                    if got.shape != ref.shape:
                        print(f"{name} {o} {label}: shape {got.shape}, expected {ref.shape}")
                        return 1
                    err = float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))
                    worst = max(worst, err)
                    if not err <= TOLERANCE:
                        print(f"{name} {o} {' '.join(partition)} {label}: relative error {err:.3g} > {TOLERANCE}")
                        return 1
                runs += 1
    print(f"{name}: worst relative error {worst:.3g} over {runs} runs")
    return 0


def main():
    if sys.argv[1:] == ["--list"]:
        print("\n".join(MODELS))
        return 0
    gpu = "--gpu" in sys.argv[3:]
    if gpu and not gpu_visible():
        print("no GPU visible")
        return 1 if os.environ.get("PLANRT_REQUIRE_GPU") == "1" else 77
    return check(sys.argv[1], sys.argv[2], gpu)


if __name__ == "__main__":
    sys.exit(main())
