#include "backends/cuda/device_resources.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cudnn_attention_plan.h"
#include "planrt/core/log.h"
#include "platform/cuda/cuda_allocator.h"

namespace planrt::backends {
namespace {

// Device memory in use now on the current device (0 if CUDA cannot say).
uint64_t used_now() {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return total_b - free_b;
}

uint64_t added_since(uint64_t before) {
  const uint64_t now = used_now();
  return now > before ? now - before : 0;
}

struct HandleRegistry {
  std::mutex mu;
  std::map<std::pair<int, bool>, std::weak_ptr<SharedCublas>> handles;
};

HandleRegistry& handle_registry() {
  static HandleRegistry* registry = new HandleRegistry();  // never destroyed, as the cache
  return *registry;
}

}  // namespace

// The current device must be `device` (the handle binds to it).
Result<std::shared_ptr<SharedCublas>> shared_cublas(int device, bool allow_tf32) {
  HandleRegistry& r = handle_registry();
  std::lock_guard lock(r.mu);
  std::weak_ptr<SharedCublas>& slot = r.handles[{device, allow_tf32}];
  if (std::shared_ptr<SharedCublas> live = slot.lock()) return live;
  const uint64_t before = used_now();
  PLANRT_ASSIGN_OR_RETURN(kernels::cuda::CublasHandle handle,
                          kernels::cuda::CublasHandle::create(kernels::cuda::CublasOptions{allow_tf32}));
  auto shared = std::make_shared<SharedCublas>();
  shared->handle = std::move(handle);
  shared->allow_tf32 = allow_tf32;
  shared->device = device;
  shared->cublas_bytes = added_since(before);
  slot = shared;
  return shared;
}

Status ensure_cudnn(SharedCublas& shared) {
  std::lock_guard lock(shared.mu);
  if (shared.cudnn.get() != nullptr) return {};
  const uint64_t before = used_now();
  PLANRT_ASSIGN_OR_RETURN(shared.cudnn, kernels::cuda::CudnnHandle::create(shared.allow_tf32));
  shared.cudnn_bytes = added_since(before);
  shared.cudnn_open = true;
  return {};
}

Status open_cudnn_for(SharedCublas& shared, CudnnUse use) {
  if (use.convolution) return ensure_cudnn(shared);
  if (!use.bf16_attention || !kernels::cuda::kCudnnFusedAttentionBuilt) return {};
  if (Status s = ensure_cudnn(shared); !s.ok()) {
    PLANRT_LOG_INFO("bf16 and f16 attention run planrt's kernel on cuda:{}: {}", shared.device, s.to_string());
  }
  return {};
}

LibraryHandles library_handles(int device) {
  HandleRegistry& r = handle_registry();
  std::lock_guard lock(r.mu);
  LibraryHandles handles;
  for (const auto& [key, weak] : r.handles) {
    if (key.first != device) continue;
    if (std::shared_ptr<SharedCublas> live = weak.lock()) {
      // cudnn_open before the bytes: ensure_cudnn stores the bytes first, so a handle counted
      // here has its bytes counted too.
      if (live->cudnn_open.load()) ++handles.cudnn;
      ++handles.cublas;
      handles.bytes += live->cublas_bytes.load() + live->cudnn_bytes.load();
    }
  }
  return handles;
}

}  // namespace planrt::backends
