#include "support/gpu.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#ifdef PLANRT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace planrt::testing_support {

int visible_gpu_count() {
#ifdef PLANRT_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

std::string gpu_unavailable_reason(int needed) {
#ifdef PLANRT_HAVE_CUDA
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("no CUDA device visible ({})", cudaGetErrorString(err));
  }
  return fmt::format("needs {} CUDA device(s), {} visible", needed, count);
#else
  return fmt::format("needs {} CUDA device(s); built without CUDA (PLANRT_CUDA=OFF or no nvcc)", needed);
#endif
}

bool gpu_required() {
  const char* v = std::getenv("PLANRT_REQUIRE_GPU");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace planrt::testing_support
