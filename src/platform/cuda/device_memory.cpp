// cuda_device_memory (planrt/platform/cuda.h): cudaMemGetInfo on the asked device, with the
// caller's current device left as it was.
#include <cuda_runtime.h>

#include "planrt/platform/cuda.h"
#include "platform/cuda/cuda_status.h"
#include "platform/cuda/device_guard.h"

namespace planrt {

Result<CudaDeviceMemory> cuda_device_memory(Device device) {
  if (device.type != DeviceType::CUDA) {
    return make_error(ErrorCode::InvalidArgument, "device memory figures are for CUDA devices, not {}",
                      to_string(device));
  }
  PLANRT_RETURN_IF_ERROR(cuda::check_cuda_device(device.index));
  PLANRT_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::set(device.index));
  size_t free_b = 0, total_b = 0;
  cudaError_t err = cudaMemGetInfo(&free_b, &total_b);
  if (err != cudaSuccess) return cuda::cuda_error(err, "cudaMemGetInfo", device.index);
  return CudaDeviceMemory{device, free_b, total_b};
}

}  // namespace planrt
