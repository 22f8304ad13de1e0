// The convolutional networks' ops on CUDA: conv2d through cuDNN (the legacy convolution API
// of cuDNN 9, opened on first use), the pools, clip and the hard activations, pad and
// expand. f32, f16 and bf16.
//
// conv2d: NCHW in and out, or NHWC with a [K, KH, KW, C/groups] weight (layout "nhwc").
// A channels-last depthwise one runs planrt's kernel (depthwise_conv_kernels.cu, workspace.h);
// the others go through an execution plan of cuDNN's backend API made once per shape and layout on the
// handle (cudnn_conv_plan.h: the first of cuDNN's heuristic ranking, no trial runs, whose
// workspace fits the planned workspace output, kernels/workspace.h:
// conv2d_cuda_workspace_per_image). Asymmetric pads first copy the image into the workspace,
// padded, in the layout of x. Bias and ReLU follow in one elementwise pass.
//
// The pools: one thread per output element in either layout (vision_kernels.cu).
#include <cstring>

#include <fmt/format.h>

#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_conv_plan.h"
#include "kernels/cuda/cudnn_library.h"
#include "kernels/cuda/float_types.h"
#include "kernels/cuda/launch.h"
#include "kernels/op_plans.h"
#include "kernels/operands.h"
#include "kernels/workspace.h"

