// scaled_dot_product_attention, f32, bf16 and f16, in either layout (kernels/attention_layout.h).
// Fused (attention_runs_fused: the default for
// head dim 64): one kernel, online softmax, no scores in memory (attention_kernels.cu; bf16
// and f16 on the tensor cores, attention_bf16_kernels.cu). bf16 or f16 without a causal mask
// runs cuDNN's fused attention instead where the context has a cuDNN handle and cuDNN has a
// plan for the shape (cudnn_attention_plan.h: cuDNN 9.13 or later, no workspace, 16-byte
// aligned operands); where it has none, planrt's kernel runs, with the same result up to the
// 16-bit rounding (backend option attention=planrt keeps planrt's kernel). Otherwise, f32 only:
// scores = scale * q @ k^T (strided-batched GEMM over the heads), softmax of each score row
// with the optional causal mask (one kernel, in place), then scores @ v (strided-batched
// GEMM). Those scores live in temporary memory, at most kScoreBudget bytes at a time: heads
// are processed in groups that fit (one head at least).
// The optional mask (input 3, kernels/attention_layout.h) is applied by planrt's kernels
// only: the fused ones read it where they have a score; the unfused path masks each group's
// score rows in its softmax (launch::attention_softmax_rows); cuDNN is not asked. A query
// row whose keys are all masked gives zeros on every path.
#include <algorithm>
#include <limits>
#include <type_traits>

#include "kernels/cpu/blas.h"
#include "kernels/cuda/attention_dispatch.cuh"
#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_library.h"
#include "kernels/cuda/float_types.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.h"
#include "kernels/op_plans.h"
#include "kernels/workspace.h"
#include "planrt/core/log.h"

namespace planrt::kernels::cuda {
namespace {

// A dim of 1 addresses nothing with its stride, which the layout may leave 0 (bhsd: one batch
// of every head); cuDNN is given the stride that would step past the whole operand instead.
AttentionOperandStrides cudnn_strides(const AttentionLayout& layout, const AttentionStrides& s, int64_t batches,
                                      int64_t rows) {
  AttentionOperandStrides out{s.batch, s.head, s.row};
  if (layout.heads_per_batch == 1) out.head = rows * s.row;
  if (batches == 1) out.batch = layout.heads_per_batch * out.head;
  return out;
}

// Runs bf16 or f16 (T) attention as a cuDNN plan; false (nothing enqueued) when cuDNN cannot
// take it here: no handle, operands off 16-byte alignment, or no plan for the shape.
template <typename T>
Result<bool> ran_on_cudnn(const CudaKernelContext& ctx, const AttentionPlan& plan, DType dtype, const void* q,
                          const void* k, const void* v, void* out) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  const AttentionLayout& layout = plan.layout;
  if (!ctx.cudnn_attention || ctx.cudnn == nullptr || ctx.cudnn->get() == nullptr || plan.causal) return false;
  if (layout.mask.kind != AttentionMaskKind::None) return false;  // planrt's kernel applies masks
  const auto* bq = static_cast<const T*>(q) + layout.q.start;
  const auto* bk = static_cast<const T*>(k) + layout.k.start;
  const auto* bv = static_cast<const T*>(v) + layout.v.start;
  auto* bo = static_cast<T*>(out) + layout.out.start;
  if (!launch::all_aligned16(bq, bk, bv, bo) || !layout.strides_multiple_of(8)) return false;
  PLANRT_ASSIGN_OR_RETURN(const CudnnLibrary* lib, cudnn_library());
  AttentionPlanKey key;
  key.batch = plan.heads / layout.heads_per_batch;
  key.heads = layout.heads_per_batch;
  key.sq = plan.sq;
  key.sk = plan.sk;
  key.d = plan.d;
  key.dv = plan.dv;
  key.q = cudnn_strides(layout, layout.q, key.batch, plan.sq);
  key.k = cudnn_strides(layout, layout.k, key.batch, plan.sk);
  key.v = cudnn_strides(layout, layout.v, key.batch, plan.sk);
  key.out = cudnn_strides(layout, layout.out, key.batch, plan.sq);
  key.dtype = dtype;
  key.workspace_budget = 0;  // attention plans no workspace (kernels/workspace.h)
  AttentionPlanCache& cache = ctx.cudnn->attention_plans();
  const AttentionPlanCache::Known known = cache.find(key);
  if (known.refused) return false;  // asked once, logged then
  const CudnnAttentionPlan* plan_for_key = known.plan;
  if (plan_for_key == nullptr) {
    // Making a plan compiles and loads kernels, which a stream being captured into a CUDA
    // graph (the caller's own capture) must not see: planrt's kernel runs this call instead.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(ctx.stream, &capturing) != cudaSuccess || capturing != cudaStreamCaptureStatusNone) {
      (void)cudaGetLastError();
      return false;
    }
    Result<const CudnnAttentionPlan*> made = cache.get(*lib, ctx.cudnn->get(), key);
    if (!made.ok()) {
      // No plan: planrt's kernel computes the same. A refusal is remembered (so logged once);
      // any other failure (out of memory, a failed compilation) is tried again on a later call.
      PLANRT_LOG_INFO("{}: planrt's kernel runs it: {}", op, made.status().to_string());
      return false;
    }
    plan_for_key = *made;
  }
  if (cudnnStatus_t s = lib->cudnnSetStream(ctx.cudnn->get(), ctx.stream); s != CUDNN_STATUS_SUCCESS) {
    return make_error(ErrorCode::Internal, "{}: cudnnSetStream failed: {}", op, lib->cudnnGetErrorString(s));
  }
  PLANRT_RETURN_IF_ERROR(plan_for_key->execute(ctx.cudnn->get(), bq, bk, bv, bo, static_cast<float>(plan.scale), nullptr));
  return true;
}

}  // namespace

