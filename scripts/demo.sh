#!/usr/bin/env bash
# Installs what is missing, builds Release, builds a sample program from the transformer
# template and runs it, printing outputs, latency and the memory report.
# Idempotent; works from a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/.."

# PLANRT_SKIP_BUILD=1 uses the CLI already in PLANRT_BUILD_DIR (a build carried to a GPU
# machine that cannot install packages).
build_dir=${PLANRT_BUILD_DIR:-build/release}
if [ "${PLANRT_SKIP_BUILD:-0}" != "1" ]; then
  ./scripts/deps.sh
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLANRT_BUILD_TESTS=OFF \
    -DPLANRT_CUDA="${PLANRT_CUDA:-AUTO}"
  cmake --build "$build_dir" -j "$(nproc)" --target planrt_cli
fi

planrt="$build_dir/tools/planrt"
out=${PLANRT_DEMO_DIR:-out/demo}
mkdir -p "$out"

# On the GPU when the build has CUDA and a GPU is visible, on the CPU otherwise.
partition=cpu
device="cpu (no GPU visible, or built without CUDA)"
if "$planrt" --version | grep -q "with CUDA" &&
   command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  partition=cuda
  device="GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
fi
echo "== demo: running on $device (partition $partition)"

echo "== planrt build --template transformer --layers 2 --d-model 512 --heads 8 --ffn 2048 --max-seq 2048"
"$planrt" build --template transformer --layers 2 --d-model 512 --heads 8 --ffn 2048 \
  --max-seq 2048 --weights random:0 --partition "$partition" -o "$out/transformer.prog"

echo "== planrt inspect"
"$planrt" inspect "$out/transformer.prog" --plot "$out/plan.svg"

echo "== planrt run (S=128, 2 warm-up + 20 timed iterations)"
"$planrt" run "$out/transformer.prog" --random-inputs 0 --dim S=128 --warmup 2 --iterations 20 \
  --output-dir "$out/outputs"
echo "== outputs in $out/outputs, memory plan drawn in $out/plan.svg"
