// scaled_dot_product_attention, f32: scores = scale * q @ k^T (strided-batched GEMM over
// the heads), softmax of each score row with the optional causal mask (one kernel, in
// place), then scores @ v (strided-batched GEMM). Scores live in temporary memory, at most
// kScoreBudget bytes at a time: heads are processed in groups that fit (one head at least).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.h"

namespace planrt::kernels::cuda {
namespace {

constexpr int64_t kScoreBudget = int64_t{256} << 20;

}  // namespace

// The CPU kernel's contract: q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] with equal
// leading dims; causal masks key j for query i when j > i (top-left, as PyTorch's
// is_causal); scale defaults to 1 / sqrt(D).
Status scaled_dot_product_attention(const CudaKernelContext& ctx, const OpAttrs& attrs,
                                    std::span<const TensorView> inputs,
                                    std::span<const TensorView> outputs) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  const TensorView& q = inputs[0];
  const TensorView& k = inputs[1];
  const TensorView& v = inputs[2];
  if (q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank() ||
      cpu::drop_last(k.sizes, 2) != cpu::drop_last(q.sizes, 2) ||
      cpu::drop_last(v.sizes, 2) != cpu::drop_last(q.sizes, 2) ||
      k.sizes.size(-1) != q.sizes.size(-1) || v.sizes.size(-2) != k.sizes.size(-2)) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: expected q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] with equal "
                      "leading dims; got {}",
                      op, cpu::describe_inputs(op, inputs));
  }
  const int64_t sq = q.sizes.size(-2);
  const int64_t sk = k.sizes.size(-2);
  const int64_t d = q.sizes.size(-1);
  const int64_t dv = v.sizes.size(-1);
  Shape expected = q.sizes;
  expected[expected.rank() - 1] = dv;
  PLANRT_RETURN_IF_ERROR(cpu::check_output(op, inputs, outputs[0], DType::F32, expected));
  PLANRT_ASSIGN_OR_RETURN(bool causal, cpu::with_op(op, attrs.get_bool("causal", false)));
  PLANRT_ASSIGN_OR_RETURN(double scale, cpu::with_op(op, attrs.get_float(
                                                             "scale", 1.0 / std::sqrt(double(d)))));
  PLANRT_RETURN_IF_ERROR(cpu::check_gemm_dims(op, sq, sk, d));
  PLANRT_RETURN_IF_ERROR(cpu::check_gemm_dims(op, sq, dv, sk));

  const int64_t heads = cpu::drop_last(q.sizes, 2).numel();
  float* out = outputs[0].data_as<float>();
  if (heads == 0 || sq == 0 || dv == 0) return {};
  if (sk == 0) {  // softmax over no keys weighs nothing: the weighted sum is empty
    return cuda_status(op, "cudaMemsetAsync",
                       cudaMemsetAsync(out, 0, outputs[0].nbytes(), ctx.stream));
  }
  if (sq > std::numeric_limits<int64_t>::max() / int64_t{sizeof(float)} / sk) {
    return make_error(ErrorCode::OutOfMemory, "{}: a score matrix of {} x {} floats overflows", op,
                      sq, sk);
  }
  const int64_t head_bytes = sq * sk * int64_t{sizeof(float)};
  const int64_t group = std::max<int64_t>(1, std::min(heads, kScoreBudget / head_bytes));
  TempBuffer scores(ctx);
  PLANRT_RETURN_IF_ERROR(scores.allocate(op, static_cast<size_t>(group * head_bytes)));
  auto* s = static_cast<float*>(scores.get());
  const float* pq = q.data_as<const float>();
  const float* pk = k.data_as<const float>();
  const float* pv = v.data_as<const float>();
  for (int64_t h = 0; h < heads; h += group) {
    const int64_t count = std::min(group, heads - h);
    PLANRT_RETURN_IF_ERROR(gemm_strided(op, ctx, BLayout::NK, sq, sk, d,
                                        static_cast<float>(scale), pq + h * sq * d, sq * d,
                                        pk + h * sk * d, sk * d, 0.0f, s, sq * sk, count));
    PLANRT_RETURN_IF_ERROR(cuda_status(
        op, "kernel launch",
        launch::softmax_rows(s, s, count * sq, sk, causal ? sq : 0, ctx.stream)));
    PLANRT_RETURN_IF_ERROR(gemm_strided(op, ctx, BLayout::KN, sq, dv, sk, 1.0f, s, sq * sk,
                                        pv + h * sk * dv, sk * dv, 0.0f, out + h * sq * dv,
                                        sq * dv, count));
  }
  return scores.release();
}

}  // namespace planrt::kernels::cuda
