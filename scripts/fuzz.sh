#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, AddressSanitizer + UBSan, no CUDA) and
# runs one on its seed corpus for a while.
#
#   ./scripts/fuzz.sh TARGET SECONDS [LIBFUZZER_FLAG...]
#   ./scripts/fuzz.sh TARGET merge      # minimise tests/fuzz/corpus/TARGET with the run's finds
#                                       # (check its size: a 30-minute run's finds reach MBs)
#
# TARGET is program, model_json, safetensors, npy or onnx_model. A run reads tests/fuzz/corpus/TARGET,
# tests/fuzz/regressions/TARGET and the seeds scripts/fuzz-corpus.sh writes to
# build/fuzz-seeds (made on the first run), and writes under build/fuzz-run/TARGET:
#   corpus/    what the run found worth keeping (libFuzzer's working corpus)
#   crashes/   crash-*, leak-*, timeout-*, oom-*: each is an input to fix, then to move
#              into tests/fuzz/regressions/TARGET (replayed by ctest on every CI run)
#   fuzz.log   libFuzzer's output, ending with -print_final_stats
# It runs under `nice -n 15`, on one core. A single input running past 30 s is a timeout
# (generous: a niced fuzzer on a busy shared machine may get a fraction of a core);
# more than 2 GiB resident (or one allocation above it) is an out-of-memory finding: the
# targets cap what the API lets them cap, so anything above is an unbounded allocation.
# Two targets may run at once (each on its own core), but start the second once the first
# has finished building: both build in the same folder.
# Environment: PLANRT_FUZZ_BUILD_DIR (build/fuzz), PLANRT_FUZZ_OUT (build/fuzz-run),
# PLANRT_FUZZ_SEEDS (build/fuzz-seeds), CXX/CC (clang++-14/clang-14 when present).
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: scripts/fuzz.sh program|model_json|safetensors|npy|onnx_model SECONDS|merge [LIBFUZZER_FLAG...]"
target=${1:?$usage}
mode=${2:?$usage}
shift 2
case $target in
  program | model_json | safetensors | npy | onnx_model) ;;
  *) echo "error: unknown target '$target'; $usage" >&2; exit 2 ;;
esac
if [[ $mode != merge && ! $mode =~ ^[0-9]+$ ]]; then
  echo "error: '$mode' is neither a number of seconds nor 'merge'; $usage" >&2
  exit 2
fi

cxx=${CXX:-$(command -v clang++-14 || command -v clang++ || true)}
cc=${CC:-$(command -v clang-14 || command -v clang || true)}
if [[ -z $cxx || -z $cc ]]; then
  echo "error: clang not found (Debian: apt-get install clang-14); set CXX and CC to use another" >&2
  exit 1
fi

build_dir=${PLANRT_FUZZ_BUILD_DIR:-build/fuzz}
# -O1 with assertions on: fast enough to fuzz, and internal invariants still checked.
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
  -DPLANRT_CUDA=OFF -DPLANRT_FUZZ=ON -DPLANRT_BUILD_BENCH=OFF >/dev/null
nice -n 10 cmake --build "$build_dir" -j "${PLANRT_JOBS:-2}" --target "${target}_fuzz"
fuzzer=$build_dir/tests/fuzz/${target}_fuzz

seeds=${PLANRT_FUZZ_SEEDS:-build/fuzz-seeds}
if [[ ! -d $seeds/$target ]]; then
  nice -n 10 ./scripts/fuzz-corpus.sh "$seeds"
fi
out=${PLANRT_FUZZ_OUT:-build/fuzz-run}/$target
mkdir -p "$out/corpus" "$out/crashes"
committed=tests/fuzz/corpus/$target
regressions=tests/fuzz/regressions/$target
mkdir -p "$committed"

# allocator_may_return_null: a failed allocation must come back to the library as an error
# it reports, not abort inside the allocator. One kernel thread (oneDNN's OpenMP): one core
# per fuzzer.
export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1
export OMP_NUM_THREADS=1

if [[ $mode == merge ]]; then
  # Keeps, of the committed corpus, the seeds and the run's finds, the fewest files that
  # reach the same coverage.
  merged=$(mktemp -d)
  inputs=("$committed" "$seeds/$target" "$out/corpus")
  nice -n 15 "$fuzzer" -merge=1 "$merged" "${inputs[@]}" "$@"
  rm -f "$committed"/*
  cp "$merged"/* "$committed"/
  rm -rf "$merged"
  echo "$committed: $(ls "$committed" | wc -l) files, $(du -sk "$committed" | cut -f1) KiB"
  exit 0
fi

read_dirs=("$committed" "$seeds/$target")
if [[ -d $regressions ]]; then read_dirs+=("$regressions"); fi
nice -n 15 "$fuzzer" "$out/corpus" "${read_dirs[@]}" \
  -max_total_time="$mode" -print_final_stats=1 -timeout=30 -rss_limit_mb=2048 \
  -artifact_prefix="$out/crashes/" "$@" 2>&1 | tee "$out/fuzz.log"
