#!/usr/bin/env bash
# Installs planrt from this clone, with nothing beyond Debian packages (scripts/deps.sh):
# the C++ package (public headers, libplanrt.so, planrtConfig.cmake, planrt.pc), the planrt
# CLI, and the Python module for Debian's /usr/bin/python3 (docs/install.md).
#
#   ./scripts/install.sh                # root: prefix /usr/local, the module into
#                                       #   /usr/local/lib/python3.X/dist-packages (on sys.path)
#                                       # other users: prefix ~/.local, the module into the
#                                       #   user site (python3 -m site --user-site)
#   ./scripts/install.sh --prefix DIR   # everything under DIR; the module in
#                                       #   DIR/lib/python3.X/dist-packages (add it to PYTHONPATH)
# Then: python3 -c "import planrt", and find_package(planrt) with CMAKE_PREFIX_PATH=PREFIX.
# PLANRT_INSTALL_BUILD_DIR (default build/release) is the build folder; CUDA parts are built
# when nvcc is found (PLANRT_CUDA=AUTO|ON|OFF as for cmake).
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    -h|--help) sed -n 2,16p "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

./scripts/deps.sh

python=/usr/bin/python3
python_dir=()
if [ -z "$prefix" ]; then
  if [ "$(id -u)" -eq 0 ]; then
    prefix=/usr/local
  else
    prefix=$HOME/.local
    python_dir=(-DPLANRT_PYTHON_INSTALL_DIR="$("$python" -m site --user-site)")
  fi
fi

build_dir=${PLANRT_INSTALL_BUILD_DIR:-build/release}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLANRT_BUILD_TESTS=OFF \
  -DPLANRT_BUILD_BENCH=OFF -DPLANRT_PYTHON=ON -DPython_EXECUTABLE="$python" \
  -DPLANRT_CUDA="${PLANRT_CUDA:-AUTO}" "${python_dir[@]}"
cmake --build "$build_dir" -j "${PLANRT_JOBS:-$(nproc)}"
cmake --install "$build_dir" --prefix "$prefix" --strip
# The shared library's folder may be new to the dynamic loader's cache.
if [ "$(id -u)" -eq 0 ] && [ "$prefix" = /usr/local ]; then ldconfig; fi

site=$("$python" -c "import sysconfig; print(f'python{sysconfig.get_python_version()}')")
echo "install.sh: planrt installed under $prefix"
echo "  C++:    find_package(planrt) with -DCMAKE_PREFIX_PATH=$prefix; pkg-config planrt"
if [ ${#python_dir[@]} -gt 0 ]; then
  echo "  Python: $python -c 'import planrt' (user site)"
elif [ "$prefix" = /usr/local ]; then
  echo "  Python: $python -c 'import planrt'"
else
  echo "  Python: PYTHONPATH=$prefix/lib/$site/dist-packages $python -c 'import planrt'"
fi
