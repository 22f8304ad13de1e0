#!/usr/bin/env bash
# compute-sanitizer over the GPU test binaries (issue 6): memcheck (out-of-bounds and
# misaligned device accesses, leaks of device allocations), racecheck (shared-memory
# hazards) and synccheck (barrier misuse). Each tool runs each binary once in its own
# process with PLANRT_REQUIRE_GPU=1; a tool's error summary other than 0 fails the script.
#
#   PLANRT_BUILD_DIR=build/gpu ./scripts/gpu-sanitize.sh [TOOL ...]   # default: all three
# GTEST_FILTER narrows every binary (e.g. '*Attention*'); racecheck and synccheck only
# look at kernels, so they run the kernel tests alone unless PLANRT_SANITIZE_ALL=1.
set -uo pipefail
cd "$(dirname "$0")/.."
build_dir=${PLANRT_BUILD_DIR:-build/gpu}
tools=("$@")
[ ${#tools[@]} -eq 0 ] && tools=(memcheck racecheck synccheck)
export PLANRT_REQUIRE_GPU=1
out=${PLANRT_SANITIZE_OUT:-out/gpu-sanitize}
mkdir -p "$out"
binaries=(kernels_cuda_test backends_cuda_test backends_engine_cuda_test platform_cuda_test)
failed=0
for tool in "${tools[@]}"; do
  for bin in "${binaries[@]}"; do
    if [ "$tool" != memcheck ] && [ "$bin" != kernels_cuda_test ] && [ "${PLANRT_SANITIZE_ALL:-0}" != 1 ]; then
      continue
    fi
    # API errors are not reported: the tests provoke some on purpose (an impossible
    # allocation must come back as OutOfMemory), and each such test checks the error itself.
    args=(--tool "$tool" --error-exitcode 99 --report-api-errors no)
    [ "$tool" = memcheck ] && args+=(--leak-check full)
    filter=()
    # The 1000-run concurrency tests take minutes under memcheck; racecheck does not apply to
    # them (no shared memory of their own) and the plain GPU lane runs them.
    if [ "$bin" = backends_engine_cuda_test ] && [ -z "${GTEST_FILTER:-}" ]; then
      filter=(--gtest_filter='-*TwoThreadsTwoStreams*')
    fi
    log="$out/$tool-$bin.log"
    start=$(date +%s)
    timeout "${PLANRT_SANITIZE_TIMEOUT:-900}" compute-sanitizer "${args[@]}" "$build_dir/tests/$bin" --gtest_brief=1 "${filter[@]}" > "$log" 2>&1
    rc=$?
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY" "$log" | tail -1)
    tests=$(grep -E "^\[  PASSED  \]|^\[  FAILED  \]" "$log" | head -2 | tr '\n' ' ')
    echo "$tool $bin rc=$rc $(( $(date +%s) - start ))s: ${summary:-no summary} | $tests"
    [ $rc -ne 0 ] && failed=1
  done
done
exit $failed
