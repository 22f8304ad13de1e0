// linear and matmul through cuBLAS, f32 (TF32 only when the handle's math mode allows it).
#include "kernels/cpu/blas.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.h"

namespace planrt::kernels::cuda {
namespace {

Status append_dim(std::string_view op, Shape& shape, int64_t d) {
  Status s = shape.push_back(d);
  if (s.ok()) return s;
  return s.with_context(std::string(op));
}

}  // namespace

Status linear(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> inputs,
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
                      cpu::describe_inputs(op, inputs));
  }
  const int64_t k = w.sizes[1];
  const int64_t n = w.sizes[0];
  const int64_t m = cpu::drop_last(x.sizes, 1).numel();
  Shape expected = cpu::drop_last(x.sizes, 1);
  PLANRT_RETURN_IF_ERROR(append_dim(op, expected, n));
  PLANRT_RETURN_IF_ERROR(cpu::check_output(op, inputs, outputs[0], DType::F32, expected));
  PLANRT_RETURN_IF_ERROR(cpu::check_gemm_dims(op, m, n, k));
  if (m == 0 || n == 0) return {};

  float* y = outputs[0].data_as<float>();
  // As on the CPU: the bias goes in first and the GEMM accumulates onto it (beta = 1).
  if (!bias.is_none()) {
    PLANRT_RETURN_IF_ERROR(cuda_status(
        op, "kernel launch",
        launch::fill_rows(bias.data_as<const float>(), y, m, n, ctx.stream)));
  }
  return gemm_strided(op, ctx, BLayout::NK, m, n, k, 1.0f, x.data_as<const float>(), 0,
                      w.data_as<const float>(), 0, bias.is_none() ? 0.0f : 1.0f, y, m * n, 1);
}

// torch.matmul: a 1-D operand is a row (a) or column (b) vector whose dim is dropped from
// the result; dims before the last two are batch dims and broadcast.
Status matmul(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "matmul";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  if (a.rank() < 1 || b.rank() < 1) {
    return make_error(ErrorCode::InvalidArgument, "{}: both operands need rank >= 1; got {}", op,
                      cpu::describe_inputs(op, inputs));
  }
  const bool a_vec = a.rank() == 1;
  const bool b_vec = b.rank() == 1;
  const int64_t m = a_vec ? 1 : a.sizes.size(-2);
  const int64_t k = a.sizes.size(-1);
  const int64_t kb = b_vec ? b.sizes[0] : b.sizes.size(-2);
  const int64_t n = b_vec ? 1 : b.sizes.size(-1);
  if (k != kb) {
    return make_error(ErrorCode::InvalidArgument, "{}: inner dims differ ({} vs {}); got {}", op, k,
                      kb, cpu::describe_inputs(op, inputs));
  }
  const Shape a_batch = cpu::drop_last(a.sizes, a_vec ? 1 : 2);
  const Shape b_batch = cpu::drop_last(b.sizes, b_vec ? 1 : 2);
  PLANRT_ASSIGN_OR_RETURN(Shape batch, cpu::broadcast_shapes(op, a_batch, b_batch));
  Shape expected = batch;
  if (!a_vec) PLANRT_RETURN_IF_ERROR(append_dim(op, expected, m));
  if (!b_vec) PLANRT_RETURN_IF_ERROR(append_dim(op, expected, n));
  PLANRT_RETURN_IF_ERROR(cpu::check_output(op, inputs, outputs[0], DType::F32, expected));

  const float* pa = a.data_as<const float>();
  const float* pb = b.data_as<const float>();
  float* py = outputs[0].data_as<float>();
  const int64_t count = batch.numel();
  // One shared b and an unbroadcast a: the batch folds into the rows of one product.
  if (b_batch.numel() == 1 && a_batch == batch) {
    return gemm_strided(op, ctx, BLayout::KN, count * m, n, k, 1.0f, pa, 0, pb, 0, 0.0f, py,
                        count * m * n, 1);
  }
  // Each operand either fully batched or one matrix for all: one strided-batched call.
  const bool a_uniform = a_batch == batch || a_batch.numel() == 1;
  const bool b_uniform = b_batch == batch || b_batch.numel() == 1;
  if ((a_uniform && b_uniform) || k == 0 || count == 0 || m == 0 || n == 0) {
    return gemm_strided(op, ctx, BLayout::KN, m, n, k, 1.0f, pa, a_batch == batch ? m * k : 0,
                        pb, b_batch == batch ? k * n : 0, 0.0f, py, m * n, count);
  }
  // Mixed broadcasting ([2, 1] with [1, 3]): per-product pointers, computed on the device
  // into temporary memory so that nothing waits on the host.
  PLANRT_RETURN_IF_ERROR(cpu::check_gemm_dims(op, m, n, k));
  PLANRT_RETURN_IF_ERROR(cpu::check_blas_dim(op, "batch count", count));
  launch::IndexMap map;
  map.rank = batch.rank();
  const Shape sa = cpu::broadcast_strides(a_batch, batch);
  const Shape sb = cpu::broadcast_strides(b_batch, batch);
  for (int d = 0; d < batch.rank(); ++d) {
    map.size[d] = batch[d];
    map.stride_a[d] = sa[d] * m * k;
    map.stride_b[d] = sb[d] * k * n;
  }
  TempBuffer pointers(ctx);
  PLANRT_RETURN_IF_ERROR(
      pointers.allocate(op, static_cast<size_t>(3 * count) * sizeof(float*)));
  auto** base = static_cast<float**>(pointers.get());
  const float** a_ptrs = const_cast<const float**>(base);
  const float** b_ptrs = const_cast<const float**>(base + count);
  float** y_ptrs = base + 2 * count;
  PLANRT_RETURN_IF_ERROR(cuda_status(op, "kernel launch",
                                     launch::gemm_pointers(pa, pb, py, m * n, count, map, a_ptrs,
                                                           b_ptrs, y_ptrs, ctx.stream)));
  PLANRT_RETURN_IF_ERROR(gemm_pointer_batched(op, ctx, m, n, k, a_ptrs, b_ptrs, y_ptrs, count));
  return pointers.release();
}

}  // namespace planrt::kernels::cuda
