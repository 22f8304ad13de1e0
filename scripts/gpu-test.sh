#!/usr/bin/env bash
# The GPU lane: builds with CUDA required and runs every test with PLANRT_REQUIRE_GPU=1,
# so a GPU test that would skip fails instead. Run it on a machine with an NVIDIA GPU.
#
#   ./scripts/gpu-test.sh                 # configure, build, test
#   PLANRT_SKIP_BUILD=1 ./scripts/gpu-test.sh   # test a build carried from elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${PLANRT_BUILD_DIR:-build/gpu}
if [ "${PLANRT_SKIP_BUILD:-0}" != "1" ]; then
  ./scripts/deps.sh
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPLANRT_CUDA=ON
  cmake --build "$build_dir" -j "$(nproc)"
fi
export PLANRT_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
ctest --test-dir "$build_dir" --output-on-failure -j "${PLANRT_TEST_JOBS:-4}" --timeout 900
