// Scaled dot-product attention as one cuDNN execution plan: cuDNN's fused attention
// operation (CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, cuDNN 9.13 and later), built once
// per shape and handle and then only executed.
//
// Why: on Hopper cuDNN's attention engines run the tensor cores' warpgroup instructions, which
// planrt's own bf16 kernel (attention_bf16_kernels.cu, mma.sync) does not; at S = 2048 of the
// 12-block encoder the attention was half of planrt's bf16 forward and cuDNN's was a quarter
// of PyTorch's (docs/performance.md, issue 18).
//
// What it takes: bf16 or f16 q [B, H, Sq, D], k [B, H, Sk, D], v [B, H, Sk, Dv], out [B, H, Sq, Dv]
// in any strides with rows contiguous (the layouts of kernels/attention_layout.h: each
// operand's batch, head and row strides), operands 16-byte aligned, a scale passed by value,
// no mask. Causal attention needs a score-modifier subgraph that this operation takes only
// from cuDNN 9.21; it stays on planrt's kernel. Workspace: at most `workspace_budget` bytes
// (attention plans none, so 0: an engine that wants more is not used).
//
// When cuDNN cannot: an older cuDNN has no such operation, and an engine may refuse a shape;
// create() is then NotSupported, the cache remembers it (cudnn_backend.h: PlanCache), and the
// caller runs planrt's kernel. The engines compile at run time (NVRTC), so a plan's first
// creation takes time; it happens on the first call of a shape, outside any CUDA graph
// capture (graph_replay.cpp runs a segment once before capturing it).
//
// Ownership and thread safety: as for the convolution plans (cudnn_conv_plan.h).
#pragma once

#include <cudnn.h>

#include <memory>
#include <tuple>

#include "kernels/cuda/cudnn_backend.h"
#include "planrt/core/dtype.h"
#include "planrt/core/result.h"

namespace planrt::kernels::cuda {

// Whether this build can make the fused attention operation at all (its descriptor came
// with cuDNN 9.13's headers): without it nothing opens cuDNN for attention.
inline constexpr bool kCudnnFusedAttentionBuilt = CUDNN_VERSION >= 91300;

struct CudnnLibrary;

// One operand's strides in elements (its rows are contiguous).
struct AttentionOperandStrides {
  int64_t batch = 0, head = 0, row = 0;
  auto tied() const { return std::tie(batch, head, row); }
  bool operator<(const AttentionOperandStrides& o) const { return tied() < o.tied(); }
};

struct AttentionPlanKey {
  int64_t batch = 0, heads = 0, sq = 0, sk = 0, d = 0, dv = 0;
  AttentionOperandStrides q, k, v, out;
  DType dtype = DType::BF16;
  uint64_t workspace_budget = 0;

  auto tied() const {
    return std::tie(batch, heads, sq, sk, d, dv, q, k, v, out, dtype, workspace_budget);
  }
  bool operator<(const AttentionPlanKey& o) const { return tied() < o.tied(); }
};

class CudnnAttentionPlan {
 public:
  static Result<std::unique_ptr<CudnnAttentionPlan>> create(const CudnnLibrary& lib, cudnnHandle_t handle,
                                                            const AttentionPlanKey& key);
  CudnnAttentionPlan(const CudnnAttentionPlan&) = delete;
  CudnnAttentionPlan& operator=(const CudnnAttentionPlan&) = delete;

  uint64_t workspace_bytes() const { return static_cast<uint64_t>(plan_.workspace_bytes); }
  // out = softmax(scale * q k^T) v on the handle's stream; each pointer is the operand's
  // element (0, 0, 0, 0). `workspace` holds workspace_bytes() (null when that is 0).
  Status execute(cudnnHandle_t handle, const void* q, const void* k, const void* v, void* out, float scale,
                 void* workspace) const;

 private:
  CudnnAttentionPlan() = default;
  const CudnnLibrary* lib_ = nullptr;
  FinalizedPlan plan_;  // owns the plan descriptor
};

// A handle's attention plans (cudnn_backend.h: PlanCache).
using AttentionPlanCache = PlanCache<AttentionPlanKey, CudnnAttentionPlan>;

}  // namespace planrt::kernels::cuda
