// linear and matmul: every product goes through OpenBLAS sgemm, f32.
#include <algorithm>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"

namespace planrt::kernels::cpu {
namespace {

// Appends `d` to `shape` unless the result would pass kMaxRank.
Status append_dim(std::string_view op, Shape& shape, int64_t d) {
  Status s = shape.push_back(d);
  if (s.ok()) return s;
  return s.with_context(std::string(op));
}

}  // namespace

Status linear(const OpAttrs&, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "linear";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  const TensorView bias = inputs.size() > 2 ? inputs[2] : TensorView::none();
  if (x.rank() < 1 || w.rank() != 2 || x.sizes.size(-1) != w.sizes[1] ||
      (!bias.is_none() && (bias.rank() != 1 || bias.sizes[0] != w.sizes[0]))) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: expected x [..., in], weight [out, in], bias [out]; got {}", op,
                      describe_inputs(op, inputs));
  }
  const int64_t k = w.sizes[1];
  const int64_t n = w.sizes[0];
  const int64_t m = drop_last(x.sizes, 1).numel();
  Shape expected = drop_last(x.sizes, 1);
  PLANRT_RETURN_IF_ERROR(append_dim(op, expected, n));
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], DType::F32, expected));
  PLANRT_RETURN_IF_ERROR(check_gemm_dims(op, m, n, k));
  if (m == 0 || n == 0) return {};

  float* y = outputs[0].data_as<float>();
  // The bias goes in first and sgemm accumulates onto it (beta = 1): one pass over y
  // instead of a second one after the product.
  if (!bias.is_none()) {
    const float* b = bias.data_as<const float>();
    for (int64_t i = 0; i < m; ++i) std::copy(b, b + n, y + i * n);
  }
  gemm_nt(m, n, k, 1.0f, x.data_as<const float>(), w.data_as<const float>(),
          bias.is_none() ? 0.0f : 1.0f, y);
  return {};
}

// torch.matmul: a 1-D operand is a row (a) or column (b) vector whose dim is dropped from
// the result; dims before the last two are batch dims and broadcast.
Status matmul(const OpAttrs&, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "matmul";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  if (a.rank() < 1 || b.rank() < 1) {
    return make_error(ErrorCode::InvalidArgument, "{}: both operands need rank >= 1; got {}", op,
                      describe_inputs(op, inputs));
  }
  const bool a_vec = a.rank() == 1;
  const bool b_vec = b.rank() == 1;
  const int64_t m = a_vec ? 1 : a.sizes.size(-2);
  const int64_t k = a.sizes.size(-1);
  const int64_t kb = b_vec ? b.sizes[0] : b.sizes.size(-2);
  const int64_t n = b_vec ? 1 : b.sizes.size(-1);
  if (k != kb) {
    return make_error(ErrorCode::InvalidArgument, "{}: inner dims differ ({} vs {}); got {}", op, k,
                      kb, describe_inputs(op, inputs));
  }
  const Shape a_batch = drop_last(a.sizes, a_vec ? 1 : 2);
  const Shape b_batch = drop_last(b.sizes, b_vec ? 1 : 2);
  PLANRT_ASSIGN_OR_RETURN(Shape batch, broadcast_shapes(op, a_batch, b_batch));
  Shape expected = batch;
  if (!a_vec) PLANRT_RETURN_IF_ERROR(append_dim(op, expected, m));
  if (!b_vec) PLANRT_RETURN_IF_ERROR(append_dim(op, expected, n));
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], DType::F32, expected));

  const float* pa = a.data_as<const float>();
  const float* pb = b.data_as<const float>();
  float* py = outputs[0].data_as<float>();
  const int64_t count = batch.numel();
  // One shared b and an unbroadcast a: the batch folds into the rows of a single product,
  // which BLAS runs far better than `count` small ones.
  if (b_batch.numel() == 1 && a_batch == batch) {
    PLANRT_RETURN_IF_ERROR(check_gemm_dims(op, count * m, n, k));
    gemm_nn(count * m, n, k, 1.0f, pa, pb, py);
    return {};
  }
  PLANRT_RETURN_IF_ERROR(check_gemm_dims(op, m, n, k));
  Shape sa = broadcast_strides(a_batch, batch);
  Shape sb = broadcast_strides(b_batch, batch);
  for (int d = 0; d < batch.rank(); ++d) {
    sa[d] *= m * k;
    sb[d] *= k * n;
  }
  int64_t y_offset = 0;
  for_each_index<2>(batch, {sa, sb}, [&](const std::array<int64_t, 2>& off) {
    gemm_nn(m, n, k, 1.0f, pa + off[0], pb + off[1], py + y_offset);
    y_offset += m * n;
  });
  return {};
}

}  // namespace planrt::kernels::cpu
