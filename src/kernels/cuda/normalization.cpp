// layer_norm and rms_norm over the last dim, softmax over any dim, f32: one block per row
// (warp-shuffle reductions); softmax along a middle dim walks one line per thread.
#include <vector>

#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cuda {
namespace {

const float* optional_data(std::span<const TensorView> inputs, size_t i) {
  return i < inputs.size() && !inputs[i].is_none() ? inputs[i].data_as<const float>() : nullptr;
}

}  // namespace

Status layer_norm(const CudaKernelContext& ctx, const OpAttrs& attrs,
                  std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "layer_norm";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(NormPlan plan, plan_layer_norm(attrs, inputs, outputs));
  if (plan.n == 0) return {};
  return cuda_status(op, "kernel launch",
                     launch::layer_norm(inputs[0].data_as<const float>(), optional_data(inputs, 1),
                                        optional_data(inputs, 2), outputs[0].data_as<float>(),
                                        plan.rows, plan.n, plan.eps, ctx.stream));
}

Status add_layer_norm(const CudaKernelContext& ctx, const OpAttrs& attrs,
                      std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "add_layer_norm";
  if (inputs.size() < 2 || inputs.size() > 4 || outputs.size() != 2) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: expected inputs a, b, weight?, bias? and outputs sum, normed; got {} "
                      "inputs and {} outputs", op, inputs.size(), outputs.size());
  }
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  if (!(a.sizes == b.sizes)) {
    return make_error(ErrorCode::InvalidArgument, "{}: a {} and b {} must have one shape", op,
                      a.sizes.to_string(), b.sizes.to_string());
  }
  // The checks of the two ops it stands for.
  PLANRT_RETURN_IF_ERROR(check_operands("add", inputs.first(2), outputs.first(1)));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs("add", inputs.first(2)));
  PLANRT_ASSIGN_OR_RETURN(Shape shape, plan_binary("add", inputs.first(2), outputs.first(1)));
  (void)shape;
  std::vector<TensorView> norm_in(inputs.begin(), inputs.end());
  norm_in.erase(norm_in.begin());  // the sum, then weight and bias
  norm_in[0] = outputs[0];
  PLANRT_RETURN_IF_ERROR(check_operands("layer_norm", norm_in, outputs.subspan(1)));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs("layer_norm", norm_in));
  PLANRT_ASSIGN_OR_RETURN(NormPlan plan, plan_layer_norm(attrs, norm_in, outputs.subspan(1)));
  if (plan.n == 0) return {};
  return cuda_status(op, "kernel launch",
                     launch::add_layer_norm(a.data_as<const float>(), b.data_as<const float>(),
                                            outputs[0].data_as<float>(), optional_data(norm_in, 1),
                                            optional_data(norm_in, 2), outputs[1].data_as<float>(),
                                            plan.rows, plan.n, plan.eps, ctx.stream));
}

Status rms_norm(const CudaKernelContext& ctx, const OpAttrs& attrs,
                std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "rms_norm";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(NormPlan plan, plan_rms_norm(attrs, inputs, outputs));
  if (plan.n == 0) return {};
  return cuda_status(op, "kernel launch",
                     launch::rms_norm(inputs[0].data_as<const float>(), optional_data(inputs, 1),
                                      outputs[0].data_as<float>(), plan.rows, plan.n, plan.eps,
                                      ctx.stream));
}

Status softmax(const CudaKernelContext& ctx, const OpAttrs& attrs,
               std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "softmax";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(SoftmaxPlan plan, plan_softmax(attrs, inputs, outputs));
  const auto [outer, n, inner] = plan;
  if (outer == 0) return {};
  const float* px = inputs[0].data_as<const float>();
  float* py = outputs[0].data_as<float>();
  if (inner == 1) {
    return cuda_status(op, "kernel launch",
                       launch::softmax_rows(px, py, outer, n, 0, ctx.stream));
  }
  return cuda_status(op, "kernel launch",
                     launch::softmax_strided(px, py, outer, n, inner, ctx.stream));
}

}  // namespace planrt::kernels::cuda
