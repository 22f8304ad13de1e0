// linear and matmul: every product goes through oneDNN's sgemm (kernels/cpu/blas.h), f32.
#include <algorithm>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cpu {

Status linear(const OpAttrs& attrs, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "linear";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(LinearPlan plan, plan_linear(inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(LinearActivation activation, plan_linear_activation(attrs));
  const auto [m, n, k] = plan;
  PLANRT_RETURN_IF_ERROR(check_gemm_dims(op, m, n, k));
  if (m == 0 || n == 0) return {};

  const TensorView bias = inputs.size() > 2 ? inputs[2] : TensorView::none();
  float* y = outputs[0].data_as<float>();
  // The bias goes in first and sgemm accumulates onto it (beta = 1): one pass over y
  // instead of a second one after the product.
  if (!bias.is_none()) {
    const float* b = bias.data_as<const float>();
    for (int64_t i = 0; i < m; ++i) std::copy(b, b + n, y + i * n);
  }
  PLANRT_RETURN_IF_ERROR(gemm_nt(m, n, k, 1.0f, inputs[0].data_as<const float>(), k,
                                 inputs[1].data_as<const float>(), k, bias.is_none() ? 0.0f : 1.0f, y, n));
  return activate_in_place(activation, y, m * n);
}

Status matmul(const OpAttrs&, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "matmul";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(MatmulPlan plan, plan_matmul(inputs, outputs));
  const auto& [m, n, k, a_batch, b_batch, batch] = plan;
  const float* pa = inputs[0].data_as<const float>();
  const float* pb = inputs[1].data_as<const float>();
  float* py = outputs[0].data_as<float>();
  const int64_t count = batch.numel();
  // One shared b and an unbroadcast a: the batch folds into the rows of a single product,
  // which BLAS runs far better than `count` small ones.
  if (b_batch.numel() == 1 && a_batch == batch) {
    PLANRT_RETURN_IF_ERROR(check_gemm_dims(op, count * m, n, k));
    return gemm_nn(count * m, n, k, 1.0f, pa, k, pb, n, 0.0f, py, n);
  }
  PLANRT_RETURN_IF_ERROR(check_gemm_dims(op, m, n, k));
  Shape sa = broadcast_strides(a_batch, batch);
  Shape sb = broadcast_strides(b_batch, batch);
  for (int d = 0; d < batch.rank(); ++d) {
    sa[d] *= m * k;
    sb[d] *= k * n;
  }
  int64_t y_offset = 0;
  Status status;
  // Explicit copies: clang 14 (the fuzz build, scripts/fuzz.sh) cannot capture structured
  // bindings, a C++20 addition it lacks.
  for_each_index<2>(batch, {sa, sb}, [&, m = m, n = n, k = k](const std::array<int64_t, 2>& off) {
    if (status.ok()) status = gemm_nn(m, n, k, 1.0f, pa + off[0], k, pb + off[1], n, 0.0f, py + y_offset, n);
    y_offset += m * n;
  });
  return status;
}

}  // namespace planrt::kernels::cpu
