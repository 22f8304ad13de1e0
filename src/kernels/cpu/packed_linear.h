// A CPU `linear` whose weight is a constant, prepared once at load: the weight [N, K] is
// reordered into oneDNN's blocked layout for its matmul (brgemm) kernels, and each call runs
// y = x @ W^T + bias as one oneDNN matmul with the bias fused. The plain kernel
// (kernels/cpu/linear_algebra.cpp) multiplies the weight as stored, transposed; blocked, the
// products at small row counts run ~2x faster on AVX-512 (docs/performance.md, the CPU).
//
// Memory: the blocked copy, packed_bytes() of it (about the weight's size), is placed at
// create() in the method's PackedWeightArena (weight_arena.h: huge pages), which this object
// keeps alive, or, with no arena, allocated by oneDNN and owned here; the runtime counts it in
// the method's memory report; the stored weight is no longer read after create(). Per row count M the matmul is
// created on first use and kept (at most kMaxShapes; then created per call); oneDNN's
// scratchpad is user-managed, per calling thread.
//
// Thread safety: run() may be called from several threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>

#include "kernels/cpu/prepared_kernel.h"
#include "kernels/cpu/weight_arena.h"
#include "planrt/core/result.h"
#include "planrt/core/tensor_view.h"

namespace planrt::kernels::cpu {

class PackedLinear final : public PreparedKernel {
 public:
  // weight: f32 [N, K], contiguous, read only during the call. NotSupported when the weight
  // is not such a matrix or oneDNN has no blocked kernel for it (callers then keep the plain
  // kernel); OutOfMemory when the copy cannot be allocated.
  static Result<std::unique_ptr<PackedLinear>> create(const TensorView& weight,
                                                      std::shared_ptr<PackedWeightArena> arena = nullptr);
  ~PackedLinear();
  PackedLinear(const PackedLinear&) = delete;
  PackedLinear& operator=(const PackedLinear&) = delete;

  // The linear op's contract (inputs x [.., K], weight, optional bias [N]; output [.., N]),
  // with the weight input ignored in favour of the packed copy; its shape must still be the
  // packed one.
  // attrs: the fused activation (op_plans.h, plan_linear_activation), run as oneDNN post-ops.
  Status run(const OpAttrs& attrs, std::span<const TensorView> inputs,
             std::span<const TensorView> outputs) const override;
  using PreparedKernel::run;

  uint64_t packed_bytes() const override;
  int64_t out_features() const { return n_; }
  int64_t in_features() const { return k_; }

  struct State;

 private:
  PackedLinear(int64_t n, int64_t k, std::unique_ptr<State> state);
  int64_t n_, k_;
  std::unique_ptr<State> state_;
};

}  // namespace planrt::kernels::cpu
