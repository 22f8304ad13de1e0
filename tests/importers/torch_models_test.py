#!/usr/bin/python3
"""PyTorch modules exported with torch.onnx.export, built with `planrt build`, run with
`planrt run` on the CPU and compared with PyTorch's own output (relative error: the largest
absolute difference over the largest absolute reference value, at most 1e-5 in f32).
Dynamic batch and sequence dims are run at several values within their bounds, and each
model is built with more than one partition (engines run on the host too).

  torch_models_test.py PLANRT MODEL [--gpu]   MODEL: one of the names in MODELS; exit 0 on
                                              success. --gpu: the cuda and engine-per-block
                                              partitions on cuda:0 against PyTorch on CUDA
                                              (TF32 off); exit 77 without a GPU (1 with
                                              PLANRT_REQUIRE_GPU=1)
  torch_models_test.py PLANRT --segments      the -per-block partitions' segments
  torch_models_test.py --list                 the model names
"""
import inspect
import json
import math
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


class BertLike(torch.nn.Module):
    """Token and position embeddings, layer norm, a GELU encoder, a tanh pooler on token 0."""

    def __init__(self, vocab=100, d=64, heads=4, layers=2, max_pos=64):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(max_pos, d)
        self.ln = torch.nn.LayerNorm(d)
        layer = torch.nn.TransformerEncoderLayer(d, heads, 128, activation="gelu", batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pool = torch.nn.Linear(d, d)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        h = self.enc(self.ln(self.tok(ids) + self.pos(pos)))
        return h, torch.tanh(self.pool(h[:, 0]))


class GptBlock(torch.nn.Module):
    """Pre-LN causal self-attention written out as GPT-2 does (fused QKV, split heads, a
    lower-triangular buffer sliced to the sequence and masked_fill), then a GELU MLP."""

    def __init__(self, d, heads, max_pos):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.c_attn = torch.nn.Linear(d, 3 * d)
        self.c_proj = torch.nn.Linear(d, d)
        self.fc = torch.nn.Linear(d, 4 * d)
        self.proj = torch.nn.Linear(4 * d, d)
        self.heads = heads
        self.register_buffer("bias", torch.tril(torch.ones(max_pos, max_pos)).view(1, 1, max_pos, max_pos))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.c_attn(self.ln1(x)).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :s, :s] == 0, float("-inf"))
        y = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(b, s, d)
        x = x + self.c_proj(y)
        return x + self.proj(torch.nn.functional.gelu(self.fc(self.ln2(x))))


class GptLike(torch.nn.Module):
    """A GPT-2-like causal decoder stack (no KV cache): embeddings, blocks, final norm, LM head."""

    def __init__(self, vocab=100, d=64, heads=4, layers=2, max_pos=64):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, d)
        self.wpe = torch.nn.Embedding(max_pos, d)
        self.blocks = torch.nn.ModuleList([GptBlock(d, heads, max_pos) for _ in range(layers)])
        self.ln_f = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class CausalEncoder(torch.nn.Module):
    """nn.TransformerEncoder with the square subsequent mask made inside forward."""

    def __init__(self):
        super().__init__()
        self.enc = encoder("gelu", True, True)

    def forward(self, x):
        s = x.shape[1]
        mask = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
        return self.enc(x, mask=mask)


# name -> (module factory, input shape with "b" and "s" for the dynamic dims)
MODELS = {
    "mlp": (Mlp, ("b", 32)),
    "encoder_post_norm_relu": (lambda: encoder("relu", True, False), ("b", "s", 64)),
    "encoder_post_norm_gelu": (lambda: encoder("gelu", True, False), ("b", "s", 64)),
    "encoder_pre_norm_relu": (lambda: encoder("relu", True, True), ("b", "s", 64)),
    "encoder_pre_norm_gelu": (lambda: encoder("gelu", True, True), ("b", "s", 64)),
    "encoder_seq_first_gelu": (lambda: encoder("gelu", False, True), ("s", "b", 64)),
    "bert_like": (BertLike, ("b", "s"), "ids", ("hidden", "pooled")),
    "gpt_like": (GptLike, ("b", "s"), "ids", ("logits",)),
    "encoder_causal_mask": (CausalEncoder, ("b", "s", 64)),
}
PARTITIONS = (["--partition", "cpu"], ["--partition", "engine", "--device", "cpu"],
              ["--partition", "engine-per-block", "--device", "cpu"])
GPU_PARTITIONS = (["--partition", "cuda", "--device", "cuda:0"],
                  ["--partition", "engine-per-block", "--device", "cuda:0"])


def export(module, example, path, outputs, dynamic_axes):
    # The TorchScript exporter (what Debian's torch 1.13 has; torch 2.x keeps it with
    # dynamo=False, its default before 2.9).
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    torch.onnx.export(module, (example,), path, input_names=["x"], output_names=list(outputs),
                      dynamic_axes=dynamic_axes, opset_version=14, **kwargs)


def make_input(kind, shape):
    if kind == "ids":
        return torch.randint(0, 100, shape)
    return torch.randn(*shape)


SIZES = ((1, 1), (2, 7), (4, 64), (3, 33))
# torch 2.x's TorchScript exporter traces nn.MultiheadAttention's sizes as Python integers,
# fixing the graph to the example's (batch, seq) whatever dynamic_axes says (docs/onnx.md):
# there, each size is exported and built on its own with the dims fixed (--dim b=B).
SPECIALISES = int(torch.__version__.split(".")[0]) >= 2 or os.environ.get("PLANRT_EXPORT_PER_SIZE") == "1"


