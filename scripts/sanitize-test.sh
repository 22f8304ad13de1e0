#!/usr/bin/env bash
# The CPU tests under AddressSanitizer + UndefinedBehaviorSanitizer with leak checking on
# (issue 6). Not yet part of ./scripts/test.sh (and so of CI): its cost on the 2-core CI
# machine is to be measured before it is wired in. CUDA is off (the sanitizers do not see
# device memory; the GPU lane uses compute-sanitizer for that).
#   ./scripts/sanitize-test.sh        # build/asan, then ctest
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh

build_dir=${PLANRT_BUILD_DIR:-build/asan}
jobs=${PLANRT_JOBS:-$(nproc)}
flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -O1"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPLANRT_CUDA=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
cmake --build "$build_dir" -j "$jobs"
# allocator_may_return_null: tests ask for impossible sizes on purpose and expect an error,
# not an abort. One BLAS thread keeps the run deterministic and quick.
export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1
export OPENBLAS_NUM_THREADS=1
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 1200
