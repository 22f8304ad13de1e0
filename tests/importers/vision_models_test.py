#!/usr/bin/python3
"""torchvision's classification models (Debian's python3-torchvision, random weights:
weights=None, no downloads), in eval mode, exported with torch.onnx.export with the batch as
a dynamic dim, built with `planrt build` and run with `planrt run` on the CPU, compared with
PyTorch's own output: relative error (the largest absolute difference over the largest
absolute reference value) at most 1e-4 in f32 (batch-norm folding reorders rounding).

To keep CI's time in bounds the images are 64 x 64, not 224 (every model here accepts
that size: the strides leave at least a 2 x 2 map; vit_b_16 is made for 64 x 64, 16 patches),
and the batch runs at 1 and 3 within the bounds 1..4. Parameters torchvision initialises to
zero (vit's head) are drawn at random, so that the output is not zero on both sides.

  vision_models_test.py PLANRT MODEL [--gpu]   exit 0 on success. --gpu: the cuda and
                                               engine-per-block partitions on cuda:0
                                               against PyTorch on CUDA (TF32 off on both
                                               sides); exit 77 without a GPU (1 with
                                               PLANRT_REQUIRE_GPU=1)
  vision_models_test.py --list                  the model names
"""
import inspect
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision

TOLERANCE = 1e-4
SIZE = 64
BATCHES = (1, 3)
MODELS = ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny",
          "vit_b_16")
PARTITIONS = (["--partition", "cpu"], ["--partition", "engine", "--device", "cpu"])
GPU_PARTITIONS = (["--partition", "cuda", "--device", "cuda:0"],
                  ["--partition", "engine-per-block", "--device", "cuda:0"])


def make(name):
    torch.manual_seed(0)
    kwargs = {"image_size": SIZE} if name.startswith("vit") else {}
    model = getattr(torchvision.models, name)(weights=None, **kwargs).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.abs().max() == 0:
                p.normal_(0.0, 0.02)
    return model


def export(model, example, path):
    # The TorchScript exporter (Debian's torch 1.13 has only it; torch 2.x keeps it with
    # dynamo=False).
    kwargs = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, example, path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=17, **kwargs)


def check(planrt, name, partitions, device="cpu"):
    model = make(name)
    with tempfile.TemporaryDirectory() as work:
        onnx_path = os.path.join(work, f"{name}.onnx")
        export(model, torch.randn(2, 3, SIZE, SIZE), onnx_path)
        model = model.to(device)
        worst = 0.0
        for partition in partitions:
            prog = os.path.join(work, "m.prog")
            r = subprocess.run([planrt, "build", onnx_path, "-o", prog, "--dim", "batch=1..4"] + partition,
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"{name} {' '.join(partition)}: build failed: {r.stderr.strip()}")
            for batch in BATCHES:
                x = torch.randn(batch, 3, SIZE, SIZE)
                with torch.no_grad():
                    ref = model(x.to(device)).double().cpu().numpy()
                x_path = os.path.join(work, "x.npy")
                np.save(x_path, x.numpy())
                out_dir = os.path.join(work, "out")
                r = subprocess.run([planrt, "run", prog, "--input", f"x={x_path}", "--output-dir", out_dir],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError(f"{name} {' '.join(partition)} batch {batch}: run failed: {r.stderr.strip()}")
                got = np.load(os.path.join(out_dir, "y.npy")).astype(np.float64)
                if got.shape != ref.shape:
                    raise RuntimeError(f"{name}: output shape {got.shape}, expected {ref.shape}")
                rel = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
                worst = max(worst, rel)
                if not rel <= TOLERANCE:
                    raise RuntimeError(f"{name} {' '.join(partition)} batch {batch}: relative error {rel:.3g} > "
                                       f"{TOLERANCE}")
    print(f"{name}: worst relative error {worst:.3g} over {len(partitions)} partitions x {len(BATCHES)} batches")


def main():
    if sys.argv[1:] == ["--list"]:
        print("\n".join(MODELS))
        return 0
    if len(sys.argv) < 3 or sys.argv[2] not in MODELS:
        print(__doc__, file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    partitions, device = PARTITIONS, "cpu"
    if "--gpu" in sys.argv[3:]:
        if not torch.cuda.is_available():
            print("no CUDA device visible to PyTorch")
            return 1 if os.environ.get("PLANRT_REQUIRE_GPU") == "1" else 77
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        partitions, device = GPU_PARTITIONS, "cuda"
    try:
        check(sys.argv[1], sys.argv[2], partitions, device)
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
