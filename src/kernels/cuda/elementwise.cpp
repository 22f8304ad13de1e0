// add, sub, mul, div (broadcasting by index math on the device) and relu, silu, gelu, f32.
#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.h"
#include "kernels/op_plans.h"
#include "kernels/operands.h"

namespace planrt::kernels::cuda {
namespace {

Status binary(std::string_view op, launch::BinaryOp kind, const CudaKernelContext& ctx,
              std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  const TensorView& out = outputs[0];
  PLANRT_ASSIGN_OR_RETURN(Shape shape, plan_binary(op, inputs, outputs));
  const int64_t n = out.numel();
  if (n == 0) return {};
  const float* pa = a.data_as<const float>();
  const float* pb = b.data_as<const float>();
  float* py = out.data_as<float>();
  if (a.sizes == shape && b.sizes == shape) {
    return cuda_status(op, "kernel launch",
                       launch::binary_same_shape(kind, pa, pb, py, n, ctx.stream));
  }
  launch::IndexMap map;
  map.rank = shape.rank();
  const Shape sa = broadcast_strides(a.sizes, shape);
  const Shape sb = broadcast_strides(b.sizes, shape);
  for (int d = 0; d < shape.rank(); ++d) {
    map.size[d] = shape[d];
    map.stride_a[d] = sa[d];
    map.stride_b[d] = sb[d];
  }
  return cuda_status(op, "kernel launch",
                     launch::binary_broadcast(kind, pa, pb, py, n, map, ctx.stream));
}

Status unary(std::string_view op, launch::UnaryOp kind, const CudaKernelContext& ctx,
             std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_RETURN_IF_ERROR(plan_unary(op, inputs, outputs));
  return cuda_status(op, "kernel launch",
                     launch::unary(kind, inputs[0].data_as<const float>(),
                                   outputs[0].data_as<float>(), inputs[0].numel(), ctx.stream));
}

}  // namespace

Status add(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> in,
           std::span<const TensorView> out) {
  return binary("add", launch::BinaryOp::Add, ctx, in, out);
}
Status sub(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> in,
           std::span<const TensorView> out) {
  return binary("sub", launch::BinaryOp::Sub, ctx, in, out);
}
Status mul(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> in,
           std::span<const TensorView> out) {
  return binary("mul", launch::BinaryOp::Mul, ctx, in, out);
}
Status div(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> in,
           std::span<const TensorView> out) {
  return binary("div", launch::BinaryOp::Div, ctx, in, out);
}
Status relu(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> in,
            std::span<const TensorView> out) {
  return unary("relu", launch::UnaryOp::Relu, ctx, in, out);
}
Status silu(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> in,
            std::span<const TensorView> out) {
  return unary("silu", launch::UnaryOp::Silu, ctx, in, out);
}

Status gelu(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> in,
            std::span<const TensorView> out) {
  PLANRT_ASSIGN_OR_RETURN(GeluApproximation mode, plan_gelu(attrs));
  return unary("gelu",
               mode == GeluApproximation::None ? launch::UnaryOp::GeluErf
                                               : launch::UnaryOp::GeluTanh,
               ctx, in, out);
}

}  // namespace planrt::kernels::cuda
