#!/usr/bin/env python3
"""torchvision's classification models on a GPU (issue 16's benchmark): each model (random
weights, eval mode) exported with torch.onnx.export (batch dynamic), built with `planrt
build model.onnx` for the `cuda` partition at the batch measured, against the same module
in PyTorch eager and under torch.compile. One process, one GPU; every figure of a row from
the same run, same weights and input.

planrt runs three ways: the `cuda` partition (intermediates from the warm pool per call),
the same with CUDA graphs (`--backend-option cuda.use_cuda_graphs=true`), and the `engine`
partition (one engine; its intermediates and the convolutions' workspaces planned into its
scratch, whose plan ratio is the row's `planrt_engine_plan_ratio`).

Figures (medians over --iterations after --warmup):
  host-to-host latency: the batch on the host -> logits on the host (copy in, forward, sync,
    copy out), what `planrt run` times;
  device memory above the weights: planrt, cudaMemGetInfo after the runs minus before the
    load, less the weights (`planrt run --json`; it includes the cuDNN/cuBLAS handles and the
    kernel images they load, which PyTorch's figure does not); PyTorch,
    torch.cuda.max_memory_allocated() and max_memory_reserved() minus the weights (the
    caching allocator's peak in use and held);
  plan ratio: planned bytes over the plan's lower bound (largest live set), per planned
    (method, device) and per engine scratch plan (`planrt inspect --json`);
  relative error: max |planrt - torch| / max |torch|, TF32 off on both sides.

  python3 bench/vision_models.py --planrt build/gpu/tools/planrt [--models resnet50 ...]
      [--batch 1 32] [--dtype f32 bf16] [--size 224] [--iterations 30] [--warmup 5]
      [--out FILE.jsonl] [--smoke]   # resnet18, batch 2, 64 x 64, 3 iterations

Exit 1 when an output disagrees (relative error above 1e-4 in f32, 3e-2 in bf16) or a step
fails; 77 without a GPU (1 with PLANRT_REQUIRE_GPU=1).
"""
import argparse
import inspect
import json
import os
import sys
import tempfile

import numpy as np
import torch
import torchvision

from torch_peers import planrt_out, run_planrt, time_torch


def make(name, size):
    torch.manual_seed(0)
    kwargs = {"image_size": size} if name.startswith("vit") else {}
    model = getattr(torchvision.models, name)(weights=None, **kwargs).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.abs().max() == 0:  # vit's zero-initialised head: logits of zero say nothing
                p.normal_(0.0, 0.02)
    return model


def export(model, path, size, dtype):
    kwargs = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    x = torch.randn(2, 3, size, size, dtype=dtype)
    torch.onnx.export(model.to(dtype), (x,), path, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=17, **kwargs)


