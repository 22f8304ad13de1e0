#include "kernels/cuda/cudnn_backend.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/cuda/cudnn_library.h"

namespace planrt::kernels::cuda {

Status cudnn_backend_status(const CudnnLibrary& lib, cudnnStatus_t s, std::string_view op, std::string_view what) {
  if (s == CUDNN_STATUS_SUCCESS) return {};
  // cuDNN 9 groups its codes by thousands: 2xxx bad parameters, 3xxx not supported (an
  // operation this version lacks, a shape no engine takes, NVRTC missing), 4xxx internal.
  ErrorCode code = ErrorCode::Internal;
  const int category = static_cast<int>(s) / 1000;
  if (category == 2 || category == 3) code = ErrorCode::NotSupported;
  if (s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED || s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) {
    code = ErrorCode::OutOfMemory;
  }
  return make_error(code, "{}: cuDNN {} failed: {}", op, what, lib.cudnnGetErrorString(s));
}

Result<BackendDescriptor> BackendDescriptor::make(const CudnnLibrary& lib, cudnnBackendDescriptorType_t type,
                                                  std::string_view op, std::string_view what) {
  BackendDescriptor d;
  d.lib_ = &lib;
  d.op_ = op;
  PLANRT_RETURN_IF_ERROR(cudnn_backend_status(lib, lib.cudnnBackendCreateDescriptor(type, &d.d_), op,
                                              fmt::format("creating the {} descriptor", what)));
  return d;
}

BackendDescriptor::BackendDescriptor(BackendDescriptor&& o) noexcept
    : lib_(o.lib_), op_(o.op_), d_(std::exchange(o.d_, nullptr)) {}

BackendDescriptor& BackendDescriptor::operator=(BackendDescriptor&& o) noexcept {
  if (this != &o) {
    reset();
    lib_ = o.lib_;
    op_ = o.op_;
    d_ = std::exchange(o.d_, nullptr);
  }
  return *this;
}

void BackendDescriptor::reset() {
  if (d_ != nullptr) (void)lib_->cudnnBackendDestroyDescriptor(d_);
  d_ = nullptr;
}

Status BackendDescriptor::set_raw(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                                  const void* values, std::string_view what) {
  return cudnn_backend_status(*lib_, lib_->cudnnBackendSetAttribute(d_, name, type, count, values), op_,
                              fmt::format("setting {}", what));
}

Status BackendDescriptor::finalize(std::string_view what) {
  return cudnn_backend_status(*lib_, lib_->cudnnBackendFinalize(d_), op_, fmt::format("finalizing the {}", what));
}

Result<BackendDescriptor> backend_tensor(const CudnnLibrary& lib, std::string_view op, const BackendTensorSpec& spec) {
  PLANRT_ASSIGN_OR_RETURN(BackendDescriptor t,
                          BackendDescriptor::make(lib, CUDNN_BACKEND_TENSOR_DESCRIPTOR, op, "tensor"));
  PLANRT_RETURN_IF_ERROR(
      t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &spec.type, 1, "a tensor's data type"));
  PLANRT_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, spec.dims.data(), 4, "a tensor's dims"));
  PLANRT_RETURN_IF_ERROR(
      t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, spec.strides.data(), 4, "a tensor's strides"));
  PLANRT_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &spec.uid, 1, "a tensor's id"));
  PLANRT_RETURN_IF_ERROR(t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &kCudnnOperandAlignment, 1,
                               "a tensor's alignment"));
  if (spec.by_value) {
    const bool by_value = true;
    PLANRT_RETURN_IF_ERROR(
        t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value, 1, "a scalar passed by value"));
  }
  PLANRT_RETURN_IF_ERROR(t.finalize("tensor"));
  return t;
}

