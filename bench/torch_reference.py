#!/usr/bin/env python3
"""PyTorch reference executor for planrt model descriptions (docs/model-format.md).

Reads a model JSON and its safetensors weights (write them with
`planrt build ... --save-model model.json`), runs one method in PyTorch eager, op by op,
with the torch function each op of docs/design.md section 9 names, and reports outputs, device
memory and latency. It is the oracle for correctness and the baseline for memory and speed
(bench/compare.sh runs it beside planrt).

  python3 bench/torch_reference.py model.json --input x=x.npy --output-dir out/ \
      [--method forward] [--device cuda] [--dtype f32|bf16] [--iterations 50] [--warmup 5]
      [--compile none|default|reduce-overhead] [--module encoder]

Prints one JSON object: outputs (name, shape, path), latency_ms {median, p90} timed with
CUDA events around the forward (inputs already on the device), host_to_host_ms {median,
p90} (host clock around copy in + forward + copy out, what `planrt run` times), memory {weights_bytes,
max_allocated_above_weights_bytes (torch.cuda.max_memory_allocated minus the weights),
device_used_delta_bytes (cudaMemGetInfo after the runs minus before loading)}.
TF32 is off (torch.backends.*.allow_tf32 = False), as planrt's default. --dtype defaults to
the model's input dtype; f32 .npy inputs are cast to it (bf16: rounded to nearest even, as
`planrt run` does) and outputs are saved as f32 (bf16 widens exactly).
--module encoder runs PyTorch's own module instead of the op-by-op executor: the model must
be the `transformer` template's graph (docs/model-format.md), whose weights are loaded into an
nn.TransformerEncoder of nn.TransformerEncoderLayer(norm_first=True, activation="gelu") blocks
(q, k, v concatenated into in_proj) -- the stack a user deploys with, and what issue 18's peers
are measured on.
Needs only torch and numpy (safetensors is parsed here).
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I32": torch.int32, "I64": torch.int64}
NAMES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def read_safetensors(path, device):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = DTYPES[info["dtype"]]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype) if end > begin else \
            torch.empty(0, dtype=dtype)
        out[name] = t.reshape(info["shape"]).to(device)
    return out


def resolve_shape(spec, dims, x):
    """reshape's `shape`: ints, dim names (bound from the inputs) and at most one -1."""
    return [dims[e] if isinstance(e, str) else int(e) for e in spec]


def run_node(op, args, attrs, dims):
    a = args
    if op == "linear":
        return F.linear(a[0], a[1], a[2] if len(a) > 2 else None)
    if op == "matmul":
        return torch.matmul(a[0], a[1])
    if op == "add":
        return a[0] + a[1]
    if op == "sub":
        return a[0] - a[1]
    if op == "mul":
        return a[0] * a[1]
    if op == "div":
        return a[0] / a[1]
    if op == "layer_norm":
        return F.layer_norm(a[0], (a[0].shape[-1],), a[1] if len(a) > 1 else None,
                            a[2] if len(a) > 2 else None, attrs.get("eps", 1e-5))
    if op == "rms_norm":
        return F.rms_norm(a[0], (a[0].shape[-1],), a[1] if len(a) > 1 else None,
                          attrs.get("eps", 1e-6))
    if op == "softmax":
        return torch.softmax(a[0], dim=attrs.get("dim", -1))
    if op == "gelu":
        return F.gelu(a[0], approximate=attrs.get("approximate", "none"))
    if op == "relu":
        return torch.relu(a[0])
    if op == "silu":
        return F.silu(a[0])
    if op == "reshape":
        return a[0].reshape(resolve_shape(attrs["shape"], dims, a[0]))
    if op == "permute":
        return a[0].permute(*attrs["dims"])
    if op == "transpose":
        return a[0].transpose(attrs["dim0"], attrs["dim1"])
    if op == "scaled_dot_product_attention":
        seq_major = attrs.get("layout", "bhsd") == "bshd"  # [.., S, H, D]: heads next to each other
        q, k, v = (t.transpose(-3, -2) if seq_major else t for t in a[:3])
        o = F.scaled_dot_product_attention(q, k, v, is_causal=attrs.get("causal", False),
                                           scale=attrs.get("scale"))
        return o.transpose(-3, -2) if seq_major else o
    if op == "embedding":
        return F.embedding(a[0].long(), a[1])
    if op == "concat":
        return torch.cat(a, dim=attrs.get("dim", 0))
    if op == "slice":
        index = [slice(None)] * a[0].dim()
        index[attrs.get("dim", 0)] = slice(attrs.get("start", 0), attrs.get("end"))
        return a[0][tuple(index)]
    raise ValueError(f"op '{op}' has no torch reference")


