#!/usr/bin/env bash
# The GPU lane: builds with CUDA required, runs every test with PLANRT_REQUIRE_GPU=1 (so a
# GPU test that would skip fails instead), then every GPU benchmark in its smoke mode: the
# C++ ones through ctest (label bench-smoke), bench/compare.sh --smoke (planrt beside
# PyTorch and torch.compile, report included), bench/kernel_profile.sh --smoke (Nsight
# Compute), bench/cuda/gemm_algorithm_ab.sh --smoke (timed against heuristic GEMMs) and
# bench/onnx_encoder.py --smoke (an exported encoder against the template and PyTorch),
# bench/vision_models.py --smoke (an exported resnet18 against PyTorch on CUDA),
# bench/hf_bert.py --smoke (a Hugging Face BERT export on a padded batch against transformers,
# torch.compile and ONNX Runtime's CPU provider; needs transformers). A
# benchmark that errors or fails its own checks fails the lane. Run it on a machine with an
# NVIDIA GPU, torch and ncu.
#
#   ./scripts/gpu-test.sh                       # configure, build, test, benchmarks' smoke runs
#   PLANRT_SKIP_BUILD=1 ./scripts/gpu-test.sh   # a build carried from elsewhere (gpu-carry.sh)
# PLANRT_LANE_OUT=DIR keeps the logs and the lane's summary line (lane.json) there.
# PLANRT_LANE_STEPS="tests bench-smoke ..." runs only the named steps (a device session that
# allows ten minutes a command runs the lane in two parts); the default runs every step.
set -uo pipefail
cd "$(dirname "$0")/.."

build_dir=${PLANRT_BUILD_DIR:-build/gpu}
if [ "${PLANRT_SKIP_BUILD:-0}" != "1" ]; then
  set -e
  ./scripts/deps.sh
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPLANRT_CUDA=ON
  cmake --build "$build_dir" -j "$(nproc)"
  set +e
fi
# A carried build names the folders it was made in; point its ctest files at this checkout.
if [ -f "$build_dir/source_root" ]; then
  made_in=$(cat "$build_dir/source_root")
  if [ "$made_in" != "$PWD" ]; then
    grep -rlF "$made_in" "$build_dir" --include='*.cmake' | xargs -r sed -i "s|$made_in|$PWD|g"
    echo "$PWD" > "$build_dir/source_root"
  fi
  # ... and at the build folder it was made in (gpu-carry.sh records it), where that is not
  # this one: a build carried from build/test runs as build/gpu.
  if [ -f "$build_dir/build_root" ]; then
    built_in=$(cat "$build_dir/build_root")
    [ "$built_in" != "$build_dir" ] && grep -rlF "$PWD/$built_in/" "$build_dir" --include='*.cmake' |
      xargs -r sed -i "s|$PWD/$built_in/|$PWD/$build_dir/|g"
  fi
fi
# The Python of the ONNX tests and benchmarks: /usr/bin/python3 (Debian's torch, onnx and
# numpy), or where that one lacks them, the python3 on PATH (a GPU image's venv); the
# build's ctest files name /usr/bin/python3 and are pointed at it.
py=${PLANRT_TEST_PYTHON:-/usr/bin/python3}
if [ -z "${PLANRT_TEST_PYTHON:-}" ] && ! /usr/bin/python3 -c 'import torch, onnx, numpy' 2>/dev/null &&
   command -v python3 >/dev/null && python3 -c 'import torch, onnx, numpy' 2>/dev/null; then
  py=$(command -v python3)
fi
if [ "$py" != /usr/bin/python3 ]; then
  echo "gpu lane: Python tests run with $py"
  grep -rlF /usr/bin/python3 "$build_dir" --include='*.cmake' | xargs -r sed -i "s|/usr/bin/python3|$py|g"
