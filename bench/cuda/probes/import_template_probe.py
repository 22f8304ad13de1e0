#!/usr/bin/env python3
"""Issue 15's residual gap, taken apart (run by hand on a GPU machine): the exported encoder's
program against the template's on the same weights, and the template's model rebuilt from its
JSON with one difference of the import's at a time, each program its own `planrt run`
process, alternating, in rounds with the order rotated.

The import and the template compile to the same steps, offsets and constant placement
(docs/performance.md, "compared field by field"); what differs is (1) the layer norms' eps
(the import's is the bf16 constant the exporter wrote for 1e-5), (2) attention's `scale` and
`fused` stated explicitly (equal to the defaults), (3) the import's sequence dim fixed where
the template's is bounded. The variants:
  template     `planrt build --template transformer ... --weights` (bench/onnx_encoder.py's)
  json         the template's model as written by --save-model, built from the JSON
  json_static  that JSON with the dim S fixed at the run's length (no dims)
  json_attrs   that JSON with attention's scale and fused stated
  json_eps     that JSON with the import's layer-norm eps
  import       the TorchScript export (opset 14), `planrt build model.onnx --dim S=SEQ`
Each round runs every program once with the load-time GEMM timing (the default) and, with
--heuristic-rounds, once more with `cuda.gemm_algorithm=heuristic` (no per-process choice).
With --in-process the programs are instead loaded side by side in this one process through
the Python module (`PYTHONPATH=build/gpu/python`; on a carried build
`scripts/build-python-module.sh build/gpu python3` first) and timed in rotated rounds there,
host to host (`Module.run` on a NumPy input): a difference between processes, which the
default mode measured (docs/performance.md), is then the same for every program.

  python3 bench/cuda/probes/import_template_probe.py --planrt build/gpu/tools/planrt
      [--seq 128] [--dtype bf16] [--layers 12] [--rounds 6] [--heuristic-rounds 4]
      [--iterations 300] [--warmup 20] [--in-process] [--out FILE.jsonl]

Prints per program the median of its rounds' medians, their range, and the ratio to the
template; with --out appends one JSON line with every round's median.
"""
import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import onnx_encoder  # noqa: E402  (the module, its export and the template's weights)


def build(planrt, args):
    r = subprocess.run([planrt, "build", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"planrt build {' '.join(args)}: {r.stderr.strip()}")


def run_ms(planrt, prog, x_path, iterations, warmup, options):
    cmd = [planrt, "run", prog, "--input", f"x={x_path}", "--iterations", str(iterations),
           "--warmup", str(warmup), "--json"]
    for o in options:
        cmd += ["--backend-option", o]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"planrt run {prog}: {r.stderr.strip()}")
    return json.loads(r.stdout)["latency_ms"]["median"]


def in_process_ms(progs, x, rounds, iterations, warmup, options):
    """{program: [median ms of each round]}, every program loaded in this process."""
    import time
    import planrt
    modules = {kind: planrt.Module(path, backend_options=options) for kind, path in progs.items()}
    for m in modules.values():
        for _ in range(warmup):
            m.run("forward", [x])
    kinds = list(progs)
    ms = {kind: [] for kind in kinds}
    for r in range(rounds):
        for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
            times = []
            for _ in range(iterations):
                t0 = time.perf_counter()
                modules[kind].run("forward", [x])
                times.append((time.perf_counter() - t0) * 1e3)
            ms[kind].append(statistics.median(times))
    return ms


def fixed_dims(value, dims):
    """`value` with every dim name in `dims` replaced by its size, recursively."""
    if isinstance(value, str) and value in dims:
        return dims[value]
    if isinstance(value, list):
        return [fixed_dims(v, dims) for v in value]
    if isinstance(value, dict):
        return {k: fixed_dims(v, dims) for k, v in value.items()}
    return value


