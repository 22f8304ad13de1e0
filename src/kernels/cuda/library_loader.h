// Opening a CUDA library (cuBLAS, cuBLASLt, cuDNN) with dlopen and resolving its functions:
// the search order and the errors the libraries opened on first use share
// (cublas_library.h, cudnn_library.h). Thread-safe; opening twice returns the loader's
// same handle.
#pragma once

#include <dlfcn.h>

#include <cuda_runtime_api.h>

#include <string_view>

#include "planrt/core/result.h"

namespace planrt::kernels::cuda {

// dlopen of `soname` in PLANRT_CUDA_MATH_LIBRARY_DIR when that is set (and only there), else
// through the dynamic loader's own search, then beside the libcudart this process loaded.
// NotSupported naming the library, every path tried, LD_LIBRARY_PATH and the loader's
// message; `install_hint` says what to install ("the CUDA toolkit's cuBLAS").
Result<void*> open_cuda_library(const char* soname, std::string_view install_hint);

// NotSupported naming the library and the function when `handle` lacks it.
Status missing_function(const char* soname, const char* name);

template <typename Fn>
Status resolve_function(void* handle, const char* soname, const char* name, Fn& out) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) return missing_function(soname, name);
  out = reinterpret_cast<Fn>(symbol);
  return {};
}

}  // namespace planrt::kernels::cuda