def check(planrt, name, gpu=False):
    torch.manual_seed(1234)
    factory, shape, kind, outputs = (MODELS[name] + ("f32", ("y",)))[:4]
    module = factory().eval()
    device = "cuda" if gpu else "cpu"
    axes = {i: d for i, d in enumerate(shape) if isinstance(d, str)}
    out_axes = {o: dict(axes) for o in outputs}
    if name == "bert_like":
        out_axes["pooled"] = {0: "b"}
    partitions = GPU_PARTITIONS if gpu else PARTITIONS
    worst = 0.0
    with tempfile.TemporaryDirectory() as work:
        def build(onnx_path, bounds, partition):
            prog = os.path.join(work, "m.prog")
            r = subprocess.run([planrt, "build", onnx_path, "-o", prog] + bounds + partition,
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"{name} {' '.join(partition)}: build failed: {r.stderr.strip()}")
            return prog

        def bounds_for(b, s):
            dims = {"b": f"{BATCH[0]}..{BATCH[1]}" if b is None else str(b),
                    "s": f"{SEQ[0]}..{SEQ[1]}" if s is None else str(s)}
            return [f for d in ("b", "s") if d in shape for f in ("--dim", f"{d}={dims[d]}")]

        onnx_path = os.path.join(work, "model.onnx")
        if not SPECIALISES:
            export(module, make_input(kind, [{"b": 2, "s": 5}.get(d, d) for d in shape]), onnx_path,
                   outputs, {"x": axes, **out_axes})
        module = module.to(device)
        for partition in partitions:
            prog = None if SPECIALISES else build(onnx_path, bounds_for(None, None), partition)
            for b, s in SIZES:
                x = make_input(kind, [{"b": b, "s": s}.get(d, d) for d in shape])
                if SPECIALISES:
                    export(module.to("cpu"), x, onnx_path, outputs, {"x": axes, **out_axes})
                    module = module.to(device)
                    prog = build(onnx_path, bounds_for(b, s), partition)
                np.save(os.path.join(work, "x.npy"), x.numpy())
                out = os.path.join(work, "out")
                r = subprocess.run([planrt, "run", prog, "--input", f"x={os.path.join(work, 'x.npy')}",
                                    "--output-dir", out], capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError(f"{name} {' '.join(partition)} b={b} s={s}: run failed: {r.stderr.strip()}")
                # The modules' own composite path: with gradients on, nn.TransformerEncoderLayer
                # does not take its inference fast path (whose CUDA kernels differ from the
                # module's definition by up to 6e-5 with GELU, measured on an H200).
                with torch.enable_grad():
                    refs = module(x.to(device))
                refs = refs if isinstance(refs, tuple) else (refs,)
                refs = tuple(r.detach() for r in refs)
                for out_name, ref in zip(outputs, refs):
                    ref = ref.cpu().numpy()
                    got = np.load(os.path.join(out, f"{out_name}.npy"))
                    if got.shape != ref.shape:
                        raise RuntimeError(f"{name} {out_name} b={b} s={s}: shape {got.shape}, expected {ref.shape}")
                    err = float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))
                    worst = max(worst, err)
                    if not err <= TOLERANCE:
                        raise RuntimeError(f"{name} {out_name} {' '.join(partition)} b={b} s={s}: relative "
                                           f"error {err:.3g} > {TOLERANCE}")
    print(f"{name}: worst relative error {worst:.3g} over {len(partitions)} partitions x {len(SIZES)} sizes"
          f"{' on ' + torch.cuda.get_device_name() if gpu else ''} (torch {torch.__version__})")
    return 0


def check_segments(planrt):
    """The -per-block partitions find the exporter's blocks: one segment per encoder layer,
    nodes before the first block (embeddings) in a segment of their own."""
    cases = [("encoder_post_norm_relu", ["--partition", "cuda-per-block", "--device", "cuda:0"],
              ["block0", "block1"]),
             ("bert_like", ["--partition", "engine-per-block", "--device", "cpu"], ["head", "block0", "block1"])]
    for name, partition, want in cases:
        torch.manual_seed(0)
        factory, shape, kind, outputs = (MODELS[name] + ("f32", ("y",)))[:4]
        module = factory().eval()
        with tempfile.TemporaryDirectory() as work:
            onnx_path, prog = os.path.join(work, "m.onnx"), os.path.join(work, "m.prog")
            axes = {i: d for i, d in enumerate(shape) if isinstance(d, str)}
            export(module, make_input(kind, [{"b": 2, "s": 5}.get(d, d) for d in shape]), onnx_path, outputs,
                   {"x": axes, **{o: {0: "b"} for o in outputs}})
            dims = ["b=2", "s=5"] if SPECIALISES else ["b=1..4", "s=1..64"]
            r = subprocess.run([planrt, "build", onnx_path, "-o", prog, "--dim", dims[0], "--dim", dims[1]] + partition,
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name} {' '.join(partition)}: build failed: {r.stderr.strip()}")
                return 1
            j = json.loads(subprocess.run([planrt, "inspect", prog, "--json"], check=True, capture_output=True,
                                          text=True).stdout)
            got = [seg["name"] for seg in j["methods"][0]["segments"]]
            if got != want:
                print(f"{name} {' '.join(partition)}: segments {got}, expected {want}")
                return 1
            print(f"{name} {' '.join(partition)}: segments {got}")
    return 0


def main():
    if sys.argv[1:] == ["--list"]:
        print("\n".join(MODELS))
        return 0
    torch.set_num_threads(1)
    if sys.argv[2] == "--segments":
        return check_segments(sys.argv[1])
    gpu = "--gpu" in sys.argv[3:]
    if gpu:
        if not torch.cuda.is_available():
            print("no CUDA device visible to PyTorch")
            return 1 if os.environ.get("PLANRT_REQUIRE_GPU") == "1" else 77
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    try:
        return check(sys.argv[1], sys.argv[2], gpu)
    except RuntimeError as e:
        print(e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
