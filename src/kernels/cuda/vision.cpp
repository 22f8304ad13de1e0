// The convolutional networks' ops on CUDA: conv2d through cuDNN (the legacy convolution API
// of cuDNN 9, opened on first use), the pools, clip and the hard activations, pad and
// expand. f32 and bf16.
//
// conv2d: NCHW in and out. The algorithm is the fastest of cuDNN's heuristic ranking
// (cudnnGetConvolutionForwardAlgorithm_v7, no trial runs, so it is safe inside a CUDA graph
// capture) whose workspace fits the planned workspace output (kernels/workspace.h:
// conv2d_cuda_workspace_per_image); the choice is cached per shape and device, process-wide.
// Asymmetric pads (cuDNN pads both sides alike) first copy the image into the workspace,
// padded. Bias and ReLU follow in one elementwise pass.
#include <cudnn.h>

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include <fmt/format.h>

#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_library.h"
#include "kernels/cuda/launch.h"
#include "kernels/op_plans.h"
#include "kernels/operands.h"
#include "kernels/workspace.h"

namespace planrt::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;

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
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_f32_or_bf16_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(ClampPlan p, plan_clamp(op, attrs, inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& y = outputs[0];
  return launched(op, dtype == DType::BF16
                          ? launch::clamp(x.data_as<const bf16>(), y.data_as<bf16>(), x.numel(), p.scale, p.shift,
                                          p.lo, p.hi, p.times_x, ctx.stream)
                          : launch::clamp(x.data_as<const float>(), y.data_as<float>(), x.numel(), p.scale, p.shift,
                                          p.lo, p.hi, p.times_x, ctx.stream));
}

Status pool_op(std::string_view op, const CudaKernelContext& ctx, const OpAttrs& attrs,
               std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_f32_or_bf16_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(Pool2dPlan p, plan_pool2d(op, attrs, inputs, outputs));
  const launch::Window w = to_window(p.h, p.w, p.oh, p.ow, p.window);
  const bool max = op == "max_pool2d";
  const TensorView& x = inputs[0];
  const TensorView& y = outputs[0];
  return launched(op, dtype == DType::BF16
                          ? launch::pool2d(max, p.count_include_pad, x.data_as<const bf16>(), y.data_as<bf16>(),
                                           p.n * p.c, w, ctx.stream)
                          : launch::pool2d(max, p.count_include_pad, x.data_as<const float>(), y.data_as<float>(),
                                           p.n * p.c, w, ctx.stream));
}

// ---- cuDNN ----------------------------------------------------------------------------

Status cudnn_status(std::string_view op, std::string_view what, const CudnnLibrary& lib, cudnnStatus_t s) {
  if (s == CUDNN_STATUS_SUCCESS) return {};
  ErrorCode code = ErrorCode::Internal;
  if (s == CUDNN_STATUS_ALLOC_FAILED) code = ErrorCode::OutOfMemory;
  if (s == CUDNN_STATUS_NOT_SUPPORTED || s == CUDNN_STATUS_BAD_PARAM) code = ErrorCode::NotSupported;
  return make_error(code, "{}: {} failed: {}", op, what, lib.cudnnGetErrorString(s));
}

// The descriptors of one call, destroyed on every path.
struct ConvDescriptors {
  const CudnnLibrary* lib = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~ConvDescriptors() {
    if (x != nullptr) lib->cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) lib->cudnnDestroyTensorDescriptor(y);
    if (w != nullptr) lib->cudnnDestroyFilterDescriptor(w);
    if (conv != nullptr) lib->cudnnDestroyConvolutionDescriptor(conv);
  }
};

// What decides the algorithm: shapes, attributes, dtype, math mode, the workspace budget.
using ConvKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int, bool, uint64_t>;

std::mutex g_algo_mu;
std::map<ConvKey, cudnnConvolutionFwdAlgo_t>& algorithm_cache() {
  static std::map<ConvKey, cudnnConvolutionFwdAlgo_t> cache;
  return cache;
}

