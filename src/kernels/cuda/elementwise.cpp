// add, sub, mul, div, pow (broadcasting by index math on the device) and the unary ops, f32,
// f16 and bf16 (one dtype for all operands). Integer operands of add, sub, mul, div, pow and neg
// take the family's integer forms instead (typed_elementwise.cpp).
#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/float_types.h"
#include "kernels/cuda/launch.h"
#include "kernels/op_plans.h"
#include "kernels/operands.h"

namespace planrt::kernels::cuda {
namespace {

template <typename T>
Status binary_typed(std::string_view op, launch::BinaryOp kind, const CudaKernelContext& ctx,
                    const Shape& shape, std::span<const TensorView> inputs,
                    std::span<const TensorView> outputs) {
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  const int64_t n = outputs[0].numel();
  if (n == 0) return {};
  const T* pa = a.data_as<const T>();
  const T* pb = b.data_as<const T>();
  T* py = outputs[0].data_as<T>();
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

// i32, i64 or u8 among the inputs: the integer form runs the call. A mix with a float goes
// there too, whose plan refuses it by the family's one-dtype rule ("cast one"), which says
// more than this path's "supports f32, f16 and bf16" would.
bool has_integer_input(std::span<const TensorView> inputs) {
  for (const TensorView& in : inputs) {
    if (!in.is_none() && is_integer(in.dtype)) return true;
  }
  return false;
}

Status binary(std::string_view op, launch::BinaryOp kind, CudaKernelFn integer_form,
              const CudaKernelContext& ctx, const OpAttrs& attrs,
              std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  if (has_integer_input(inputs)) return integer_form(ctx, attrs, inputs, outputs);
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_float_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(Shape shape, plan_binary(op, inputs, outputs));
  return with_float_type(dtype, [&](auto t) {
    return binary_typed<typename decltype(t)::type>(op, kind, ctx, shape, inputs, outputs);
  });
}

Status unary(std::string_view op, launch::UnaryOp kind, const CudaKernelContext& ctx,
             std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_float_inputs(op, inputs));
  PLANRT_RETURN_IF_ERROR(plan_unary(op, inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& y = outputs[0];
  const cudaError_t err = with_float_type(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    return launch::unary(kind, x.data_as<const T>(), y.data_as<T>(), x.numel(), ctx.stream);
  });
  return cuda_status(op, "kernel launch", err);
}

}  // namespace

Status add(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> in,
           std::span<const TensorView> out) {
  return binary("add", launch::BinaryOp::Add, integer_add, ctx, attrs, in, out);
}
Status sub(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> in,
           std::span<const TensorView> out) {
  return binary("sub", launch::BinaryOp::Sub, integer_sub, ctx, attrs, in, out);
}
Status mul(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> in,
           std::span<const TensorView> out) {
  return binary("mul", launch::BinaryOp::Mul, integer_mul, ctx, attrs, in, out);
}
Status div(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> in,
           std::span<const TensorView> out) {
  return binary("div", launch::BinaryOp::Div, integer_div, ctx, attrs, in, out);
}
Status power(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> in,
           std::span<const TensorView> out) {
  return binary("pow", launch::BinaryOp::Pow, integer_pow, ctx, attrs, in, out);
}
Status unary_neg(const CudaKernelContext& ctx, const OpAttrs& attrs,
                 std::span<const TensorView> in, std::span<const TensorView> out) {
  if (has_integer_input(in)) return integer_neg(ctx, attrs, in, out);
  return unary("neg", launch::UnaryOp::Neg, ctx, in, out);
}

#define PLANRT_CUDA_UNARY(op, kind)                                                        \
  Status unary_##op(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> in, \
                    std::span<const TensorView> out) {                                       \
    return unary(#op, launch::UnaryOp::kind, ctx, in, out);                                  \
  }
PLANRT_CUDA_UNARY(sqrt, Sqrt)
PLANRT_CUDA_UNARY(exp, Exp)
PLANRT_CUDA_UNARY(erf, Erf)
PLANRT_CUDA_UNARY(tanh, Tanh)
PLANRT_CUDA_UNARY(sigmoid, Sigmoid)
#undef PLANRT_CUDA_UNARY

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