class Executor:
    def __init__(self, model, method, weights, dtype):
        self.method = method
        self.weights = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in weights.items()}
        self.dtype = dtype

    def bind_dims(self, inputs):
        dims = {}
        for decl, t in zip(self.method["inputs"], inputs):
            for e, n in zip(decl["shape"], t.shape):
                if isinstance(e, str):
                    dims[e] = int(n)
        return dims

    def last_uses(self):
        # Each value is dropped after the last node reading it, as eager module code drops
        # its locals, so the reference holds no more memory than PyTorch itself would.
        last = {}
        for k, node in enumerate(self.method["nodes"]):
            for i in node["inputs"]:
                if i is not None:
                    last[i] = k
        keep = set(self.method["outputs"])
        drops = [[] for _ in self.method["nodes"]]
        for name, k in last.items():
            if name not in keep and name not in self.weights:
                drops[k].append(name)
        return drops

    def forward(self, inputs):
        values = {decl["name"]: t for decl, t in zip(self.method["inputs"], inputs)}
        dims = self.bind_dims(inputs)
        if not hasattr(self, "_drops"):
            self._drops = self.last_uses()
        for k, node in enumerate(self.method["nodes"]):
            args = [values[i] if i in values else self.weights[i] if i is not None else None
                    for i in node["inputs"]]
            while args and args[-1] is None:
                args.pop()
            out = run_node(node["op"], args, node.get("attrs", {}), dims)
            del args
            for name in self._drops[k]:
                values.pop(name, None)
            values[node["outputs"][0]] = out
        return [values[name] for name in self.method["outputs"]]


# One pre-LN block of the `transformer` template (src/builder/transformer.cpp), op by op.
ENCODER_BLOCK_OPS = ["layer_norm", "linear", "reshape", "permute", "linear", "reshape", "permute",
                     "linear", "reshape", "permute", "scaled_dot_product_attention", "permute",
                     "reshape", "linear", "add", "layer_norm", "linear", "gelu", "linear", "add"]


