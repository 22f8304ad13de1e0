#!/usr/bin/env python3
"""The exported encoder on a GPU (issue 15's benchmark): a 12-layer pre-LN
nn.TransformerEncoder (d_model 512, 8 heads, FFN 2048, GELU, batch 1), exported with
torch.onnx.export (the TorchScript exporter at opset 14 and, where torch has it, the
dynamo exporter torch 2.9+ uses by default: rows "import" and "dynamo") and built with
`planrt build model.onnx`, against the same module in
PyTorch eager and under torch.compile, and against the template-built program of the same
model (`planrt build --template transformer --weights`, same sizes, partition and weights:
the module's, so its output is checked like the import's). One run per
(sequence length, dtype); every figure comes from this one process on one GPU.

Figures (medians over --iterations after --warmup; planrt's programs run --rounds times
each, the order rotated per round, and report the median of their rounds):
  host-to-host latency: input on the host -> output on the host (copy in, forward, sync,
    copy out), which is what `planrt run` times;
  device memory above the weights: planrt, cudaMemGetInfo after the runs minus before the
    load, less the weights (bench/compare.sh's convention, `planrt run --json`); PyTorch,
    torch.cuda.max_memory_allocated() minus the weights (the caching allocator's peak).
  relative error: max |planrt - torch| / max |torch| (TF32 off on both sides), torch being
    the module's composite path (gradients on, so not nn.TransformerEncoderLayer's inference
    fast path, whose CUDA kernels differ from the module's definition by ~2e-4 here).

  python3 bench/onnx_encoder.py --planrt build/gpu/tools/planrt [--seq 128 2048]
      [--dtype f32 bf16] [--layers 12] [--iterations 50] [--warmup 5] [--rounds 7]
      [--out FILE.jsonl] [--smoke]   # 2 layers, S = 64, 5 iterations, 2 rounds: checks the
                                     # path, judges no target

Exit 1 when an output disagrees (relative error above 1e-4 in f32, 2e-2 in bf16) or a
step fails; 77 without a GPU (1 with PLANRT_REQUIRE_GPU=1).
"""
import argparse
import inspect
import json
import os
import statistics
import sys
import tempfile

import numpy as np
import torch

from torch_peers import planrt_out as planrt_json, run_planrt as run_planrt_json, time_torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpu"))
import models  # noqa: E402  (the CPU comparison's encoder: the same module, another size)

D, HEADS, FFN = (models.MODELS["encoder"][k] for k in ("d", "heads", "ffn"))


def encoder(layers):
    """The pre-norm GELU encoder with each block's own weights: nn.TransformerEncoder clones
    one layer, and an export of equal layers stores one layer's weights for all (a model
    1/layers the size, cache-resident), which the template's distinct layers are not."""
    return models.build("encoder", seed=0, layers=layers)


def write_template_weights(module, path):
    """The module's weights as a safetensors file under the transformer template's names
    (`planrt build --template transformer --weights PATH`), in the module's dtype: the
    template-built program then computes what the export does, so the latency ratio compares
    two programs of one model and their outputs must agree."""
    tensors = {}
    for i, layer in enumerate(module.layers):
        b = f"blocks.{i}."
        attn = layer.self_attn
        for name, w in zip("qkv", attn.in_proj_weight.chunk(3)):
            tensors[b + f"attn.{name}.weight"] = w
        for name, w in zip("qkv", attn.in_proj_bias.chunk(3)):
            tensors[b + f"attn.{name}.bias"] = w
        tensors[b + "attn.o.weight"], tensors[b + "attn.o.bias"] = attn.out_proj.weight, attn.out_proj.bias
        for theirs, mine in (("linear1", "mlp.fc1"), ("linear2", "mlp.fc2"), ("norm1", "ln1"), ("norm2", "ln2")):
            tensors[b + mine + ".weight"] = getattr(layer, theirs).weight
            tensors[b + mine + ".bias"] = getattr(layer, theirs).bias
    names = {torch.float32: "F32", torch.bfloat16: "BF16"}
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.detach().contiguous().cpu().view(torch.int16 if t.dtype == torch.bfloat16 else t.dtype)
        data = raw.numpy().astype("<i2" if t.dtype == torch.bfloat16 else "<f4").tobytes()  # safetensors: little-endian
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for data in blobs:
            f.write(data)


