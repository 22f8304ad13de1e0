#include "platform/cuda/cuda_allocator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>

#include "planrt/core/log.h"
#include "planrt/platform/cuda.h"
#include "platform/cuda/cuda_status.h"
#include "platform/cuda/device_guard.h"
#include "platform/cuda/fault_injection.h"

namespace planrt::cuda {
namespace {

Status check_is_cuda(Device device, size_t nbytes, const char* what) {
  if (device.type != DeviceType::CUDA) {
    return make_error(ErrorCode::InvalidArgument, "the CUDA allocator cannot {} {} bytes on {}",
                      what, nbytes, to_string(device));
  }
  return {};
}

// `stream` null: synchronous (cudaMemcpy); else ordered on that stream (cudaMemcpyAsync).
Status copy(void* dst, const void* src, size_t nbytes, Device device, cudaMemcpyKind kind,
            const char* direction, void* stream = nullptr) {
  PLANRT_RETURN_IF_ERROR(check_is_cuda(device, nbytes, "copy"));
  if (nbytes == 0) return {};
  if (dst == nullptr || src == nullptr) {
    return make_error(ErrorCode::InvalidArgument, "{} copy of {} bytes on {} with a null pointer",
                      direction, nbytes, to_string(device));
  }
  auto guard = DeviceGuard::set(device.index);
  if (!guard.ok()) return guard.status().with_context(fmt::format("{} copy", direction));
  cudaError_t err = stream == nullptr
                        ? cudaMemcpy(dst, src, nbytes, kind)
                        : cudaMemcpyAsync(dst, src, nbytes, kind, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    return cuda_error(err,
                      fmt::format("{} copy of {} bytes ({})", direction, nbytes,
                                  stream == nullptr ? "cudaMemcpy" : "cudaMemcpyAsync"),
                      device.index);
  }
  return {};
}

}  // namespace

Result<void*> CudaAllocator::allocate(size_t nbytes, Device device) {
  PLANRT_RETURN_IF_ERROR(check_is_cuda(device, nbytes, "allocate"));
  if (nbytes == 0) return static_cast<void*>(nullptr);
  auto guard = DeviceGuard::set(device.index);
  if (!guard.ok()) {
    return guard.status().with_context(
        fmt::format("cannot allocate {} bytes on {}", nbytes, to_string(device)));
  }
  void* p = nullptr;
  cudaError_t err = injected_allocation_failure();
  if (err == cudaSuccess) err = cudaMalloc(&p, nbytes);
  if (err != cudaSuccess) {
    return cuda_error(err, fmt::format("allocating {} bytes (cudaMalloc)", nbytes), device.index);
  }
  std::lock_guard lock(mu_);
  live_[device.index] += nbytes;
  return p;
}

uint64_t CudaAllocator::live_bytes(Device device) const {
  std::lock_guard lock(mu_);
  auto it = live_.find(device.index);
  return it == live_.end() ? 0 : it->second;
}

void CudaAllocator::deallocate(void* ptr, size_t nbytes, Device device) {
  if (ptr == nullptr) return;
  auto guard = DeviceGuard::set(device.index);
  if (!guard.ok()) {
    PLANRT_LOG_ERROR("freeing {} bytes on {}: {}", nbytes, to_string(device),
                     guard.status().to_string());
    // cudaFree works on any device's pointer under unified addressing; try anyway.
  }
  cudaError_t err = cudaFree(ptr);
  if (err != cudaSuccess) {
    PLANRT_LOG_ERROR("{}", cuda_error(err, fmt::format("freeing {} bytes (cudaFree)", nbytes),
                                      device.index)
                               .to_string());
  }
  std::lock_guard lock(mu_);
  uint64_t& live = live_[device.index];
  live -= std::min<uint64_t>(live, nbytes);
}

Status CudaAllocator::copy_host_to_device(void* dst, const void* src, size_t nbytes,
                                          Device device) {
  return copy(dst, src, nbytes, device, cudaMemcpyHostToDevice, "host-to-device");
}

Status CudaAllocator::copy_device_to_host(void* dst, const void* src, size_t nbytes,
                                          Device device) {
  return copy(dst, src, nbytes, device, cudaMemcpyDeviceToHost, "device-to-host");
}

Status CudaAllocator::copy_device_to_device(void* dst, const void* src, size_t nbytes,
                                            Device device) {
  return copy(dst, src, nbytes, device, cudaMemcpyDeviceToDevice, "device-to-device");
}

Result<void*> CudaAllocator::create_stream(Device device) {
  if (device.type != DeviceType::CUDA) {
    return make_error(ErrorCode::InvalidArgument, "the CUDA allocator cannot create a stream on {}",
                      to_string(device));
  }
  auto guard = DeviceGuard::set(device.index);
  if (!guard.ok()) return guard.status().with_context("creating a stream");
  cudaStream_t stream = nullptr;
  // Non-blocking: never serialized with the legacy default stream other code may use.
  cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (err != cudaSuccess) return cuda_error(err, "creating a stream", device.index);
  return static_cast<void*>(stream);
}

void CudaAllocator::destroy_stream(void* stream, Device device) {
  if (stream == nullptr) return;
  cudaError_t err = cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    PLANRT_LOG_ERROR("{}", cuda_error(err, "destroying a stream", device.index).to_string());
  }
}

