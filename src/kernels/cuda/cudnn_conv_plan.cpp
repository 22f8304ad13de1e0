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
// Every operand is at least 16-byte aligned: planned offsets, pool blocks and the padded
// copy at the workspace's start all are.
constexpr int64_t kOperandAlignment = 16;

Status backend_status(const CudnnLibrary& lib, cudnnStatus_t s, std::string_view what) {
  if (s == CUDNN_STATUS_SUCCESS) return {};
  ErrorCode code = ErrorCode::Internal;
  if (s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED) code = ErrorCode::OutOfMemory;
  if (s == CUDNN_STATUS_NOT_SUPPORTED || s == CUDNN_STATUS_BAD_PARAM) code = ErrorCode::NotSupported;
  return make_error(code, "conv2d: cuDNN {} failed: {}", what, lib.cudnnGetErrorString(s));
}

// A cuDNN backend descriptor, destroyed with its owner. Move-only.
class Descriptor {
 public:
  static Result<Descriptor> make(const CudnnLibrary& lib, cudnnBackendDescriptorType_t type, std::string_view what) {
    Descriptor d;
    d.lib_ = &lib;
    PLANRT_RETURN_IF_ERROR(backend_status(lib, lib.cudnnBackendCreateDescriptor(type, &d.d_),
                                          fmt::format("creating the {} descriptor", what)));
    return d;
  }
  Descriptor() = default;
  Descriptor(Descriptor&& o) noexcept : lib_(o.lib_), d_(std::exchange(o.d_, nullptr)) {}
  Descriptor& operator=(Descriptor&& o) noexcept {
    if (this != &o) {
      reset();
      lib_ = o.lib_;
      d_ = std::exchange(o.d_, nullptr);
    }
    return *this;
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() { reset(); }

  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnBackendDescriptor_t release() { return std::exchange(d_, nullptr); }

  template <typename T>
  Status set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values, int64_t count,
             std::string_view what) {
    return backend_status(*lib_, lib_->cudnnBackendSetAttribute(d_, name, type, count, values),
                          fmt::format("setting {}", what));
  }
  Status finalize(std::string_view what) {
    return backend_status(*lib_, lib_->cudnnBackendFinalize(d_), fmt::format("finalizing the {}", what));
  }

 private:
  void reset() {
    if (d_ != nullptr) (void)lib_->cudnnBackendDestroyDescriptor(d_);
    d_ = nullptr;
  }
  const CudnnLibrary* lib_ = nullptr;
  cudnnBackendDescriptor_t d_ = nullptr;
};

// A packed 4-d tensor of `dims` in cuDNN's order ([N, C, H, W], or [K, C / groups, KH, KW]
// for the filter), laid out in memory that order or, channels_last, with dim 1 innermost
// (NHWC, or KRSC for the filter): cuDNN reads the layout from the strides alone.
Result<Descriptor> tensor(const CudnnLibrary& lib, int64_t uid, cudnnDataType_t type, std::array<int64_t, 4> dims,
                          bool channels_last) {
  PLANRT_ASSIGN_OR_RETURN(Descriptor t, Descriptor::make(lib, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor"));
  const std::array<int64_t, 4> strides =
      channels_last ? std::array<int64_t, 4>{dims[1] * dims[2] * dims[3], 1, dims[3] * dims[1], dims[1]}
                    : std::array<int64_t, 4>{dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  PLANRT_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type, 1, "a tensor's data type"));
  PLANRT_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4, "a tensor's dims"));
  PLANRT_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4, "a tensor's strides"));
  PLANRT_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid, 1, "a tensor's id"));
  PLANRT_RETURN_IF_ERROR(
      t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &kOperandAlignment, 1, "a tensor's alignment"));
  PLANRT_RETURN_IF_ERROR(t.finalize("tensor"));
  return t;
}

