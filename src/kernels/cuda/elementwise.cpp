// add, sub, mul, div (broadcasting by index math on the device) and relu, silu, gelu, f32.
#include "kernels/cpu/broadcast.h"
#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.h"

namespace planrt::kernels::cuda {
namespace {

Status binary(std::string_view op, launch::BinaryOp kind, const CudaKernelContext& ctx,
              std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  const TensorView& out = outputs[0];
  PLANRT_ASSIGN_OR_RETURN(Shape shape, cpu::broadcast_shapes(op, a.sizes, b.sizes));
  PLANRT_RETURN_IF_ERROR(cpu::check_output(op, inputs, out, DType::F32, shape));
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
  const Shape sa = cpu::broadcast_strides(a.sizes, shape);
  const Shape sb = cpu::broadcast_strides(b.sizes, shape);
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
  PLANRT_RETURN_IF_ERROR(
      cpu::check_output(op, inputs, outputs[0], DType::F32, inputs[0].sizes));
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
  constexpr std::string_view op = "gelu";
  // Not PLANRT_ASSIGN_OR_RETURN: GCC 12 misreports the moved-out string as uninitialized.
  Result<std::string> approximate = cpu::with_op(op, attrs.get_string("approximate", "none"));
  if (!approximate.ok()) return approximate.status();
  const std::string& mode = *approximate;
  if (mode == "none") return unary(op, launch::UnaryOp::GeluErf, ctx, in, out);
  if (mode == "tanh") return unary(op, launch::UnaryOp::GeluTanh, ctx, in, out);
  return make_error(ErrorCode::InvalidArgument, "{}: approximate = '{}', expected 'none' or 'tanh'",
                    op, mode);
}

}  // namespace planrt::kernels::cuda
