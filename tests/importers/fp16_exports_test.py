#!/usr/bin/python3
"""The dynamo exports of tests/data/onnx/dynamo (dynamo_exports_test.py's models) converted to
fp16 here, as the published fp16 ONNX exports are: every float initializer rounded to
float16, every float input, output and intermediate type float16 (onnx + numpy; the models
hold no Cast or Constant of a float). fp16 runs on the CUDA kernels only (docs/design.md,
"Dtypes"):

  fp16_exports_test.py PLANRT NAME          the conversion built for the CPU is refused at
                                            build, the message naming f16 and the CPU kernel
  fp16_exports_test.py PLANRT NAME --gpu    built with --partition cuda for cuda:0, run on
                                            the f16 input and compared with torch's f32
                                            output within fp16's tolerance (77 without a
                                            GPU)
  fp16_exports_test.py --list

Tolerance: max |planrt - torch| / max |torch| <= 1e-2, and the same normwise <= 5e-3: f16's
relative step is 2^-11 (about 5e-4); two encoder blocks round their weights, every
activation and (their attention having head dim 16, so left decomposed) their scores to f16.
An output computed in the wrong dtype or layout is off by order 1.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "onnx", "dynamo")
MAX_TOLERANCE = 1e-2
NORM_TOLERANCE = 5e-3
# name -> (dims the input has, output names)
MODELS = {
    "mlp": (("b",), ("y",)),
    "encoder_post_norm_relu": (("b", "s"), ("y",)),
    "encoder_pre_norm_gelu": (("b", "s"), ("y",)),
    "encoder_seq_first_gelu": (("b", "s"), ("y",)),
    "bert_like": (("b", "s"), ("hidden", "pooled")),
}
BOUNDS = {"b": "1..8", "s": "1..64"}


def to_fp16(model):
    """The model with every float tensor float16 (initializers rounded to nearest even)."""
    g = model.graph
    for i, t in enumerate(g.initializer):
        if t.data_type == TensorProto.FLOAT:
            half = numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name)
            g.initializer[i].CopyFrom(half)
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    for n in g.node:
        if n.op_type in ("Cast", "CastLike", "Constant", "ConstantOfShape", "EyeLike", "RandomNormal"):
            raise RuntimeError(f"{n.op_type} node '{n.name}': this conversion handles no typed node")
    return model


def gpu_visible():
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True) if any(
        os.access(os.path.join(p, "nvidia-smi"), os.X_OK) for p in os.environ.get("PATH", "").split(":")) else None
    return r is not None and r.returncode == 0 and "GPU" in r.stdout


def check(planrt, name, gpu):
    dims, outputs = MODELS[name]
    bounds = [f for d in dims for f in ("--dim", f"{d}={BOUNDS[d]}")]
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, f"{name}_fp16.onnx")
        onnx.save(to_fp16(onnx.load(os.path.join(DATA, f"{name}.onnx"))), model)
        prog = os.path.join(work, "m.prog")
        if not gpu:
            r = subprocess.run([planrt, "build", model, "-o", prog, "--partition", "cpu"] + bounds,
                               capture_output=True, text=True)
            if r.returncode == 0:
                print(f"{name}: the f16 model built for the CPU, which computes no f16")
                return 1
            if "has dtype f16" not in r.stderr or "the CPU kernel supports" not in r.stderr:
                print(f"{name}: the CPU build failed, but not by naming f16: {r.stderr.strip()}")
                return 1
            print(f"{name}: refused on the CPU: {r.stderr.strip().splitlines()[-1]}")
            return 0
        r = subprocess.run([planrt, "build", model, "-o", prog, "--partition", "cuda", "--device", "cuda:0"] + bounds,
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{name} f16: build failed: {r.stderr.strip()}")
            return 1
        x = np.load(os.path.join(DATA, f"{name}_x.npy"))
        if x.dtype == np.float32:
            x = x.astype(np.float16)
        np.save(os.path.join(work, "x.npy"), x)
        out = os.path.join(work, "out")
        r = subprocess.run([planrt, "run", prog, "--input", f"x={os.path.join(work, 'x.npy')}", "--output-dir", out],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{name} f16: run failed: {r.stderr.strip()}")
            return 1
        for o in outputs:
            ref = np.load(os.path.join(DATA, f"{name}_{o}.npy")).astype(np.float64)
            got = np.load(os.path.join(out, f"{o}.npy"))
            if got.dtype != np.float16:
                print(f"{name} {o}: dtype {got.dtype}, expected float16")
                return 1
            got = got.astype(np.float64)
            if got.shape != ref.shape:
                print(f"{name} {o}: shape {got.shape}, expected {ref.shape}")
                return 1
            if not np.all(np.isfinite(got)):
                print(f"{name} {o}: {np.count_nonzero(~np.isfinite(got))} values not finite")
                return 1
            worst = float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))
            norm = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))
            print(f"{name} {o}: f16 on cuda against torch f32: max relative {worst:.3g}, normwise {norm:.3g}")
            if not (worst <= MAX_TOLERANCE and norm <= NORM_TOLERANCE):
                print(f"{name} {o}: beyond {MAX_TOLERANCE} (max) or {NORM_TOLERANCE} (normwise)")
                return 1
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
