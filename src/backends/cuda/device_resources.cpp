#include "backends/cuda/device_resources.h"

#include "platform/cuda/cuda_allocator.h"

namespace planrt::backends {

WeightCache& weight_cache() {
  static WeightCache* cache = new WeightCache();  // never destroyed: handles may outlive statics
  return *cache;
}

// The current device must be `device` (the handle binds to it).
Result<std::shared_ptr<SharedCublas>> shared_cublas(int device, bool allow_tf32) {
  static std::mutex registry_mu;
  static std::map<std::pair<int, bool>, std::weak_ptr<SharedCublas>> registry;
  std::lock_guard lock(registry_mu);
  std::weak_ptr<SharedCublas>& slot = registry[{device, allow_tf32}];
  if (std::shared_ptr<SharedCublas> live = slot.lock()) return live;
  PLANRT_ASSIGN_OR_RETURN(kernels::cuda::CublasHandle handle,
                          kernels::cuda::CublasHandle::create(kernels::cuda::CublasOptions{allow_tf32}));
  auto shared = std::make_shared<SharedCublas>();
  shared->handle = std::move(handle);
  shared->allow_tf32 = allow_tf32;
  slot = shared;
  return shared;
}

Status ensure_cudnn(SharedCublas& shared) {
  std::lock_guard lock(shared.mu);
  if (shared.cudnn.get() != nullptr) return {};
  PLANRT_ASSIGN_OR_RETURN(shared.cudnn, kernels::cuda::CudnnHandle::create(shared.allow_tf32));
  return {};
}

}  // namespace planrt::backends
