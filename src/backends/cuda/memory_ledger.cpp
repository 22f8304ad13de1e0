// The device-memory ledger: see include/planrt/backends/memory_ledger.h.
#include "planrt/backends/memory_ledger.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "backends/cuda/device_resources.h"
#include "planrt/backends/engine.h"
#include "planrt/platform/cuda.h"
#include "platform/cuda/cuda_allocator.h"
#include "platform/cuda/cuda_status.h"
#include "platform/cuda/device_guard.h"

namespace planrt {

Result<DeviceMemoryLedger> device_memory_ledger(Device device, uint64_t baseline_used_bytes) {
  if (device.type != DeviceType::CUDA) {
    return make_error(ErrorCode::InvalidArgument, "the device-memory ledger is for CUDA devices, not {}",
                      to_string(device));
  }
  PLANRT_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::set(device.index));
  DeviceMemoryLedger l;
  l.device = device;
  l.baseline_used_bytes = baseline_used_bytes;

  // The weights' allocations, not only the constants they hold: a packed allocation keeps
  // the bytes of released constants until its last one goes (backends/cuda/weight_cache.h).
  const uint64_t weights = backends::weight_cache().allocated_bytes_on(device.index);
  const uint64_t constants = backends::weight_cache().resident_bytes_on(device.index);
  PLANRT_ASSIGN_OR_RETURN(EngineScratchStats scratch, engine_scratch_stats(device));
  const uint64_t allocated = cuda::cuda_allocator().live_bytes(device);
  const uint64_t arenas = allocated - std::min(allocated, weights + scratch.private_scratch_bytes);
  PLANRT_ASSIGN_OR_RETURN(CudaPoolStats pool, cuda_pool_stats(device));
  unsigned long long graph_bytes = 0;  // the attribute's value type (cuuint64_t)
  PLANRT_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetGraphMemAttribute(device.index, cudaGraphMemAttrReservedMemCurrent, &graph_bytes),
      "reading the device's graph memory", device.index);

  l.lines.push_back({"weights", weights,
                     fmt::format("program constants uploaded to the device ({} bytes of constants in use)",
                                 constants)});
  l.lines.push_back({"arenas", arenas,
                     "planned buffers of loaded methods (planned delegate scratch included) and the "
                     "kernels' error records"});
  l.lines.push_back({"engine scratch", scratch.private_scratch_bytes,
                     fmt::format("{} private engine context(s)", scratch.private_contexts)});
  l.lines.push_back({"scratch pool", scratch.pool_capacity_bytes,
                     fmt::format("the shared engine scratch pool ({} pooled context(s))", scratch.pooled_contexts)});
  l.lines.push_back({"warm pool", pool.reserved_bytes,
                     fmt::format("reserved by the cuda backend's warm pool; in use {}, high-water {}, "
                                 "{} allocation(s)", pool.used_bytes, pool.used_high_bytes, pool.allocations)});
  const backends::LibraryHandles handles = backends::library_handles(device.index);
  l.lines.push_back({"library handles", handles.bytes,
                     fmt::format("what creating the live handles added: {} cuBLAS, {} cuDNN", handles.cublas,
                                 handles.cudnn)});
  l.lines.push_back({"CUDA graphs", static_cast<uint64_t>(graph_bytes), "graph allocations' reserved memory"});

  PLANRT_ASSIGN_OR_RETURN(CudaDeviceMemory now, cuda_device_memory(device));
  l.used_bytes = now.used_bytes();
  return l;
}

}  // namespace planrt