// The operation graph of one forward convolution.
Result<Descriptor> convolution_graph(const CudnnLibrary& lib, cudnnHandle_t handle, const ConvPlanKey& k) {
  const cudnnDataType_t type = k.dtype == DType::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  PLANRT_ASSIGN_OR_RETURN(Descriptor x, tensor(lib, kUidX, type, {k.n, k.c, k.h, k.w}, k.channels_last));
  PLANRT_ASSIGN_OR_RETURN(Descriptor w,
                          tensor(lib, kUidW, type, {k.k, k.c / k.groups, k.kh, k.kw}, k.channels_last));
  PLANRT_ASSIGN_OR_RETURN(Descriptor y, tensor(lib, kUidY, type, {k.n, k.k, k.oh, k.ow}, k.channels_last));

  PLANRT_ASSIGN_OR_RETURN(Descriptor conv,
                          Descriptor::make(lib, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "convolution"));
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
                                                          "convolution operation"));
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

  PLANRT_ASSIGN_OR_RETURN(Descriptor graph,
                          Descriptor::make(lib, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph"));
  cudnnBackendDescriptor_t od = op.get();
  PLANRT_RETURN_IF_ERROR(
      graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1, "the graph's handle"));
  PLANRT_RETURN_IF_ERROR(
      graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, &od, 1, "the graph's operation"));
  PLANRT_RETURN_IF_ERROR(graph.finalize("operation graph"));
  return graph;
}

// Whether the engine behind `config` may run this key: its numerical and behaviour notes.
// `allow_runtime_compilation`: the second pass, when no precompiled engine fits.
bool engine_suits(const CudnnLibrary& lib, cudnnBackendDescriptor_t config, const ConvPlanKey& k,
                  bool allow_runtime_compilation) {
  Result<Descriptor> engine = Descriptor::make(lib, CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
  if (!engine.ok()) return false;
  cudnnBackendDescriptor_t ed = engine->get();
  int64_t got = 0;
  if (lib.cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &ed) !=
      CUDNN_STATUS_SUCCESS) {
    return false;
  }
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> numerical{};
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> behavior{};
  int64_t n_numerical = 0, n_behavior = 0;
  if (lib.cudnnBackendGetAttribute(ed, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                   static_cast<int64_t>(numerical.size()), &n_numerical,
                                   numerical.data()) != CUDNN_STATUS_SUCCESS ||
      lib.cudnnBackendGetAttribute(ed, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                   static_cast<int64_t>(behavior.size()), &n_behavior,
                                   behavior.data()) != CUDNN_STATUS_SUCCESS) {
    return false;
  }
  for (int64_t i = 0; i < n_numerical; ++i) {
    // f32 stays f32: TF32 tensor cores only when allowed, never a down-converting engine.
    if (k.dtype == DType::F32 && numerical[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) return false;
    if (k.dtype == DType::F32 && !k.allow_tf32 && numerical[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE) return false;
  }
  for (int64_t i = 0; i < n_behavior; ++i) {
    if (!allow_runtime_compilation && behavior[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) return false;
  }
  return true;
}

// The engine configs cuDNN's heuristics rank for `graph` in `mode`, best first.
Result<std::vector<Descriptor>> ranked_configs(const CudnnLibrary& lib, cudnnBackendDescriptor_t graph,
                                               cudnnBackendHeurMode_t mode) {
  PLANRT_ASSIGN_OR_RETURN(Descriptor heuristics,
                          Descriptor::make(lib, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics"));
  PLANRT_RETURN_IF_ERROR(heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, &graph, 1,
                                        "the heuristics' graph"));
  PLANRT_RETURN_IF_ERROR(heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode, 1, "the mode"));
  PLANRT_RETURN_IF_ERROR(heuristics.finalize("heuristics"));
  int64_t count = 0;
  PLANRT_RETURN_IF_ERROR(backend_status(
      lib,
      lib.cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                   &count, nullptr),
      "counting the heuristics' engine configs"));
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    PLANRT_ASSIGN_OR_RETURN(Descriptor c, Descriptor::make(lib, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config"));
    raw.push_back(c.get());
    configs.push_back(std::move(c));
  }
  int64_t returned = 0;
  if (count > 0) {
    PLANRT_RETURN_IF_ERROR(backend_status(
        lib,
        lib.cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                     count, &returned, raw.data()),
        "reading the heuristics' engine configs"));
  }
  configs.resize(static_cast<size_t>(std::clamp<int64_t>(returned, 0, count)));
  return configs;
}

}  // namespace

CudnnConvPlan::~CudnnConvPlan() {
  if (plan_ != nullptr) (void)lib_->cudnnBackendDestroyDescriptor(plan_);
}

Result<std::unique_ptr<CudnnConvPlan>> CudnnConvPlan::create(const CudnnLibrary& lib, cudnnHandle_t handle,
                                                             const ConvPlanKey& key) {
  PLANRT_ASSIGN_OR_RETURN(Descriptor graph, convolution_graph(lib, handle, key));
  // cuDNN's ranking first (mode A), then its fallback list, which holds the engines that need
  // little or no workspace (a 2x2 stride-2 bf16 convolution found none within its budget in
  // mode A's list); in each, precompiled engines before ones compiled at run time.
  int64_t ranked = 0, smallest_need = -1;  // for the error: configs seen, least workspace over budget
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Result<std::vector<Descriptor>> configs = ranked_configs(lib, graph.get(), mode);
    if (!configs.ok()) {
      if (mode == CUDNN_HEUR_MODE_A) return configs.status();
      continue;
    }
    ranked += static_cast<int64_t>(configs->size());
    for (bool runtime_compilation : {false, true}) {
      for (const Descriptor& config : *configs) {
        if (!engine_suits(lib, config.get(), key, runtime_compilation)) continue;
        PLANRT_ASSIGN_OR_RETURN(Descriptor plan,
                                Descriptor::make(lib, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan"));
        cudnnBackendDescriptor_t cd = config.get();
        if (!plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1, "the plan's handle").ok() ||
            !plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, &cd, 1, "the config")
                 .ok() ||
            !plan.finalize("execution plan").ok()) {
          continue;  // this engine cannot take the shape; the next may
        }
        int64_t workspace = 0, got = 0;
        if (lib.cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                         &got, &workspace) != CUDNN_STATUS_SUCCESS ||
            workspace < 0) {
          continue;
        }
        if (static_cast<uint64_t>(workspace) > key.workspace_budget) {
          if (smallest_need < 0 || workspace < smallest_need) smallest_need = workspace;
          continue;
        }
        auto out = std::unique_ptr<CudnnConvPlan>(new CudnnConvPlan());
        out->lib_ = &lib;
        out->plan_ = plan.release();
        out->workspace_bytes_ = static_cast<uint64_t>(workspace);
        return out;
      }
    }
  }
  return make_error(ErrorCode::NotSupported,
                    "conv2d: cuDNN has no engine for the {} {} convolution of x [N, C, H, W] = [{}, {}, {}, {}] by "
                    "weight [K, C/groups, KH, KW] = [{}, {}, {}, {}] (groups {}) within its planned workspace of {} "
                    "bytes ({} engine configs ranked{})",
                    dtype_name(key.dtype), key.channels_last ? "NHWC" : "NCHW", key.n, key.c, key.h, key.w, key.k,
                    key.c / key.groups, key.kh, key.kw, key.groups, key.workspace_budget, ranked,
                    smallest_need >= 0 ? fmt::format("; the smallest that suits needs {} bytes", smallest_need) : "");
}

