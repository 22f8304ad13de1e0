// layer_norm and rms_norm over the last dim, softmax and log_softmax over any dim, f32, f16
// and bf16 (weights in the input's dtype): one block per row (warp-shuffle reductions); softmax
// and log_softmax along a middle dim walk one line per thread.
#include <vector>

#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/float_types.h"
#include "kernels/cuda/launch.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cuda {
namespace {

template <typename T>
const T* optional_data(std::span<const TensorView> inputs, size_t i) {
  return i < inputs.size() && !inputs[i].is_none() ? inputs[i].data_as<const T>() : nullptr;
}

template <typename T>
cudaError_t launch_layer_norm(const CudaKernelContext& ctx, const NormPlan& plan,
                              std::span<const TensorView> inputs,
                              std::span<const TensorView> outputs) {
  return launch::layer_norm(inputs[0].data_as<const T>(), optional_data<T>(inputs, 1),
                            optional_data<T>(inputs, 2), outputs[0].data_as<T>(), plan.rows,
                            plan.n, plan.eps, ctx.stream);
}

// inputs a, b, weight?, bias?; outputs sum, normed.
template <typename T>
cudaError_t launch_add_layer_norm(const CudaKernelContext& ctx, const NormPlan& plan,
                                  std::span<const TensorView> inputs,
                                  std::span<const TensorView> outputs) {
  return launch::add_layer_norm(inputs[0].data_as<const T>(), inputs[1].data_as<const T>(),
                                outputs[0].data_as<T>(), optional_data<T>(inputs, 2),
                                optional_data<T>(inputs, 3), outputs[1].data_as<T>(), plan.rows,
                                plan.n, plan.eps, ctx.stream);
}

template <typename T>
cudaError_t launch_rms_norm(const CudaKernelContext& ctx, const NormPlan& plan,
                            std::span<const TensorView> inputs,
                            std::span<const TensorView> outputs) {
  return launch::rms_norm(inputs[0].data_as<const T>(), optional_data<T>(inputs, 1),
                          outputs[0].data_as<T>(), plan.rows, plan.n, plan.eps, ctx.stream);
}

// kLog: log_softmax, the same launch shapes.
template <bool kLog, typename T>
cudaError_t launch_softmax(const CudaKernelContext& ctx, const SoftmaxPlan& plan,
                           const TensorView& x, const TensorView& y) {
  const auto [outer, n, inner] = plan;
  const T* px = x.data_as<const T>();
  T* py = y.data_as<T>();
  if (inner == 1) {
    return kLog ? launch::log_softmax_rows(px, py, outer, n, ctx.stream)
                : launch::softmax_rows(px, py, outer, n, 0, ctx.stream);
  }
  return kLog ? launch::log_softmax_strided(px, py, outer, n, inner, ctx.stream)
              : launch::softmax_strided(px, py, outer, n, inner, ctx.stream);
}

template <bool kLog>
Status softmax_op(const CudaKernelContext& ctx, const OpAttrs& attrs,
                  std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = kLog ? "log_softmax" : "softmax";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_float_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(SoftmaxPlan plan, plan_softmax(op, attrs, inputs, outputs));
  if (plan.outer == 0) return {};
  return cuda_status(op, "kernel launch", with_float_type(dtype, [&](auto t) {
                       return launch_softmax<kLog, typename decltype(t)::type>(ctx, plan, inputs[0], outputs[0]);
                     }));
}

}  // namespace

Status layer_norm(const CudaKernelContext& ctx, const OpAttrs& attrs,
                  std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "layer_norm";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_float_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(NormPlan plan, plan_layer_norm(attrs, inputs, outputs));
  if (plan.n == 0) return {};
  return cuda_status(op, "kernel launch", with_float_type(dtype, [&](auto t) {
                       return launch_layer_norm<typename decltype(t)::type>(ctx, plan, inputs, outputs);
                     }));
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
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_float_inputs("add", inputs.first(2)));
  PLANRT_ASSIGN_OR_RETURN(Shape shape, plan_binary("add", inputs.first(2), outputs.first(1)));
  (void)shape;
  std::vector<TensorView> norm_in(inputs.begin(), inputs.end());
  norm_in.erase(norm_in.begin());  // the sum, then weight and bias
  norm_in[0] = outputs[0];
  PLANRT_RETURN_IF_ERROR(check_operands("layer_norm", norm_in, outputs.subspan(1)));
  PLANRT_ASSIGN_OR_RETURN(DType norm_dtype, require_float_inputs("layer_norm", norm_in));
  (void)norm_dtype;  // the sum's dtype, which the add's plan checked against a and b
  PLANRT_ASSIGN_OR_RETURN(NormPlan plan, plan_layer_norm(attrs, norm_in, outputs.subspan(1)));
  if (plan.n == 0) return {};
  return cuda_status(op, "kernel launch", with_float_type(dtype, [&](auto t) {
                       return launch_add_layer_norm<typename decltype(t)::type>(ctx, plan, inputs, outputs);
                     }));
}

Status rms_norm(const CudaKernelContext& ctx, const OpAttrs& attrs,
                std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "rms_norm";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_float_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(NormPlan plan, plan_rms_norm(attrs, inputs, outputs));
  if (plan.n == 0) return {};
  return cuda_status(op, "kernel launch", with_float_type(dtype, [&](auto t) {
                       return launch_rms_norm<typename decltype(t)::type>(ctx, plan, inputs, outputs);
                     }));
}

Status softmax(const CudaKernelContext& ctx, const OpAttrs& attrs,
               std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  return softmax_op<false>(ctx, attrs, inputs, outputs);
}

Status log_softmax(const CudaKernelContext& ctx, const OpAttrs& attrs,
                   std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  return softmax_op<true>(ctx, attrs, inputs, outputs);
}

}  // namespace planrt::kernels::cuda
