#!/usr/bin/python3
"""Hugging Face models as users export them (tests/data/onnx/hf, made by export_hf.py there on
the GPU machine: transformers 5.17, torch 2.11, both exporters): each export is built with
`planrt build` (batch and sequence dims bounded, free at run time), run with `planrt run` on
the padded batch the export was made with, and compared with transformers' own f32 output,
row by row over the positions the attention mask keeps (a padded position's output is
whatever the model computes there, which no user reads); the attention must run fused, its
mask inside it (no softmax step left).

  hf_exports_test.py PLANRT NAME [--gpu]    NAME is MODEL_EXPORTER (bert_dynamo, ...); exit 0
                                            on success; --gpu: cuda:0 (77 without a GPU)
  hf_exports_test.py --list                 the exports present
"""
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "onnx", "hf")
TOLERANCE = 1e-4  # relative to the output's largest magnitude (the f32 target)
BOUNDS = {"batch": "1..4", "seq": "1..32"}


def exports():
    return sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(DATA, "*.onnx")))


def gpu_visible():
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    except OSError:
        return False
    return r.returncode == 0 and "GPU" in r.stdout


def kept_rows(inputs, ref):
    """A boolean mask over ref's leading [batch, positions] of the positions to compare."""
    if "attention_mask" in inputs and ref.ndim >= 3 and ref.shape[1] == inputs["attention_mask"].shape[1]:
        return inputs["attention_mask"].astype(bool)
    return np.ones(ref.shape[:2], dtype=bool)


def check(planrt, name, gpu):
    model = name.rsplit("_", 1)[0]
    inputs = dict(np.load(os.path.join(DATA, f"{model}_inputs.npz")))
    # The dims as the export names them (dim_param of the first input: batch, then sequence;
    # image models have no sequence dim).
    import onnx
    first = onnx.load(os.path.join(DATA, f"{name}.onnx"), load_external_data=False).graph.input[0]
    params = [d.dim_param for d in first.type.tensor_type.shape.dim if d.dim_param]
    bounds = [f for d, b in zip(params, BOUNDS.values()) for f in ("--dim", f"{d}={b}")]
    refs = dict(np.load(os.path.join(DATA, f"{model}_outputs.npz")))
    partitions = ([["--partition", "cuda", "--device", "cuda:0"]] if gpu
                  else [["--partition", "cpu"], ["--partition", "engine-per-block", "--device", "cpu"]])
    with tempfile.TemporaryDirectory() as work:
        for partition in partitions:
            prog = os.path.join(work, "m.prog")
            r = subprocess.run([planrt, "build", os.path.join(DATA, f"{name}.onnx"), "-o", prog] + bounds + partition,
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name} {' '.join(partition)}: build failed: {r.stderr.strip()}")
                return 1
            # Attention runs fused, its mask inside (no softmax over a score tensor left); an
            # engine partition's steps are its delegate calls.
            steps = subprocess.run([planrt, "inspect", "--steps", prog], capture_output=True, text=True).stdout
            ops = [line.split()[1] for line in steps.splitlines() if line[:6].strip().isdigit() and len(line.split()) > 1]
            if "delegate" not in ops and ("softmax" in ops or "scaled_dot_product_attention" not in ops):
                print(f"{name} {' '.join(partition)}: attention not fused: ops {sorted(set(ops))}")
                return 1
            cmd = [planrt, "run", prog, "--output-dir", os.path.join(work, "out")]
            for k, v in inputs.items():
                path = os.path.join(work, f"{k}.npy")
                np.save(path, v)
                cmd += ["--input", f"{k}={path}"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name} {' '.join(partition)}: run failed: {r.stderr.strip()}")
                return 1
            for o, ref in refs.items():
                got = np.load(os.path.join(work, "out", f"{o}.npy"))
                if got.shape != ref.shape:
                    print(f"{name} {o}: shape {got.shape}, expected {ref.shape}")
                    return 1
                keep = kept_rows(inputs, ref)
                err = float(np.max(np.abs(got[keep] - ref[keep])) / max(float(np.max(np.abs(ref[keep]))), 1e-30))
                print(f"{name} {o} {' '.join(partition)}: relative error {err:.3g} over {int(keep.sum())} positions")
                if not err <= TOLERANCE:
                    return 1
    return 0


def main():
    if sys.argv[1:] == ["--list"]:
        print("\n".join(exports()))
        return 0
    gpu = "--gpu" in sys.argv[3:]
    if gpu and not gpu_visible():
        print("no GPU visible")
        return 1 if os.environ.get("PLANRT_REQUIRE_GPU") == "1" else 77
    return check(sys.argv[1], sys.argv[2], gpu)


if __name__ == "__main__":
    sys.exit(main())
