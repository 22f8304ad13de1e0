#!/usr/bin/env python3
"""A Hugging Face BERT as users export it, on a padded batch (issue 55's latency and memory
target): transformers' BertModel at the BERT-base shape (12 layers, d 768, 12 heads, FFN
3072, vocabulary 30522; random weights from a seed), exported with torch.onnx.export (the
TorchScript exporter, opset 17, batch and sequence dynamic, as tests/data/onnx/hf/export_hf.py
does) and built with `planrt build` for `--dim batch=1..B --dim seq=1..S`; run on a batch of B
sequences padded to S (lengths from S down to S/4, an `attention_mask` saying so):
  on CUDA: planrt (partition cuda) against transformers eager and under torch.compile
    (mode="reduce-overhead"), f32 with TF32 off, host to host (inputs on the host -> output
    on the host); device memory above the weights (planrt: `planrt run --json`'s device use
    after the run minus before the load, less the weights; PyTorch: max_memory_allocated
    minus the weights);
  on the CPU: planrt (partition cpu, `cpu.num_threads=T`) against ONNX Runtime's CPU
    provider on the same export (graph optimizations all, T intra-op threads), peak RSS of
    neither (one process runs both).
Accuracy: every position the mask keeps within 1e-4 of transformers' f32 output (relative to
its largest magnitude), for every runtime. One process, one machine: the ratios are the
figures to read.

  python3 bench/hf_bert.py --planrt build/gpu/tools/planrt [--batch 8] [--seq 128]
      [--layers 12] [--threads 1 2] [--iterations 30] [--cpu-iterations N] [--warmup 5] [--out FILE.jsonl]
      [--smoke]   # 2 layers, batch 2, seq 32, a few iterations: checks the path only

Needs torch, transformers and onnx (the GPU machine), onnxruntime for the CPU rows (skipped
without it). Exit 1 when an output disagrees or a step fails; 77 without a GPU (1 with
PLANRT_REQUIRE_GPU=1); the CPU rows run either way.
"""
import argparse
import inspect
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

from torch_peers import planrt_out

NAMES = ("input_ids", "attention_mask", "token_type_ids")
TOLERANCE = 1e-4


