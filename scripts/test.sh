#!/usr/bin/env bash
# What CI runs (.ci/run execs it). Installs what is missing, then three lanes, each its own
# build, in this order so that a plain failure is reported before the slow lanes start:
#   1. normal  build/test   RelWithDebInfo, CUDA parts when nvcc is found; every test
#                           (GPU tests skip without a GPU and say so; ./scripts/gpu-test.sh
#                           is the lane that requires one)
#   2. asan    build/asan   ./scripts/sanitize-test.sh: every CPU test under ASan+UBSan, leaks on
#   3. tsan    build/tsan   ./scripts/tsan-test.sh: the concurrency tests under ThreadSanitizer
# Idempotent; works from a fresh clone. PLANRT_SANITIZERS=0 runs the normal lane alone
# (a quick local check; CI runs all three).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh

build_dir=${PLANRT_BUILD_DIR:-build/test}
jobs=${PLANRT_JOBS:-$(nproc)}

lane_times=()
# lane NAME COMMAND...: runs it and reports its wall time and CPU time. On a shared machine
# the wall time says little; CPU time over the core count bounds what a dedicated one takes.
lane() {
  local name=$1 start=$SECONDS
  shift
  echo "=== lane $name"
  local TIMEFORMAT="=== lane $name: %0R s wall, %0U s user + %0S s sys CPU"
  time "$@"
  lane_times+=("$name $((SECONDS - start)) s")
}

# CI's normal lane: the library at -O2 with line tables only (-g1: a report's file:line, and
# about a third less compile time than -g), the tests' own sources at -O1
# (docs/reliability.md, "CI time", has the measured lane times).
normal_lane() {
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DPLANRT_TEST_COMPILE_OPTIONS=-O1 \
    -DPLANRT_CUDA="${PLANRT_CUDA:-AUTO}"
  cmake --build "$build_dir" -j "$jobs"
  ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 600
}

lane normal normal_lane
if [ "${PLANRT_SANITIZERS:-1}" != "0" ]; then
  lane asan ./scripts/sanitize-test.sh
  lane tsan ./scripts/tsan-test.sh
fi
summary=$(printf '%s, ' "${lane_times[@]}")
echo "test.sh: every lane passed (${summary%, })"
