#!/usr/bin/env bash
# Side by side with PyTorch (issue 5): for each model of the list, build the program with
# planrt (and the same model as JSON + safetensors, --save-model), run PyTorch eager on it
# (bench/torch_reference.py) and planrt on the same input, and append one JSON line per
# model to bench/results/compare.jsonl: relative error of the output, device memory above
# weights on both sides, latency medians and p90s.
#
#   bench/compare.sh [--smoke] [--no-compile] [MODEL_SPEC ...]   # then: python3 bench/report_compare.py
#   bench/compare.sh --sweep [f32|bf16 ...]   # issue 18: 12 blocks, S in 1 16 128 512 2048,
#                                             # cuda and engine-per-block (report_compare.py --sweep)
# Beside PyTorch eager (the op-by-op reference, the oracle for the outputs) each model also
# runs as PyTorch's own module -- nn.TransformerEncoder with the same weights
# (torch_reference.py --module encoder) -- eager and under torch.compile, mode default and
# mode reduce-overhead (CUDA graphs), unless --no-compile: the peers a user deploys with
# (torch 2 on the GPU machine), and the ones issue 18's ratios are taken against.
# MODEL_SPEC: LAYERS:SEQ:PARTITION[:DTYPE] (DTYPE f32, the default, or bf16; default list:
# issue 5's, below). Run on a GPU machine
# with torch, from a clean checkout: without PLANRT it installs the Debian packages
# (scripts/deps.sh), builds build/release with CUDA and uses its CLI; PLANRT=path/to/planrt
# uses a CLI built elsewhere. It first measures the ceilings of the floors (bench/floors.py).
# Latency, like for like: both sides host to host (copy in + forward + copy out, host clock:
# `planrt run`'s Method::run, and the same loop in torch_reference.py); PyTorch's forward
# alone (CUDA events, input on the device) is recorded too. Memory, like for like: the
# device's used memory (cudaMemGetInfo) after the runs minus before loading, less weights.
# Correctness is checked on every model: relative error of planrt's output against PyTorch's
# at most 1e-5 (f32) or 1e-2 (bf16), and CUDA-graph replay bit-identical to eager; the
# script exits 1 after the last model when any check failed.
# --smoke (scripts/gpu-test.sh): three 2-block models at S = 64 (cuda and engine-per-block in
# f32, cuda in bf16; unless specs are given), 3 timed runs, floors at small sizes, results in
# out/compare-smoke/compare.jsonl (not bench/results), then report_compare.py on them into
# that folder; the same correctness checks.
set -euo pipefail
cd "$(dirname "$0")/.."
smoke=0
sweep=0
compile_modes=(default reduce-overhead)
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) smoke=1 ;;
    --sweep) sweep=1 ;;
    --no-compile) compile_modes=() ;;
    *) break ;;
  esac
  shift
