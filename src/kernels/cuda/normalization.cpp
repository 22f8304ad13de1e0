// layer_norm and rms_norm over the last dim, softmax over any dim, f32: one block per row
// (warp-shuffle reductions); softmax along a middle dim walks one line per thread.
#include "kernels/cpu/broadcast.h"
#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.h"

namespace planrt::kernels::cuda {
namespace {

// The CPU kernel's check_norm: x [..., N], optional per-feature vectors [N].
Status check_norm(std::string_view op, std::span<const TensorView> inputs,
                  std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  const TensorView& x = inputs[0];
  if (x.rank() < 1) {
    return make_error(ErrorCode::InvalidArgument, "{}: x needs rank >= 1; got {}", op,
                      cpu::describe_inputs(op, inputs));
  }
  for (size_t i = 1; i < inputs.size(); ++i) {
    const TensorView& v = inputs[i];
    if (v.is_none()) continue;
    if (v.rank() != 1 || v.sizes[0] != x.sizes.size(-1)) {
      return make_error(ErrorCode::InvalidArgument,
                        "{}: {} must be [{}] to match the last dim of x; got {}", op,
                        cpu::input_role(op, i), x.sizes.size(-1),
                        cpu::describe_inputs(op, inputs));
    }
  }
  return cpu::check_output(op, inputs, outputs[0], DType::F32, x.sizes);
}

const float* optional_data(std::span<const TensorView> inputs, size_t i) {
  return i < inputs.size() && !inputs[i].is_none() ? inputs[i].data_as<const float>() : nullptr;
}

}  // namespace

Status layer_norm(const CudaKernelContext& ctx, const OpAttrs& attrs,
                  std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "layer_norm";
  PLANRT_RETURN_IF_ERROR(check_norm(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(double eps, cpu::with_op(op, attrs.get_float("eps", 1e-5)));
  const TensorView& x = inputs[0];
  const int64_t n = x.sizes.size(-1);
  if (n == 0) return {};
  return cuda_status(op, "kernel launch",
                     launch::layer_norm(x.data_as<const float>(), optional_data(inputs, 1),
                                        optional_data(inputs, 2), outputs[0].data_as<float>(),
                                        x.numel() / n, n, eps, ctx.stream));
}

Status rms_norm(const CudaKernelContext& ctx, const OpAttrs& attrs,
                std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "rms_norm";
  PLANRT_RETURN_IF_ERROR(check_norm(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(double eps, cpu::with_op(op, attrs.get_float("eps", 1e-6)));
  const TensorView& x = inputs[0];
  const int64_t n = x.sizes.size(-1);
  if (n == 0) return {};
  return cuda_status(op, "kernel launch",
                     launch::rms_norm(x.data_as<const float>(), optional_data(inputs, 1),
                                      outputs[0].data_as<float>(), x.numel() / n, n, eps,
                                      ctx.stream));
}

Status softmax(const CudaKernelContext& ctx, const OpAttrs& attrs,
               std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "softmax";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  const TensorView& x = inputs[0];
  PLANRT_RETURN_IF_ERROR(cpu::check_output(op, inputs, outputs[0], DType::F32, x.sizes));
  PLANRT_ASSIGN_OR_RETURN(int64_t dim_attr, cpu::with_op(op, attrs.get_int("dim", -1)));
  PLANRT_ASSIGN_OR_RETURN(int dim, cpu::normalize_dim(op, "dim", dim_attr, x.rank()));
  if (x.numel() == 0) return {};
  const int64_t n = x.rank() == 0 ? 1 : x.sizes[dim];
  const int64_t inner = x.rank() == 0 ? 1 : contiguous_strides(x.sizes)[dim];
  const int64_t outer = x.numel() / (n * inner);
  const float* px = x.data_as<const float>();
  float* py = outputs[0].data_as<float>();
  if (inner == 1) {
    return cuda_status(op, "kernel launch",
                       launch::softmax_rows(px, py, outer, n, 0, ctx.stream));
  }
  return cuda_status(op, "kernel launch",
                     launch::softmax_strided(px, py, outer, n, inner, ctx.stream));
}

}  // namespace planrt::kernels::cuda
