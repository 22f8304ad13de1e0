#include "kernels/cuda/cudnn_attention_plan.h"

#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/cuda/cudnn_library.h"

namespace planrt::kernels::cuda {
namespace {

constexpr int64_t kUidQ = 1, kUidK = 2, kUidV = 3, kUidOut = 4, kUidScale = 5;
constexpr std::string_view kOp = "scaled_dot_product_attention";

#if CUDNN_VERSION >= 91300
Result<BackendDescriptor> operand(const CudnnLibrary& lib, int64_t uid, cudnnDataType_t type, int64_t batch,
                                  int64_t heads, int64_t rows, int64_t width, const AttentionOperandStrides& s) {
  return backend_tensor(lib, kOp, {uid, type, {batch, heads, rows, width}, {s.batch, s.head, s.row, 1}});
}
#endif

Result<BackendDescriptor> attention_graph(const CudnnLibrary& lib, cudnnHandle_t handle, const AttentionPlanKey& k) {
  if (k.dtype != DType::BF16 && k.dtype != DType::F16) {
    return make_error(ErrorCode::NotSupported, "{}: cuDNN's fused attention takes bf16 and f16 here, not {}", kOp,
                      dtype_name(k.dtype));
  }
#if CUDNN_VERSION < 91300
  // Built against headers older than the fused attention operation: every call takes planrt's
  // own kernel (the caller falls back on NotSupported).
  (void)lib, (void)handle;
  return make_error(ErrorCode::NotSupported,
                    "{}: planrt was built against cuDNN {}.{}; cuDNN's fused attention needs its 9.13 "
                    "headers or later",
                    kOp, CUDNN_MAJOR, CUDNN_MINOR);
#else
  const cudnnDataType_t type = k.dtype == DType::F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
  PLANRT_ASSIGN_OR_RETURN(BackendDescriptor q, operand(lib, kUidQ, type, k.batch, k.heads, k.sq, k.d, k.q));
  PLANRT_ASSIGN_OR_RETURN(BackendDescriptor kd, operand(lib, kUidK, type, k.batch, k.heads, k.sk, k.d, k.k));
  PLANRT_ASSIGN_OR_RETURN(BackendDescriptor v, operand(lib, kUidV, type, k.batch, k.heads, k.sk, k.dv, k.v));
  PLANRT_ASSIGN_OR_RETURN(BackendDescriptor o, operand(lib, kUidOut, type, k.batch, k.heads, k.sq, k.dv, k.out));
  PLANRT_ASSIGN_OR_RETURN(BackendDescriptor scale,
                          backend_tensor(lib, kOp, {kUidScale, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, true}));
  // An older cuDNN has no such descriptor type: creating it fails NotSupported (bad param).
  PLANRT_ASSIGN_OR_RETURN(BackendDescriptor op, BackendDescriptor::make(lib, CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR,
                                                                        kOp, "fused attention operation"));
  PLANRT_RETURN_IF_ERROR(op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, q, "the queries"));
  PLANRT_RETURN_IF_ERROR(op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, kd, "the keys"));
  PLANRT_RETURN_IF_ERROR(op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, v, "the values"));
  PLANRT_RETURN_IF_ERROR(op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, o, "the output"));
  PLANRT_RETURN_IF_ERROR(op.set_descriptor(CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, scale, "the scale"));
  PLANRT_RETURN_IF_ERROR(op.finalize("fused attention operation"));
  const BackendDescriptor* ops[] = {&op};
  return backend_graph(lib, handle, kOp, ops);
#endif
}

}  // namespace

Result<std::unique_ptr<CudnnAttentionPlan>> CudnnAttentionPlan::create(const CudnnLibrary& lib, cudnnHandle_t handle,
                                                                       const AttentionPlanKey& key) {
  PLANRT_ASSIGN_OR_RETURN(BackendDescriptor graph, attention_graph(lib, handle, key));
  // Every engine cuDNN ranks for the graph computes it the same way (bf16 or f16 in, f32
  // accumulation); they compile at run time, so none is put last.
  PlanSearch seen;
  Result<FinalizedPlan> plan = search_plan(
      lib, handle, graph.get(), kOp, key.workspace_budget, 1, [](cudnnBackendDescriptor_t, int) { return true; },
      seen);
  if (plan.ok()) {
    auto out = std::unique_ptr<CudnnAttentionPlan>(new CudnnAttentionPlan());
    out->lib_ = &lib;
    out->plan_ = std::move(plan).value();
    return out;
  }
  if (plan.status().code() != ErrorCode::NotSupported) return plan.status();
  return make_error(ErrorCode::NotSupported,
                    "{}: cuDNN has no engine for {} heads x {} batches of {} queries, {} keys, head dims {} and {} "
                    "within a workspace of {} bytes ({} engine configs ranked{}{})",
                    kOp, key.heads, key.batch, key.sq, key.sk, key.d, key.dv, key.workspace_budget, seen.ranked,
                    seen.smallest_need >= 0 ? fmt::format("; the smallest needs {} bytes", seen.smallest_need) : "",
                    seen.first_failure.empty() ? "" : "; the first refused with: " + seen.first_failure);
}

Status CudnnAttentionPlan::execute(cudnnHandle_t handle, const void* q, const void* k, const void* v, void* out,
                                   float scale, void* workspace) const {
  const int64_t uids[] = {kUidQ, kUidK, kUidV, kUidOut, kUidScale};
  void* const pointers[] = {const_cast<void*>(q), const_cast<void*>(k), const_cast<void*>(v), out, &scale};
  return execute_plan(*lib_, handle, plan_.plan.get(), kOp, uids, pointers, workspace);
}

}  // namespace planrt::kernels::cuda
