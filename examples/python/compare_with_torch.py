#!/usr/bin/env python3
"""planrt from Python: export a PyTorch encoder to ONNX, build it with planrt, run it on
NumPy and torch inputs, compare with PyTorch, print the memory report; then the same for
planrt's own transformer template.

    python3 examples/python/compare_with_torch.py [--device cpu|cuda:0] [--seq 48]

Needs the planrt module (./scripts/install.sh, or PYTHONPATH=build/<dir>/python) and Debian's
python3-torch and python3-onnx. Exit 1 when planrt and PyTorch disagree.
"""
import argparse
import inspect
import json
import os
import sys
import tempfile

import numpy as np
import torch

import planrt


def export_encoder(path, seq, dynamic):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=256,
                                             activation="gelu", batch_first=True, norm_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    x = torch.randn(1, seq, 64)
    kwargs = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    axes = {"x": {1: "seq"}, "y": {1: "seq"}} if dynamic else None
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"],
                      dynamic_axes=axes, opset_version=14, **kwargs)
    return model, x


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="cpu, or cuda:N for a GPU partition")
    ap.add_argument("--seq", type=int, default=48)
    args = ap.parse_args()
    partition = "cpu" if args.device == "cpu" else "cuda"
    print(f"planrt {planrt.__version__} (CUDA support: {planrt.has_cuda})")

    with tempfile.TemporaryDirectory() as work:
        onnx_path = os.path.join(work, "encoder.onnx")
        # torch 2.x's TorchScript exporter fixes nn.MultiheadAttention's sizes: export the
        # size that runs (docs/onnx.md); torch 1.13 keeps the sequence dynamic.
        dynamic = int(torch.__version__.split(".")[0]) < 2
        model, x = export_encoder(onnx_path, args.seq, dynamic)
        dims = {"seq": (1, 128)} if dynamic else None
        program = planrt.build(onnx_path, dims=dims, partition=partition, device=args.device)
        module = planrt.Module(program)
        meta = module.method_meta("forward")
        print("method:", meta)
        for e in meta.memory:
            print(f"  estimate on {e.device}: planned {e.planned_bytes} B, weights {e.weights_bytes} B")

        with torch.enable_grad():  # the module's composite path, not the inference fast path
            reference = model(x).detach().numpy()
        (from_numpy,) = module.run("forward", [x.numpy()])
        on_device = x.to(args.device) if args.device != "cpu" else x
        (from_torch,) = module.run("forward", [on_device], outputs="dlpack")
        from_torch = torch.from_dlpack(from_torch).numpy()
        err = float(np.abs(from_numpy - reference).max() / np.abs(reference).max())
        print(f"ONNX encoder: output {from_numpy.shape}, max relative error vs PyTorch {err:.2e}")
        same = np.array_equal(from_numpy, from_torch)
        print(f"  NumPy and torch inputs give the same output: {same}")
        print("memory report:", json.dumps(module.memory_report(), indent=2))

    template = planrt.build(template="transformer", layers=2, d_model=128, heads=4, ffn=512,
                            max_seq=64, partition=partition, device=args.device)
    print("template plans:", template.plans)
    (y,) = planrt.Module(template).run("forward", [np.ones((1, 16, 128), np.float32)])
    print(f"template encoder: output {y.shape}, finite: {bool(np.isfinite(y).all())}")
    ok = err <= 1e-4 and same and np.isfinite(y).all()
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