def has_dynamo_exporter():
    return "dynamo" in inspect.signature(torch.onnx.export).parameters


def export(module, path, seq, dtype, dynamo=False):
    """TorchScript export at opset 14 (dynamo=False where torch has both), or torch 2.x's
    default dynamo export (opset 18+, the sequence dim symbolic: docs/onnx.md)."""
    kwargs = {"dynamo": dynamo} if has_dynamo_exporter() else {}
    if not dynamo:
        kwargs["opset_version"] = 14
    x = torch.randn(1, seq, D, dtype=dtype)
    torch.onnx.export(module.to(dtype), (x,), path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {1: "S"}, "y": {1: "S"}}, **kwargs)


def dim_flags(path, seq):
    """--dim NAME=seq for each symbolic dim of the model's inputs (the exporter names them)."""
    import onnx
    names = {d.dim_param for i in onnx.load(path, load_external_data=False).graph.input
             for d in i.type.tensor_type.shape.dim if d.dim_param}
    return [f for n in sorted(names) for f in ("--dim", f"{n}={seq}")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--planrt", required=True)
    ap.add_argument("--seq", type=int, nargs="+", default=[128, 2048])
    ap.add_argument("--dtype", nargs="+", default=["f32", "bf16"])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=7, help="runs of each planrt program, order rotated")
    ap.add_argument("--out")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    if args.smoke:
        args.seq, args.layers, args.iterations, args.warmup, args.rounds = [64], 2, 5, 2, 2
    if not torch.cuda.is_available():
        print("no CUDA device visible to PyTorch", file=sys.stderr)
        return 1 if os.environ.get("PLANRT_REQUIRE_GPU") == "1" else 77
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    commit = os.environ.get("PLANRT_COMMIT", "unknown")
    failed = False
    lines = []
    for dtype_name in args.dtype:
        dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
        for seq in args.seq:
            torch.manual_seed(0)
            module = encoder(args.layers)
            with tempfile.TemporaryDirectory() as work:
                onnx_path = os.path.join(work, "encoder.onnx")
                # Exported at the benchmark's length and built with the dim fixed there: torch
                # 2.x's TorchScript exporter fixes nn.MultiheadAttention's reshapes to the
                # example's length anyway (docs/onnx.md).
                export(module, onnx_path, seq, dtype)
                dynamo_path = os.path.join(work, "encoder_dynamo.onnx")
                line = {"bench": "onnx_encoder", "commit": commit, "gpu": torch.cuda.get_device_name(),
                        "layers": args.layers, "d_model": D, "heads": HEADS, "ffn": FFN, "seq": seq,
                        "dtype": dtype_name, "iterations": args.iterations, "smoke": args.smoke}
                progs = {}
                try:
                    progs["import"] = os.path.join(work, "import.prog")
                    planrt_json([args.planrt, "build", onnx_path, "--dim", f"S={seq}", "--partition",
                                 "cuda", "--device", "cuda:0", "-o", progs["import"]])
                    if has_dynamo_exporter():  # the exporter torch 2.9+ uses by default
                        export(module, dynamo_path, seq, dtype, dynamo=True)
                        progs["dynamo"] = os.path.join(work, "dynamo.prog")
                        planrt_json([args.planrt, "build", dynamo_path, *dim_flags(dynamo_path, seq),
                                     "--partition", "cuda", "--device", "cuda:0", "-o", progs["dynamo"]])
                    progs["template"] = os.path.join(work, "template.prog")
                    template_weights = os.path.join(work, "template.safetensors")
                    write_template_weights(module.to(dtype), template_weights)
                    planrt_json([args.planrt, "build", "--template", "transformer", "--layers", str(args.layers),
                                 "--d-model", str(D), "--heads", str(HEADS), "--ffn", str(FFN), "--max-seq",
                                 str(seq), "--weights", template_weights, "--partition", "cuda", "--dtype",
                                 dtype_name, "-o", progs["template"]])
                except Exception as e:  # a failed build, or a failed export
                    print(f"S={seq} {dtype_name}: {e}", file=sys.stderr)
                    failed = True
                    continue
                x = torch.randn(1, seq, D)
                x_path = os.path.join(work, "x.npy")
                np.save(x_path, x.numpy())  # f32; planrt rounds a bf16 input as torch does
                x_host = x.to(dtype)
                weights = sum(p.numel() * p.element_size() for p in module.parameters())
                module = module.to("cuda", dtype)
                with torch.no_grad():
                    torch.cuda.reset_peak_memory_stats()
                    eager_ms, ref = time_torch(module, x_host, args.iterations, args.warmup)
                    eager_above = torch.cuda.max_memory_allocated() - weights
                    compiled = torch.compile(module)
                    torch.cuda.reset_peak_memory_stats()
                    compile_ms, _ = time_torch(compiled, x_host, args.iterations, args.warmup)
                    compile_above = torch.cuda.max_memory_allocated() - weights
                # The accuracy check is against the module's own composite path (gradients on:
                # no inference fast path, whose kernels differ from the definition).
                with torch.enable_grad():
                    ref = module(x_host.to("cuda")).detach().float().cpu().numpy()
                del module, compiled
                torch.cuda.empty_cache()
                # The programs run in rounds, each round in the order rotated by one, so that
                # no program is always the first process after PyTorch's (until 488ac37 the
                # import always was, and its launch-bound bf16 S = 128 row ranged 0.70-1.29 of
                # the template over four runs; whether the order caused that is not measured).
                # A row's latency is the median of its rounds' medians, its memory and output
                # the first round's. Seven rounds: at bf16 S = 128 a process runs either at
                # ~0.65-0.70 ms or at 1.2-1.7 ms, whichever program it is (docs/performance.md,
                # probed at 9fca6e5), so three rounds could land a program in the slow mode twice.
                kinds = list(progs)
                round_ms = {kind: [] for kind in kinds}
                first = {}
                for r in range(args.rounds):
                    for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
                        result = run_planrt_json(args.planrt, progs[kind], x_path, os.path.join(work, kind),
                                                 args.iterations, args.warmup)
                        round_ms[kind].append(result[0])
                        first.setdefault(kind, result)
                for kind in kinds:
                    _, above, cuda, y = first[kind]
                    ms = statistics.median(round_ms[kind])
                    w = cuda["weights_bytes"]
                    line[f"planrt_{kind}_host_to_host_ms"] = ms
                    line[f"planrt_{kind}_round_medians_ms"] = round_ms[kind]
                    line[f"planrt_{kind}_device_used_above_weights_bytes"] = above
                    line[f"planrt_{kind}_weights_bytes"] = w
                    # Every program holds the module's weights, the template's too.
                    rel = float(np.max(np.abs(y - ref)) / np.max(np.abs(ref)))
                    line[f"{kind}_relative_error_vs_torch"] = rel
                    if rel > (1e-4 if dtype_name == "f32" else 2e-2):
                        print(f"S={seq} {dtype_name} {kind}: relative error {rel:.3g}", file=sys.stderr)
                        failed = True
                line.update({"torch_eager_host_to_host_ms": eager_ms, "torch_compile_host_to_host_ms": compile_ms,
                             "torch_eager_max_allocated_above_weights_bytes": eager_above,
                             "torch_compile_max_allocated_above_weights_bytes": compile_above,
                             "torch_weights_bytes": weights})
                line["import_over_template_latency"] = (line["planrt_import_host_to_host_ms"]
                                                        / line["planrt_template_host_to_host_ms"])
                line["import_over_torch_compile_latency"] = line["planrt_import_host_to_host_ms"] / compile_ms
                if "dynamo" in progs:
                    line["dynamo_over_template_latency"] = (line["planrt_dynamo_host_to_host_ms"]
                                                            / line["planrt_template_host_to_host_ms"])
                print(json.dumps(line))
                lines.append(line)
    if args.out and lines:
        with open(args.out, "a") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
