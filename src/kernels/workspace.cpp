#include "kernels/workspace.h"

#include <algorithm>
#include <limits>

#include "kernels/op_plans.h"

namespace planrt::kernels {

bool attention_runs_fused(const AttentionPlan& plan) {
  return plan.fused && plan.d == 64 && plan.dv == 64;
}

int64_t attention_head_group(int64_t heads, int64_t head_bytes) {
  if (head_bytes <= 0) return std::max<int64_t>(1, heads);
  return std::max<int64_t>(1, std::min(heads, kScoreBudget / head_bytes));
}

bool matmul_needs_pointer_arrays(int64_t m, int64_t n, int64_t k, const Shape& a_batch,
                                 const Shape& b_batch, const Shape& batch) {
  const int64_t count = batch.numel();
  if (b_batch.numel() == 1 && a_batch == batch) return false;  // folds into one product
  const bool a_uniform = a_batch == batch || a_batch.numel() == 1;
  const bool b_uniform = b_batch == batch || b_batch.numel() == 1;
  return !((a_uniform && b_uniform) || k == 0 || count == 0 || m == 0 || n == 0);
}

Result<uint64_t> cuda_workspace_bytes(std::string_view op, const OpAttrs& attrs,
                                      std::span<const TensorView> inputs,
                                      std::span<const TensorView> outputs) {
  if (op == "scaled_dot_product_attention") {
    PLANRT_ASSIGN_OR_RETURN(AttentionPlan p, plan_attention(attrs, inputs, outputs));
    if (p.heads == 0 || p.sq == 0 || p.dv == 0 || p.sk == 0) return uint64_t{0};
    if (attention_runs_fused(p)) return uint64_t{0};
    // bf16 runs fused only; the kernel refuses the rest before asking for anything.
    if (inputs[0].dtype == DType::BF16) return uint64_t{0};
    if (p.sq > std::numeric_limits<int64_t>::max() / int64_t{sizeof(float)} / p.sk) {
      return make_error(ErrorCode::OutOfMemory, "{}: a score matrix of {} x {} floats overflows",
                        op, p.sq, p.sk);
    }
    const int64_t head_bytes = p.sq * p.sk * int64_t{sizeof(float)};
    return static_cast<uint64_t>(attention_head_group(p.heads, head_bytes) * head_bytes);
  }
  if (op == "matmul") {
    PLANRT_ASSIGN_OR_RETURN(MatmulPlan p, plan_matmul(inputs, outputs));
    if (!matmul_needs_pointer_arrays(p.m, p.n, p.k, p.a_batch, p.b_batch, p.batch)) {
      return uint64_t{0};
    }
    return static_cast<uint64_t>(3 * p.batch.numel()) * sizeof(float*);
  }
  return uint64_t{0};
}

}  // namespace planrt::kernels
