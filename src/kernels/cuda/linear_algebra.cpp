// linear and matmul through cuBLAS, f32 (TF32 only when the handle's math mode allows it),
// bf16 and f16 (f32 accumulation).
#include "kernels/cpu/blas.h"
#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/float_types.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/launch.h"
#include "kernels/op_plans.h"
#include "kernels/workspace.h"
#include "kernels/operands.h"

namespace planrt::kernels::cuda {

Status linear(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "linear";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_float_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(LinearPlan plan, plan_linear(inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(LinearActivation activation, plan_linear_activation(attrs));
  if (activation != LinearActivation::None) {
    // The builder fuses activations into host linears only (builder/rewrite.h).
    return make_error(ErrorCode::NotSupported, "{}: a fused activation ({}) runs on the host only; keep the "
                      "activation as its own node on a GPU", op, linear_activation_name(activation));
  }
  const auto [m, n, k] = plan;
  PLANRT_RETURN_IF_ERROR(cpu::check_gemm_dims(op, m, n, k));
  if (m == 0 || n == 0) return {};

  const TensorView bias = inputs.size() > 2 ? inputs[2] : TensorView::none();
  void* y = outputs[0].data;
  // One cuBLASLt call, the bias in its epilogue, its algorithm timed on the first call of the
  // shape (gemm_lt.h), with the workspace the plan gave it (none without ctx.temp).
  TempBuffer workspace(ctx);
  const uint64_t workspace_bytes = ctx.temp != nullptr ? linear_cuda_workspace_bytes(m, n, k) : 0;
  if (workspace_bytes > 0) PLANRT_RETURN_IF_ERROR(workspace.allocate(op, workspace_bytes));
  const LtProduct product{dtype, m, n, k, inputs[0].data, inputs[1].data,
                          bias.is_none() ? nullptr : bias.data, y};
  PLANRT_ASSIGN_OR_RETURN(bool done,
                          gemm_nk_lt(op, ctx, product, workspace.get(), workspace_bytes));
  PLANRT_RETURN_IF_ERROR(workspace.release());
  if (done) return {};
  // Else, as on the CPU: the bias goes in first and the GEMM accumulates onto it (beta = 1).
  if (!bias.is_none()) {
    // (plan's fields: clang before 16 captures no structured binding in a lambda.)
    const cudaError_t err = with_float_type(dtype, [&](auto t) {
      using T = typename decltype(t)::type;
      return launch::fill_rows(bias.data_as<const T>(), static_cast<T*>(y), plan.m, plan.n, ctx.stream);
    });
    PLANRT_RETURN_IF_ERROR(cuda_status(op, "kernel launch", err));
  }
  return gemm_strided(op, ctx, BLayout::NK, dtype, m, n, k, 1.0f, inputs[0].data, 0,
                      inputs[1].data, 0, bias.is_none() ? 0.0f : 1.0f, y, m * n, 1);
}

Status matmul(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "matmul";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_float_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(MatmulPlan plan, plan_matmul(inputs, outputs));
  const auto& [m, n, k, a_batch, b_batch, batch] = plan;
  const void* pa = inputs[0].data;
  const void* pb = inputs[1].data;
  void* py = outputs[0].data;
  const int64_t count = batch.numel();
  // One shared b and an unbroadcast a: the batch folds into the rows of one product.
  // (Which path runs decides the workspace, so the test is shared with cuda_workspace_bytes.)
  const bool pointer_arrays = matmul_needs_pointer_arrays(m, n, k, a_batch, b_batch, batch);
  if (b_batch.numel() == 1 && a_batch == batch) {
    return gemm_strided(op, ctx, BLayout::KN, dtype, count * m, n, k, 1.0f, pa, 0, pb, 0, 0.0f,
                        py, count * m * n, 1);
  }
  // Each operand either fully batched or one matrix for all: one strided-batched call.
  if (!pointer_arrays) {
    return gemm_strided(op, ctx, BLayout::KN, dtype, m, n, k, 1.0f, pa,
                        a_batch == batch ? m * k : 0, pb, b_batch == batch ? k * n : 0, 0.0f, py,
                        m * n, count);
  }
  // Mixed broadcasting ([2, 1] with [1, 3]): per-product pointers, computed on the device
  // into temporary memory so that nothing waits on the host.
  PLANRT_RETURN_IF_ERROR(cpu::check_gemm_dims(op, m, n, k));
  PLANRT_RETURN_IF_ERROR(cpu::check_blas_dim(op, "batch count", count));
  launch::IndexMap map;
  map.rank = batch.rank();
  const Shape sa = broadcast_strides(a_batch, batch);
  const Shape sb = broadcast_strides(b_batch, batch);
  for (int d = 0; d < batch.rank(); ++d) {
    map.size[d] = batch[d];
    map.stride_a[d] = sa[d] * m * k;
    map.stride_b[d] = sb[d] * k * n;
  }
  TempBuffer pointers(ctx);
  PLANRT_RETURN_IF_ERROR(
      pointers.allocate(op, static_cast<size_t>(3 * count) * sizeof(void*)));
  auto** base = static_cast<void**>(pointers.get());
  const void** a_ptrs = const_cast<const void**>(base);
  const void** b_ptrs = const_cast<const void**>(base + count);
  void** y_ptrs = base + 2 * count;
  PLANRT_RETURN_IF_ERROR(cuda_status(
      op, "kernel launch",
      launch::gemm_pointers(pa, pb, py, element_size(dtype), m * n, count, map, a_ptrs, b_ptrs,
                            y_ptrs, ctx.stream)));
  PLANRT_RETURN_IF_ERROR(
      gemm_pointer_batched(op, ctx, dtype, m, n, k, a_ptrs, b_ptrs, y_ptrs, count));
  return pointers.release();
}

}  // namespace planrt::kernels::cuda