Status scaled_dot_product_attention(const CudaKernelContext& ctx, const OpAttrs& attrs,
                                    std::span<const TensorView> inputs,
                                    std::span<const TensorView> outputs) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  // q, k and v share one dtype; the mask is bool or that dtype (plan_attention checks it).
  PLANRT_ASSIGN_OR_RETURN(DType dtype, require_float_inputs(op, inputs.first(std::min<size_t>(inputs.size(), 3))));
  PLANRT_ASSIGN_OR_RETURN(AttentionPlan plan, plan_attention(attrs, inputs, outputs));
  const auto [heads, sq, sk, d, dv, causal, scale, fused_attr, layout] = plan;
  PLANRT_RETURN_IF_ERROR(cpu::check_gemm_dims(op, sq, sk, d));
  PLANRT_RETURN_IF_ERROR(cpu::check_gemm_dims(op, sq, dv, sk));

  // The decision the workspace planners read too (kernels/workspace.h).
  PLANRT_ASSIGN_OR_RETURN(AttentionWorkspace workspace, attention_workspace(plan, dtype));
  const bool fused = workspace.fused;  // fused_attr and head dim 64
  if (dtype != DType::F32 && !fused) {
    return make_error(ErrorCode::NotSupported,
                      "{}: {} attention runs fused only (head dim 64, fused not false); got "
                      "head dims {} and {}, fused {}: use f32 for the unfused path",
                      op, dtype_name(dtype), d, dv, fused_attr);
  }
  if (heads == 0 || sq == 0 || dv == 0) return {};
  if (sk == 0) {  // softmax over no keys weighs nothing: the weighted sum is empty
    return cuda_status(op, "cudaMemsetAsync",
                       cudaMemsetAsync(outputs[0].data, 0, outputs[0].nbytes(), ctx.stream));
  }
  const void* mask = attention_mask_data(inputs);  // null: none
  if (dtype != DType::F32) {  // bf16 or f16: cuDNN's or planrt's kernel on the tensor cores
    // (plan's fields: clang before 16 captures no structured binding in a lambda.)
    return with_float_type(dtype, [&](auto t) -> Status {
      using T = typename decltype(t)::type;
      PLANRT_ASSIGN_OR_RETURN(bool on_cudnn,
                              ran_on_cudnn<T>(ctx, plan, dtype, inputs[0].data, attention_source(inputs, 1).data,
                                              attention_source(inputs, 2).data, outputs[0].data));
      if (on_cudnn) return {};
      if constexpr (std::is_same_v<T, float>) {
        return make_error(ErrorCode::Internal, "{}: no 16-bit kernel for dtype {}", op, dtype_name(dtype));
      } else {
        return cuda_status(op, "kernel launch",
                           launch::fused_attention(inputs[0].data_as<const T>(),
                                                   attention_source(inputs, 1).data_as<const T>(),
                                                   attention_source(inputs, 2).data_as<const T>(), mask,
                                                   outputs[0].data_as<T>(), plan.heads, plan.sq, plan.sk,
                                                   static_cast<float>(plan.scale), plan.causal, plan.layout,
                                                   ctx.stream));
      }
    });
  }
  float* out = outputs[0].data_as<float>();
  const float* pq = inputs[0].data_as<const float>();
  const float* pk = attention_source(inputs, 1).data_as<const float>();
  const float* pv = attention_source(inputs, 2).data_as<const float>();
  if (fused) {  // no temporary memory
    return cuda_status(op, "kernel launch",
                       launch::fused_attention(pq, pk, pv, mask, out, heads, sq, sk,
                                               static_cast<float>(scale), causal, layout,
                                               ctx.stream));
  }
  const int64_t group = workspace.head_group;
  TempBuffer scores(ctx);
  PLANRT_RETURN_IF_ERROR(scores.allocate(op, static_cast<size_t>(workspace.bytes)));
  auto* s = static_cast<float*>(scores.get());
  // Groups of heads that share a batch index, so that one stride steps from head to head
  // in every layout (kernels/attention_layout.h).
  const int64_t per_batch = layout.heads_per_batch;
  for (int64_t h = 0; h < heads;) {
    const int64_t count = std::min({group, heads - h, per_batch - h % per_batch});
    PLANRT_RETURN_IF_ERROR(gemm_strided(
        op, ctx, BLayout::NK, sq, sk, d, static_cast<float>(scale),
        pq + layout.head_offset(layout.q, h), layout.q.head, pk + layout.head_offset(layout.k, h),
        layout.k.head, 0.0f, s, sq * sk, count, {layout.q.row, layout.k.row, 0}));
    PLANRT_RETURN_IF_ERROR(cuda_status(
        op, "kernel launch",
        mask == nullptr ? launch::softmax_rows(s, s, count * sq, sk, causal ? sq : 0, ctx.stream)
                        : launch::attention_softmax_rows(s, count, sq, sk, causal, mask, layout.mask, h,
                                                         ctx.stream)));
    PLANRT_RETURN_IF_ERROR(gemm_strided(
        op, ctx, BLayout::KN, sq, dv, sk, 1.0f, s, sq * sk, pv + layout.head_offset(layout.v, h),
        layout.v.head, 0.0f, out + layout.head_offset(layout.out, h), layout.out.head, count,
        {0, layout.v.row, layout.out.row}));
    h += count;
  }
  return scores.release();
}

}  // namespace planrt::kernels::cuda