Status CudaAllocator::synchronize(void* stream, Device device) {
  if (stream == nullptr) return {};
  cudaError_t err = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) return cuda_error(err, "synchronizing a stream", device.index);
  return {};
}

Status CudaAllocator::copy_host_to_device_async(void* dst, const void* src, size_t nbytes,
                                                Device device, void* stream) {
  return copy(dst, src, nbytes, device, cudaMemcpyHostToDevice, "host-to-device", stream);
}

Status CudaAllocator::copy_device_to_host_async(void* dst, const void* src, size_t nbytes,
                                                Device device, void* stream) {
  return copy(dst, src, nbytes, device, cudaMemcpyDeviceToHost, "device-to-host", stream);
}

Status CudaAllocator::copy_device_to_device_async(void* dst, const void* src, size_t nbytes,
                                                  Device device, void* stream) {
  return copy(dst, src, nbytes, device, cudaMemcpyDeviceToDevice, "device-to-device", stream);
}

Status CudaAllocator::wait_for_caller(void* stream, Device device) {
  if (stream == nullptr) return {};
  auto guard = DeviceGuard::set(device.index);
  if (!guard.ok()) return guard.status().with_context("ordering after the caller's work");
  // An event recorded on the legacy default stream (handle 0), waited for on `stream`: the
  // method's stream is non-blocking, so without it nothing orders the two.
  cudaEvent_t event = nullptr;
  cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (err != cudaSuccess) return cuda_error(err, "creating an event for the caller's work", device.index);
  err = cudaEventRecord(event, nullptr);
  if (err == cudaSuccess) err = cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), event, 0);
  cudaError_t destroyed = cudaEventDestroy(event);  // released once the wait is satisfied
  if (err != cudaSuccess) return cuda_error(err, "waiting for the caller's work (legacy default stream)", device.index);
  if (destroyed != cudaSuccess) return cuda_error(destroyed, "cudaEventDestroy", device.index);
  return {};
}

Result<bool> CudaAllocator::pin_host_memory(void* ptr, size_t nbytes, Device device) {
  if (ptr == nullptr || nbytes == 0) return false;
  auto guard = DeviceGuard::set(device.index);
  if (!guard.ok()) return guard.status().with_context("pinning host memory");
  // Portable: the pages stay locked for every device, not only the current one.
  cudaError_t err = cudaHostRegister(ptr, nbytes, cudaHostRegisterPortable);
  if (err == cudaSuccess) return true;
  (void)cudaGetLastError();  // clear it: an unpinned buffer is a slower copy, not a failure
  PLANRT_LOG_DEBUG("cuda:{}: {} bytes of host memory stay pageable ({})", device.index, nbytes,
                   cudaGetErrorString(err));
  return false;
}

void CudaAllocator::unpin_host_memory(void* ptr, size_t, Device device) {
  cudaError_t err = cudaHostUnregister(ptr);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    PLANRT_LOG_ERROR("{}", cuda_error(err, "unpinning host memory", device.index).to_string());
  }
}

uint64_t CudaAllocator::total_memory(Device device) {
  if (device.type != DeviceType::CUDA) return 0;
  auto guard = DeviceGuard::set(device.index);
  if (!guard.ok()) return 0;
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return total_bytes;
}

CudaAllocator& cuda_allocator() {
  // Never destroyed: Methods and weights freed during static destruction still count here.
  static CudaAllocator* allocator = new CudaAllocator();
  return *allocator;
}

}  // namespace planrt::cuda

namespace planrt {

Status register_cuda_allocator() {
  // Serializes check-then-register so two threads calling at once both succeed.
  static std::mutex mu;
  std::lock_guard lock(mu);
  DeviceAllocator* mine = &cuda::cuda_allocator();
  DeviceAllocator* current = get_device_allocator(DeviceType::CUDA);
  if (current == mine) return {};
  if (current != nullptr) {
    return make_error(ErrorCode::InvalidArgument,
                      "cannot register the CUDA allocator: another allocator is registered for "
                      "cuda; unregister it first");
  }
  return register_device_allocator(DeviceType::CUDA, mine);
}

}  // namespace planrt