Result<BackendDescriptor> backend_graph(const CudnnLibrary& lib, cudnnHandle_t handle, std::string_view op,
                                        std::span<const BackendDescriptor* const> ops) {
  PLANRT_ASSIGN_OR_RETURN(BackendDescriptor graph,
                          BackendDescriptor::make(lib, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, op, "operation graph"));
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const BackendDescriptor* d : ops) raw.push_back(d->get());
  PLANRT_RETURN_IF_ERROR(
      graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1, "the graph's handle"));
  PLANRT_RETURN_IF_ERROR(graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.data(),
                                   static_cast<int64_t>(raw.size()), "the graph's operations"));
  PLANRT_RETURN_IF_ERROR(graph.finalize("operation graph"));
  return graph;
}

Result<std::vector<BackendDescriptor>> ranked_engine_configs(const CudnnLibrary& lib, cudnnBackendDescriptor_t graph,
                                                             std::string_view op, cudnnBackendHeurMode_t mode) {
  PLANRT_ASSIGN_OR_RETURN(BackendDescriptor heuristics,
                          BackendDescriptor::make(lib, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, op, "heuristics"));
  PLANRT_RETURN_IF_ERROR(heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, &graph, 1,
                                        "the heuristics' graph"));
  PLANRT_RETURN_IF_ERROR(heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode, 1, "the mode"));
  PLANRT_RETURN_IF_ERROR(heuristics.finalize("heuristics"));
  int64_t count = 0;
  PLANRT_RETURN_IF_ERROR(cudnn_backend_status(
      lib,
      lib.cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                   &count, nullptr),
      op, "counting the heuristics' engine configs"));
  std::vector<BackendDescriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    PLANRT_ASSIGN_OR_RETURN(BackendDescriptor c,
                            BackendDescriptor::make(lib, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, op, "engine config"));
    raw.push_back(c.get());
    configs.push_back(std::move(c));
  }
  int64_t returned = 0;
  if (count > 0) {
    PLANRT_RETURN_IF_ERROR(cudnn_backend_status(
        lib,
        lib.cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                     count, &returned, raw.data()),
        op, "reading the heuristics' engine configs"));
  }
  configs.resize(static_cast<size_t>(std::clamp<int64_t>(returned, 0, count)));
  return configs;
}

bool EngineNotes::has(cudnnBackendNumericalNote_t n) const {
  return std::find(numerical.begin(), numerical.end(), n) != numerical.end();
}
bool EngineNotes::has(cudnnBackendBehaviorNote_t n) const {
  return std::find(behavior.begin(), behavior.end(), n) != behavior.end();
}

bool read_engine_notes(const CudnnLibrary& lib, cudnnBackendDescriptor_t config, std::string_view op,
                       EngineNotes& notes) {
  Result<BackendDescriptor> engine = BackendDescriptor::make(lib, CUDNN_BACKEND_ENGINE_DESCRIPTOR, op, "engine");
  if (!engine.ok()) return false;
  cudnnBackendDescriptor_t ed = engine->get();
  int64_t got = 0;
  if (lib.cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &ed) !=
      CUDNN_STATUS_SUCCESS) {
    return false;
  }
  notes.numerical.assign(CUDNN_NUMERICAL_NOTE_TYPE_COUNT, {});
  notes.behavior.assign(CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, {});
  int64_t n_numerical = 0, n_behavior = 0;
  if (lib.cudnnBackendGetAttribute(ed, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                   static_cast<int64_t>(notes.numerical.size()), &n_numerical,
                                   notes.numerical.data()) != CUDNN_STATUS_SUCCESS ||
      lib.cudnnBackendGetAttribute(ed, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                   static_cast<int64_t>(notes.behavior.size()), &n_behavior,
                                   notes.behavior.data()) != CUDNN_STATUS_SUCCESS) {
    return false;
  }
  notes.numerical.resize(static_cast<size_t>(std::clamp<int64_t>(n_numerical, 0, CUDNN_NUMERICAL_NOTE_TYPE_COUNT)));
  notes.behavior.resize(static_cast<size_t>(std::clamp<int64_t>(n_behavior, 0, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT)));
  return true;
}

