#!/usr/bin/env bash
# Issue 18's GEMM lever alone: the 12-block template encoder (d 512, 8 heads, FFN 2048,
# batch 1) run by planrt with each linear's cuBLASLt algorithm timed at its first call and a
# planned workspace (cuda.gemm_algorithm=timed, the default) against the heuristic's first
# answer (=heuristic: the algorithm planrt ran before, though now with the workspace on
# offer), eager and replayed as CUDA graphs, on the cuda partition; rounds alternate the
# order, host-to-host medians. One JSON line per (S, dtype, mode, choice) to stdout.
#   PLANRT=build/gpu/tools/planrt bench/cuda/gemm_algorithm_ab.sh [--smoke] [SEQ ...]
# Figures in bench/results/gemm_algorithm_ab.jsonl.
set -euo pipefail
cd "$(dirname "$0")/../.."
planrt=${PLANRT:-build/release/tools/planrt}
layers=12 iterations=50 rounds=${ROUNDS:-3}
if [ "${1:-}" = --smoke ]; then
  layers=1 iterations=3 rounds=1
  shift
fi
seqs=("$@")
[ ${#seqs[@]} -eq 0 ] && seqs=(1 16 128 512 2048)
work=${WORK:-out/gemm_algorithm_ab}
mkdir -p "$work"
commit=${PLANRT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
for dtype in f32 bf16; do
  for seq in "${seqs[@]}"; do
    prog="$work/t${layers}_s${seq}_${dtype}.prog"
    "$planrt" build --template transformer --layers "$layers" --d-model 512 --heads 8 --ffn 2048 \
      --max-seq "$seq" --weights random:1 --partition cuda --dtype "$dtype" -o "$prog" > /dev/null
    for round in $(seq "$rounds"); do
      order=(timed heuristic)
      [ $((round % 2)) = 0 ] && order=(heuristic timed)
      for choice in "${order[@]}"; do
        for graphs in false true; do
          out="$work/run_${seq}_${dtype}_${choice}_${graphs}.json"
          "$planrt" run "$prog" --random-inputs 0 --dim "S=$seq" --iterations "$iterations" \
            --warmup 5 --json --backend-option "cuda.gemm_algorithm=$choice" \
            --backend-option "cuda.use_cuda_graphs=$graphs" > "$out"
          python3 - "$out" "$commit" "$layers" "$seq" "$dtype" "$choice" "$graphs" "$round" <<'PY'
import json, sys
path, commit, layers, seq, dtype, choice, graphs, rnd = sys.argv[1:]
j = json.load(open(path))
print(json.dumps({"bench": "gemm_algorithm_ab", "commit": commit, "layers": int(layers),
                  "seq": int(seq), "dtype": dtype, "gemm_algorithm": choice,
                  "cuda_graphs": graphs == "true", "round": int(rnd),
                  "median_ms": j["latency_ms"]["median"], "p90_ms": j["latency_ms"]["p90"],
                  "iterations": j["latency_ms"]["iterations"]}), flush=True)
PY
        done
      done
    done
  done
done
