// linear's cuBLASLt products (kernels/cuda/gemm_lt.h) with their algorithm timed on the first
// call and a workspace, against the unoptimised path (the heuristic's first answer with no
// workspace, what planrt ran before issue 18) and against the CPU kernel: f32 within 1e-5 of
// the CPU, bf16 and f16 within their rounding of the unoptimised path; the shapes of the encoder's
// products at short and long sequences (where split-K algorithms win), with and without a
// bias. Also: a stream being captured is never timed on, and a later ordinary call is; the
// linear kernel asks ctx.temp for exactly the workspace the planners plan for it.
// GPU tests skip without a visible GPU and fail instead with PLANRT_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <vector>

#include "kernels/cuda/cuda_test_util.h"
#include "kernels/cuda/dtype_agreement.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/workspace.h"
#include "support/gpu.h"

namespace planrt::kernels::cuda {
namespace {

using testing::CudaRunner;
using testing::DeviceMemory;
using testing::HostTensor;
using testing::rnd;

struct Shape3 {
  int64_t m, n, k;
};
constexpr Shape3 kShapes[] = {{1, 512, 512},    {16, 1536, 512}, {128, 512, 2048},
                              {128, 2048, 512}, {300, 512, 512}, {513, 1000, 64}};

// One product through gemm_nk_lt; y downloaded. `done` false when cuBLASLt did not apply.
struct LtRun {
  Status status;
  bool done = false;
  HostTensor y;
};
LtRun run_lt(CudaRunner& r, DType dtype, const Shape3& s, const HostTensor& x, const HostTensor& w,
           const HostTensor& bias, void* workspace, uint64_t workspace_bytes, GemmAlgorithm choice) {
  TensorView dx = r.upload(testing::in_dtype(x, dtype));
  TensorView dw = r.upload(testing::in_dtype(w, dtype));
  TensorView db = bias.is_none() ? TensorView::none() : r.upload(testing::in_dtype(bias, dtype));
  TensorView dy = r.device_output(dtype, {s.m, s.n});
  LtProduct p{dtype, s.m, s.n, s.k, dx.data, dw.data, db.is_none() ? nullptr : db.data, dy.data};
  LtRun out;
  CudaKernelContext ctx = r.ctx();
  ctx.gemm_algorithm = choice;
  Result<bool> done = gemm_nk_lt("linear", ctx, p, workspace, workspace_bytes);
  out.status = done.ok() ? r.synchronize() : done.status();
  out.done = done.ok() && *done;
  if (out.status.ok()) out.y = testing::widened(r.download(dy));
  return out;
}

TEST(GemmLt, TimedWithAWorkspaceAgreesWithTheUnoptimisedPathAndTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  DeviceMemory workspace(kCudaLinearWorkspaceCap);
  uint32_t seed = 401;
  const LtAlgorithmStats before = lt_algorithm_stats();
  int64_t timed_problems = 0;
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (const Shape3& s : kShapes) {
      for (bool with_bias : {true, false}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " " << s.m << " x " << s.n
                                          << " x " << s.k << (with_bias ? " + bias" : ""));
        HostTensor x = rnd({s.m, s.k}, seed++);
        HostTensor w = rnd({s.n, s.k}, seed++);
        HostTensor bias = with_bias ? rnd({s.n}, seed++) : HostTensor();
        const uint64_t ws = linear_cuda_workspace_bytes(s.m, s.n, s.k);
        LtRun fast = run_lt(r, dtype, s, x, w, bias, workspace.get(), ws, GemmAlgorithm::Timed);
        LtRun plain = run_lt(r, dtype, s, x, w, bias, nullptr, 0, GemmAlgorithm::Heuristic);
        ASSERT_TRUE(fast.status.ok()) << fast.status.to_string();
        ASSERT_TRUE(plain.status.ok()) << plain.status.to_string();
        ASSERT_TRUE(fast.done && plain.done) << "cuBLASLt applies to aligned f32/bf16/f16 products";
        ++timed_problems;
        // A second timed call reuses the choice: the same bits.
        LtRun again = run_lt(r, dtype, s, x, w, bias, workspace.get(), ws, GemmAlgorithm::Timed);
        ASSERT_TRUE(again.status.ok());
        EXPECT_TRUE(testing::same_bytes(again.y, fast.y));
        if (dtype == DType::F32) {
          HostTensor want(DType::F32, {s.m, s.n});
          std::vector<TensorView> in{x.view(), w.view()};
          if (with_bias) in.push_back(bias.view());
          std::vector<TensorView> out{want.view()};
          ASSERT_TRUE((*find_cpu_kernel("linear"))({}, in, out).ok());
          EXPECT_LT(testing::relative_error(fast.y, want), testing::kTolerance);
          EXPECT_LT(testing::relative_error(plain.y, want), testing::kTolerance);
        } else {
          // Two 16-bit results of one f32-accumulated product differ by output rounding (and a
          // split-K reduction's) only: bf16 steps by 2^-8, f16 by 2^-11.
          EXPECT_LT(testing::relative_error(fast.y, plain.y), dtype == DType::F16 ? 2e-3 : 1e-2);
        }
      }
    }
  }
  const LtAlgorithmStats after = lt_algorithm_stats();
  // Every problem with more than one candidate was timed once (a few have a single one).
  EXPECT_GT(after.problems_timed - before.problems_timed, timed_problems / 2);
  EXPECT_LE(after.problems_timed - before.problems_timed, timed_problems);
  EXPECT_GE(after.candidates_timed - before.candidates_timed,
            2 * (after.problems_timed - before.problems_timed));
}

