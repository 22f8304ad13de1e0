// resize on CUDA (kernels/op_plans.h: plan_resize, the CPU kernel's plan): f32, bf16 and f16
// (the 16-bit ones storage only, computed in f32), one thread per output element
// (resize_kernels.cu). The host passes the plan by value; the taps
// are computed on the device, so a call uploads nothing and may be captured in a graph.
#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/resize_launch.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cuda {

Status resize(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "resize";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  const DType dtype = inputs[0].dtype;
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16) {
    return make_error(ErrorCode::NotSupported, "{}: x has dtype {}; the CUDA kernel supports f32, f16 and bf16", op,
                      dtype_name(dtype));
  }
  PLANRT_ASSIGN_OR_RETURN(ResizePlan plan, plan_resize(attrs, inputs, outputs));
  static_assert(launch::kResizeMaxDims >= kMaxRank);
  launch::ResizeArgs args;
  args.rank = static_cast<int>(plan.axes.size());
  args.mode = static_cast<int>(plan.attrs.mode);
  args.coordinates = static_cast<int>(plan.attrs.coordinates);
  args.nearest = static_cast<int>(plan.attrs.nearest);
  args.exclude_outside = plan.attrs.exclude_outside ? 1 : 0;
  args.cubic_a = plan.attrs.cubic_a;
  args.extrapolation = plan.attrs.extrapolation;
  for (size_t d = 0; d < plan.axes.size(); ++d) {
    const ResizeAxis& a = plan.axes[d];
    args.axis[d] = {a.in, a.out, a.scale, a.roi_start, a.roi_end, a.identity ? 1 : 0};
  }
  const int64_t n = outputs[0].numel();
  cudaError_t err = cudaSuccess;
  switch (dtype) {
    case DType::BF16:
      err = launch::resize(inputs[0].data_as<const __nv_bfloat16>(), outputs[0].data_as<__nv_bfloat16>(), n, args,
                           ctx.stream);
      break;
    case DType::F16:
      err = launch::resize(inputs[0].data_as<const __half>(), outputs[0].data_as<__half>(), n, args, ctx.stream);
      break;
    default:
      err = launch::resize(inputs[0].data_as<const float>(), outputs[0].data_as<float>(), n, args, ctx.stream);
      break;
  }
  return cuda_status(op, "kernel launch", err);
}

}  // namespace planrt::kernels::cuda
