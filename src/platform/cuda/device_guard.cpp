#include "platform/cuda/device_guard.h"

#include <cuda_runtime.h>

#include "planrt/core/log.h"
#include "platform/cuda/cuda_status.h"

namespace planrt::cuda {

Result<DeviceGuard> DeviceGuard::set(int device) {
  PLANRT_RETURN_IF_ERROR(check_cuda_device(device));
  int previous = 0;
  PLANRT_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous), "cudaGetDevice", device);
  DeviceGuard guard(previous, device);
  if (previous != device) {
    PLANRT_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), "cudaSetDevice", device);
    guard.active_ = true;
  }
  return guard;
}

DeviceGuard::DeviceGuard(DeviceGuard&& other) noexcept
    : previous_(other.previous_), current_(other.current_), active_(other.active_) {
  other.active_ = false;
}

DeviceGuard::~DeviceGuard() {
  if (!active_) return;
  cudaError_t err = cudaSetDevice(previous_);
  if (err != cudaSuccess) {
    cudaGetLastError();
    PLANRT_LOG_ERROR("could not make cuda:{} current again after using cuda:{}: {}", previous_,
                     current_, cuda_error_text(err));
  }
}

}  // namespace planrt::cuda
