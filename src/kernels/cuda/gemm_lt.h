// linear's products through cuBLASLt: y[m, n] = x[m, k] @ w[n, k]^T, the bias (when there is
// one) added by the GEMM's epilogue instead of a pass of its own. The other products are in
// gemm.h. Contract as gemm.h: row-major f32 or bf16 (every operand, the bias too), enqueued
// on ctx.stream, TF32 only when the handle's math mode allows it.
//
// Algorithm choice (issue 18; TensorRT's tactic timing is the model). cuBLASLt's heuristic
// ranks algorithms by a model of the GPU, and its first answer is often not the fastest for
// the small products of short sequences (bench/results/gemm_algos.jsonl: 128 x 512 x 2048 in
// f32 takes 38.9 us with its first answer and no workspace, 15.2 us with the fastest of its
// top answers given a workspace). So the first call of a problem (device, dtype, m, n, k,
// bias or not, math mode, workspace) takes the heuristic's top answers that fit the call's
// workspace, times each on the call's own operands (kLtTimedGemms GEMMs captured into a CUDA
// graph and replayed on ctx.stream: the GPU's time, not cuBLASLt's host cost), and keeps the
// fastest for every later call in the process. That first call waits for ctx.stream: the
// one place a kernel call synchronizes. A call on a stream being captured into a CUDA graph
// (or on the legacy default stream, which cannot be captured), or one whose timing fails,
// is not timed: it runs the heuristic's first answer and caches nothing, so a later
// ordinary call still times (a graph captured before that call keeps the first answer). The
// cuda backend runs a new graph key once eagerly before capturing it (graph_replay.h), so
// its graphs hold timed choices.
//
// Workspace: the caller's (kernels/workspace.h linear_cuda_workspace_bytes, planned in the
// method's arena or an engine's scratch); with none, only algorithms that need none.
//
// Thread safety: the cache is shared and locked (never while timing: two threads timing one
// problem keep the first result stored); the handle is the caller's (one per thread or
// stream in flight).
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/cuda/cuda_kernel.h"

namespace planrt::kernels::cuda {

// Heuristic answers considered per problem, and GEMMs per timed graph replay.
inline constexpr int kLtCandidates = 8;
inline constexpr int kLtTimedGemms = 10;

struct LtProduct {
  DType dtype = DType::F32;  // F32, BF16 or F16
  int64_t m = 0, n = 0, k = 0;
  const void* x = nullptr;     // [m, k]
  const void* w = nullptr;     // [n, k]
  const void* bias = nullptr;  // [n], or null for none
  void* y = nullptr;           // [m, n], disjoint from x, w and bias
};

// Enqueues the product, its algorithm chosen as ctx.gemm_algorithm says (Heuristic: the
// heuristic's first answer within the workspace; with none, what planrt ran before issue
// 18), and returns true; returns false having enqueued nothing when cuBLASLt
// does not apply (an empty dim, a pointer not 16-byte aligned, a dtype other than f32 and
// bf16, no algorithm for the problem within `workspace_bytes`): the caller then takes its
// cuBLAS path. `workspace` (device memory of ctx's device, 256-byte aligned) may be null
// when `workspace_bytes` is 0.
Result<bool> gemm_nk_lt(std::string_view op, const CudaKernelContext& ctx, const LtProduct& p,
                        void* workspace, uint64_t workspace_bytes);

// Process-wide counts, for tests and reports.
struct LtAlgorithmStats {
  int64_t problems_timed = 0;      // first calls that timed their candidates
  int64_t candidates_timed = 0;    // candidates timed over all those calls
  int64_t untimed_calls = 0;       // calls on a capturing or legacy stream with no cached choice
  int64_t cached_problems = 0;     // problems whose choice (or "none") is kept now
};
LtAlgorithmStats lt_algorithm_stats();

}  // namespace planrt::kernels::cuda