Result<FinalizedPlan> finalize_plan(const CudnnLibrary& lib, cudnnHandle_t handle, cudnnBackendDescriptor_t config,
                                    std::string_view op) {
  FinalizedPlan out;
  PLANRT_ASSIGN_OR_RETURN(out.plan,
                          BackendDescriptor::make(lib, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, op, "execution plan"));
  PLANRT_RETURN_IF_ERROR(
      out.plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle, 1, "the plan's handle"));
  PLANRT_RETURN_IF_ERROR(
      out.plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, &config, 1, "the config"));
  PLANRT_RETURN_IF_ERROR(out.plan.finalize("execution plan"));
  int64_t got = 0;
  PLANRT_RETURN_IF_ERROR(cudnn_backend_status(
      lib,
      lib.cudnnBackendGetAttribute(out.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                                   &out.workspace_bytes),
      op, "reading the plan's workspace size"));
  if (out.workspace_bytes < 0) {
    return make_error(ErrorCode::Internal, "{}: cuDNN reports a workspace of {} bytes", op, out.workspace_bytes);
  }
  return out;
}

Result<FinalizedPlan> search_plan(const CudnnLibrary& lib, cudnnHandle_t handle, cudnnBackendDescriptor_t graph,
                                  std::string_view op, uint64_t workspace_budget, int passes,
                                  const std::function<bool(cudnnBackendDescriptor_t config, int pass)>& suits,
                                  PlanSearch& seen) {
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Result<std::vector<BackendDescriptor>> configs = ranked_engine_configs(lib, graph, op, mode);
    if (!configs.ok()) {  // a mode with no list; the other may have one
      if (seen.first_failure.empty()) seen.first_failure = configs.status().message();
      continue;
    }
    seen.ranked += static_cast<int64_t>(configs->size());
    for (int pass = 0; pass < passes; ++pass) {
      for (const BackendDescriptor& config : *configs) {
        if (!suits(config.get(), pass)) continue;
        Result<FinalizedPlan> plan = finalize_plan(lib, handle, config.get(), op);
        if (!plan.ok()) {  // this engine cannot take the graph; the next may
          if (seen.first_failure.empty()) seen.first_failure = plan.status().message();
          if (plan.status().code() != ErrorCode::NotSupported && seen.other_failure.ok()) {
            seen.other_failure = plan.status();
          }
          continue;
        }
        if (static_cast<uint64_t>(plan->workspace_bytes) > workspace_budget) {
          if (seen.smallest_need < 0 || plan->workspace_bytes < seen.smallest_need) {
            seen.smallest_need = plan->workspace_bytes;
          }
          continue;
        }
        return plan;
      }
    }
  }
  if (!seen.other_failure.ok()) return seen.other_failure;
  return make_error(ErrorCode::NotSupported, "{}: no cuDNN engine config suits", op);
}

Status execute_plan(const CudnnLibrary& lib, cudnnHandle_t handle, cudnnBackendDescriptor_t plan, std::string_view op,
                    std::span<const int64_t> uids, std::span<void* const> pointers, void* workspace) {
  PLANRT_ASSIGN_OR_RETURN(BackendDescriptor pack,
                          BackendDescriptor::make(lib, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, op, "variant pack"));
  PLANRT_RETURN_IF_ERROR(pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(),
                                  static_cast<int64_t>(uids.size()), "the operands' ids"));
  PLANRT_RETURN_IF_ERROR(pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers.data(),
                                  static_cast<int64_t>(pointers.size()), "the operands"));
  PLANRT_RETURN_IF_ERROR(
      pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace, 1, "the workspace"));
  PLANRT_RETURN_IF_ERROR(pack.finalize("variant pack"));
  return cudnn_backend_status(lib, lib.cudnnBackendExecute(handle, plan, pack.get()), op, "executing the plan");
}

}  // namespace planrt::kernels::cuda