def plan_ratios(planrt, prog):
    """The plan ratios `planrt inspect --json` reports for prog's method: the largest over its
    planned (method, device) plans, and over its engines' scratch plans."""
    method = json.loads(planrt_out([planrt, "inspect", prog, "--json"]))["methods"][0]
    out = {"planrt_method_plan_ratio": max([p["ratio"] for p in method["plan"]], default=1.0)}
    engines = method.get("engines", [])
    if engines:
        out["planrt_engine_plan_ratio"] = max(e["scratch_ratio"] for e in engines)
        out["planrt_engine_scratch_bytes"] = sum(e["scratch_bytes"] for e in engines)
        out["planrt_engine_scratch_lower_bound_bytes"] = sum(e["scratch_lower_bound_bytes"] for e in engines)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--planrt", required=True)
    ap.add_argument("--models", nargs="+", default=["resnet50", "mobilenet_v2", "convnext_tiny", "vit_b_16"])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--dtype", nargs="+", default=["f32"])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--compare-nchw", action="store_true",
                    help="also build the cuda program with --conv-layout nchw and time it (cuda_nchw, cuda_graphs_nchw)")
    ap.add_argument("--out")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    if args.smoke:
        args.models, args.batch, args.size, args.iterations, args.warmup = ["resnet18"], [2], 64, 3, 1
        args.no_compile = True
    if not torch.cuda.is_available():
        print("no CUDA device visible to PyTorch", file=sys.stderr)
        return 1 if os.environ.get("PLANRT_REQUIRE_GPU") == "1" else 77
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    commit = os.environ.get("PLANRT_COMMIT", "unknown")
    failed, lines = False, []
    for dtype_name in args.dtype:
        dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
        for name in args.models:
            for batch in args.batch:
                model = make(name, args.size)
                line = {"bench": "vision_models", "commit": commit, "gpu": torch.cuda.get_device_name(),
                        "model": name, "batch": batch, "size": args.size, "dtype": dtype_name,
                        "iterations": args.iterations, "smoke": args.smoke}
                with tempfile.TemporaryDirectory() as work:
                    onnx_path = os.path.join(work, "model.onnx")
                    progs = {"cuda": os.path.join(work, "cuda.prog"), "engine": os.path.join(work, "engine.prog")}
                    if args.compare_nchw:
                        progs["cuda_nchw"] = os.path.join(work, "cuda_nchw.prog")
                    try:
                        export(model, onnx_path, args.size, dtype)
                        for label, prog in progs.items():
                            partition, _, layout = label.partition("_")
                            planrt_out([args.planrt, "build", onnx_path, "--dim", f"batch={batch}",
                                        "--partition", partition, "--device", "cuda:0", "-o", prog]
                                       + (["--conv-layout", layout] if layout else []))
                        line.update(plan_ratios(args.planrt, progs["engine"]))
                    except RuntimeError as e:
                        print(f"{name} batch {batch} {dtype_name}: {e}", file=sys.stderr)
                        failed = True
                        continue
                    x = torch.randn(batch, 3, args.size, args.size)
                    x_path = os.path.join(work, "x.npy")
                    np.save(x_path, x.numpy())  # f32; planrt rounds a bf16 input as torch does
                    x_host = x.to(dtype)
                    weights = sum(p.numel() * p.element_size() for p in model.parameters())
                    line["torch_weights_bytes"] = weights
                    model = model.to("cuda", dtype)
                    with torch.no_grad():
                        torch.cuda.reset_peak_memory_stats()
                        eager_ms, ref = time_torch(model, x_host, args.iterations, args.warmup)
                        line["torch_eager_host_to_host_ms"] = eager_ms
                        line["torch_eager_max_allocated_above_weights_bytes"] = torch.cuda.max_memory_allocated() - weights
                        line["torch_eager_max_reserved_above_weights_bytes"] = torch.cuda.max_memory_reserved() - weights
                        if not args.no_compile:
                            compiled = torch.compile(model)
                            torch.cuda.reset_peak_memory_stats()
                            compile_ms, _ = time_torch(compiled, x_host, args.iterations, args.warmup)
                            line["torch_compile_host_to_host_ms"] = compile_ms
                            line["torch_compile_max_allocated_above_weights_bytes"] = (
                                torch.cuda.max_memory_allocated() - weights)
                            del compiled
                    ref = ref.float().numpy()
                    del model
                    torch.cuda.empty_cache()
                    runs = [("cuda", progs["cuda"], []),
                            ("cuda_graphs", progs["cuda"], ["--backend-option", "cuda.use_cuda_graphs=true"]),
                            ("engine", progs["engine"], [])]
                    if args.compare_nchw:
                        runs += [("cuda_nchw", progs["cuda_nchw"], []),
                                 ("cuda_graphs_nchw", progs["cuda_nchw"], ["--backend-option", "cuda.use_cuda_graphs=true"])]
                    for label, prog, extra in runs:
                        try:
                            ms, above, cuda, y = run_planrt(args.planrt, prog, x_path, os.path.join(work, label),
                                                            args.iterations, args.warmup, extra)
                        except RuntimeError as e:
                            print(f"{name} batch {batch} {dtype_name} {label}: {e}", file=sys.stderr)
                            failed = True
                            continue
                        rel = float(np.max(np.abs(y.astype(np.float64) - ref)) / np.max(np.abs(ref)))
                        line.update({f"planrt_{label}_host_to_host_ms": ms,
                                     f"planrt_{label}_device_used_above_weights_bytes": above,
                                     f"planrt_{label}_planned_bytes": cuda.get("planned_bytes", 0),
                                     f"planrt_{label}_pool_reserved_bytes": cuda.get("pool", {}).get("reserved_bytes", 0),
                                     f"planrt_{label}_scratch_private_bytes": cuda.get("scratch_private_bytes", 0),
                                     f"planrt_{label}_relative_error_vs_torch": rel,
                                     f"planrt_{label}_over_torch_eager_latency": ms / eager_ms})
                        if "torch_compile_host_to_host_ms" in line:
                            line[f"planrt_{label}_over_torch_compile_latency"] = ms / line["torch_compile_host_to_host_ms"]
                        if rel > (1e-4 if dtype_name == "f32" else 3e-2):
                            print(f"{name} batch {batch} {dtype_name} {label}: relative error {rel:.3g}", file=sys.stderr)
                            failed = True
                    print(json.dumps(line), flush=True)
                    lines.append(line)
    if args.out and lines:
        with open(args.out, "a") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
