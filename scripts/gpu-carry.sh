#!/usr/bin/env bash
# Packs a CUDA build made here (build/gpu) into build/gpu-carry for a GPU machine that has
# the CUDA toolkit but not this machine's Debian libraries: the test binaries and ctest
# files, the CLI, every benchmark (their smoke runs are ctest tests), stripped, plus the
# shared libraries the GPU image lacks (fmt, oneDNN and the OpenCL loader it links, OpenBLAS
# (benchmarks only) and its Fortran runtime, protobuf and
# ONNX's generated classes), the ONNX node tests the test suite claims (onnx-node/, from
# Debian's libonnx-testdata: gpu-test.sh points PLANRT_ONNX_NODE_DIR there), and
# source_root (the checkout it was made in: gpu-test.sh points the ctest files at its own).
# On the GPU machine:
#   export LD_LIBRARY_PATH=$PWD/build/gpu/lib   # with build/gpu -> gpu-carry
#   PLANRT_SKIP_BUILD=1 ./scripts/gpu-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-build/gpu}
dst=build/gpu-carry
rm -rf "$dst"
mkdir -p "$dst/tests" "$dst/tools" "$dst/bench/smoke" "$dst/src" "$dst/lib"
cp "$src/CTestTestfile.cmake" "$dst/"
: > "$dst/src/CTestTestfile.cmake"
cp "$src"/tests/*_test "$src"/tests/*.cmake "$dst/tests/"
cp "$src/tools/planrt" "$dst/tools/"
cp "$src/bench/CTestTestfile.cmake" "$dst/bench/"
cp "$src"/bench/*_bench "$dst/bench/"
# The probes built by CMake (bench/cuda/probes/), run by hand.
for probe in conv_plan_memory method_memory_steps; do
  [ -f "$src/bench/$probe" ] && cp "$src/bench/$probe" "$dst/bench/"
done
sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$src/CMakeCache.txt" > "$dst/source_root"
echo "$src" > "$dst/build_root"  # the folder the ctest files name (gpu-test.sh re-points them)
[ -f "$src/tools/CTestTestfile.cmake" ] && cp "$src/tools/CTestTestfile.cmake" "$dst/tools/"
strip "$dst"/tests/*_test "$dst/tools/planrt" "$dst"/bench/*_bench "$dst"/bench/conv_plan_memory "$dst"/bench/method_memory_steps 2>/dev/null || true
for lib in libfmt.so.9 libdnnl.so.2 libOpenCL.so.1 libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libbenchmark.so.1debian \
    libprotobuf.so.32 libonnx_proto.so.1; do
  # No early exit in awk: ldconfig would die of SIGPIPE, failing the pipeline (pipefail).
  path=$(ldconfig -p | awk -v l="$lib" '$1 == l && !found {print $NF; found = 1}')
  [ -n "$path" ] && cp -L "$path" "$dst/lib/"
done
# The Python module is rebuilt on the GPU machine for its own Python
# (scripts/build-python-module.sh) against the library and these headers.
if [ -f "$src/src/libplanrt.so" ]; then
  soname=$(objdump -p "$src/src/libplanrt.so" | awk '$1 == "SONAME" {print $2}')
  cp -L "$src/src/libplanrt.so" "$dst/lib/$soname"
  ln -s "$soname" "$dst/lib/libplanrt.so"
  strip "$dst/lib/$soname"
  mkdir -p "$dst/include-extra"
  cp -r /usr/include/fmt /usr/include/dlpack "$dst/include-extra/"
  # grep -c reads all of nm's output (grep -q would close the pipe early: SIGPIPE under pipefail).
  if nm -D --defined-only "$dst/lib/$soname" | grep -c register_cuda_backend > /dev/null; then
    touch "$dst/include-extra/planrt_has_cuda"
  fi
fi
mkdir -p "$dst/onnx-node"
while read -r t; do
  cp -r "/usr/share/libonnx-testdata/data/node/$t" "$dst/onnx-node/"
done < tests/importers/onnx_node_tests.txt
# The openblas-pthread variant is what libopenblas.so.0 resolves to through alternatives.
du -sh "$dst"
