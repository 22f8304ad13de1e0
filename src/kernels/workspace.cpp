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

Result<AttentionWorkspace> attention_workspace(const AttentionPlan& plan, DType dtype) {
  AttentionWorkspace ws;
  ws.fused = attention_runs_fused(plan);
  if (ws.fused || dtype == DType::BF16) return ws;
  if (plan.heads == 0 || plan.sq == 0 || plan.dv == 0 || plan.sk == 0) return ws;
  if (plan.sq > std::numeric_limits<int64_t>::max() / int64_t{sizeof(float)} / plan.sk) {
    return make_error(ErrorCode::OutOfMemory,
                      "scaled_dot_product_attention: a score matrix of {} x {} floats overflows",
                      plan.sq, plan.sk);
  }
  const int64_t head_bytes = plan.sq * plan.sk * int64_t{sizeof(float)};
  ws.head_group = attention_head_group(plan.heads, head_bytes);
  ws.bytes = static_cast<uint64_t>(ws.head_group * head_bytes);
  return ws;
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
    PLANRT_ASSIGN_OR_RETURN(AttentionWorkspace ws, attention_workspace(p, inputs[0].dtype));
    return ws.bytes;
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
