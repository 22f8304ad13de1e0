// DeviceErrorRecord: the record a CUDA-running segment's kernels write a data error into
// (kernels/cuda/device_error.h: an embedding id out of range, found on the device), and its
// pinned host copy, read back after the stream is synchronized. One owner for the cuda
// backend's segments and the engine backend's CUDA runner. Private to src/backends.
//
// Lifecycle per run: the kernels get device() and may write into it; copy_to_host(stream)
// enqueues the read-back at the end of the run; once the caller has synchronized that
// stream, take() reports what the kernels found (OutOfRange naming the id, as the CPU
// kernel does) and clears both copies for the next run.
// Ownership: move-only; the destructor frees both copies, logging (never throwing) a
// failure. Creation errors (OutOfMemory, a CUDA error) name the device and `where`.
// Thread safety: none; a segment runs one call at a time. The current device must be the
// record's for create(), copy_to_host() and take().
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <string_view>

#include "kernels/cuda/device_error.h"
#include "planrt/core/result.h"

namespace planrt::backends {

class DeviceErrorRecord {
 public:
  DeviceErrorRecord() = default;
  static Result<DeviceErrorRecord> create(int device, std::string_view where);

  DeviceErrorRecord(DeviceErrorRecord&& other) noexcept;
  DeviceErrorRecord& operator=(DeviceErrorRecord&& other) noexcept;
  DeviceErrorRecord(const DeviceErrorRecord&) = delete;
  DeviceErrorRecord& operator=(const DeviceErrorRecord&) = delete;
  ~DeviceErrorRecord() { reset(); }

  kernels::cuda::CudaDeviceError* device() const { return device_copy_; }
  // After the read-back's stream was synchronized: whether the kernels reported an error.
  bool has_error() const { return host_copy_ != nullptr && host_copy_->kind != 0; }
  // Enqueues the read-back of the device copy on `stream`.
  Status copy_to_host(cudaStream_t stream, std::string_view where) const;
  // After `stream` was synchronized: the kernels' error, if any, with `where` as context;
  // both copies are clear again (a failure to clear is logged: the error still returns).
  Status take(cudaStream_t stream, std::string_view where);
  void reset();

 private:
  int device_ = -1;
  kernels::cuda::CudaDeviceError* device_copy_ = nullptr;  // cudaMalloc (cuda_allocator)
  kernels::cuda::CudaDeviceError* host_copy_ = nullptr;    // cudaMallocHost
};

}  // namespace planrt::backends
