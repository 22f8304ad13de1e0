// scaled_dot_product_attention, f32: per (batch, head), scores = scale * q @ k^T (sgemm),
// an optional causal mask, a row softmax, then scores @ v (sgemm). The [Sq, Sk] score
// matrix is heap scratch reused across heads; its allocation failing is OutOfMemory.
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/softmax_row.h"

namespace planrt::kernels::cpu {

// Attributes: causal (bool, default false; PyTorch's is_causal) masks key j for query i
// when j > i, aligned top-left as PyTorch does when Sq != Sk. scale (float) defaults to
// 1 / sqrt(D). Shapes: q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] with equal leading
// dims (usually [B, H]); the output is [..., Sq, Dv].
Status scaled_dot_product_attention(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                    std::span<const TensorView> outputs) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  const TensorView& q = inputs[0];
  const TensorView& k = inputs[1];
  const TensorView& v = inputs[2];
  if (q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank() ||
      drop_last(k.sizes, 2) != drop_last(q.sizes, 2) ||
      drop_last(v.sizes, 2) != drop_last(q.sizes, 2) || k.sizes.size(-1) != q.sizes.size(-1) ||
      v.sizes.size(-2) != k.sizes.size(-2)) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: expected q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] with equal "
                      "leading dims; got {}",
                      op, describe_inputs(op, inputs));
  }
  const int64_t sq = q.sizes.size(-2);
  const int64_t sk = k.sizes.size(-2);
  const int64_t d = q.sizes.size(-1);
  const int64_t dv = v.sizes.size(-1);
  Shape expected = q.sizes;
  expected[expected.rank() - 1] = dv;
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], DType::F32, expected));
  PLANRT_ASSIGN_OR_RETURN(bool causal, with_op(op, attrs.get_bool("causal", false)));
  PLANRT_ASSIGN_OR_RETURN(double scale,
                          with_op(op, attrs.get_float("scale", 1.0 / std::sqrt(double(d)))));
  PLANRT_RETURN_IF_ERROR(check_gemm_dims(op, sq, sk, d));
  PLANRT_RETURN_IF_ERROR(check_gemm_dims(op, sq, dv, sk));

  const int64_t heads = drop_last(q.sizes, 2).numel();
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
    const float* qh = q.data_as<const float>() + h * sq * d;
    const float* kh = k.data_as<const float>() + h * sk * d;
    const float* vh = v.data_as<const float>() + h * sk * dv;
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
