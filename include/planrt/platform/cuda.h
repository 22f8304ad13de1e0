// CUDA support a user calls directly: registering the CUDA device allocator and reading
// the warm memory pool's statistics (docs/design.md §5). Available only in builds with CUDA
// (PLANRT_HAVE_CUDA is defined); nothing here includes a CUDA header.
//
// Errors: every call returns Status/Result, never throws or aborts; messages name the
// device. Thread safety: every function here may be called from any thread.
#pragma once

#include <cstdint>

#include "planrt/core/device.h"
#include "planrt/core/result.h"

namespace planrt {

// Registers planrt's CUDA DeviceAllocator for DeviceType::CUDA (planned arenas through
// cudaMalloc on the buffer's device; synchronous host<->device copies). Idempotent: a
// second call is ok. Returns InvalidArgument when a different allocator is already
// registered for CUDA. It succeeds on a machine without a GPU too: allocating then fails
// with an error naming the device, and host-only programs are unaffected.
Status register_cuda_allocator();

// Statistics of the warm pool of one device: the pool planrt creates for the stream-ordered
// temporaries of its CUDA code (or the device's default pool when that option is chosen).
struct CudaPoolStats {
  Device device = Device::cuda(0);
  bool pool_created = false;   // false: planrt has not used this device's pool yet (all 0)
  bool private_pool = true;    // false: the device's default pool (shared with the process)
  uint64_t release_threshold = 0;  // bytes the pool keeps across synchronizations
  uint64_t reserved_bytes = 0;     // memory the pool holds from the driver now
  uint64_t reserved_high_bytes = 0;
  uint64_t used_bytes = 0;         // memory handed out and not yet freed
  uint64_t used_high_bytes = 0;
  int64_t allocations = 0;  // successful stream-ordered allocations
  int64_t frees = 0;
  int64_t trims = 0;        // releases (the last user gone, or an explicit release)
  int64_t users = 0;        // live users (handles) of the pool now
};

// The statistics of `device`'s pool. A valid device whose pool planrt has not created yet
// reports pool_created = false and zeros. Errors: InvalidArgument for a device that is not
// CUDA or does not exist, NotSupported without a GPU.
Result<CudaPoolStats> cuda_pool_stats(Device device);

// Gives the memory `device`'s warm pool holds but nobody uses back to the driver now (what
// the pool's last user does when it goes), after waiting for planrt's own frees on that
// device, and trims the device's CUDA-graph memory. Memory in use is never released; the
// next allocations grow the pool again. A pool planrt never created: ok, nothing done.
// Errors: InvalidArgument for a device that is not CUDA or does not exist, NotSupported
// without a GPU, the CUDA error naming the device otherwise.
Status trim_cuda_pool(Device device);

// The device's own memory figures (cudaMemGetInfo): what every process and context on the
// device holds, not only planrt. Errors: InvalidArgument for a device that is not CUDA or
// does not exist, NotSupported without a GPU.
struct CudaDeviceMemory {
  Device device = Device::cuda(0);
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  uint64_t used_bytes() const { return total_bytes - free_bytes; }
};
Result<CudaDeviceMemory> cuda_device_memory(Device device);

}  // namespace planrt