TEST(GemmLt, AStreamBeingCapturedIsNeverTimedOnAndALaterCallIs) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const Shape3 s{96, 768, 1536};  // a problem no other test of this process uses
  HostTensor x = rnd({s.m, s.k}, 501), w = rnd({s.n, s.k}, 502), bias = rnd({s.n}, 503);
  TensorView dx = r.upload(x), dw = r.upload(w), db = r.upload(bias);
  TensorView dy = r.device_output(DType::F32, {s.m, s.n});
  DeviceMemory workspace(kCudaLinearWorkspaceCap);
  const uint64_t ws = linear_cuda_workspace_bytes(s.m, s.n, s.k);
  const LtProduct p{DType::F32, s.m, s.n, s.k, dx.data, dw.data, db.data, dy.data};

  const LtAlgorithmStats before = lt_algorithm_stats();
  ASSERT_EQ(cudaStreamBeginCapture(r.stream(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
  Result<bool> captured = gemm_nk_lt("linear", r.ctx(), p, workspace.get(), ws);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(r.stream(), &graph), cudaSuccess) << "the stream is not left capturing";
  ASSERT_TRUE(captured.ok()) << captured.status().to_string();
  EXPECT_TRUE(*captured);
  const LtAlgorithmStats mid = lt_algorithm_stats();
  EXPECT_EQ(mid.problems_timed, before.problems_timed);
  EXPECT_EQ(mid.untimed_calls, before.untimed_calls + 1);
  EXPECT_EQ(mid.cached_problems, before.cached_problems) << "an untimed choice is not kept";
  // The captured product computes the right thing when replayed.
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, r.stream()), cudaSuccess);
  ASSERT_TRUE(r.synchronize().ok());
  HostTensor want(DType::F32, {s.m, s.n});
  std::vector<TensorView> in{x.view(), w.view(), bias.view()};
  std::vector<TensorView> out{want.view()};
  ASSERT_TRUE((*find_cpu_kernel("linear"))({}, in, out).ok());
  EXPECT_LT(testing::relative_error(r.download(dy), want), testing::kTolerance);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  Result<bool> ordinary = gemm_nk_lt("linear", r.ctx(), p, workspace.get(), ws);
  ASSERT_TRUE(ordinary.ok() && *ordinary);
  ASSERT_TRUE(r.synchronize().ok());
  const LtAlgorithmStats after = lt_algorithm_stats();
  EXPECT_EQ(after.problems_timed, mid.problems_timed + 1);
  EXPECT_EQ(after.cached_problems, mid.cached_problems + 1);
  EXPECT_LT(testing::relative_error(r.download(dy), want), testing::kTolerance);
}

// Counts what the kernel asks of ctx.temp.
class CountingTemp final : public CudaTempMemory {
 public:
  Result<void*> allocate(size_t bytes, cudaStream_t stream) override {
    requests.push_back(bytes);
    return inner.allocate(bytes, stream);
  }
  Status deallocate(void* ptr, size_t bytes, cudaStream_t stream) override {
    return inner.deallocate(ptr, bytes, stream);
  }
  StreamOrderedTempMemory inner;
  std::vector<size_t> requests;
};

TEST(GemmLt, TheLinearKernelAsksForTheWorkspaceThePlannersPlan) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  CountingTemp temp;
  CudaKernelContext ctx = r.ctx();
  ctx.temp = &temp;
  HostTensor x = rnd({2, 64, 512}, 601), w = rnd({2048, 512}, 602), b = rnd({2048}, 603);
  std::vector<TensorView> in{r.upload(x), r.upload(w), r.upload(b)};
  std::vector<TensorView> out{r.device_output(DType::F32, {2, 64, 2048})};
  ASSERT_TRUE((*find_cuda_kernel("linear"))(ctx, {}, in, out).ok());
  ASSERT_TRUE(r.synchronize().ok());
  Result<uint64_t> planned = cuda_workspace_bytes("linear", {}, in, out);
  ASSERT_TRUE(planned.ok());
  ASSERT_EQ(temp.requests.size(), 1u);
  EXPECT_EQ(temp.requests[0], *planned);
  EXPECT_EQ(*planned, linear_cuda_workspace_bytes(128, 2048, 512));
  // Without ctx.temp the kernel takes no workspace and still computes the product.
  ctx.temp = nullptr;
  ASSERT_TRUE((*find_cuda_kernel("linear"))(ctx, {}, in, out).ok());
  ASSERT_TRUE(r.synchronize().ok());
  HostTensor want(DType::F32, {2, 64, 2048});
  std::vector<TensorView> host_in{x.view(), w.view(), b.view()};
  std::vector<TensorView> host_out{want.view()};
  ASSERT_TRUE((*find_cpu_kernel("linear"))({}, host_in, host_out).ok());
  EXPECT_LT(testing::relative_error(r.download(out[0]), want), testing::kTolerance);
}

}  // namespace
}  // namespace planrt::kernels::cuda
