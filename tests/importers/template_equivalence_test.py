#!/usr/bin/python3
"""The importer loses nothing against the template: the transformer template's model,
written as PyTorch modules with the template's own weights, exported with
torch.onnx.export and imported, gives a program with the template program's ops, the same
memory plan (planned bytes, lower bound, ratio) and the same outputs (relative error at most
1e-6 on the CPU).

  template_equivalence_test.py PLANRT
"""
import importlib.util
import inspect
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAYERS, D, HEADS, FFN, MAX_SEQ = 2, 64, 4, 128, 64
PLAN = re.compile(r"plan (\S+) on (\S+): (.+) planned, lower bound (.+), ratio ([0-9.]+) \((\d+) tensors")


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(D, D) for _ in range(4))
        self.fc1, self.fc2 = torch.nn.Linear(D, FFN), torch.nn.Linear(FFN, D)

    def forward(self, x):
        s = x.shape[1]
        a = self.ln1(x)
        q, k, v = (p(a).view(1, s, HEADS, D // HEADS).transpose(1, 2) for p in (self.q, self.k, self.v))
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D // HEADS), dim=-1) @ v
        h = x + self.o(att.transpose(1, 2).reshape(1, s, D))
        return h + self.fc2(F.gelu(self.fc1(self.ln2(h))))


class Template(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block() for _ in range(LAYERS)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def load_template_weights(module, weights):
    names = {"ln1": "ln1", "ln2": "ln2", "q": "attn.q", "k": "attn.k", "v": "attn.v", "o": "attn.o",
             "fc1": "mlp.fc1", "fc2": "mlp.fc2"}
    state = {}
    for i in range(LAYERS):
        for ours, theirs in names.items():
            for kind in ("weight", "bias"):
                state[f"blocks.{i}.{ours}.{kind}"] = weights[f"blocks.{i}.{theirs}.{kind}"]
    module.load_state_dict(state)


def build(planrt, args):
    r = subprocess.run([planrt, "build"] + args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"planrt build {' '.join(args)} failed: {r.stderr}")
    return PLAN.search(r.stdout).groups()


def main():
    planrt = sys.argv[1]
    spec = importlib.util.spec_from_file_location("torch_reference", os.path.join(ROOT, "bench", "torch_reference.py"))
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    with tempfile.TemporaryDirectory() as work:
        t_prog, t_json = os.path.join(work, "t.prog"), os.path.join(work, "t.json")
        t_plan = build(planrt, ["--template", "transformer", "--layers", str(LAYERS), "--d-model", str(D),
                                "--heads", str(HEADS), "--ffn", str(FFN), "--max-seq", str(MAX_SEQ),
                                "--weights", "random:3", "--save-model", t_json, "-o", t_prog])
        module = Template().eval()
        load_template_weights(module, ref.read_safetensors(os.path.join(work, "t.safetensors"), "cpu"))
        onnx_path = os.path.join(work, "t.onnx")
        kwargs = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
        torch.onnx.export(module, (torch.randn(1, 5, D),), onnx_path, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {1: "S"}, "y": {1: "S"}}, opset_version=14, **kwargs)
        i_prog, i_json = os.path.join(work, "i.prog"), os.path.join(work, "i.json")
        i_plan = build(planrt, [onnx_path, "--dim", f"S=1..{MAX_SEQ}", "--save-model", i_json, "-o", i_prog])
        failures = []
        ops = [Counter(n["op"] for n in json.load(open(p))["methods"][0]["nodes"]) for p in (t_json, i_json)]
        if ops[0] != ops[1]:
            failures.append(f"ops differ: template {dict(ops[0])}, import {dict(ops[1])}")
        # planned bytes, lower bound, ratio (the tensor counts follow the ops)
        if t_plan[2:5] != i_plan[2:5]:
            failures.append(f"plans differ: template {t_plan}, import {i_plan}")
        worst = 0.0
        for s in (1, 17, 64):
            x = np.random.default_rng(s).standard_normal((1, s, D)).astype(np.float32)
            np.save(os.path.join(work, "x.npy"), x)
            outs = []
            for prog, out in ((t_prog, "ot"), (i_prog, "oi")):
                subprocess.run([planrt, "run", prog, "--input", f"x={os.path.join(work, 'x.npy')}",
                                "--output-dir", os.path.join(work, out)], capture_output=True, check=True)
                outs.append(np.load(os.path.join(work, out, "y.npy")))
            with torch.no_grad():
                torch_y = module(torch.from_numpy(x)).numpy()
            err = float(np.max(np.abs(outs[0] - outs[1])) / np.max(np.abs(outs[0])))
            err_torch = float(np.max(np.abs(outs[1] - torch_y)) / np.max(np.abs(torch_y)))
            worst = max(worst, err)
            if err > 1e-6 or err_torch > 1e-5:
                failures.append(f"S={s}: import vs template {err:.3g}, import vs torch {err_torch:.3g}")
        print(f"template: {t_plan}\nimport:   {i_plan}\nops: {dict(ops[1])}\n"
              f"worst relative difference of the outputs: {worst:.3g}")
        for f in failures:
            print("FAIL:", f)
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