Status describe(std::string_view op, const Conv2dPlan& p, int64_t h, int64_t w, int64_t pad_h, int64_t pad_w,
                DType dtype, bool allow_tf32, ConvDescriptors& d) {
  const CudnnLibrary& lib = *d.lib;
  const cudnnDataType_t type = dtype == DType::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  auto narrow = [](int64_t v) { return static_cast<int>(v); };
  PLANRT_RETURN_IF_ERROR(cudnn_status(op, "cudnnCreateTensorDescriptor", lib, lib.cudnnCreateTensorDescriptor(&d.x)));
  PLANRT_RETURN_IF_ERROR(cudnn_status(op, "cudnnCreateTensorDescriptor", lib, lib.cudnnCreateTensorDescriptor(&d.y)));
  PLANRT_RETURN_IF_ERROR(cudnn_status(op, "cudnnCreateFilterDescriptor", lib, lib.cudnnCreateFilterDescriptor(&d.w)));
  PLANRT_RETURN_IF_ERROR(
      cudnn_status(op, "cudnnCreateConvolutionDescriptor", lib, lib.cudnnCreateConvolutionDescriptor(&d.conv)));
  PLANRT_RETURN_IF_ERROR(cudnn_status(op, "cudnnSetTensor4dDescriptor", lib,
                                      lib.cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, type, narrow(p.n),
                                                                     narrow(p.c), narrow(h), narrow(w))));
  PLANRT_RETURN_IF_ERROR(cudnn_status(op, "cudnnSetTensor4dDescriptor", lib,
                                      lib.cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, type, narrow(p.n),
                                                                     narrow(p.k), narrow(p.oh), narrow(p.ow))));
  PLANRT_RETURN_IF_ERROR(cudnn_status(
      op, "cudnnSetFilter4dDescriptor", lib,
      lib.cudnnSetFilter4dDescriptor(d.w, type, CUDNN_TENSOR_NCHW, narrow(p.k), narrow(p.c / p.groups),
                                     narrow(p.window.kh), narrow(p.window.kw))));
  PLANRT_RETURN_IF_ERROR(cudnn_status(
      op, "cudnnSetConvolution2dDescriptor", lib,
      lib.cudnnSetConvolution2dDescriptor(d.conv, narrow(pad_h), narrow(pad_w), narrow(p.window.stride_h),
                                          narrow(p.window.stride_w), narrow(p.window.dilation_h),
                                          narrow(p.window.dilation_w), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)));
  PLANRT_RETURN_IF_ERROR(cudnn_status(op, "cudnnSetConvolutionGroupCount", lib,
                                      lib.cudnnSetConvolutionGroupCount(d.conv, narrow(p.groups))));
  // TF32 off (the project's f32 comparisons): FMA math; bf16 takes the tensor cores.
  const cudnnMathType_t math =
      dtype == DType::BF16 ? CUDNN_TENSOR_OP_MATH : (allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
  return cudnn_status(op, "cudnnSetConvolutionMathType", lib, lib.cudnnSetConvolutionMathType(d.conv, math));
}

// The fastest ranked algorithm whose workspace fits `budget`.
Result<cudnnConvolutionFwdAlgo_t> choose_algorithm(std::string_view op, const CudaKernelContext& ctx,
                                                   const ConvDescriptors& d, const ConvKey& key, uint64_t budget) {
  {
    std::lock_guard lock(g_algo_mu);
    auto it = algorithm_cache().find(key);
    if (it != algorithm_cache().end()) return it->second;
  }
  const CudnnLibrary& lib = *d.lib;
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  PLANRT_RETURN_IF_ERROR(cudnn_status(op, "cudnnGetConvolutionForwardAlgorithm_v7", lib,
                                      lib.cudnnGetConvolutionForwardAlgorithm_v7(
                                          ctx.cudnn->get(), d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                          &returned, perf)));
  for (int i = 0; i < returned; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    // The ranking's memory figure is an estimate (for bf16 it was measured below the real
    // need); what the algorithm will ask is what cudnnGetConvolutionForwardWorkspaceSize says.
    size_t needed = 0;
    if (lib.cudnnGetConvolutionForwardWorkspaceSize(ctx.cudnn->get(), d.x, d.w, d.conv, d.y, perf[i].algo, &needed) !=
            CUDNN_STATUS_SUCCESS ||
        needed > budget) {
      continue;
    }
    std::lock_guard lock(g_algo_mu);
    algorithm_cache().emplace(key, perf[i].algo);
    return perf[i].algo;
  }
  return make_error(ErrorCode::NotSupported,
                    "{}: cuDNN has no algorithm for this convolution within its planned workspace of {} bytes "
                    "({} ranked)", op, budget, returned);
}

}  // namespace