class Wrapper(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.model(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state


def make_inputs(batch, seq, vocab):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, vocab, (batch, seq), generator=g)
    lengths = np.linspace(seq, max(seq // 4, 1), batch).astype(int)
    mask = torch.zeros(batch, seq, dtype=torch.int64)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros(batch, seq, dtype=torch.int64)}


def rel_error(got, ref, mask):
    keep = mask.astype(bool)
    return float(np.max(np.abs(got[keep] - ref[keep])) / max(float(np.max(np.abs(ref[keep]))), 1e-30))


def run_planrt(planrt, prog, paths, out_dir, iterations, warmup, extra=()):
    cmd = [planrt, "run", prog, "--output-dir", out_dir, "--iterations", str(iterations), "--warmup", str(warmup),
           "--json", *extra]
    for name, path in paths.items():
        cmd += ["--input", f"{name}={path}"]
    j = json.loads(planrt_out(cmd))
    return j, np.load(os.path.join(out_dir, "last_hidden_state.npy"))


def median_ms(fn, iterations, warmup):
    times, out = [], None
    for i in range(warmup + iterations):
        t0 = time.perf_counter()
        out = fn()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--planrt", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--cpu-iterations", type=int, default=None, help="the CPU rows' (default: --iterations)")
    ap.add_argument("--out")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    if args.smoke:
        args.batch, args.seq, args.layers, args.iterations, args.warmup, args.threads = 2, 32, 2, 3, 1, [1]
        args.cpu_iterations = None
    cpu_iterations = args.cpu_iterations or args.iterations
    import transformers
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    commit = os.environ.get("PLANRT_COMMIT", "unknown")
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=args.layers,
                                  num_attention_heads=12, intermediate_size=3072, max_position_embeddings=512)
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).eval()
    wrapper = Wrapper(model).eval()
    inputs = make_inputs(args.batch, args.seq, cfg.vocab_size)
    mask = inputs["attention_mask"].numpy()
    with torch.no_grad():
        ref = wrapper(*(inputs[n] for n in NAMES)).numpy()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    base = {"bench": "hf_bert", "commit": commit, "layers": args.layers, "d_model": 768, "batch": args.batch,
            "seq": args.seq, "lengths": mask.sum(axis=1).tolist(), "iterations": args.iterations,
            "smoke": args.smoke, "transformers": transformers.__version__, "torch": torch.__version__}
    failed, lines = False, []
    with tempfile.TemporaryDirectory() as work:
        onnx_path = os.path.join(work, "bert.onnx")
        axes = {n: {0: "batch", 1: "seq"} for n in NAMES}
        axes["last_hidden_state"] = {0: "batch", 1: "seq"}
        # The TorchScript exporter (torch 2.9+ defaults to dynamo; older ones have only this).
        kwargs = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
        torch.onnx.export(wrapper, tuple(inputs[n] for n in NAMES), onnx_path, opset_version=17,
                          input_names=list(NAMES), output_names=["last_hidden_state"], dynamic_axes=axes, **kwargs)
        import onnx
        graph_inputs = {i.name for i in onnx.load(onnx_path, load_external_data=False).graph.input}
        paths = {}
        for n in (n for n in NAMES if n in graph_inputs):  # an input the model ignores is not exported
            paths[n] = os.path.join(work, f"{n}.npy")
            np.save(paths[n], inputs[n].numpy())
        dims = ["--dim", f"batch=1..{args.batch}", "--dim", f"seq=1..{args.seq}"]

        # The CPU rows: planrt against ONNX Runtime on the same export.
        cpu_prog = os.path.join(work, "cpu.prog")
        planrt_out([args.planrt, "build", onnx_path, "-o", cpu_prog, "--partition", "cpu", *dims])
        try:
            import onnxruntime as ort
        except ImportError:
            ort = None
            print("onnxruntime not installed: the CPU rows have no peer", file=sys.stderr)
        for t in args.threads:
            line = dict(base, device="cpu", threads=t, cpu=os.uname().machine)
            line["iterations"] = cpu_iterations
            j, y = run_planrt(args.planrt, cpu_prog, paths, os.path.join(work, f"cpu{t}"), cpu_iterations,
                              args.warmup, ["--backend-option", f"cpu.num_threads={t}"])
            line["planrt_ms"] = j["latency_ms"]["median"]
            line["planrt_rel_error"] = rel_error(y, ref, mask)
            if ort is not None:
                so = ort.SessionOptions()
                so.intra_op_num_threads = t
                so.inter_op_num_threads = 1
                so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
                feed = {n: inputs[n].numpy() for n in paths}
                ms, out = median_ms(lambda: sess.run(None, feed)[0], cpu_iterations, args.warmup)
                line["onnxruntime_ms"] = ms
                line["onnxruntime_rel_error"] = rel_error(out, ref, mask)
                line["planrt_over_onnxruntime"] = line["planrt_ms"] / ms
            for k in ("planrt_rel_error", "onnxruntime_rel_error"):
                if k in line and not line[k] <= TOLERANCE:
                    print(f"cpu threads {t}: {k} {line[k]:.3g}", file=sys.stderr)
                    failed = True
            print(json.dumps(line), flush=True)
            lines.append(line)

        # The CUDA row.
        if not torch.cuda.is_available():
            print("no CUDA device visible to PyTorch: the GPU row is skipped", file=sys.stderr)
            gpu_status = 1 if os.environ.get("PLANRT_REQUIRE_GPU") == "1" else 77
        else:
            gpu_status = 0
            line = dict(base, device="cuda", gpu=torch.cuda.get_device_name(), dtype="f32")
            cuda_prog = os.path.join(work, "cuda.prog")
            planrt_out([args.planrt, "build", onnx_path, "-o", cuda_prog, "--partition", "cuda", "--device", "cuda:0",
                        *dims])
            j, y = run_planrt(args.planrt, cuda_prog, paths, os.path.join(work, "cuda"), args.iterations, args.warmup)
            cuda = next(d for d in j["memory"]["devices"] if d["device"] == "cuda:0")
            line["planrt_ms"] = j["latency_ms"]["median"]
            line["planrt_device_above_weights_bytes"] = (cuda.get("device_used_after_run_bytes", 0)
                                                         - cuda.get("device_used_before_load_bytes", 0)
                                                         - cuda["weights_bytes"])
            line["planrt_rel_error"] = rel_error(y, ref, mask)
            gpu_model = wrapper.to("cuda")

            def call(fn):
                def run():
                    out = fn(*(inputs[n].to("cuda") for n in NAMES)).to("cpu")
                    torch.cuda.synchronize()
                    return out
                return run

            with torch.no_grad():
                torch.cuda.reset_peak_memory_stats()
                line["torch_eager_ms"], out = median_ms(call(gpu_model), args.iterations, args.warmup)
                line["torch_eager_above_weights_bytes"] = torch.cuda.max_memory_allocated() - weights
                line["torch_eager_rel_error"] = rel_error(out.numpy(), ref, mask)
                compiled = torch.compile(gpu_model, mode="reduce-overhead")
                torch.cuda.reset_peak_memory_stats()
                line["torch_compile_ms"], out = median_ms(call(compiled), args.iterations, args.warmup)
                line["torch_compile_above_weights_bytes"] = torch.cuda.max_memory_allocated() - weights
                line["torch_compile_rel_error"] = rel_error(out.numpy(), ref, mask)
            line["planrt_over_torch_compile"] = line["planrt_ms"] / line["torch_compile_ms"]
            for k in ("planrt_rel_error", "torch_eager_rel_error", "torch_compile_rel_error"):
                if not line[k] <= TOLERANCE:
                    print(f"cuda: {k} {line[k]:.3g}", file=sys.stderr)
                    failed = failed or k == "planrt_rel_error"
            print(json.dumps(line), flush=True)
            lines.append(line)
    if args.out and lines:
        with open(args.out, "a") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
    if failed:
        return 1
    return gpu_status


if __name__ == "__main__":
    sys.exit(main())
