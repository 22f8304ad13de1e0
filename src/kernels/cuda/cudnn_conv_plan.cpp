#include "kernels/cuda/cudnn_conv_plan.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/cuda/cudnn_library.h"

namespace planrt::kernels::cuda {
namespace {

constexpr int64_t kUidX = 1, kUidW = 2, kUidY = 3;
constexpr std::string_view kOp = "conv2d";
using Descriptor = BackendDescriptor;

// A packed 4-d tensor of `dims` in cuDNN's order ([N, C, H, W], or [K, C / groups, KH, KW]
// for the filter), laid out in memory that order or, channels_last, with dim 1 innermost
// (NHWC, or KRSC for the filter): cuDNN reads the layout from the strides alone.
Result<Descriptor> tensor(const CudnnLibrary& lib, int64_t uid, cudnnDataType_t type, std::array<int64_t, 4> dims,
                          bool channels_last) {
  const std::array<int64_t, 4> strides =
      channels_last ? std::array<int64_t, 4>{dims[1] * dims[2] * dims[3], 1, dims[3] * dims[1], dims[1]}
                    : std::array<int64_t, 4>{dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  return backend_tensor(lib, kOp, {uid, type, dims, strides});
}

// The operation graph of one forward convolution.
Result<Descriptor> convolution_graph(const CudnnLibrary& lib, cudnnHandle_t handle, const ConvPlanKey& k) {
  const cudnnDataType_t type = k.dtype == DType::BF16  ? CUDNN_DATA_BFLOAT16
                               : k.dtype == DType::F16 ? CUDNN_DATA_HALF
                                                       : CUDNN_DATA_FLOAT;
  PLANRT_ASSIGN_OR_RETURN(Descriptor x, tensor(lib, kUidX, type, {k.n, k.c, k.h, k.w}, k.channels_last));
  PLANRT_ASSIGN_OR_RETURN(Descriptor w,
                          tensor(lib, kUidW, type, {k.k, k.c / k.groups, k.kh, k.kw}, k.channels_last));
  PLANRT_ASSIGN_OR_RETURN(Descriptor y, tensor(lib, kUidY, type, {k.n, k.k, k.oh, k.ow}, k.channels_last));

  PLANRT_ASSIGN_OR_RETURN(Descriptor conv,
                          Descriptor::make(lib, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, kOp, "convolution"));
  const cudnnDataType_t accumulate = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial = 2;
  const std::array<int64_t, 2> dilations{k.dilation_h, k.dilation_w}, strides{k.stride_h, k.stride_w},
      pads{k.pad_h, k.pad_w};
  PLANRT_RETURN_IF_ERROR(conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &accumulate, 1,
                                  "the convolution's accumulation type"));
  PLANRT_RETURN_IF_ERROR(
      conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, &mode, 1, "the convolution's mode"));
  PLANRT_RETURN_IF_ERROR(
      conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, &spatial, 1, "the convolution's rank"));
  PLANRT_RETURN_IF_ERROR(
      conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, dilations.data(), 2, "the dilations"));
  PLANRT_RETURN_IF_ERROR(
      conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, strides.data(), 2, "the strides"));
  PLANRT_RETURN_IF_ERROR(conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, pads.data(), 2, "the pads"));
  PLANRT_RETURN_IF_ERROR(conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, pads.data(), 2, "the pads"));
  PLANRT_RETURN_IF_ERROR(conv.finalize("convolution descriptor"));

  PLANRT_ASSIGN_OR_RETURN(Descriptor op, Descriptor::make(lib, CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                                          kOp, "convolution operation"));
  const float alpha = 1.0f, beta = 0.0f;
  cudnnBackendDescriptor_t xd = x.get(), wd = w.get(), yd = y.get(), cd = conv.get();
  PLANRT_RETURN_IF_ERROR(
      op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, &xd, 1, "the input"));
  PLANRT_RETURN_IF_ERROR(
      op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, &wd, 1, "the weight"));
  PLANRT_RETURN_IF_ERROR(
      op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, &yd, 1, "the output"));
  PLANRT_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, &cd,
                                1, "the convolution"));
  PLANRT_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, &alpha, 1, "alpha"));
  PLANRT_RETURN_IF_ERROR(op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, &beta, 1, "beta"));
  PLANRT_RETURN_IF_ERROR(op.finalize("convolution operation"));

  const Descriptor* ops[] = {&op};
  return backend_graph(lib, handle, kOp, ops);
}

// Whether the engine behind `config` may run this key: its numerical and behaviour notes.
// `allow_runtime_compilation`: the second pass, when no precompiled engine fits.
bool engine_suits(const CudnnLibrary& lib, cudnnBackendDescriptor_t config, const ConvPlanKey& k,
                  bool allow_runtime_compilation) {
  EngineNotes notes;
  if (!read_engine_notes(lib, config, kOp, notes)) return false;
  // f32 stays f32: TF32 tensor cores only when allowed, never a down-converting engine.
  if (k.dtype == DType::F32 && notes.has(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)) return false;
  if (k.dtype == DType::F32 && !k.allow_tf32 && notes.has(CUDNN_NUMERICAL_NOTE_TENSOR_CORE)) return false;
  return allow_runtime_compilation || !notes.has(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION);
}

}  // namespace

Result<std::unique_ptr<CudnnConvPlan>> CudnnConvPlan::create(const CudnnLibrary& lib, cudnnHandle_t handle,
                                                             const ConvPlanKey& key) {
  PLANRT_ASSIGN_OR_RETURN(Descriptor graph, convolution_graph(lib, handle, key));
  // cuDNN's ranking first (mode A), then its fallback list, which holds the engines that need
  // little or no workspace (a 2x2 stride-2 bf16 convolution found none within its budget in
  // mode A's list); in each, precompiled engines before ones compiled at run time.
  PlanSearch seen;
  Result<FinalizedPlan> plan = search_plan(
      lib, handle, graph.get(), kOp, key.workspace_budget, 2,
      [&](cudnnBackendDescriptor_t config, int pass) { return engine_suits(lib, config, key, pass == 1); }, seen);
  if (plan.ok()) {
    auto out = std::unique_ptr<CudnnConvPlan>(new CudnnConvPlan());
    out->lib_ = &lib;
    out->plan_ = std::move(plan).value();
    return out;
  }
  if (plan.status().code() != ErrorCode::NotSupported) return plan.status();
  return make_error(ErrorCode::NotSupported,
                    "conv2d: cuDNN has no engine for the {} {} convolution of x [N, C, H, W] = [{}, {}, {}, {}] by "
                    "weight [K, C/groups, KH, KW] = [{}, {}, {}, {}] (groups {}) within its planned workspace of {} "
                    "bytes ({} engine configs ranked{})",
                    dtype_name(key.dtype), key.channels_last ? "NHWC" : "NCHW", key.n, key.c, key.h, key.w, key.k,
                    key.c / key.groups, key.kh, key.kw, key.groups, key.workspace_budget, seen.ranked,
                    seen.smallest_need >= 0
                        ? fmt::format("; the smallest that suits needs {} bytes", seen.smallest_need)
                        : (seen.first_failure.empty() ? "" : "; the first refused with: " + seen.first_failure));
}

Status CudnnConvPlan::execute(cudnnHandle_t handle, const void* x, const void* w, void* y, void* workspace) const {
  const int64_t uids[] = {kUidX, kUidW, kUidY};
  void* const pointers[] = {const_cast<void*>(x), const_cast<void*>(w), y};
  return execute_plan(*lib_, handle, plan_.plan.get(), kOp, uids, pointers, workspace);
}

}  // namespace planrt::kernels::cuda
