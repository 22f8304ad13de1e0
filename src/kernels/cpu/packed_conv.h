// A CPU conv2d whose weight is a constant, prepared once at load with oneDNN's convolution.
//
// Why: oneDNN runs NCHW convolutions as im2col + GEMM (~50–100 GFLOP/s on one AVX-512 core of
// the development machine) but channels-last ones with its brgemm kernels (~150–200), and
// depthwise ones 10x faster (docs/performance.md). A channels-last program (layout "nhwc",
// the builder's rewrite, builder/layout.h) hands x and y over where they lie; for an NCHW one
// each call reorders x into channels-last, convolves with the bias and the activation fused,
// and reorders the result back, both copies in the planned workspace output
// (kernels/workspace.h: conv2d_host_workspace_bytes_per_image). oneDNN's own scratchpad
// comes from the same workspace; a convolution whose scratchpad does not fit there, or for
// which oneDNN offers only its reference implementation (far slower than im2col + sgemm),
// runs the plain kernel instead (convolution.cpp).
//
// Winograd: a 3x3 convolution of stride 1 (one group, no dilation) may also run as oneDNN's
// Winograd convolution, F(2x2, 3x3) or F(4x4, 3x3): 1.4–2x faster than the direct one on
// large images of few channels, slower on small images of many (docs/performance.md). At load
// the weight is also packed in each Winograd layout oneDNN picks at batch 1 and at the
// method's largest batch, where that layout's weights are no larger than the images of one
// call (memory bounded by the activations' scale) and its blocked copies and scratchpad fit
// the planned workspace (which the build sizes for the batch-1 one, kernels/workspace.h).
// The first call at a batch size and thread count that can run more than one runs each
// three times and keeps the fastest for that key. Rounding: within 2-3x of the direct
// convolution's (a few 1e-7 relative, measured against float64).
// PLANRT_CPU_WINOGRAD=0 packs no Winograd layout.
//
// Memory: the weight reordered into oneDNN's blocked layout, packed_bytes(), placed in the
// method's PackedWeightArena (weight_arena.h), kept alive here, or owned here without one. Per
// batch size the convolution is created on first use and kept (at most kMaxShapes), with the
// memory objects a call binds its operands to (a few idle sets, reused by later calls).
// Thread safety: run() may be called from several threads at once; each call holds its own
// set of bindings while it runs.
#pragma once

#include <memory>

#include "kernels/cpu/prepared_kernel.h"
#include "kernels/cpu/weight_arena.h"
#include "kernels/op_plans.h"
#include "planrt/core/result.h"

namespace planrt::kernels::cpu {

class PackedConv final : public PreparedKernel {
 public:
  // `plan`: the call's plan at any batch size (plan_conv2d); `weight`: f32
  // [K, C/groups, KH, KW], contiguous, read only during the call. NotSupported when oneDNN
  // has no such convolution (callers keep the plain kernel); OutOfMemory when the copy
  // cannot be allocated.
  // `attrs`: the instruction's, kept for the plain kernel's fallback.
  // `max_batch`: the largest batch the method runs (for the Winograd layouts, below).
  static Result<std::unique_ptr<PackedConv>> create(const OpAttrs& attrs, const Conv2dPlan& plan,
                                                    const TensorView& weight,
                                                    std::shared_ptr<PackedWeightArena> arena = nullptr,
                                                    int64_t max_batch = 1);
  ~PackedConv() override;
  PackedConv(const PackedConv&) = delete;
  PackedConv& operator=(const PackedConv&) = delete;

  // conv2d's contract, weight operand ignored; x's channels and image size, the kernel and
  // its attributes must be the prepared ones (the batch may differ).
  Status run(const OpAttrs& attrs, std::span<const TensorView> inputs,
             std::span<const TensorView> outputs) const override;
  using PreparedKernel::run;
  uint64_t packed_bytes() const override;
  // How many Winograd weight layouts were packed (0: the convolution is always direct).
  size_t winograd_layouts() const;

  struct State;

 private:
  PackedConv(const OpAttrs& attrs, const Conv2dPlan& plan, std::unique_ptr<State> state);
  OpAttrs attrs_;
  Conv2dPlan plan_;
  std::unique_ptr<State> state_;
};

// What oneDNN's Winograd convolution of `plan` at batch 1 needs in the workspace (blocked
// copies of x and y, its scratchpad), 0 where it has none for this shape on this CPU
// (kernels/workspace.h sizes a host convolution's workspace to hold it). Never throws.
uint64_t winograd_workspace_bytes_per_image(const Conv2dPlan& plan);

}  // namespace planrt::kernels::cpu
