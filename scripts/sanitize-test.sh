#!/usr/bin/env bash
# The ASan+UBSan lane (issue 6; part of ./scripts/test.sh, and so of CI): the CPU tests that
# exercise memory, built with AddressSanitizer and UndefinedBehaviorSanitizer, leak checking
# on. CUDA is off (the sanitizers do not see device memory; the GPU lane uses
# compute-sanitizer for that), and so are the benchmarks, which no test runs.
# Left to the normal lane (PLANRT_DATA_TESTS=OFF): the data-table tests, builder_test (shape
# rules and rewrites over IR tables in standard containers) and the ONNX node and model
# tests (the same kernels and loader paths as the unit tests here, over ONNX's tables); the
# importer's handling of bad files is the fuzz targets' (their regressions replay here).
# The library is built at -O1 with the sanitizers, the tests' own sources at -O0 (half the
# compile time; they only drive the library), and the planner's property test runs 250
# cases a family, not 2000 (PLANRT_PROPERTY_CASES).
#   ./scripts/sanitize-test.sh        # build/asan (PLANRT_ASAN_BUILD_DIR), then ctest
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh

build_dir=${PLANRT_ASAN_BUILD_DIR:-build/asan}
jobs=${PLANRT_JOBS:-$(nproc)}
flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -O1"
# -g1: line tables only, enough for a report's file:line and about 20% less compile time
# than -g (measured on allocation_sweep_test.cpp) on CI's two cores.
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
  -DPLANRT_CUDA=OFF -DPLANRT_BUILD_BENCH=OFF -DPLANRT_PYTHON=OFF \
  -DPLANRT_DATA_TESTS=OFF -DPLANRT_TEST_COMPILE_OPTIONS=-O0 \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
cmake --build "$build_dir" -j "$jobs"
# allocator_may_return_null: tests ask for impossible sizes on purpose and expect an error,
# not an abort. One kernel thread (OpenMP, which oneDNN shares) keeps the run quick on the
# lane's cores; the threading tests set their own counts (ThreadCountScope).
export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1
export OMP_NUM_THREADS=1
export PLANRT_PROPERTY_CASES=250
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 1200
