// Device resources the CUDA-running backends (cuda, engine) share per device: uploaded
// weights and the cuBLAS handle. Private to src/backends.
//
// - weight_cache(): program constants resident on a device (backends/cuda/weight_cache.h).
// - shared_cublas(device, tf32): one cuBLAS handle per (device, TF32 mode): a handle holds
//   tens of MiB of device memory (docs/design.md §7 has the figure), so a handle per
//   segment made a model of many delegates pay it once per delegate. A handle
//   must not be used from two threads at once: hold `mu` from the first enqueue through the
//   last. The handle goes, with its memory, when the last user does.
// Thread safety: both may be used from any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <tuple>

#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cudnn_library.h"
#include "planrt/backends/cuda.h"
#include "backends/cuda/weight_cache.h"
#include "planrt/core/result.h"
#include "platform/cuda/cuda_allocator.h"

namespace planrt::backends {


// The device's math-library handles: cuBLAS, and cuDNN once a segment with a convolution or
// attention cuDNN may run asks (open_cudnn_for), both used under `mu`.
struct SharedCublas {
  std::mutex mu;
  kernels::cuda::CublasHandle handle;
  bool allow_tf32 = false;
  kernels::cuda::CudnnHandle cudnn;  // empty until ensure_cudnn
  int device = 0;
  // Device memory each handle's creation added (cudaMemGetInfo around the call: the
  // libraries do not say; another thread allocating meanwhile would be counted too).
  // Atomics, so the ledger reads them without the handle's lock (a long run holds it).
  std::atomic<uint64_t> cublas_bytes{0};
  std::atomic<uint64_t> cudnn_bytes{0};
  std::atomic<bool> cudnn_open{false};  // `cudnn` made, for readers without the lock
};

// The live handles of `device`: how many of each, and what they took when they were made
// (the ledger's line).
struct LibraryHandles {
  uint64_t bytes = 0;
  int cublas = 0;
  int cudnn = 0;
};
LibraryHandles library_handles(int device);

// The current device must be `device` (the handle binds to it).
Result<std::shared_ptr<SharedCublas>> shared_cublas(int device, bool allow_tf32);

// Opens cuDNN (the first time in the process) and makes the device's handle, unless made;
// the current device must be the handles' device. NotSupported naming libcudnn when it is
// absent: only methods with a CUDA convolution need it.
Status ensure_cudnn(SharedCublas& shared);

// What a graph's ops want of cuDNN: a convolution needs it (ensure_cudnn's error otherwise);
// bf16 or f16 attention without a causal mask runs on it where it can be had (the kernel falls back
// to planrt's own attention, so a missing cuDNN is only logged).
struct CudnnUse {
  bool convolution = false;
  bool bf16_attention = false;  // bf16 or f16 (the 16-bit attention)
};
Status open_cudnn_for(SharedCublas& shared, CudnnUse use);

}  // namespace planrt::backends