Status conv2d(const CudaKernelContext& ctx, const OpAttrs& attrs, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "conv2d";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_f32_or_bf16_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(Conv2dPlan p, plan_conv2d(attrs, inputs, outputs));
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
  PLANRT_RETURN_IF_ERROR(cudnn_status(op, "cudnnSetStream", *lib, lib->cudnnSetStream(ctx.cudnn->get(), ctx.stream)));
  const void* x = inputs[0].data;
  int64_t h = p.h, w = p.w, pad_h = p.window.pad_top, pad_w = p.window.pad_left;
  auto* workspace = static_cast<uint8_t*>(p.workspace_bytes > 0 ? outputs[1].data : nullptr);
  if (!conv2d_pads_symmetric(p)) {
    // The image padded into the workspace, then a convolution without padding.
    launch::PadMap map;
    map.rank = 4;
    const int64_t out[4] = {p.n, p.c, p.h + p.window.pad_top + p.window.pad_bottom,
                            p.w + p.window.pad_left + p.window.pad_right};
    const int64_t in[4] = {p.n, p.c, p.h, p.w};
    const int64_t begin[4] = {0, 0, p.window.pad_top, p.window.pad_left};
    for (int d = 0; d < 4; ++d) {
      map.out_size[d] = out[d];
      map.in_size[d] = in[d];
      map.begin[d] = begin[d];
    }
    PLANRT_RETURN_IF_ERROR(launched(op, launch::pad(x, workspace, element_size(dtype), out[0] * out[1] * out[2] * out[3],
                                                    map, launch::PadMode::Constant, 0, ctx.stream)));
    x = workspace;
    h = out[2];
    w = out[3];
    pad_h = pad_w = 0;
  }
  ConvDescriptors d;
  d.lib = lib;
  PLANRT_RETURN_IF_ERROR(describe(op, p, h, w, pad_h, pad_w, dtype, ctx.cudnn->allow_tf32(), d));
  const uint64_t budget = p.workspace_bytes - padded_bytes;
  int device = 0;
  PLANRT_RETURN_IF_ERROR(cuda_status(op, "cudaGetDevice", cudaGetDevice(&device)));
  const ConvKey key{device, p.n, p.c, h, w, p.k, p.window.kh, p.window.kw, p.window.stride_h, p.window.stride_w,
                    pad_h * 65536 + pad_w, p.window.dilation_h * 65536 + p.window.dilation_w, p.groups,
                    static_cast<int>(dtype), ctx.cudnn->allow_tf32(), budget};
  PLANRT_ASSIGN_OR_RETURN(cudnnConvolutionFwdAlgo_t algo, choose_algorithm(op, ctx, d, key, budget));
  size_t needed = 0;
  PLANRT_RETURN_IF_ERROR(cudnn_status(op, "cudnnGetConvolutionForwardWorkspaceSize", *lib,
                                      lib->cudnnGetConvolutionForwardWorkspaceSize(ctx.cudnn->get(), d.x, d.w, d.conv,
                                                                                   d.y, algo, &needed)));
  if (needed > budget) {
    return make_error(ErrorCode::Internal, "{}: cuDNN's algorithm {} asks {} bytes of a {} byte workspace", op,
                      static_cast<int>(algo), needed, budget);
  }
  const float one_f = 1.0f, zero_f = 0.0f;
  PLANRT_RETURN_IF_ERROR(cudnn_status(
      op, "cudnnConvolutionForward", *lib,
      lib->cudnnConvolutionForward(ctx.cudnn->get(), &one_f, d.x, x, d.w, inputs[1].data, d.conv, algo,
                                   needed > 0 ? workspace + padded_bytes : nullptr, needed, &zero_f, d.y,
                                   outputs[0].data)));
  if (!p.has_bias && p.activation == ConvActivation::None) return {};
  const bool relu = p.activation == ConvActivation::Relu;
  const int64_t planes = p.n * p.k, hw = p.oh * p.ow;
  return launched(op, dtype == DType::BF16
                          ? launch::bias_activation(outputs[0].data_as<bf16>(),
                                                    p.has_bias ? inputs[2].data_as<const bf16>() : nullptr, planes,
                                                    p.k, hw, relu, ctx.stream)
                          : launch::bias_activation(outputs[0].data_as<float>(),
                                                    p.has_bias ? inputs[2].data_as<const float>() : nullptr, planes,
                                                    p.k, hw, relu, ctx.stream));
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
