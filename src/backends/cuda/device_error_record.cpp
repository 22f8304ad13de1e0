#include "backends/cuda/device_error_record.h"

#include <utility>

#include "kernels/cuda/cuda_kernel.h"
#include "planrt/core/log.h"
#include "platform/cuda/cuda_allocator.h"
#include "platform/cuda/cuda_status.h"
#include "platform/cuda/fault_injection.h"

namespace planrt::backends {

using kernels::cuda::CudaDeviceError;

Result<DeviceErrorRecord> DeviceErrorRecord::create(int device, std::string_view where) {
  DeviceErrorRecord r;
  r.device_ = device;
  PLANRT_ASSIGN_OR_RETURN(void* on_device, cuda::cuda_allocator().allocate(sizeof(CudaDeviceError),
                                                                           Device::cuda(device)));
  r.device_copy_ = static_cast<CudaDeviceError*>(on_device);
  PLANRT_CUDA_RETURN_IF_ERROR(cudaMemset(r.device_copy_, 0, sizeof(CudaDeviceError)),
                              std::string(where) + ": clearing the error record", device);
  void* host = nullptr;
  PLANRT_CUDA_RETURN_IF_ERROR(cuda::malloc_host(&host, sizeof(CudaDeviceError)),
                              std::string(where) + ": the pinned error record", device);
  r.host_copy_ = static_cast<CudaDeviceError*>(host);
  *r.host_copy_ = CudaDeviceError{};
  return r;
}

DeviceErrorRecord::DeviceErrorRecord(DeviceErrorRecord&& other) noexcept
    : device_(std::exchange(other.device_, -1)),
      device_copy_(std::exchange(other.device_copy_, nullptr)),
      host_copy_(std::exchange(other.host_copy_, nullptr)) {}

DeviceErrorRecord& DeviceErrorRecord::operator=(DeviceErrorRecord&& other) noexcept {
  if (this != &other) {
    reset();
    device_ = std::exchange(other.device_, -1);
    device_copy_ = std::exchange(other.device_copy_, nullptr);
    host_copy_ = std::exchange(other.host_copy_, nullptr);
  }
  return *this;
}

void DeviceErrorRecord::reset() {
  if (device_copy_ != nullptr) {
    cuda::cuda_allocator().deallocate(device_copy_, sizeof(CudaDeviceError), Device::cuda(device_));
    device_copy_ = nullptr;
  }
  if (host_copy_ != nullptr) {
    cudaError_t err = cudaFreeHost(host_copy_);
    if (err != cudaSuccess) {
      PLANRT_LOG_ERROR("{}", cuda::cuda_error(err, "cudaFreeHost of a kernel error record", device_).to_string());
    }
    host_copy_ = nullptr;
  }
}

Status DeviceErrorRecord::copy_to_host(cudaStream_t stream, std::string_view where) const {
  cudaError_t err = cudaMemcpyAsync(host_copy_, device_copy_, sizeof(CudaDeviceError),
                                    cudaMemcpyDeviceToHost, stream);
  if (err != cudaSuccess) {
    return cuda::cuda_error(err, std::string(where) + ": reading the kernels' error record", device_);
  }
  return {};
}

Status DeviceErrorRecord::take(cudaStream_t stream, std::string_view where) {
  const CudaDeviceError record = *host_copy_;
  if (record.kind == 0) return {};
  // Clear both copies so the next run starts clean; the stream is idle here.
  *host_copy_ = CudaDeviceError{};
  cudaError_t err = cudaMemsetAsync(device_copy_, 0, sizeof(CudaDeviceError), stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) {
    PLANRT_LOG_ERROR("{}", cuda::cuda_error(err, std::string(where) + ": clearing the error record",
                                            device_).to_string());
  }
  return kernels::cuda::device_error_status(record).with_context(where);
}

}  // namespace planrt::backends
