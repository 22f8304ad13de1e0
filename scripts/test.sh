#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test through ctest.
# Idempotent; works from a fresh clone. GPU tests skip without a GPU (and say so);
# ./scripts/gpu-test.sh is the lane that requires one.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh

build_dir=${PLANRT_BUILD_DIR:-build/test}
jobs=${PLANRT_JOBS:-$(nproc)}

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPLANRT_CUDA="${PLANRT_CUDA:-AUTO}"
cmake --build "$build_dir" -j "$jobs"
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 600
