// scaled_dot_product_attention, f32: per (batch, head), scores = scale * q @ k^T (sgemm),
// an optional causal mask, a row softmax, then scores @ v (sgemm). The [Sq, Sk] score
// matrix is heap scratch reused across heads; its allocation failing is OutOfMemory.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/softmax_row.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cpu {

Status scaled_dot_product_attention(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                    std::span<const TensorView> outputs) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(AttentionPlan plan, plan_attention(attrs, inputs, outputs));
  // `fused` concerns the CUDA kernel only: this one works a head at a time either way.
  const auto [heads, sq, sk, d, dv, causal, scale, fused] = plan;
  PLANRT_RETURN_IF_ERROR(check_gemm_dims(op, sq, sk, d));
  PLANRT_RETURN_IF_ERROR(check_gemm_dims(op, sq, dv, sk));

  float* out = outputs[0].data_as<float>();
  if (heads == 0 || sq == 0 || dv == 0) return {};
  if (sk == 0) {  // softmax over no keys weighs nothing: the weighted sum is empty
    std::fill(out, out + outputs[0].numel(), 0.0f);
    return {};
  }
  if (sq > std::numeric_limits<int64_t>::max() / int64_t{sizeof(float)} / sk) {
    return make_error(ErrorCode::OutOfMemory, "{}: a score matrix of {} x {} floats overflows", op,
                      sq, sk);
  }
  std::unique_ptr<float[]> scores(new (std::nothrow) float[static_cast<size_t>(sq * sk)]);
  if (scores == nullptr) {
    return make_error(ErrorCode::OutOfMemory, "{}: cannot allocate {} bytes of score scratch", op,
                      sq * sk * int64_t{sizeof(float)});
  }
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  for (int64_t h = 0; h < heads; ++h) {
    const float* qh = inputs[0].data_as<const float>() + h * sq * d;
    const float* kh = inputs[1].data_as<const float>() + h * sk * d;
    const float* vh = inputs[2].data_as<const float>() + h * sk * dv;
    gemm_nt(sq, sk, d, static_cast<float>(scale), qh, kh, 0.0f, scores.get());
    for (int64_t i = 0; i < sq; ++i) {
      float* row = scores.get() + i * sk;
      if (causal) {
        for (int64_t j = i + 1; j < sk; ++j) row[j] = kMasked;
      }
      softmax_line(row, row, sk, 1);
    }
    gemm_nn(sq, dv, sk, 1.0f, scores.get(), vh, out + h * sq * dv);
  }
  return {};
}

}  // namespace planrt::kernels::cpu
