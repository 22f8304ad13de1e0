#!/usr/bin/env bash
# Where the GPU time of one forward goes, planrt beside PyTorch: builds the transformer
# template (LAYERS blocks, [1, SEQ, 512], PARTITION), runs one warm-up and one timed forward
# of each side under Nsight Compute (kernel durations only, clocks left alone), and prints
# per-kernel totals per forward. Needs ncu and torch (a GPU machine); CUDA events and the
# compare harness (bench/compare.sh) give the latencies that count — this says why.
#
#   PLANRT=build/gpu/tools/planrt bench/kernel_profile.sh [--smoke] [LAYERS] [SEQ] [PARTITION] [ATTENTION]
# --smoke (scripts/gpu-test.sh): defaults of 1 block at S = 64, into out/kernel_profile-smoke;
# fails when either profile holds no kernels (a process that failed under ncu).
set -euo pipefail
cd "$(dirname "$0")/.."
planrt=${PLANRT:-build/release/tools/planrt}
smoke=0
if [ "${1:-}" = --smoke ]; then
  smoke=1
  shift
fi
if [ $smoke = 1 ]; then
  layers=${1:-1}
  seq=${2:-64}
  base=${PROFILE_DIR:-out/kernel_profile-smoke}
else
  layers=${1:-2}
  seq=${2:-2048}
  base=${PROFILE_DIR:-out/kernel_profile}
fi
partition=${3:-cuda}
attention=${4:-fused}
dir=$base/t${layers}_s${seq}_${partition}_${attention}
mkdir -p "$dir"
"$planrt" build --template transformer --layers "$layers" --d-model 512 --heads 8 --ffn 2048 \
  --max-seq "$seq" --weights random:1 --partition "$partition" --attention "$attention" \
  --save-model "$dir/model.json" -o "$dir/model.prog" > /dev/null
python3 -c "import numpy as np; np.save('$dir/x.npy', np.random.default_rng(7).standard_normal((1, $seq, 512)).astype(np.float32))"
ncu_args=(--clock-control none --metrics gpu__time_duration.sum --csv)
ncu "${ncu_args[@]}" "$planrt" run "$dir/model.prog" --input "x=$dir/x.npy" --warmup 1 \
  --iterations 1 > "$dir/planrt.csv"
# torch_reference runs warm-up + timed + one host-to-host pass: three forwards.
ncu "${ncu_args[@]}" python3 bench/torch_reference.py "$dir/model.json" --input "x=$dir/x.npy" \
  --output-dir "$dir/torch" --warmup 1 --iterations 1 > "$dir/torch.csv"
python3 bench/kernel_profile_report.py "$dir/planrt.csv" 2 "$dir/torch.csv" 3
