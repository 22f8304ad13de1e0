#!/usr/bin/env bash
# Start-up cost of the planrt CLI, a CUDA build beside a CPU-only one (issue 21): wall time
# and peak resident memory (/usr/bin/time) of `--version`, `inspect`, `build` and a CPU
# `run` of a small transformer, the two builds alternating, medians of RUNS each. Appends
# one JSON line to bench/results/startup.jsonl (or STARTUP_RESULTS) and prints a table.
#
#   CPU_CLI=build/cpu/tools/planrt CUDA_CLI=build/gpu/tools/planrt bench/startup.sh [--smoke]
# --smoke (ctest bench_smoke.startup): 2 runs, results in the build folder; the same checks
# (every command exits 0, /usr/bin/time reads a figure). With one CLI only, it is measured
# as both sides. Exit 0: measured; 1: a command failed; 77: no /usr/bin/time (a skip).
set -euo pipefail
cd "$(dirname "$0")/.."
smoke=0
[ "${1:-}" = --smoke ] && smoke=1
cpu_cli=${CPU_CLI:-${CUDA_CLI:-}}
cuda_cli=${CUDA_CLI:-${CPU_CLI:-}}
if [ -z "$cpu_cli" ]; then
  echo "startup.sh: set CPU_CLI and CUDA_CLI (paths to planrt)" >&2
  exit 1
fi
if [ ! -x /usr/bin/time ]; then
  # ./scripts/deps.sh installs it (Debian package time); elsewhere a smoke run is a skip.
  echo "startup.sh: /usr/bin/time is missing (Debian/Ubuntu package 'time')" >&2
  exit 77
fi
runs=${RUNS:-$([ $smoke = 1 ] && echo 2 || echo 15)}
results=${STARTUP_RESULTS:-bench/results/startup.jsonl}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
commit=${PLANRT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}

"$cpu_cli" build --template transformer --layers 2 --d-model 64 --heads 4 --ffn 128 --max-seq 32 \
  --weights random:1 --partition cpu -o "$work/model.prog" > /dev/null
commands=(
  "--version"
  "inspect $work/model.prog"
  "build --template transformer --layers 2 --d-model 64 --heads 4 --ffn 128 --max-seq 32 --weights random:1 --partition cpu -o $work/out.prog"
  "run $work/model.prog --random-inputs 1 --dim S=16 --iterations 3"
)
names=(version inspect build run)

# measure CLI ARGS: "seconds kilobytes" of one run (wall time from the shell's clock in
# nanoseconds, /usr/bin/time's own has 10 ms steps; peak RSS from /usr/bin/time)
measure() {
  local cli=$1
  shift
  local t0 t1
  t0=$(date +%s%N)
  /usr/bin/time -f "%M" -o "$work/time" "$cli" "$@" > /dev/null 2> "$work/stderr" || {
    echo "startup.sh: '$cli $*' failed: $(head -c 500 "$work/stderr")" >&2
    exit 1
  }
  t1=$(date +%s%N)
  echo "$(awk -v d="$((t1 - t0))" 'BEGIN {printf "%.4f", d / 1e9}') $(cat "$work/time")"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

json="{\"bench\": \"startup\", \"commit\": \"$commit\", \"smoke\": $([ $smoke = 1 ] && echo true || echo false), \"runs\": $runs, \"cpu_cli\": \"$cpu_cli\", \"cuda_cli\": \"$cuda_cli\", \"machine\": \"$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')\", \"commands\": {"
printf '%-8s %12s %12s %12s %12s %10s %10s\n' command "cpu s" "cuda s" "cpu MB" "cuda MB" "d ms" "d MB"
for i in "${!commands[@]}"; do
  : > "$work/cpu_s"; : > "$work/cuda_s"; : > "$work/cpu_kb"; : > "$work/cuda_kb"
  for ((r = 0; r < runs; ++r)); do
    # shellcheck disable=SC2086
    read -r s kb <<< "$(measure "$cpu_cli" ${commands[$i]})"
    echo "$s" >> "$work/cpu_s"; echo "$kb" >> "$work/cpu_kb"
    # shellcheck disable=SC2086
    read -r s kb <<< "$(measure "$cuda_cli" ${commands[$i]})"
    echo "$s" >> "$work/cuda_s"; echo "$kb" >> "$work/cuda_kb"
  done
  cs=$(median < "$work/cpu_s"); gs=$(median < "$work/cuda_s")
  ck=$(median < "$work/cpu_kb"); gk=$(median < "$work/cuda_kb")
  dms=$(awk -v a="$gs" -v b="$cs" 'BEGIN {printf "%.0f", (a - b) * 1000}')
  dmb=$(awk -v a="$gk" -v b="$ck" 'BEGIN {printf "%.1f", (a - b) / 1024}')
  printf '%-8s %12s %12s %12.1f %12.1f %10s %10s\n' "${names[$i]}" "$cs" "$gs" \
    "$(awk -v k="$ck" 'BEGIN {print k / 1024}')" "$(awk -v k="$gk" 'BEGIN {print k / 1024}')" "$dms" "$dmb"
  [ "$i" -gt 0 ] && json+=", "
  json+="\"${names[$i]}\": {\"cpu_median_s\": $cs, \"cuda_median_s\": $gs, \"cpu_peak_rss_kb\": $ck, \"cuda_peak_rss_kb\": $gk, \"delta_ms\": $dms, \"delta_mb\": $dmb}"
done
json+="}}"
if [ $smoke = 1 ] && [ -z "${STARTUP_RESULTS:-}" ]; then
  echo "$json"
else
  mkdir -p "$(dirname "$results")"
  echo "$json" >> "$results"
fi