namespace planrt::kernels::cuda {
namespace {

Status launched(std::string_view op, cudaError_t err) { return cuda_status(op, "kernel launch", err); }

launch::Window to_window(int64_t h, int64_t w, int64_t oh, int64_t ow, const Window2d& win) {
  launch::Window out;
  out.h = h;
  out.w = w;
  out.oh = oh;
  out.ow = ow;
  out.kh = win.kh;
  out.kw = win.kw;
  out.stride_h = win.stride_h;
  out.stride_w = win.stride_w;
  out.pad_top = win.pad_top;
  out.pad_left = win.pad_left;
  out.pad_bottom = win.pad_bottom;
  out.pad_right = win.pad_right;
  out.dilation_h = win.dilation_h;
  out.dilation_w = win.dilation_w;
  return out;
}

Status clamp_op(std::string_view op, const CudaKernelContext& ctx, const OpAttrs& attrs,
                std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_float_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(ClampPlan p, plan_clamp(op, attrs, inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& y = outputs[0];
  return launched(op, with_float_type(dtype, [&](auto t) {
                    using T = typename decltype(t)::type;
                    return launch::clamp(x.data_as<const T>(), y.data_as<T>(), x.numel(), p.scale, p.shift, p.lo,
                                         p.hi, p.times_x, ctx.stream);
                  }));
}

Status pool_op(std::string_view op, const CudaKernelContext& ctx, const OpAttrs& attrs,
               std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_float_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(Pool2dPlan p, plan_pool2d(op, attrs, inputs, outputs));
  const launch::Window w = to_window(p.h, p.w, p.oh, p.ow, p.window);
  const bool max = op == "max_pool2d";
  const TensorView& x = inputs[0];
  const TensorView& y = outputs[0];
  return launched(op, with_float_type(dtype, [&](auto t) {
                    using T = typename decltype(t)::type;
                    return p.channels_last ? launch::pool2d_channels_last(max, p.count_include_pad, x.data_as<const T>(),
                                                                          y.data_as<T>(), p.n, p.c, w, ctx.stream)
                                           : launch::pool2d(max, p.count_include_pad, x.data_as<const T>(),
                                                            y.data_as<T>(), p.n * p.c, w, ctx.stream);
                  }));
}

}  // namespace

Status conv2d(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "conv2d";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_float_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(Conv2dPlan p, plan_conv2d(attrs, inputs, outputs));
  if (p.activation == ConvActivation::Clamp) {
    // The builder fuses these only into host convolutions (builder/rewrite.h); on the GPU the
    // separate clamp op runs them.
    return make_error(ErrorCode::NotSupported,
                      "{}: activation '{}' fused into a convolution runs on the host only; on CUDA give it as "
                      "its own {} node", op, p.activation_name, p.activation_name);
  }
  if (conv2d_cuda_is_depthwise(p)) {  // planrt's kernel (workspace.h), bias and ReLU in its pass
    const launch::Window w = to_window(p.h, p.w, p.oh, p.ow, p.window);
    const bool relu = p.activation == ConvActivation::Relu;
    const TensorView* bias = p.has_bias ? &inputs[2] : nullptr;
    return launched(op, with_float_type(dtype, [&](auto t) {
                      using T = typename decltype(t)::type;
                      return launch::depthwise_conv2d(inputs[0].data_as<const T>(), inputs[1].data_as<const T>(),
                                                      bias != nullptr ? bias->data_as<const T>() : nullptr,
                                                      outputs[0].data_as<T>(), p.n, p.c, w, relu, ctx.stream);
                    }));
  }
  if (ctx.cudnn == nullptr || ctx.cudnn->get() == nullptr) {
    return make_error(ErrorCode::InvalidArgument, "{}: the CUDA kernel needs a cuDNN handle", op);
  }
  for (int64_t v : {p.n, p.c, p.h + p.window.pad_top + p.window.pad_bottom, p.w + p.window.pad_left + p.window.pad_right,
                    p.k}) {
    if (v > INT32_MAX) return make_error(ErrorCode::NotSupported, "{}: size {} exceeds cuDNN's int dims", op, v);
  }
  PLANRT_ASSIGN_OR_RETURN(const CudnnLibrary* lib, cudnn_library());
  Conv2dPlan one = p;
  one.n = 1;
  const CudaConvWorkspace per_image = conv2d_cuda_workspace_per_image(one, dtype);
  const uint64_t padded_bytes = per_image.padded_copy_bytes * static_cast<uint64_t>(p.n);
  if (p.workspace_bytes < padded_bytes) {
    return make_error(ErrorCode::InvalidArgument, "{}: the workspace holds {} bytes; the padded copy needs {}", op,
                      p.workspace_bytes, padded_bytes);
  }
  if (cudnnStatus_t s = lib->cudnnSetStream(ctx.cudnn->get(), ctx.stream); s != CUDNN_STATUS_SUCCESS) {
    return make_error(ErrorCode::Internal, "{}: cudnnSetStream failed: {}", op, lib->cudnnGetErrorString(s));
  }
  const void* x = inputs[0].data;
  int64_t h = p.h, w = p.w, pad_h = p.window.pad_top, pad_w = p.window.pad_left;
  auto* workspace = static_cast<uint8_t*>(p.workspace_bytes > 0 ? outputs[1].data : nullptr);
  if (!conv2d_pads_symmetric(p)) {
    // The image padded into the workspace, then a convolution without padding. The copy keeps
    // the layout of x: [n, c, padded h, padded w], or channels-last [n, padded h, padded w, c].
    const int64_t padded_h = p.h + p.window.pad_top + p.window.pad_bottom;
    const int64_t padded_w = p.w + p.window.pad_left + p.window.pad_right;
    const int h_dim = p.channels_last ? 1 : 2, w_dim = h_dim + 1, c_dim = p.channels_last ? 3 : 1;
    int64_t out[4], in[4], begin[4] = {0, 0, 0, 0};
    out[0] = in[0] = p.n;
    out[c_dim] = in[c_dim] = p.c;
    out[h_dim] = padded_h;
    out[w_dim] = padded_w;
    in[h_dim] = p.h;
    in[w_dim] = p.w;
    begin[h_dim] = p.window.pad_top;
    begin[w_dim] = p.window.pad_left;
    launch::PadMap map;
    map.rank = 4;
    for (int d = 0; d < 4; ++d) {
      map.out_size[d] = out[d];
      map.in_size[d] = in[d];
      map.begin[d] = begin[d];
    }
    PLANRT_RETURN_IF_ERROR(launched(op, launch::pad(x, workspace, element_size(dtype), out[0] * out[1] * out[2] * out[3],
                                                    map, launch::PadMode::Constant, 0, ctx.stream)));
    x = workspace;
    h = padded_h;
    w = padded_w;
    pad_h = pad_w = 0;
  }
  ConvPlanKey key;
  key.n = p.n;
  key.c = p.c;
  key.h = h;
  key.w = w;
  key.k = p.k;
  key.kh = p.window.kh;
  key.kw = p.window.kw;
  key.stride_h = p.window.stride_h;
  key.stride_w = p.window.stride_w;
  key.pad_h = pad_h;
  key.pad_w = pad_w;
  key.dilation_h = p.window.dilation_h;
  key.dilation_w = p.window.dilation_w;
  key.groups = p.groups;
  key.oh = p.oh;
  key.ow = p.ow;
  key.channels_last = p.channels_last;
  key.dtype = dtype;
  key.allow_tf32 = ctx.cudnn->allow_tf32();
  key.workspace_budget = p.workspace_bytes - padded_bytes;
  PLANRT_ASSIGN_OR_RETURN(const CudnnConvPlan* plan, ctx.cudnn->conv_plans().get(*lib, ctx.cudnn->get(), key));
  PLANRT_RETURN_IF_ERROR(plan->execute(ctx.cudnn->get(), x, inputs[1].data, outputs[0].data,
                                       plan->workspace_bytes() > 0 ? workspace + padded_bytes : nullptr));
  if (!p.has_bias && p.activation == ConvActivation::None) return {};
  const bool relu = p.activation == ConvActivation::Relu;
  return launched(op, with_float_type(dtype, [&](auto t) {
                    using T = typename decltype(t)::type;
                    T* y = outputs[0].data_as<T>();
                    const T* bias = p.has_bias ? inputs[2].data_as<const T>() : nullptr;
                    if (p.channels_last) {
                      const int64_t rows = p.n * p.oh * p.ow;  // one per output position, of k channels
                      return launch::bias_activation_channels_last(y, bias, rows, p.k, relu, ctx.stream);
                    }
                    return launch::bias_activation(y, bias, p.n * p.k, p.k, p.oh * p.ow, relu, ctx.stream);
                  }));
}

Status max_pool2d(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> in,
                  std::span<const TensorView> out) {
  return pool_op("max_pool2d", ctx, attrs, in, out);
}
Status avg_pool2d(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> in,
                  std::span<const TensorView> out) {
  return pool_op("avg_pool2d", ctx, attrs, in, out);
}
Status clip(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> in,
            std::span<const TensorView> out) {
  return clamp_op("clip", ctx, attrs, in, out);
}
Status hard_sigmoid(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> in,
                    std::span<const TensorView> out) {
  return clamp_op("hard_sigmoid", ctx, attrs, in, out);
}
Status hard_swish(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> in,
                  std::span<const TensorView> out) {
  return clamp_op("hard_swish", ctx, attrs, in, out);
}

Status pad(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> inputs,
           std::span<const TensorView> outputs) {
  constexpr std::string_view op = "pad";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(PadPlan p, plan_pad(attrs, inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& y = outputs[0];
  if (x.rank() > launch::kMaxDims) return make_error(ErrorCode::NotSupported, "{}: rank {} > {}", op, x.rank(), launch::kMaxDims);
  launch::PadMap map;
  map.rank = x.rank();
  for (int d = 0; d < x.rank(); ++d) {
    map.out_size[d] = y.sizes[d];
    map.in_size[d] = x.sizes[d];
    map.begin[d] = p.begin[d];
  }
  const launch::PadMode mode = p.mode == PadMode::Constant ? launch::PadMode::Constant
                               : p.mode == PadMode::Edge   ? launch::PadMode::Edge
                                                           : launch::PadMode::Reflect;
  return launched(op, launch::pad(x.data, y.data, element_size(x.dtype), y.numel(), map, mode, p.fill_bits, ctx.stream));
}

Status expand(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "expand";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& y = outputs[0];
  PLANRT_ASSIGN_OR_RETURN(PermutePlan plan, plan_expand(inputs, outputs));
  const Shape& shape = plan.shape;
  if (shape.rank() > launch::kMaxDims) return make_error(ErrorCode::NotSupported, "{}: rank {} > {}", op, shape.rank(), launch::kMaxDims);
  const Shape& strides = plan.src_strides;
  launch::IndexMap map;
  map.rank = shape.rank();
  for (int d = 0; d < map.rank; ++d) {
    map.size[d] = shape[d];
    map.stride_a[d] = strides[d];
  }
  if (map.rank == 0) {
    map.rank = 1;
    map.size[0] = 1;
  }
  return launched(op, launch::permute(x.data, y.data, element_size(x.dtype), y.numel(), map, ctx.stream));
}

}  // namespace planrt::kernels::cuda
