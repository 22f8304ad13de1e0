#!/usr/bin/env bash
# Builds the planrt Python module for another interpreter against a carried build's
# libplanrt.so (the GPU lane: the build is made on the development machine for its Python,
# the GPU machine has another). gpu-carry.sh carries libplanrt.so and the headers it needs
# (fmt, dlpack); pybind11 comes from PYTHON (pip's pybind11.get_include()) or /usr/include.
#   scripts/build-python-module.sh BUILD_DIR PYTHON
# Writes BUILD_DIR/python/planrt/ (the package) for PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
python=$2
out=$build/python/planrt
mkdir -p "$out"
cp python/planrt/*.py python/planrt/*.pyi python/planrt/py.typed "$out/"
rm -f "$out"/_planrt*.so
py_include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
pybind_include=$("$python" -c 'import pybind11; print(pybind11.get_include())' 2>/dev/null || echo /usr/include)
cuda=()
[ -f "$build/include-extra/planrt_has_cuda" ] && cuda=(-DPLANRT_HAVE_CUDA=1)
objs=()
for src in python/src/*.cpp; do
  obj=$build/python/$(basename "$src" .cpp).o
  c++ -std=c++20 -O2 -fPIC -fvisibility=hidden -DFMT_SHARED -DPLANRT_VERSION="\"$(sed -n 's/^project(planrt VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)\"" \
    "${cuda[@]}" -Iinclude -isystem "$build/include-extra" -isystem "$pybind_include" -isystem "$py_include" \
    -c "$src" -o "$obj" &
  objs+=("$obj")
done
wait
c++ -shared -o "$out/_planrt$suffix" "${objs[@]}" -L"$build/lib" -l:libplanrt.so -l:libfmt.so.9 \
  -Wl,-rpath,'$ORIGIN/../../lib'
echo "build-python-module.sh: $out/_planrt$suffix for $("$python" --version)"
