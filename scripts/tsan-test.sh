#!/usr/bin/env bash
# The ThreadSanitizer lane (issue 6; part of ./scripts/test.sh, and so of CI): the libraries
# and the test binaries that start threads (the target planrt_concurrency_tests), built with
# gcc's -fsanitize=thread, and the tests labelled "concurrency" run: those whose name says
# they start threads (PLANRT_CONCURRENCY_TESTS in cmake/planrt_layer.cmake), the
# concurrency stress test among them. CPU only (PLANRT_CUDA=OFF), like the ASan lane.
#   ./scripts/tsan-test.sh            # build/tsan (PLANRT_TSAN_BUILD_DIR), then ctest
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh

build_dir=${PLANRT_TSAN_BUILD_DIR:-build/tsan}
jobs=${PLANRT_JOBS:-$(nproc)}
# -g1: line tables only, as in the ASan lane (scripts/sanitize-test.sh says why).
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
  -DPLANRT_CUDA=OFF -DPLANRT_BUILD_BENCH=OFF -DPLANRT_PYTHON=OFF \
  -DPLANRT_DATA_TESTS=OFF -DPLANRT_TEST_COMPILE_OPTIONS=-O0 \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -O1" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread"
cmake --build "$build_dir" -j "$jobs" --target planrt_concurrency_tests
# A report fails the test (TSan's exit code 66 replaces the test's 0). One kernel thread: the
# OpenMP runtime (libgomp, under oneDNN and the kernels) is not instrumented, and the stress
# test needs no more.
export TSAN_OPTIONS=second_deadlock_stack=1:history_size=4
export OMP_NUM_THREADS=1
# A lane that found no test would pass without checking anything.
count=$(ctest --test-dir "$build_dir" -N -L concurrency | sed -n 's/^Total Tests: //p')
if [ "${count:-0}" -eq 0 ]; then
  echo "tsan-test: no test labelled 'concurrency' in $build_dir" >&2
  exit 1
fi
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 1200 -L concurrency
