#include "kernels/workspace.h"

#include <algorithm>
#include <limits>

#include "kernels/cpu/packed_conv.h"
#include "kernels/op_plans.h"

namespace planrt::kernels {

bool attention_runs_fused(const AttentionPlan& plan) {
  return plan.fused && plan.d == 64 && plan.dv == 64;
}

bool attention_may_run_on_cudnn(std::string_view op, const OpAttrs& attrs, DType q_dtype) {
  if (op != "scaled_dot_product_attention" || (q_dtype != DType::BF16 && q_dtype != DType::F16)) return false;
  Result<bool> causal = attrs.get_bool("causal", false);
  return !causal.ok() || !*causal;
}

int64_t attention_head_group(int64_t heads, int64_t head_bytes) {
  if (head_bytes <= 0) return std::max<int64_t>(1, heads);
  return std::max<int64_t>(1, std::min(heads, kScoreBudget / head_bytes));
}

Result<AttentionWorkspace> attention_workspace(const AttentionPlan& plan, DType dtype) {
  AttentionWorkspace ws;
  ws.fused = attention_runs_fused(plan);
  if (ws.fused || dtype == DType::BF16 || dtype == DType::F16) return ws;
  if (plan.heads == 0 || plan.sq == 0 || plan.dv == 0 || plan.sk == 0) return ws;
  if (plan.sq > std::numeric_limits<int64_t>::max() / int64_t{sizeof(float)} / plan.sk) {
    return make_error(ErrorCode::OutOfMemory,
                      "scaled_dot_product_attention: a score matrix of {} x {} floats overflows",
                      plan.sq, plan.sk);
  }
  const int64_t head_bytes = plan.sq * plan.sk * int64_t{sizeof(float)};
  ws.head_group = attention_head_group(plan.heads, head_bytes);
  // The whole budget once the heads do not all fit, not the group's exact bytes: those shrink
  // and grow again as the shapes shrink (a group of 1 head at 151 MB becomes 3 at 67 MB =
  // 201 MB), and a plan made at the shapes' max must hold every smaller call. This way the
  // bytes only grow with the shapes; the group, and so the kernel's work, is unchanged.
  const bool all_heads_fit = plan.heads <= kScoreBudget / head_bytes;
  ws.bytes = static_cast<uint64_t>(all_heads_fit ? plan.heads * head_bytes
                                                 : std::max(head_bytes, kScoreBudget));
  return ws;
}

bool matmul_needs_pointer_arrays(int64_t m, int64_t n, int64_t k, const Shape& a_batch,
                                 const Shape& b_batch, const Shape& batch) {
  const int64_t count = batch.numel();
  if (b_batch.numel() == 1 && a_batch == batch) return false;  // folds into one product
  const bool a_uniform = a_batch == batch || a_batch.numel() == 1;
  const bool b_uniform = b_batch == batch || b_batch.numel() == 1;
  return !((a_uniform && b_uniform) || k == 0 || count == 0 || m == 0 || n == 0);
}

uint64_t conv2d_im2col_bytes(const Conv2dPlan& p) {
  const Window2d& w = p.window;
  const bool pointwise = w.kh == 1 && w.kw == 1 && w.stride_h == 1 && w.stride_w == 1 &&
                         w.pad_top == 0 && w.pad_left == 0 && w.pad_bottom == 0 && w.pad_right == 0;
  if (pointwise) return 0;
  return static_cast<uint64_t>(p.c / p.groups) * static_cast<uint64_t>(w.kh * w.kw) *
         static_cast<uint64_t>(p.oh * p.ow) * sizeof(float);
}

Result<uint64_t> conv2d_host_workspace_bytes_per_image(const Conv2dPlan& p) {
  // Sizes come from checked shapes of at most 2^63 elements each; the products below stay
  // far inside 64 bits for any tensor a host could hold, but a program may claim anything.
  const auto fits = [](int64_t a, int64_t b) { return a >= 0 && b >= 0 && (b == 0 || a <= INT64_MAX / b); };
  if (!fits(p.c, p.h * p.w) || !fits(p.k, p.oh * p.ow) || !fits(p.c / p.groups, p.window.kh * p.window.kw * p.oh * p.ow)) {
    return make_error(ErrorCode::InvalidArgument, "conv2d: the workspace of a [{}, {}, {}] image overflows", p.c, p.h, p.w);
  }
  // oneDNN's convolution (cpu/packed_conv.h) runs channels-last: an NCHW program's x and y
  // are copied through the workspace, a channels-last one's are used where they lie.
  const uint64_t copies =
      p.channels_last ? 0 : static_cast<uint64_t>(p.c * p.h * p.w + p.k * p.oh * p.ow) * sizeof(float);
  // A 3x3 convolution of stride 1 may run as oneDNN's Winograd convolution (cpu/packed_conv.h):
  // room for its blocked copies and scratchpad at batch 1 (per image, less at larger batches).
  return std::max({conv2d_im2col_bytes(p), copies + kHostConvScratchBytes, cpu::winograd_workspace_bytes_per_image(p)});
}

bool conv2d_pads_symmetric(const Conv2dPlan& p) {
  return p.window.pad_top == p.window.pad_bottom && p.window.pad_left == p.window.pad_right;
}

bool conv2d_cuda_is_depthwise(const Conv2dPlan& p) {
  return p.channels_last && p.groups > 1 && p.groups == p.c && p.k == p.c;
}

CudaConvWorkspace conv2d_cuda_workspace_per_image(const Conv2dPlan& p, DType dtype) {
  const Window2d& w = p.window;
  const auto es = static_cast<uint64_t>(element_size(dtype));
  CudaConvWorkspace ws;
  if (conv2d_cuda_is_depthwise(p)) return ws;
  if (!conv2d_pads_symmetric(p)) {
    ws.padded_copy_bytes = static_cast<uint64_t>(p.c) * static_cast<uint64_t>(p.h + w.pad_top + w.pad_bottom) *
                           static_cast<uint64_t>(p.w + w.pad_left + w.pad_right) * es;
    ws.padded_copy_bytes = (ws.padded_copy_bytes + 255) / 256 * 256;  // the algorithm's part stays aligned
  }
  ws.algorithm_bytes = std::max(std::max(static_cast<uint64_t>(p.c * p.h * p.w), static_cast<uint64_t>(p.k * p.oh * p.ow)) * es,
                                kCudaConvMinWorkspaceBytes);
  return ws;
}

uint64_t linear_cuda_workspace_bytes(int64_t m, int64_t n, int64_t k) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  // 32 f32 partial outputs, in doubles so that no product of int64 dims overflows.
  const double partials = 32.0 * 4.0 * static_cast<double>(m) * static_cast<double>(n);
  if (partials >= static_cast<double>(kCudaLinearWorkspaceCap)) return kCudaLinearWorkspaceCap;
  return (static_cast<uint64_t>(partials) + 255) / 256 * 256;
}

Result<uint64_t> cuda_workspace_bytes(std::string_view op, const OpAttrs& attrs,
                                      std::span<const TensorView> inputs,
                                      std::span<const TensorView> outputs) {
  if (op == "scaled_dot_product_attention") {
    PLANRT_ASSIGN_OR_RETURN(AttentionPlan p, plan_attention(attrs, inputs, outputs));
    PLANRT_ASSIGN_OR_RETURN(AttentionWorkspace ws, attention_workspace(p, inputs[0].dtype));
    return ws.bytes;
  }
  if (op == "linear") {
    PLANRT_ASSIGN_OR_RETURN(LinearPlan p, plan_linear(inputs, outputs));
    return linear_cuda_workspace_bytes(p.m, p.n, p.k);
  }
  if (op == "matmul") {
    PLANRT_ASSIGN_OR_RETURN(MatmulPlan p, plan_matmul(inputs, outputs));
    if (!matmul_needs_pointer_arrays(p.m, p.n, p.k, p.a_batch, p.b_batch, p.batch)) {
      return uint64_t{0};
    }
    return static_cast<uint64_t>(3 * p.batch.numel()) * sizeof(float*);
  }
  return uint64_t{0};
}

}  // namespace planrt::kernels
