#include "platform/cuda/cuda_status.h"

#include <fmt/format.h>

namespace planrt::cuda {

std::string cuda_error_text(cudaError_t err) {
  return fmt::format("{} ({})", cudaGetErrorName(err), cudaGetErrorString(err));
}

Status cuda_error(cudaError_t err, std::string_view what, int device) {
  if (err == cudaSuccess) return {};
  cudaGetLastError();  // clear the recoverable error so later checks start clean
  ErrorCode code = ErrorCode::Internal;
  switch (err) {
    case cudaErrorMemoryAllocation:
      code = ErrorCode::OutOfMemory;
      break;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNotSupported:
      code = ErrorCode::NotSupported;
      break;
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidValue:
      code = ErrorCode::InvalidArgument;
      break;
    default:
      break;
  }
  return Status(code, fmt::format("{} on cuda:{}: {}", what, device, cuda_error_text(err)));
}

Status check_cuda_device(int device) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return make_error(ErrorCode::NotSupported, "cuda:{} is not available: no CUDA device ({})",
                      device, cuda_error_text(err));
  }
  if (device < 0 || device >= count) {
    return make_error(ErrorCode::InvalidArgument,
                      "cuda:{} does not exist: {} CUDA device(s) visible", device, count);
  }
  return {};
}

}  // namespace planrt::cuda
