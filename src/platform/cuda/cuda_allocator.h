// CudaAllocator: the DeviceAllocator for DeviceType::CUDA (private; users call
// planrt::register_cuda_allocator() from planrt/platform/cuda.h).
//
// Planned arenas are long-lived, so they come from cudaMalloc on the buffer's device (under
// a DeviceGuard, so the caller's current device is left as it was), not from the warm
// pool, which serves stream-ordered per-call temporaries. Failures are returned with the
// device and the byte count: OutOfMemory for cudaErrorMemoryAllocation (the error is
// cleared, so the next allocation starts clean), InvalidArgument for a device that is not
// CUDA or does not exist. It never aborts.
// Copies are synchronous (cudaMemcpy): when they return the bytes have arrived. Streams
// (create_stream) are non-blocking CUDA streams on the given device; the *_async copies are
// cudaMemcpyAsync on them (the host source of a host-to-device copy is staged before the
// call returns, as CUDA documents for pageable memory).
// deallocate() uses cudaFree, which waits for the device to be idle; arenas are freed when
// a method is unloaded, not on a hot path. Thread safety: all methods may be called
// concurrently; the only state is the per-device count of live bytes, under a lock.
#pragma once

#include <map>
#include <mutex>

#include "planrt/platform/device_allocator.h"

namespace planrt::cuda {

class CudaAllocator final : public DeviceAllocator {
 public:
  DeviceType device_type() const override { return DeviceType::CUDA; }
  Result<void*> allocate(size_t nbytes, Device device) override;
  void deallocate(void* ptr, size_t nbytes, Device device) override;
  Status copy_host_to_device(void* dst, const void* src, size_t nbytes, Device device) override;
  Status copy_device_to_host(void* dst, const void* src, size_t nbytes, Device device) override;
  Status copy_device_to_device(void* dst, const void* src, size_t nbytes, Device device) override;
  Result<void*> create_stream(Device device) override;
  void destroy_stream(void* stream, Device device) override;
  Status synchronize(void* stream, Device device) override;
  Status copy_host_to_device_async(void* dst, const void* src, size_t nbytes, Device device,
                                   void* stream) override;
  Status copy_device_to_host_async(void* dst, const void* src, size_t nbytes, Device device,
                                   void* stream) override;
  Status copy_device_to_device_async(void* dst, const void* src, size_t nbytes, Device device,
                                     void* stream) override;
  // cudaHostRegister / cudaHostUnregister. Memory some other code registered already, or
  // memory the driver refuses to lock, stays pageable: false, and the copies work as before.
  Status wait_for_caller(void* stream, Device device) override;
  Result<bool> pin_host_memory(void* ptr, size_t nbytes, Device device) override;
  void unpin_host_memory(void* ptr, size_t nbytes, Device device) override;
  // cudaMemGetInfo's total; 0 (unknown) for a device that is not there.
  uint64_t total_memory(Device device) override;
  // What allocate() has handed out on `device` and deallocate() has not taken back (by the
  // sizes the callers give): planned arenas, private engine scratch, uploaded weights, the
  // kernels' error records. For the device-memory ledger (planrt/backends/memory_ledger.h).
  uint64_t live_bytes(Device device) const;

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> live_;  // per device index
};

// The process's instance (the one register_cuda_allocator() registers).
CudaAllocator& cuda_allocator();

}  // namespace planrt::cuda
