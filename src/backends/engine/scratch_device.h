// ScratchDevice: how the shared scratch pool (scratch_pool.h) gets memory on one device and
// orders the runs that share it. One per device, owned by the pool's slot for the process.
//
//   CPU:  host memory; runs are synchronous, so ordering is the device lock alone and
//         allocate/free are immediate.
//   CUDA: memory from a stream-ordered pool of the scratch's own (release threshold 0, so
//         a retired buffer goes back to the device at the next synchronization), allocated
//         and freed stream-ordered (cudaMallocFromPoolAsync / cudaFreeAsync), so a growth
//         never waits for other streams (no device-wide cudaFree); one handoff event per
//         device: a run's stream waits on it before using the buffer and records it after
//         its last enqueue.
#pragma once

#include <memory>

#include "planrt/core/result.h"

namespace planrt::engine {

class ScratchDevice {
 public:
  virtual ~ScratchDevice() = default;
  // Stream-ordered on `stream` (a null stream: the device's own ordering, synchronous).
  virtual Result<void*> allocate(uint64_t bytes, void* stream) = 0;
  virtual void free(void* ptr, uint64_t bytes, void* stream) = 0;
  // `stream` waits for every run that recorded the handoff before.
  virtual Status wait_handoff(void* stream) = 0;
  virtual Status record_handoff(void* stream) = 0;
  // The host waits for the last recorded run (for a trim).
  virtual Status synchronize_handoff() = 0;
  // True when `stream` is capturing a CUDA graph.
  virtual Result<bool> capturing(void* stream) = 0;
};

Result<std::unique_ptr<ScratchDevice>> make_scratch_device(Device device);

namespace detail {
Result<std::unique_ptr<ScratchDevice>> make_cuda_scratch_device(int device);  // cuda/
}

}  // namespace planrt::engine
