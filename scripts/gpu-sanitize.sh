#!/usr/bin/env bash
# compute-sanitizer over the GPU test binaries (issue 6): memcheck (out-of-bounds and
# misaligned device accesses, leaks of device allocations), racecheck (shared-memory
# hazards) and synccheck (barrier misuse). Each tool runs each binary once in its own
# process with PLANRT_REQUIRE_GPU=1; a tool's error summary other than 0 fails the script.
#
#   PLANRT_BUILD_DIR=build/gpu ./scripts/gpu-sanitize.sh [TOOL ...]   # default: all three
# GTEST_FILTER narrows every binary (e.g. '*Attention*'). racecheck and synccheck look at
# kernels' shared memory and barriers: they run the kernel tests and the GPU concurrency
# stress test (everything at once: cuda segments, CUDA engines, threads), not the rest,
# unless PLANRT_SANITIZE_ALL=1. The stress test runs 4 threads of
# PLANRT_SANITIZE_STRESS_ITERATIONS iterations each (default 25: every thread unloads and
# reloads a method once, at its 25th) under memcheck and synccheck, and 10 (no reloads)
# under racecheck: with the reloads, racecheck hung inside the CUDA driver (every worker
# thread blocked on the driver's locks inside the tool's callbacks for cudaFree,
# cudaFreeHost, cudaMalloc and cuLaunchKernel; none in planrt's locks; docs/reliability.md).
set -uo pipefail
cd "$(dirname "$0")/.."
build_dir=${PLANRT_BUILD_DIR:-build/gpu}
tools=("$@")
[ ${#tools[@]} -eq 0 ] && tools=(memcheck racecheck synccheck)
export PLANRT_REQUIRE_GPU=1
out=${PLANRT_SANITIZE_OUT:-out/gpu-sanitize}
mkdir -p "$out"
binaries=(kernels_cuda_test backends_cuda_test backends_engine_cuda_test platform_cuda_test runtime_cuda_test)
stress_iterations=${PLANRT_SANITIZE_STRESS_ITERATIONS:-25}
failed=0
for tool in "${tools[@]}"; do
  for bin in "${binaries[@]}"; do
    filter=()
    if [ "$tool" != memcheck ] && [ "${PLANRT_SANITIZE_ALL:-0}" != 1 ]; then
      case $bin in
        kernels_cuda_test) ;;
        runtime_cuda_test) [ -z "${GTEST_FILTER:-}" ] && filter=(--gtest_filter='ConcurrencyStress*') ;;
        *) continue ;;
      esac
    fi
    # API errors are not reported: the tests provoke some on purpose (an impossible
    # allocation must come back as OutOfMemory), and each such test checks the error itself.
    args=(--tool "$tool" --error-exitcode 99 --report-api-errors no)
    [ "$tool" = memcheck ] && args+=(--leak-check full)
    # Left out of the engine tests: the 1000-run two-stream test (minutes under memcheck;
    # the concurrency stress covers it), and the two tests that park a stream with a
    # blocking host function and expect another stream to progress meanwhile: the tool
    # serializes the device's work, so they wait for themselves (the engine binary made no
    # progress in 200 s with them). The plain GPU lane runs all three.
    if [ "$bin" = backends_engine_cuda_test ] && [ -z "${GTEST_FILTER:-}" ]; then
      filter=(--gtest_filter='-*TwoThreadsTwoStreams*:*AGrowthDoesNotWait*:*RunsReleasedTogether*')
    fi
    export PLANRT_STRESS_ITERATIONS=$stress_iterations
    [ "$tool" = racecheck ] && PLANRT_STRESS_ITERATIONS=${PLANRT_SANITIZE_RACECHECK_ITERATIONS:-10}
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
