#!/usr/bin/python3
"""PyTorch modules exported with torch.onnx.export, built with `planrt build`, run with
`planrt run` on the CPU and compared with PyTorch's own output (relative error: the largest
absolute difference over the largest absolute reference value, at most 1e-5 in f32).
Dynamic batch and sequence dims are run at several values within their bounds, and each
model is built with more than one partition (engines run on the host too).

  torch_models_test.py PLANRT MODEL     MODEL: one of the names in MODELS; exit 0 on success
  torch_models_test.py --list           the model names
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

TOLERANCE = 1e-5
BATCH = (1, 4)
SEQ = (1, 64)


def encoder(activation, batch_first, norm_first, layers=2):
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.1,
                                             activation=activation, batch_first=batch_first,
                                             norm_first=norm_first)
    return torch.nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 96), torch.nn.GELU(), torch.nn.Linear(96, 96),
                                       torch.nn.ReLU(), torch.nn.Linear(96, 48), torch.nn.Tanh(),
                                       torch.nn.Linear(48, 16), torch.nn.Sigmoid())

    def forward(self, x):
        return self.net(x)


# name -> (module factory, input shape with "b" and "s" for the dynamic dims, seq-first?)
MODELS = {
    "mlp": (Mlp, ("b", 32)),
    "encoder_post_norm_relu": (lambda: encoder("relu", True, False), ("b", "s", 64)),
    "encoder_post_norm_gelu": (lambda: encoder("gelu", True, False), ("b", "s", 64)),
    "encoder_pre_norm_relu": (lambda: encoder("relu", True, True), ("b", "s", 64)),
    "encoder_pre_norm_gelu": (lambda: encoder("gelu", True, True), ("b", "s", 64)),
    "encoder_seq_first_gelu": (lambda: encoder("gelu", False, True), ("s", "b", 64)),
}
PARTITIONS = (["--partition", "cpu"], ["--partition", "engine", "--device", "cpu"],
              ["--partition", "engine-per-block", "--device", "cpu"])


def check(planrt, name):
    torch.manual_seed(1234)
    factory, shape = MODELS[name]
    module = factory().eval()
    dims = {"b": 2, "s": 5}
    example = torch.randn(*[dims.get(d, d) for d in shape])
    with tempfile.TemporaryDirectory() as work:
        onnx_path = os.path.join(work, "model.onnx")
        axes = {i: d for i, d in enumerate(shape) if isinstance(d, str)}
        torch.onnx.export(module, (example,), onnx_path, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": axes, "y": axes}, opset_version=14)
        bounds = []
        if "b" in shape:
            bounds += ["--dim", f"b={BATCH[0]}..{BATCH[1]}"]
        if "s" in shape:
            bounds += ["--dim", f"s={SEQ[0]}..{SEQ[1]}"]
        worst = 0.0
        for partition in PARTITIONS:
            prog = os.path.join(work, "m.prog")
            r = subprocess.run([planrt, "build", onnx_path, "-o", prog] + bounds + partition,
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name} {' '.join(partition)}: build failed: {r.stderr.strip()}")
                return 1
            for b, s in ((1, 1), (2, 7), (4, 64), (3, 33)):
                x = torch.randn(*[{"b": b, "s": s}.get(d, d) for d in shape])
                np.save(os.path.join(work, "x.npy"), x.numpy())
                out = os.path.join(work, "out")
                r = subprocess.run([planrt, "run", prog, "--input", f"x={os.path.join(work, 'x.npy')}",
                                    "--output-dir", out], capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"{name} {' '.join(partition)} b={b} s={s}: run failed: {r.stderr.strip()}")
                    return 1
                with torch.no_grad():
                    ref = module(x).numpy()
                got = np.load(os.path.join(out, "y.npy"))
                if got.shape != ref.shape:
                    print(f"{name} b={b} s={s}: shape {got.shape}, expected {ref.shape}")
                    return 1
                err = float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))
                worst = max(worst, err)
                if not err <= TOLERANCE:
                    print(f"{name} {' '.join(partition)} b={b} s={s}: relative error {err:.3g} > {TOLERANCE}")
                    return 1
        print(f"{name}: worst relative error {worst:.3g} over {len(PARTITIONS)} partitions x 4 sizes")
    return 0


def main():
    if sys.argv[1:] == ["--list"]:
        print("\n".join(MODELS))
        return 0
    torch.set_num_threads(1)
    return check(sys.argv[1], sys.argv[2])


if __name__ == "__main__":
    sys.exit(main())