done
planrt=${PLANRT:-build/release/tools/planrt}
commit=${PLANRT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
specs=("$@")
if [ $smoke = 1 ]; then
  work=${COMPARE_DIR:-out/compare-smoke}
  results=${COMPARE_RESULTS:-$work/compare.jsonl}
  iters=${COMPARE_ITERS:-3}
  floors_args=(--smoke)
  [ ${#specs[@]} -eq 0 ] && specs=("2:64:cuda" "2:64:engine-per-block" "2:64:cuda:bf16")
  mkdir -p "$work"
  : > "$results"
else
  work=${COMPARE_DIR:-out/compare}
  results=${COMPARE_RESULTS:-bench/results/compare.jsonl}
  iters=${COMPARE_ITERS:-50}
  floors_args=()
fi
failures=0
if [ $sweep = 1 ]; then
  floors_args+=(--seqs 1,16,128,512,2048)
  # Issue 18's sweep: the 12-block model over S, f32 and bf16 (DTYPE arguments narrow it).
  dtypes=("${specs[@]}")
  [ ${#dtypes[@]} -eq 0 ] && dtypes=(f32 bf16)
  specs=()
  for dtype in "${dtypes[@]}"; do
    for seq in 1 16 128 512 2048; do
      specs+=("12:$seq:cuda:$dtype" "12:$seq:engine-per-block:$dtype")
    done
  done
fi
if [ ${#specs[@]} -eq 0 ]; then
  specs=()
  for layers in 2 6 12 24; do
    for seq in 2048 128; do
      specs+=("$layers:$seq:cuda" "$layers:$seq:engine-per-block")
    done
  done
  for seq in 2048 128; do
    specs+=("12:$seq:cuda:bf16" "12:$seq:engine-per-block:bf16")
  done
fi
if [ -z "${PLANRT:-}" ]; then
  ./scripts/deps.sh
  cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLANRT_CUDA=ON > /dev/null
  cmake --build build/release -j "$(nproc)" --target planrt_cli > /dev/null
fi
mkdir -p "$work" "$(dirname "$results")"
python3 bench/floors.py "${floors_args[@]}" >> "$results"
for spec in "${specs[@]}"; do
  IFS=: read -r layers seq partition dtype <<< "$spec"
  dtype=${dtype:-f32}
  name="t${layers}_s${seq}_${partition}"
  [ "$dtype" = f32 ] || name="${name}_${dtype}"
  dir="$work/$name"
  mkdir -p "$dir"
  "$planrt" build --template transformer --layers "$layers" --d-model 512 --heads 8 --ffn 2048 \
    --max-seq "$seq" --weights random:1 --partition "$partition" --dtype "$dtype" \
    --save-model "$dir/model.json" -o "$dir/model.prog" > /dev/null
  python3 -c "import numpy as np; np.save('$dir/x.npy', np.random.default_rng(7).standard_normal((1, $seq, 512)).astype(np.float32))"
  python3 bench/torch_reference.py "$dir/model.json" --input "x=$dir/x.npy" \
    --output-dir "$dir/torch" --iterations "$iters" --dtype "$dtype" > "$dir/torch.json"
  # The deployment peers: nn.TransformerEncoder with the same weights, eager and under
  # torch.compile, default and reduce-overhead (CUDA graphs), each in a fresh process (one
  # compilation for this S). The model and input do not depend on the partition, so each
  # runs once per (layers, seq, dtype) and its figures are shared by the partitions' rows.
  peers="$work/torch_peers_t${layers}_s${seq}_${dtype}"
  mkdir -p "$peers"
  for mode in none "${compile_modes[@]}"; do
    if [ ! -s "$peers/$mode.json" ]; then
      python3 bench/torch_reference.py "$dir/model.json" --input "x=$dir/x.npy" --module encoder \
        --output-dir "$peers/$mode" --iterations "$iters" --dtype "$dtype" --compile "$mode" \
        > "$peers/$mode.json" || { rm -f "$peers/$mode.json"; failures=$((failures + 1)); }
    fi
  done
  # bf16: both sides are also measured against PyTorch in f32 on the same (bf16) weights
  # and input, which tells planrt's rounding error from the difference between two bf16
  # computations.
  if [ "$dtype" != f32 ]; then
    python3 bench/torch_reference.py "$dir/model.json" --input "x=$dir/x.npy" \
      --output-dir "$dir/torch_f32" --iterations 3 --warmup 1 --dtype f32 > /dev/null
  fi
  options=()
  [ "$partition" != "${partition#engine}" ] && options=(--backend-option engine.use_shared_activation_scratch=true)
  "$planrt" run "$dir/model.prog" --input "x=$dir/x.npy" --warmup 5 --iterations "$iters" \
    --output-dir "$dir/planrt" --json "${options[@]}" > "$dir/planrt.json"
  # cuda segments also replayed as CUDA graphs (backend option use_cuda_graphs; engines are
  # not captured): recorded beside the default, eager run.
  rm -f "$dir/planrt_graphs.json"
  if [ "$partition" = cuda ]; then
    "$planrt" run "$dir/model.prog" --input "x=$dir/x.npy" --warmup 5 --iterations "$iters" \
      --output-dir "$dir/planrt_graphs" --json --backend-option cuda.use_cuda_graphs=true \
      > "$dir/planrt_graphs.json"
    # Two processes may time different cuBLASLt algorithms for a linear (design.md
    # "gemm-algorithms"): the outputs agree to rounding, bit for bit only within a process.
    if ! python3 -c "import numpy as np, sys; a, b = (np.load(f).astype(np.float64) for f in sys.argv[1:3]); \
sys.exit(int(np.linalg.norm(a - b) > float(sys.argv[3]) * np.linalg.norm(a)))" \
        "$dir/planrt/y.npy" "$dir/planrt_graphs/y.npy" "$([ "$dtype" = f32 ] && echo 1e-5 || echo 2e-2)"; then
      echo "$name: graph replay changed the output beyond rounding" >&2
      failures=$((failures + 1))
    fi
  fi
  python3 - "$dir" "$name" "$layers" "$seq" "$partition" "$commit" "$dtype" "$smoke" "$peers" >> "$results" <<'PY' || failures=$((failures + 1))
import json, os, sys
import numpy as np
d, name, layers, seq, partition, commit, dtype, smoke, peers = sys.argv[1:]
t = json.load(open(f"{d}/torch.json"))
p = json.load(open(f"{d}/planrt.json"))
a = np.load(f"{d}/planrt/y.npy").astype(np.float64)
b = np.load(f"{d}/torch/y.npy").astype(np.float64)
rel = float(np.linalg.norm(a - b) / np.linalg.norm(b))
extra = {}
if os.path.exists(f"{d}/planrt_graphs.json"):
    g = json.load(open(f"{d}/planrt_graphs.json"))
    same = np.array_equal(np.load(f"{d}/planrt_graphs/y.npy"), np.load(f"{d}/planrt/y.npy"))
    extra.update({"planrt_graphs_median_ms": g["latency_ms"]["median"],
                  "planrt_graphs_p90_ms": g["latency_ms"]["p90"],
                  "planrt_graphs_output_identical": bool(same)})
    gc = next(x for x in g["memory"]["devices"] if x["device"] == "cuda:0")
    extra["planrt_graphs_device_used_above_weights_bytes"] = (
        gc.get("device_used_after_run_bytes", 0) - gc.get("device_used_before_load_bytes", 0)
        - gc["weights_bytes"])
if os.path.exists(f"{d}/torch_f32/y.npy"):
    f = np.load(f"{d}/torch_f32/y.npy").astype(np.float64)
    extra.update({"planrt_rel_error_vs_torch_f32": float(np.linalg.norm(a - f) / np.linalg.norm(f)),
                  "torch_rel_error_vs_torch_f32": float(np.linalg.norm(b - f) / np.linalg.norm(f))})
for mode, key in (("none", "torch_module"), ("default", "torch_compile"), ("reduce-overhead", "torch_compile_ro")):
    if not os.path.exists(f"{peers}/{mode}.json"):
        continue
    c = json.load(open(f"{peers}/{mode}.json"))
    y = np.load(f"{peers}/{mode}/y.npy").astype(np.float64)
    extra.update({f"{key}_host_to_host_median_ms": c["host_to_host_ms"]["median"],
                  f"{key}_host_to_host_p90_ms": c["host_to_host_ms"]["p90"],
                  f"{key}_median_ms": c["latency_ms"]["median"],
                  f"{key}_rel_error_vs_eager": float(np.linalg.norm(y - b) / np.linalg.norm(b)),
                  f"{key}_max_allocated_above_weights_bytes": c["memory"]["max_allocated_above_weights_bytes"],
                  f"{key}_device_used_above_weights_bytes": c["memory"]["device_used_delta_bytes"] - c["memory"]["weights_bytes"]})
cuda = next(x for x in p["memory"]["devices"] if x["device"] == "cuda:0")
weights = cuda["weights_bytes"]
planrt_above = cuda.get("device_used_after_run_bytes", 0) - cuda.get("device_used_before_load_bytes", 0) - weights
line = {"bench": "compare", "model": name, "layers": int(layers), "seq": int(seq),
        "partition": partition, "dtype": dtype, "commit": commit,
        "device": t.get("device_name"), "torch": t["torch"], "rel_error": rel,
        "torch_median_ms": t["latency_ms"]["median"], "torch_p90_ms": t["latency_ms"]["p90"],
        "torch_host_to_host_median_ms": t["host_to_host_ms"]["median"],
        "torch_host_to_host_p90_ms": t["host_to_host_ms"]["p90"],
        "planrt_median_ms": p["latency_ms"]["median"], "planrt_p90_ms": p["latency_ms"]["p90"],
        "torch_max_allocated_above_weights_bytes": t["memory"]["max_allocated_above_weights_bytes"],
        "torch_device_used_delta_bytes": t["memory"]["device_used_delta_bytes"],
        "torch_device_used_above_weights_bytes": t["memory"]["device_used_delta_bytes"] - t["memory"]["weights_bytes"],
        "torch_weights_bytes": t["memory"]["weights_bytes"],
        "planrt_weights_bytes": weights,
        "planrt_device_used_above_weights_bytes": planrt_above,
        "planrt_planned_bytes": cuda["planned_bytes"],
        "planrt_scratch_pool_bytes": cuda.get("scratch_pool_capacity_bytes", 0),
        "planrt_scratch_private_bytes": cuda.get("scratch_private_bytes", 0),
        "planrt_pool_used_high_bytes": cuda.get("pool", {}).get("used_high_bytes", 0),
        "iterations": p["latency_ms"]["iterations"], "smoke": smoke == "1",
        "peers": "torch_module and torch_compile*: nn.TransformerEncoder with the same weights; torch_: the op-by-op executor",
        **extra,
        "timers": "torch_median_ms: cuda events around forward (input on device); torch_host_to_host and planrt: host clock around copy in + forward + copy out"}
print(json.dumps(line))
print(f"{name}: rel {rel:.2e}  host-to-host torch {line['torch_host_to_host_median_ms']:.3f} ms  "
      f"planrt {p['latency_ms']['median']:.3f} ms (torch forward {t['latency_ms']['median']:.3f})  "
      f"device used above weights: torch {line['torch_device_used_above_weights_bytes']/2**20:.1f} MiB  "
      f"planrt {planrt_above/2**20:.1f} MiB", file=sys.stderr)
tolerance = 1e-5 if dtype == "f32" else 1e-2
if not rel <= tolerance:
    print(f"{name}: relative error {rel:.2e} above {tolerance:.0e}", file=sys.stderr)
    sys.exit(3)
# The peers must compute the same model: each against the op-by-op oracle. Not to planrt's
# 1e-5 in f32: PyTorch's inference fast path for nn.TransformerEncoderLayer
# (torch._transformer_encoder_layer_fwd, taken eager and compiled) runs FFN1 + GELU as one
# cuBLASLt call whose GELU epilogue is the tanh approximation, measured 1.3e-4 from exact f32
# on the 12-block model (H200, torch 2.11); that is the peer's accuracy, recorded per row.
# 1e-3 (f32) and 2e-2 (bf16) still catch a wrong weight or a wrong op.
peer_tolerance = 1e-3 if dtype == "f32" else 2e-2
for key, value in extra.items():
    if key.endswith("_rel_error_vs_eager") and not value <= peer_tolerance:
        print(f"{name}: peer {key[:-len('_rel_error_vs_eager')]} differs from the oracle by {value:.2e}", file=sys.stderr)
        sys.exit(3)
PY
done
if [ $smoke = 1 ]; then
  cp docs/performance.md "$work/performance.md"
  python3 bench/report_compare.py --results "$results" --table "$work/performance_table.md" \
    --svg "$work/performance.svg" --doc "$work/performance.md"
fi
if [ $failures -gt 0 ]; then
  echo "compare.sh: $failures check(s) failed" >&2
  exit 1
fi
