#!/usr/bin/env bash
# Installs the Debian packages planrt needs, skipping what is present. Idempotent.
# Runs apt-get as root, or through sudo when not root.
set -euo pipefail

# ocl-icd-opencl-dev: only a Recommends of libdnnl-dev, but its CMake config (dnnl-config.cmake)
# calls find_package(OpenCL) and fails without the headers and the loader's link.
packages=(
  build-essential cmake ninja-build pkg-config git
  libfmt-dev nlohmann-json3-dev libcli11-dev
  libflatbuffers-dev flatbuffers-compiler
  libdnnl-dev ocl-icd-opencl-dev libopenblas-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-dev libprotobuf-dev libonnx-testdata
  python3 python3-numpy python3-onnx python3-torch python3-torchvision
  python3-dev pybind11-dev python3-pybind11 libdlpack-dev python3-pytest
  time
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "deps: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  sudo_cmd=()
elif command -v sudo >/dev/null 2>&1; then
  sudo_cmd=(sudo)
else
  echo "error: missing packages (${missing[*]}) and not root and no sudo to install them" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