def variant(model, kind, seq, eps):
    m = copy.deepcopy(model)
    for method in m["methods"]:
        if kind == "json_static":
            sizes = {name: seq for name in method.pop("dims", {})}
            method["inputs"] = fixed_dims(method["inputs"], sizes)
            method["nodes"] = fixed_dims(method["nodes"], sizes)
        for node in method["nodes"]:
            if kind == "json_attrs" and node["op"] == "scaled_dot_product_attention":
                node.setdefault("attrs", {}).update({"scale": 0.125, "fused": True})
            if kind == "json_eps" and node["op"] == "layer_norm":
                node.setdefault("attrs", {})["eps"] = eps
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--planrt", required=True)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--dtype", default="bf16", choices=["f32", "bf16"])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--heuristic-rounds", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--partition", default="cuda", help="cpu: the script's own check, on a machine without a GPU")
    ap.add_argument("--in-process", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[a.dtype]
    torch.manual_seed(0)
    module = onnx_encoder.encoder(a.layers).to(dtype)
    # The eps the exporter writes: 1e-5 rounded to the model's dtype.
    eps = float(torch.tensor(1e-5, dtype=dtype).float())
    progs = {}
    with tempfile.TemporaryDirectory() as work:
        onnx_path = os.path.join(work, "encoder.onnx")
        onnx_encoder.export(module, onnx_path, a.seq, dtype)
        weights = os.path.join(work, "template.safetensors")
        onnx_encoder.write_template_weights(module, weights)
        progs["template"] = os.path.join(work, "template.prog")
        model_json = os.path.join(work, "template.json")
        build(a.planrt, ["--template", "transformer", "--layers", str(a.layers), "--d-model",
                         str(onnx_encoder.D), "--heads", str(onnx_encoder.HEADS), "--ffn",
                         str(onnx_encoder.FFN), "--max-seq", str(a.seq), "--weights", weights,
                         "--partition", a.partition, "--dtype", a.dtype, "--save-model", model_json,
                         "-o", progs["template"]])
        with open(model_json) as f:
            model = json.load(f)
        for kind in ("json", "json_static", "json_attrs", "json_eps"):
            path = os.path.join(work, f"{kind}.json")  # beside the safetensors --save-model wrote
            with open(path, "w") as f:
                json.dump(variant(model, kind, a.seq, eps), f)
            progs[kind] = os.path.join(work, f"{kind}.prog")
            build(a.planrt, [path, "-o", progs[kind]])
        progs["import"] = os.path.join(work, "import.prog")
        build(a.planrt, [onnx_path, "--dim", f"S={a.seq}", "--partition", a.partition,
                         "-o", progs["import"]])
        x_path = os.path.join(work, "x.npy")
        np.save(x_path, np.random.default_rng(7).standard_normal((1, a.seq, onnx_encoder.D)).astype(np.float32))
        kinds = list(progs)
        modes = {"timed": ([], a.rounds), "heuristic": (["cuda.gemm_algorithm=heuristic"], a.heuristic_rounds)}
        ms = {mode: {k: [] for k in kinds} for mode in modes}
        for mode, (options, rounds) in modes.items():
            if a.in_process:
                if rounds:
                    x = np.load(x_path)
                    opts = dict(o.split("=", 1) for o in options)
                    ms[mode] = in_process_ms(progs, x, rounds, a.iterations, a.warmup, opts or None)
                continue
            for r in range(rounds):
                for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
                    ms[mode][kind].append(run_ms(a.planrt, progs[kind], x_path, a.iterations, a.warmup, options))
    line = {"bench": "import_template_probe", "commit": os.environ.get("PLANRT_COMMIT", "unknown"),
            "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "layers": a.layers, "seq": a.seq, "dtype": a.dtype, "iterations": a.iterations,
            "warmup": a.warmup, "in_process": a.in_process, "round_medians_ms": ms}
    for mode in modes:
        if not ms[mode]["template"]:
            continue
        base = statistics.median(ms[mode]["template"])
        print(f"{mode} GEMM choice, {'one process, ' if a.in_process else ''}{len(ms[mode]['template'])} rounds (median of round medians, range, / template):")
        for kind in kinds:
            v = ms[mode][kind]
            print(f"  {kind:12s} {statistics.median(v):.4f} ms  ({min(v):.4f}-{max(v):.4f})  "
                  f"{statistics.median(v) / base:.3f}")
    if a.out:
        with open(a.out, "a") as f:
            f.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
