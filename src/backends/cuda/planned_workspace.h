// PlannedWorkspace: the CudaTempMemory that hands a kernel the workspace planned for its
// step (kernels/workspace.h sizes it, planning/engine_scratch.h places it in a scratch):
// one region, carved in call order, never freed. Used by the CUDA engine runner and by cuda
// segments whose scratch is planned (Graph.scratch_operand). A request beyond the region is
// Internal (the plan and the kernel disagree), never an allocation. Not thread-safe: one
// step of one call at a time.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_kernel.h"

namespace planrt::backends {

class PlannedWorkspace final : public kernels::cuda::CudaTempMemory {
 public:
  // The next step's region (`base` null when it has none).
  void reset(uint8_t* base, uint64_t bytes) {
    base_ = base;
    bytes_ = bytes;
    used_ = 0;
  }
  Result<void*> allocate(size_t bytes, cudaStream_t) override {
    // The plan holds exactly what kernels::cuda_workspace_bytes says (the sum of the
    // kernel's requests); later requests start aligned, the last may end unaligned.
    if (base_ == nullptr || used_ > bytes_ || bytes > bytes_ - used_) {
      return make_error(ErrorCode::Internal,
                        "the kernel asked for {} bytes of workspace beyond the {} planned for it",
                        bytes, bytes_ - std::min(used_, bytes_));
    }
    void* p = base_ + used_;
    used_ += (bytes + 255) / 256 * 256;
    return p;
  }
  Status deallocate(void*, size_t, cudaStream_t) override { return {}; }

 private:
  uint8_t* base_ = nullptr;
  uint64_t bytes_ = 0;
  uint64_t used_ = 0;
};

}  // namespace planrt::backends