Status CudnnConvPlan::execute(cudnnHandle_t handle, const void* x, const void* w, void* y, void* workspace) const {
  PLANRT_ASSIGN_OR_RETURN(Descriptor pack, Descriptor::make(*lib_, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack"));
  const std::array<int64_t, 3> uids{kUidX, kUidW, kUidY};
  std::array<void*, 3> pointers{const_cast<void*>(x), const_cast<void*>(w), y};
  PLANRT_RETURN_IF_ERROR(
      pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), 3, "the operands' ids"));
  PLANRT_RETURN_IF_ERROR(
      pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers.data(), 3, "the operands"));
  PLANRT_RETURN_IF_ERROR(pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace, 1, "the workspace"));
  PLANRT_RETURN_IF_ERROR(pack.finalize("variant pack"));
  return backend_status(*lib_, lib_->cudnnBackendExecute(handle, plan_, pack.get()), "executing the convolution");
}

Result<const CudnnConvPlan*> ConvPlanCache::get(const CudnnLibrary& lib, cudnnHandle_t handle,
                                                const ConvPlanKey& key) {
  std::lock_guard lock(mu_);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  PLANRT_ASSIGN_OR_RETURN(std::unique_ptr<CudnnConvPlan> plan, CudnnConvPlan::create(lib, handle, key));
  return plans_.emplace(key, std::move(plan)).first->second.get();
}

size_t ConvPlanCache::size() const {
  std::lock_guard lock(mu_);
  return plans_.size();
}

}  // namespace planrt::kernels::cuda
