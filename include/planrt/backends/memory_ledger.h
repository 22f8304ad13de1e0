// The device-memory ledger (issue 19; docs/design.md §7): every device byte planrt holds on one
// CUDA device, named by owner, beside what cudaMemGetInfo measures, so that the named lines
// plus the remainder equal the measured delta. Available in CUDA builds only; nothing here
// includes a CUDA header.
//
//   uint64_t before = cuda_device_memory(Device::cuda(0))->used_bytes();   // planrt/platform/cuda.h
//   ... load and run methods ...
//   DeviceMemoryLedger l = *device_memory_ledger(Device::cuda(0), before);
//
// Lines (process-wide on the device: every live method and program, not one method):
//   weights          the allocations holding program constants on the device (shared by
//                    every segment; a packed allocation counts whole until its last
//                    constant goes)
//   arenas           planned buffers of loaded methods (a planned delegate scratch among
//                    them) and the kernels' small error records: what planrt's CUDA
//                    allocator has handed out, less the weights and private engine scratch
//   engine scratch   private engine contexts' scratch
//   scratch pool     the shared engine scratch pool's buffer
//   warm pool        what the cuda backend's warm pool holds from the driver (its use and
//                    high-water in the detail); 0 when every segment's scratch is planned
//   library handles  what creating the live cuBLAS and cuDNN handles added (cudaMemGetInfo
//                    around each creation: the libraries do not report it); the detail ends
//                    with the live handles of each: "..., N cuBLAS, M cuDNN"
//   CUDA graphs      memory the device's graph allocations hold
// remainder = (used now - `baseline_used_bytes`) - the lines: kernel images loaded on first
// launch, streams and events, the driver's own bookkeeping, and anything else in the process
// that allocated on the device after the baseline (another library, another thread). The
// baseline is the caller's: device used before planrt's work began.
//
// Errors: InvalidArgument for a device that is not CUDA; the CUDA error naming the device
// when it cannot be queried. Thread safety: may be called from any thread at any time; the
// figures are read one after another, so work in flight meanwhile can shift the remainder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planrt/core/device.h"
#include "planrt/core/result.h"

namespace planrt {

struct DeviceMemoryLine {
  std::string name;
  uint64_t bytes = 0;
  std::string detail;  // what it holds now, for a reader
};

struct DeviceMemoryLedger {
  Device device = Device::cuda(0);
  uint64_t baseline_used_bytes = 0;  // the caller's
  uint64_t used_bytes = 0;           // cudaMemGetInfo's used, now
  std::vector<DeviceMemoryLine> lines;

  int64_t measured_bytes() const {
    return static_cast<int64_t>(used_bytes) - static_cast<int64_t>(baseline_used_bytes);
  }
  uint64_t named_bytes() const {
    uint64_t n = 0;
    for (const DeviceMemoryLine& l : lines) n += l.bytes;
    return n;
  }
  int64_t remainder_bytes() const { return measured_bytes() - static_cast<int64_t>(named_bytes()); }
};

Result<DeviceMemoryLedger> device_memory_ledger(Device device, uint64_t baseline_used_bytes);

}  // namespace planrt
