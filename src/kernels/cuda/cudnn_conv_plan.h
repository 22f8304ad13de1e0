// One convolution shape as a cuDNN execution plan (the backend "graph" API of cuDNN 9),
// built once per shape and handle and then only executed.
//
// Why not the legacy cudnnConvolutionForward: in cuDNN 9 it is a wrapper that builds an
// operation graph and finalizes engine configs on every call. Measured on an H200 with
// cuDNN 9.14 (API log of resnet50 at batch 1): ~15 engine-config and ~3.6 graph
// finalizations per call, a host cost that made the 53 convolutions of one forward take
// 13.4 ms against 2.2 ms replayed from a CUDA graph (docs/performance.md).
//
// The plan: tensors x [N, C, H, W], w [K, C / groups, KH, KW], y [N, K, OH, OW], NCHW-packed,
// or channels-last (x and y NHWC, w KRSC): the dims stay in that order, the one cuDNN's
// descriptors name them in, and only the strides give the memory order (as cuDNN's frontend
// samples describe NHWC convolutions); cuDNN's heuristic ranking (mode A); the first engine
// config whose notes suit the math (f32 without TF32: no tensor-core or down-converting
// engines; no engine that compiles at run time while a precompiled one fits) and whose
// execution plan finalizes with a workspace within `workspace_budget`. Pads are symmetric
// here (vision.cpp copies asymmetric ones). An engine that cannot take the layout or the
// channel counts is either left out of the ranking or fails to finalize, and the next is
// tried; when none is left the plan is NotSupported, its message naming dtype and layout.
//
// Ownership: a plan owns its cuDNN descriptors and is bound to the handle it was made with;
// the handle's cache (ConvPlanCache, held by CudnnHandle) owns the plans and is destroyed
// before the handle. Thread safety: the cache is safe from any thread; executing a plan uses
// its handle, so the caller serializes it as it serializes the handle.
#pragma once

#include <cudnn.h>

#include <memory>
#include <tuple>

#include "kernels/cuda/cudnn_backend.h"
#include "planrt/core/dtype.h"
#include "planrt/core/result.h"

namespace planrt::kernels::cuda {

struct CudnnLibrary;

// What decides the plan: the shapes, the window, the layout, the dtype and math, the
// workspace budget.
struct ConvPlanKey {
  int64_t n = 0, c = 0, h = 0, w = 0, k = 0, kh = 0, kw = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1, groups = 1;
  int64_t oh = 0, ow = 0;
  // x and y NHWC, w [K, KH, KW, C / groups] (KRSC); else all three NCHW-packed.
  bool channels_last = false;
  DType dtype = DType::F32;
  bool allow_tf32 = false;
  uint64_t workspace_budget = 0;

  auto tied() const {
    return std::tie(n, c, h, w, k, kh, kw, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups, oh, ow,
                    channels_last, dtype, allow_tf32, workspace_budget);
  }
  bool operator<(const ConvPlanKey& o) const { return tied() < o.tied(); }
};

class CudnnConvPlan {
 public:
  static Result<std::unique_ptr<CudnnConvPlan>> create(const CudnnLibrary& lib, cudnnHandle_t handle,
                                                       const ConvPlanKey& key);
  CudnnConvPlan(const CudnnConvPlan&) = delete;
  CudnnConvPlan& operator=(const CudnnConvPlan&) = delete;

  uint64_t workspace_bytes() const { return static_cast<uint64_t>(plan_.workspace_bytes); }
  // y = conv(x, w) on the handle's stream; `workspace` holds workspace_bytes() (may be null
  // when that is 0).
  Status execute(cudnnHandle_t handle, const void* x, const void* w, void* y, void* workspace) const;

 private:
  CudnnConvPlan() = default;
  const CudnnLibrary* lib_ = nullptr;
  FinalizedPlan plan_;  // owns the plan descriptor
};

// A handle's convolution plans (cudnn_backend.h: PlanCache).
using ConvPlanCache = PlanCache<ConvPlanKey, CudnnConvPlan>;

}  // namespace planrt::kernels::cuda
