// The reductions (reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod), argmax and
// argmin over f32, f16 and bf16, and cumsum over f32, f16, bf16, i32 and i64 (kernels/op_plans.h has
// their meaning; the CPU kernels of kernels/cpu/reductions.cpp are the reference). The
// device code is math_kernels.cu's (the folds) and reduce_kernels.cu's (the rest).
#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/float_types.h"
#include "kernels/cuda/launch.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;
using f16 = __half;

launch::ReduceOp launch_op(ReduceFn fn) {
  switch (fn) {
    case ReduceFn::Sum:
      return launch::ReduceOp::Sum;
    case ReduceFn::Mean:
      return launch::ReduceOp::Mean;
    case ReduceFn::Max:
      return launch::ReduceOp::Max;
    case ReduceFn::Min:
      return launch::ReduceOp::Min;
    case ReduceFn::Prod:
      return launch::ReduceOp::Prod;
  }
  return launch::ReduceOp::Sum;  // unreachable: every ReduceFn is listed
}

Status reduce(std::string_view op, const CudaKernelContext& ctx, const OpAttrs& attrs,
              std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_float_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(ReducePlan plan, plan_reduce(op, attrs, inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& y = outputs[0];
  const launch::ReduceOp fn = launch_op(plan.fn);
  const cudaError_t err = with_float_type(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    return launch::reduce(fn, x.data_as<const T>(), y.data_as<T>(), plan.outer, plan.n, plan.inner,
                          ctx.stream);
  });
  return cuda_status(op, "kernel launch", err);
}

Status arg_reduce(std::string_view op, const CudaKernelContext& ctx, const OpAttrs& attrs,
                  std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_float_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(ArgReducePlan plan, plan_arg_reduce(op, attrs, inputs, outputs));
  const TensorView& x = inputs[0];
  auto* y = outputs[0].data_as<int64_t>();
  const cudaError_t err = with_float_type(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    return launch::arg_reduce(x.data_as<const T>(), y, plan.outer, plan.n, plan.inner, plan.max,
                              plan.select_last, ctx.stream);
  });
  return cuda_status(op, "kernel launch", err);
}

template <typename T>
cudaError_t launch_cumsum(const CumsumPlan& plan, const TensorView& x, const TensorView& y,
                          cudaStream_t stream) {
  return launch::cumsum(x.data_as<const T>(), y.data_as<T>(), plan.outer, plan.n, plan.inner,
                        plan.exclusive, plan.reverse, stream);
}

}  // namespace

#define PLANRT_CUDA_REDUCTION(name)                                                          \
  Status name(const CudaKernelContext& ctx, const OpAttrs& attrs,                            \
              std::span<const TensorView> inputs, std::span<const TensorView> outputs) {     \
    return reduce(#name, ctx, attrs, inputs, outputs);                                       \
  }
PLANRT_CUDA_REDUCTION(reduce_sum)
PLANRT_CUDA_REDUCTION(reduce_mean)
PLANRT_CUDA_REDUCTION(reduce_max)
PLANRT_CUDA_REDUCTION(reduce_min)
PLANRT_CUDA_REDUCTION(reduce_prod)
#undef PLANRT_CUDA_REDUCTION

Status argmax(const CudaKernelContext& ctx, const OpAttrs& attrs,
              std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  return arg_reduce("argmax", ctx, attrs, inputs, outputs);
}

Status argmin(const CudaKernelContext& ctx, const OpAttrs& attrs,
              std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  return arg_reduce("argmin", ctx, attrs, inputs, outputs);
}

Status cumsum(const CudaKernelContext& ctx, const OpAttrs& attrs,
              std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "cumsum";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& y = outputs[0];
  // The dtypes the builder's table gives CUDA (kernels/dtype_support.cpp), checked before the
  // plan so that an unsupported x is named as such rather than as an output mismatch.
  if (x.dtype != DType::F32 && x.dtype != DType::F16 && x.dtype != DType::BF16 &&
      x.dtype != DType::I32 && x.dtype != DType::I64) {
    return make_error(ErrorCode::NotSupported,
                      "{}: x has dtype {}; the CUDA kernel supports f32, f16, bf16, i32 and i64", op,
                      dtype_name(x.dtype));
  }
  PLANRT_ASSIGN_OR_RETURN(CumsumPlan plan, plan_cumsum(attrs, inputs, outputs));
  cudaError_t err = cudaSuccess;
  switch (x.dtype) {
    case DType::BF16:
      err = launch_cumsum<bf16>(plan, x, y, ctx.stream);
      break;
    case DType::F16:
      err = launch_cumsum<f16>(plan, x, y, ctx.stream);
      break;
    case DType::I32:
      err = launch_cumsum<int32_t>(plan, x, y, ctx.stream);
      break;
    case DType::I64:
      err = launch_cumsum<int64_t>(plan, x, y, ctx.stream);
      break;
    default:
      err = launch_cumsum<float>(plan, x, y, ctx.stream);
      break;
  }
  return cuda_status(op, "kernel launch", err);
}

}  // namespace planrt::kernels::cuda