fi
# The Python module's tests need the module built for $py: a carried build has it for the
# development machine's Python, so it is rebuilt here against the carried libplanrt.so.
skip_tests=()
if [ "${PLANRT_SKIP_BUILD:-0}" = "1" ]; then
  skip_tests=(-E '^install[.]')  # a carried build has no install rules to run
  if [ -f "$build_dir/lib/libplanrt.so" ] &&
     ! (module_dir=$PWD/$build_dir/python; cd /tmp && PYTHONPATH=$module_dir "$py" -c 'import planrt') 2>/dev/null; then
    ./scripts/build-python-module.sh "$build_dir" "$py" || echo "gpu lane: the Python module did not build"
  fi
fi
# A carried build brings the ONNX node tests the suite claims (gpu-carry.sh).
if [ -d "$build_dir/onnx-node" ]; then
  export PLANRT_ONNX_NODE_DIR=$PWD/$build_dir/onnx-node
fi
export PLANRT_REQUIRE_GPU=1
# The CLI the tests call (tests/tools/cli_test.cpp reads it before the path it was built with).
export PLANRT_CLI=$PWD/$build_dir/tools/planrt
out=${PLANRT_LANE_OUT:-out/gpu-lane}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
start=$SECONDS
failed=()

step() {  # step NAME COMMAND...: runs it, its output to the terminal and $out/NAME.log
  local name=$1
  shift
  if [ -n "${PLANRT_LANE_STEPS:-}" ] && [[ " $PLANRT_LANE_STEPS " != *" $name "* ]]; then
    echo "=== gpu lane: $name not selected (PLANRT_LANE_STEPS)"
    return
  fi
  echo "=== gpu lane: $name"
  if "$@" 2>&1 | tee "$out/$name.log"; then
    echo "=== gpu lane: $name passed"
  else
    echo "=== gpu lane: $name FAILED"
    failed+=("$name")
  fi
}

step tests ctest --test-dir "$build_dir" --output-on-failure -j "${PLANRT_TEST_JOBS:-4}" \
  --timeout 900 -LE bench-smoke "${skip_tests[@]}"
step bench-smoke ctest --test-dir "$build_dir" --output-on-failure --timeout 900 -L bench-smoke
planrt_cli=$PWD/$build_dir/tools/planrt
step compare-smoke env PLANRT="$planrt_cli" bench/compare.sh --smoke
step kernel-profile-smoke env PLANRT="$planrt_cli" bench/kernel_profile.sh --smoke
step gemm-algorithm-smoke env PLANRT="$planrt_cli" WORK="$out/gemm_algorithm_ab" bench/cuda/gemm_algorithm_ab.sh --smoke 1 128
step onnx-encoder-smoke "$py" bench/onnx_encoder.py --planrt "$planrt_cli" --smoke
step vision-models-smoke "$py" bench/vision_models.py --planrt "$planrt_cli" --smoke
step hf-bert-smoke "$py" bench/hf_bert.py --planrt "$planrt_cli" --smoke

summary() {  # ctest's own summary line: "100% tests passed out of N" or "..., K tests failed out of N"
  [ -f "$out/$1.log" ] || return 0  # a step not selected
  grep -Eo '[0-9]+% tests passed(, [0-9]+ tests failed)? out of [0-9]+' "$out/$1.log" | tail -1
}
cat > "$out/lane.json" <<EOF
{"lane": "gpu-test", "steps": "${PLANRT_LANE_STEPS:-all}", "commit": "${PLANRT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}", "device": "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | sed 's/^ *//' | paste -sd, -)", "tests": "$(summary tests)", "bench_smoke": "$(summary bench-smoke)", "skipped": $(cat "$out/tests.log" 2>/dev/null | grep -c '\*\*\*Skipped'), "failed_steps": "${failed[*]:-}", "wall_s": $((SECONDS - start))}
EOF
cat "$out/lane.json"
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu-test.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "gpu-test.sh: tests and every GPU benchmark's smoke run passed"