def encoder_module(method, weights, dtype):
    """nn.TransformerEncoder holding the template's weights; ValueError when the method is not
    the template's graph (the module would compute something else)."""
    nodes = method["nodes"]
    blocks = len(nodes) // len(ENCODER_BLOCK_OPS)
    ops = [n["op"] for n in nodes]
    if blocks == 0 or ops != ENCODER_BLOCK_OPS * blocks:
        raise ValueError("--module encoder: the method is not the transformer template's graph "
                         f"({len(nodes)} nodes: {', '.join(ops[:8])}, ...)")
    w = lambda name: weights[name]
    d_model = w("blocks.0.ln1.weight").shape[0]
    heads = next(n for n in nodes if n["op"] == "reshape")["attrs"]["shape"][2]
    gelu = next(n for n in nodes if n["op"] == "gelu")
    if gelu.get("attrs", {}).get("approximate", "none") != "none":
        raise ValueError("--module encoder: the template's GELU is exact; this model's is not")
    eps = nodes[0].get("attrs", {}).get("eps", 1e-5)
    layers = []
    for i in range(blocks):
        b = f"blocks.{i}."
        ffn = w(b + "mlp.fc1.weight").shape[0]
        layer = torch.nn.TransformerEncoderLayer(d_model, heads, ffn, dropout=0.0, activation="gelu",
                                                 layer_norm_eps=eps, batch_first=True, norm_first=True)
        with torch.no_grad():
            attn = layer.self_attn
            attn.in_proj_weight.copy_(torch.cat([w(b + f"attn.{p}.weight") for p in "qkv"]))
            attn.in_proj_bias.copy_(torch.cat([w(b + f"attn.{p}.bias") for p in "qkv"]))
            attn.out_proj.weight.copy_(w(b + "attn.o.weight"))
            attn.out_proj.bias.copy_(w(b + "attn.o.bias"))
            for mine, theirs in (("linear1", "mlp.fc1"), ("linear2", "mlp.fc2"),
                                 ("norm1", "ln1"), ("norm2", "ln2")):
                getattr(layer, mine).weight.copy_(w(b + theirs + ".weight"))
                getattr(layer, mine).bias.copy_(w(b + theirs + ".bias"))
        layers.append(layer)
    stack = torch.nn.TransformerEncoder(layers[0], blocks, enable_nested_tensor=False)
    stack.layers = torch.nn.ModuleList(layers)  # per-block FFN widths may differ
    return stack.eval().to(next(iter(weights.values())).device, dtype)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("--method", default="forward")
    p.add_argument("--input", action="append", default=[], help="NAME=PATH.npy")
    p.add_argument("--output-dir", default="")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default=None, choices=sorted(NAMES),
                   help="compute dtype (default: the method's first floating input's, else f32)")
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--compile", default="none", choices=["none", "default", "reduce-overhead"],
                   help="run the forward under torch.compile in this mode (reduce-overhead: "
                        "CUDA graphs); compilation happens in the warm-up, outside the timings")
    p.add_argument("--module", default="none", choices=["none", "encoder"],
                   help="run PyTorch's own nn.TransformerEncoder with the template model's weights "
                        "instead of the op-by-op executor")
    a = p.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    with open(a.model) as f:
        model = json.load(f)
    method = next((m for m in model["methods"] if m["name"] == a.method), None)
    if method is None:
        sys.exit(f"error: no method '{a.method}' in {a.model}")
    if cuda:
        torch.cuda.init()
        torch.cuda.synchronize()
        free0, total = torch.cuda.mem_get_info(dev)
    weights_file = model.get("weights", {}).get("file")
    weights = {}
    if weights_file:
        weights = read_safetensors(os.path.join(os.path.dirname(os.path.abspath(a.model)), weights_file), dev)
    if a.dtype is None:
        a.dtype = next((d["dtype"] for d in method["inputs"] if d.get("dtype") in NAMES), "f32")
    dtype = NAMES[a.dtype]
    if a.module == "encoder":
        if len(method["inputs"]) != 1 or len(method["outputs"]) != 1:
            sys.exit("error: --module encoder: the template's method has one input and one output")
        try:
            module = encoder_module(method, weights, dtype)
        except ValueError as e:
            sys.exit(f"error: {e}")
        weights = None  # the module holds its own copy; the file's tensors are freed
        forward = lambda inputs: [module(inputs[0])]
        weights_bytes = sum(t.numel() * t.element_size() for t in module.parameters())
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    else:
        ex = Executor(model, method, weights, dtype)
        forward = ex.forward
        weights_bytes = sum(t.numel() * t.element_size() for t in ex.weights.values())
    if a.compile != "none":
        if not hasattr(torch, "compile"):
            sys.exit(f"error: --compile needs torch 2 (this is {torch.__version__})")
        if a.module == "none":
            ex._drops = ex.last_uses()  # outside the traced code
        forward = torch.compile(module if a.module != "none" else ex.forward, mode=a.compile, dynamic=False)
        if a.module != "none":
            compiled = forward
            forward = lambda inputs: [compiled(inputs[0])]
        a.warmup = max(a.warmup, 3)  # the first calls compile (and record the graph)

    given = dict(s.split("=", 1) for s in a.input)
    inputs = []
    for decl in method["inputs"]:
        arr = np.load(given[decl["name"]])
        t = torch.from_numpy(arr).to(dev)
        inputs.append(t.to(dtype) if t.is_floating_point() else t)

    with torch.inference_mode():
        for _ in range(a.warmup):
            forward(inputs)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(dev)
        times = []
        for _ in range(a.iterations):
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                outs = forward(inputs)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            else:
                import time
                t0 = time.perf_counter()
                outs = forward(inputs)
                times.append((time.perf_counter() - t0) * 1e3)
        # The same forward host to host, as `planrt run` times Method::run: the inputs copied
        # from host memory, the outputs copied back, timed on the host.
        import time
        host_inputs = [t.cpu() for t in inputs]
        host_times = []
        for _ in range(a.iterations):
            t0 = time.perf_counter()
            outs_h = forward([t.to(dev) for t in host_inputs])
            outs = [o.cpu() for o in outs_h]  # (reduce-overhead: the next replay reuses outs_h)
            if cuda:
                torch.cuda.synchronize()
            host_times.append((time.perf_counter() - t0) * 1e3)
    result = {"model": a.model, "method": a.method, "dtype": a.dtype, "device": str(dev),
              "torch": torch.__version__, "compile": a.compile, "module": a.module}
    if cuda:
        torch.cuda.synchronize()
        free1, _ = torch.cuda.mem_get_info(dev)
        result["device_name"] = torch.cuda.get_device_name(dev)
        result["memory"] = {
            "weights_bytes": weights_bytes,
            "max_allocated_bytes": torch.cuda.max_memory_allocated(dev),
            "max_allocated_above_weights_bytes": torch.cuda.max_memory_allocated(dev) - weights_bytes,
            "device_used_delta_bytes": free0 - free1,
        }
    times.sort()
    q = lambda f: times[min(len(times) - 1, int(round(f * (len(times) - 1))))]
    result["latency_ms"] = {"median": q(0.5), "p90": q(0.9), "iterations": len(times),
                            "warmup": a.warmup, "timer": "cuda events" if cuda else "perf_counter"}
    host_times.sort()
    result["host_to_host_ms"] = {"median": host_times[len(host_times) // 2],
                                 "p90": host_times[min(len(host_times) - 1, int(round(0.9 * (len(host_times) - 1))))]}
    result["outputs"] = []
    for name, t in zip(method["outputs"], outs):
        o = {"name": name, "shape": list(t.shape)}
        if a.output_dir:
            os.makedirs(a.output_dir, exist_ok=True)
            path = os.path.join(a.output_dir, name + ".npy")
            np.save(path, t.float().cpu().numpy())
            o["path"] = path
        result["outputs"].append(o)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
