// Workspace: the temporary device memory a kernel asks for beyond its operands
// (CudaKernelContext::temp), as a function of the operand shapes alone. The CUDA kernels
// size their temporaries with these functions, and an engine (docs/design.md §6) plans the same
// figures into its activation scratch, so both always agree.
//
// Three CUDA kernels take any: linear (cuBLASLt's workspace, below),
// scaled_dot_product_attention when it keeps its scores (score rows of a group of heads, at
// most kScoreBudget bytes unless one head alone needs more; the fused kernel takes none) and
// matmul with mixed broadcasting (three pointer arrays). The CPU kernels take none from a
// caller.
// Errors: those of the op's plan (op_plans.h), for operands the kernel would refuse.
// Pure and thread-safe; data pointers are not read (views may carry null data).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "kernels/kernel.h"
#include "kernels/op_plans.h"

namespace planrt::kernels {

// Scores of one attention call are computed a group of heads at a time, in this much.
inline constexpr int64_t kScoreBudget = int64_t{256} << 20;

// Whether the CUDA scaled_dot_product_attention runs fused (one pass, online softmax, no
// score matrix and no workspace): the op's `fused` attribute allows it (the default) and
// the head dims are the fused kernel's (d == dv == 64). Otherwise it keeps the scores:
// GEMM, softmax, GEMM, the seed's scratch figures.
bool attention_runs_fused(const AttentionPlan& plan);

// Whether the CUDA scaled_dot_product_attention may run on cuDNN's fused attention (bf16 or
// f16 without a causal mask; kernels/cuda/cudnn_attention_plan.h, which may still refuse a
// shape at run time): the one decision the backends read to open cuDNN at load and the
// memory estimate reads to count its handle. A bad `causal` attribute counts as maybe (the
// kernel's own check reports it).
bool attention_may_run_on_cudnn(std::string_view op, const OpAttrs& attrs, DType q_dtype);

// The heads scaled_dot_product_attention processes at once, given one head's score bytes.
int64_t attention_head_group(int64_t heads, int64_t head_bytes);

// What one CUDA scaled_dot_product_attention call of `plan` in `dtype` takes: the one
// decision both the kernel and every planner of its workspace read (an engine's scratch,
// planning/engine_scratch.h), so they cannot disagree on whether the scores are kept.
struct AttentionWorkspace {
  bool fused = false;      // attention_runs_fused(plan): no scores, no workspace
  int64_t head_group = 0;  // unfused: heads whose [Sq, Sk] f32 scores are computed at once
  // Unfused: every head's scores when they fit kScoreBudget, else the larger of the budget
  // and one head's (at least head_group score matrices); 0 for an empty call. Never smaller
  // for smaller shapes, so a workspace planned at the shapes' max holds every call.
  uint64_t bytes = 0;
};
// OutOfMemory when one head's score matrix overflows 64 bits. bf16 and f16 run fused only
// (the kernel refuses the rest before asking for anything): 0 bytes.
Result<AttentionWorkspace> attention_workspace(const AttentionPlan& plan, DType dtype);

// Bytes the CUDA kernel of `op` allocates from CudaKernelContext::temp for one call with
// these operands (0 when it allocates nothing; unknown ops take none).
Result<uint64_t> cuda_workspace_bytes(std::string_view op, const OpAttrs& attrs,
                                      std::span<const TensorView> inputs,
                                      std::span<const TensorView> outputs);

// conv2d on the host: the bytes its planned workspace output must hold for one image, so
// that the builder can size it for a batch of any size as [N, per image] (kernels/cpu: the
// im2col matrix of one image and group for the plain kernel; for oneDNN's, packed_conv.h,
// kHostConvScratchBytes plus, in an NCHW program, the channels-last copies of the image's
// input and output; for oneDNN's Winograd convolution of a 3x3 window, where it has one, the
// blocked copies and its scratchpad at batch 1). The workspace of a call is N times this. InvalidArgument for a plan whose sizes overflow.
inline constexpr uint64_t kHostConvScratchBytes = uint64_t{64} << 10;
Result<uint64_t> conv2d_host_workspace_bytes_per_image(const Conv2dPlan& plan);
// Of the above, what the plain kernel's im2col takes (0 for a 1x1 convolution of stride 1
// and no padding, which multiplies the image in place).
uint64_t conv2d_im2col_bytes(const Conv2dPlan& plan);

// conv2d on a CUDA device, per image of the batch, in bytes of `dtype` operands: a padded
// copy of the image when the pads are asymmetric (cuDNN pads both sides alike), then the
// algorithm's workspace budget, the larger of the image's input and output sizes and
// kCudaConvMinWorkspaceBytes (small images: cuDNN's fast kernels want a few KiB). The
// kernel takes the fastest algorithm cuDNN's heuristics rank whose workspace fits the
// budget, so the plan bounds what it uses (cuda/convolution.cpp).
inline constexpr uint64_t kCudaConvMinWorkspaceBytes = uint64_t{64} << 10;
struct CudaConvWorkspace {
  uint64_t padded_copy_bytes = 0;  // per image; 0 for symmetric pads
  uint64_t algorithm_bytes = 0;    // per image
};
// A channels-last depthwise convolution (groups == in channels == out channels, more than
// one; layout "nhwc") runs planrt's own kernel on CUDA (cuda/depthwise_conv_kernels.cu:
// cuDNN's were 10-20x slower on convnext_tiny's 7x7 ones), which reads the padding as zeros
// and needs no workspace: both parts are 0. NCHW ones stay on cuDNN (for mobilenet_v2's 3x3
// in f32 it beat a one-thread-per-output kernel, 5.9 against 7.1 ms at batch 32 on an H100).
bool conv2d_cuda_is_depthwise(const Conv2dPlan& plan);
CudaConvWorkspace conv2d_cuda_workspace_per_image(const Conv2dPlan& plan, DType dtype);
bool conv2d_pads_symmetric(const Conv2dPlan& plan);

// linear on a CUDA device: the workspace its cuBLASLt product may use (cuda/gemm_lt.h), where
// split-K and stream-K algorithms keep partial sums. Measured on the H200
// (bench/results/gemm_algos.jsonl), the fastest algorithms of the encoder's short-sequence
// products used 4 to 32 f32 partial outputs' worth (128 x 512 x 2048: 8 MiB, 2.6x faster than
// with none), and none used more than 16 MiB + 1 KiB (2048 x 512 x 2048, stream-K: about one
// tile of partials per SM): 32 times the output in f32, at most kCudaLinearWorkspaceCap
// (16 MiB and room for the algorithms' counters; cuBLAS's own default on Hopper, 32 MiB, was
// the cap before and bought nothing but memory), 0 for an empty product. Grows with m and n,
// so a workspace planned at the dims' max holds every call.
inline constexpr uint64_t kCudaLinearWorkspaceCap = uint64_t{17} << 20;
uint64_t linear_cuda_workspace_bytes(int64_t m, int64_t n, int64_t k);

// matmul's batch layout needs per-product pointers (the mixed-broadcast path).
bool matmul_needs_pointer_arrays(int64_t m, int64_t n, int64_t k, const Shape& a_batch,
                                 const Shape& b_batch, const Shape& batch);

}  // namespace planrt::kernels
