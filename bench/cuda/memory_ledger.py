#!/usr/bin/env python3
"""The device-memory ledger on the GPU lane's models (issue 19; planrt/backends/memory_ledger.h).

Each model is built, run with `planrt run --json` in a process of its own, and its CUDA
device's ledger read from the report: the measured delta (cudaMemGetInfo after the runs less
before the load) split by line (weights, arenas, engine scratch, scratch pool, warm pool,
library handles, CUDA graphs) and the remainder no line names; beside it "beyond the plan",
the delta less weights, planned arenas and engine scratch (issue 19's target 3: at most
16 MiB), and the prediction `planrt inspect` gives before loading
(MemoryEstimate::predicted_bytes) with its error against the measured delta (target 2: within
2% or 4 MiB, whichever is larger). Models: the 12-block encoder (d 512, 8 heads, FFN 2048) on cuda and engine-per-block
at S = 128 and 2048 in f32 and at S = 2048 in bf16, and, when torchvision is importable,
the GPU lane's vision models (tests/importers/vision_models_test.py: resnet18, resnet50,
mobilenet_v2, mobilenet_v3_small, efficientnet_b0, convnext_tiny, vit_b_16; random weights)
exported to ONNX at batch 1 and 32 (224x224, f32, cuda), and the lane's imported
transformer models (tests/importers/torch_models_test.py) on cuda and engine-per-block.

    bench/cuda/memory_ledger.py PLANRT [--out bench/results/memory_ledger.jsonl] [--smoke]

--smoke: two blocks at S = 64 and no vision models; the checks still run. Checks (exit 2 when
one fails): the lines plus the remainder equal the measured delta, and the warm pool holds
nothing (every program's scratch is planned). Exit 77 without a GPU.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

MiB = 1 << 20


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def have_gpu():
    smi = shutil.which("nvidia-smi")
    return smi is not None and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def ledger_of(planrt, prog, dims, iterations):
    cmd = [planrt, "run", prog, "--random-inputs", "1", "--warmup", "3", "--iterations", str(iterations), "--json"]
    for d in dims:
        cmd += ["--dim", d]
    r = json.loads(run(cmd))
    dev = next(d for d in r["memory"]["devices"] if d["device"].startswith("cuda"))
    l = dev["ledger"]
    lines = {x["name"]: x["bytes"] for x in l["lines"]}
    beyond = l["measured_bytes"] - lines["weights"] - lines["arenas"] - lines["engine scratch"] - lines["scratch pool"]
    return {"ledger": lines, "measured_bytes": l["measured_bytes"], "remainder_bytes": l["remainder_bytes"],
            "named_bytes": l["named_bytes"], "planned_bytes": dev["planned_bytes"],
            "beyond_plan_bytes": beyond, "median_ms": r["latency_ms"]["median"]}


def encoder_cases(layers, seqs):
    base = ["--template", "transformer", "--layers", str(layers), "--d-model", "512", "--heads", "8",
            "--ffn", "2048", "--weights", "random:1"]
    cases = []
    for partition in ("cuda", "engine-per-block"):
        for seq in seqs:
            cases.append((f"encoder{layers} {partition} f32 S={seq}",
                          base + ["--max-seq", str(max(seqs)), "--partition", partition], [f"S={seq}"]))
        cases.append((f"encoder{layers} {partition} bf16 S={max(seqs)}",
                      base + ["--max-seq", str(max(seqs)), "--partition", partition, "--dtype", "bf16"],
                      [f"S={max(seqs)}"]))
    return cases


VISION_MODELS = ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
                 "convnext_tiny", "vit_b_16")


def vision_cases(tmp):
    try:
        import torch
        import torchvision
    except ImportError:
        return []
    import inspect
    cases = []
    for name in VISION_MODELS:
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None).eval()
        path = os.path.join(tmp, f"{name}.onnx")
        kwargs = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
        torch.onnx.export(model, (torch.randn(2, 3, 224, 224),), path, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=17, **kwargs)
        for batch in (1, 32):
            cases.append((f"{name} cuda f32 batch={batch}",
                          [path, "--dim", f"batch={batch}", "--partition", "cuda", "--device", "cuda:0"], []))
    return cases


def imported_cases(tmp):
    """The GPU lane's imported transformer models (tests/importers/torch_models_test.py:
    nn.TransformerEncoder variants, a BERT-like and a GPT-2-like stack, an MLP), exported at
    batch 4, sequence 64 with the dims fixed, on cuda and engine-per-block."""
    try:
        import torch
    except ImportError:
        return []
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "importers"))
    import torch_models_test as tm
    cases = []
    for name, entry in tm.MODELS.items():
        factory, shape, kind, outputs = (entry + ("f32", ("y",)))[:4]
        torch.manual_seed(1234)
        module = factory().eval()
        sizes = {"b": 4, "s": 64}
        path = os.path.join(tmp, f"{name}.onnx")
        # No dynamic axes: the sizes are the export's, so the build takes no --dim.
        tm.export(module, tm.make_input(kind, [sizes.get(d, d) for d in shape]), path, outputs, {})
        label = " ".join(f"{d}={sizes[d]}" for d in ("b", "s") if d in shape)
        for partition in tm.GPU_PARTITIONS:
            cases.append((f"{name} {partition[1]} f32 {label}", [path, *partition], []))
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("planrt")
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if not have_gpu():
        print("memory_ledger: no GPU visible (skipped)")
        sys.exit(77)
    commit = os.environ.get("PLANRT_COMMIT", "unknown")
    failures, lines = [], []
    with tempfile.TemporaryDirectory() as tmp:
        cases = (encoder_cases(2, [64]) if a.smoke
                 else encoder_cases(12, [128, 2048]) + vision_cases(tmp) + imported_cases(tmp))
        for i, (name, build, dims) in enumerate(cases):
            prog = os.path.join(tmp, f"{i}.prog")
            run([a.planrt, "build", *build, "-o", prog])
            r = ledger_of(a.planrt, prog, dims, 3 if a.smoke else 20)
            meta = json.loads(run([a.planrt, "inspect", "--json", prog]))["methods"][0]
            predicted = next(e for e in meta["memory_estimate"] if e["device"].startswith("cuda"))["predicted_bytes"]
            r["predicted_bytes"] = predicted
            r["prediction_error_bytes"] = r["measured_bytes"] - predicted
            r["prediction_within_target"] = abs(r["prediction_error_bytes"]) <= max(0.02 * r["measured_bytes"], 4 * MiB)
            line = {"bench": "memory_ledger", "commit": commit, "model": name, **r, "smoke": a.smoke,
                    "command": " ".join(sys.argv)}
            lines.append(line)
            led = r["ledger"]
            print(f"{name:36s} measured {r['measured_bytes'] / MiB:8.1f} MiB = " +
                  " + ".join(f"{k} {v / MiB:.1f}" for k, v in led.items() if v) +
                  f" + remainder {r['remainder_bytes'] / MiB:.1f};  beyond the plan {r['beyond_plan_bytes'] / MiB:.1f} MiB;"
                  f"  predicted {predicted / MiB:.1f} ({'within' if r['prediction_within_target'] else 'OUTSIDE'} target)")
            if r["named_bytes"] + r["remainder_bytes"] != r["measured_bytes"]:
                failures.append(f"{name}: the lines and the remainder do not add up to the measured delta")
            if led["warm pool"] != 0:
                failures.append(f"{name}: the warm pool holds {led['warm pool']} bytes")
    if a.out:
        with open(a.out, "a") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
    for f in failures:
        print("memory_ledger: " + f)
    sys.exit(2 if failures else 0)


if __name__ == "__main__":
    main()
