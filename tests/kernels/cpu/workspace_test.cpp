// The CUDA kernels' workspace sizes (kernels/workspace.h), which every planner of a workspace
// reads: for unfused attention, the bytes never shrink as the shapes grow, so a workspace
// planned at the shapes' max (an engine's scratch, a cuda segment's planned scratch) holds
// every smaller call. Mutation caught: sizing the workspace as head_group score matrices
// exactly (as before 2026-12-03) fails the sweep (16 heads at S = 4096 ask 268 MB where
// S = 6144 asked 151 MB).
#include <gtest/gtest.h>

#include "kernels/workspace.h"

namespace planrt::kernels {
namespace {

AttentionPlan unfused(int64_t heads, int64_t sq, int64_t sk) {
  AttentionPlan p;
  p.heads = heads;
  p.sq = sq;
  p.sk = sk;
  p.d = p.dv = 128;
  p.fused = false;
  return p;
}

TEST(AttentionWorkspace, NeverShrinksAsTheShapesGrowAndHoldsItsGroup) {
  for (int64_t heads : {1, 3, 8, 16, 64}) {
    uint64_t previous = 0;
    for (int64_t s = 1; s <= 12288; s += s < 64 ? 1 : 61) {
      SCOPED_TRACE(::testing::Message() << heads << " heads, S = " << s);
      auto ws = attention_workspace(unfused(heads, s, s), DType::F32);
      ASSERT_TRUE(ws.ok());
      const uint64_t head_bytes = static_cast<uint64_t>(s * s) * 4;
      EXPECT_GE(ws->bytes, previous);
      EXPECT_GE(ws->bytes, static_cast<uint64_t>(ws->head_group) * head_bytes) << "the group's scores fit";
      EXPECT_LE(ws->bytes, std::max<uint64_t>(kScoreBudget, head_bytes)) << "at most the budget or one head";
      EXPECT_GE(ws->head_group, 1);
      EXPECT_LE(ws->head_group, heads);
      previous = ws->bytes;
    }
  }
  // The case a plan at S = 6144 used to miss: 16 heads at S = 4096.
  auto at_max = attention_workspace(unfused(16, 6144, 6144), DType::F32);
  auto smaller = attention_workspace(unfused(16, 4096, 4096), DType::F32);
  ASSERT_TRUE(at_max.ok() && smaller.ok());
  EXPECT_LE(smaller->bytes, at_max->bytes);
  // All heads that fit the budget: exactly their scores, as the seed's figures assume.
  auto small = attention_workspace(unfused(8, 2048, 2048), DType::F32);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->head_group, 8);
  EXPECT_EQ(small->bytes, uint64_t{8} * 2048 * 2048 * 4);
}

}  // namespace
}  // namespace planrt::kernels

namespace planrt::kernels {
namespace {

// The CUDA linear's cuBLASLt workspace: 32 f32 partial outputs up to the cap, growing with m
// and n (so a plan at the dims' max holds a smaller call), none for an empty product, and
// what cuda_workspace_bytes reports for the op (the figure every planner reads).
TEST(LinearWorkspace, GrowsWithTheOutputUpToTheCapAndIsWhatThePlannersRead) {
  EXPECT_EQ(linear_cuda_workspace_bytes(0, 512, 512), 0u);
  EXPECT_EQ(linear_cuda_workspace_bytes(128, 0, 512), 0u);
  EXPECT_EQ(linear_cuda_workspace_bytes(128, 512, 0), 0u);
  EXPECT_EQ(linear_cuda_workspace_bytes(1, 512, 512), 32u * 4 * 512);
  EXPECT_EQ(linear_cuda_workspace_bytes(128, 512, 2048), uint64_t{8} << 20);
  EXPECT_EQ(linear_cuda_workspace_bytes(2048, 2048, 512), kCudaLinearWorkspaceCap);
  EXPECT_EQ(linear_cuda_workspace_bytes(int64_t{1} << 40, int64_t{1} << 40, 1), kCudaLinearWorkspaceCap)
      << "no overflow";
  for (int64_t n : {1, 3, 512, 1000, 2048}) {
    uint64_t previous = 0;
    for (int64_t m = 1; m <= 70000; m += m < 64 ? 1 : 997) {
      const uint64_t bytes = linear_cuda_workspace_bytes(m, n, 64);
      EXPECT_GE(bytes, previous) << m << " x " << n;
      EXPECT_LE(bytes, kCudaLinearWorkspaceCap);
      EXPECT_EQ(bytes % 256, 0u);
      previous = bytes;
    }
  }
  const Shape x{2, 64, 512}, w{1536, 512}, y{2, 64, 1536};
  std::vector<TensorView> in{TensorView::contiguous(nullptr, DType::F32, x),
                             TensorView::contiguous(nullptr, DType::F32, w)};
  std::vector<TensorView> out{TensorView::contiguous(nullptr, DType::F32, y)};
  Result<uint64_t> ws = cuda_workspace_bytes("linear", {}, in, out);
  ASSERT_TRUE(ws.ok()) << ws.status().to_string();
  EXPECT_EQ(*ws, linear_cuda_workspace_bytes(128, 1536, 512));
}

// A CUDA convolution's workspace: none for a channels-last depthwise one (planrt's kernel
// reads the padding as zeros, needs no algorithm workspace), cuDNN's budget for everything
// else, an NCHW depthwise one and a channel-multiplier one included.
TEST(ConvWorkspace, OnlyAChannelsLastDepthwiseConvolutionNeedsNoneOnCuda) {
  Conv2dPlan p;
  p.n = 1;
  p.c = p.k = p.groups = 32;
  p.h = p.w = p.oh = p.ow = 14;
  p.window.kh = p.window.kw = 7;
  p.window.pad_top = p.window.pad_left = 3;
  p.window.pad_bottom = p.window.pad_right = 2;  // asymmetric: cuDNN would need a padded copy
  p.channels_last = true;
  EXPECT_TRUE(conv2d_cuda_is_depthwise(p));
  CudaConvWorkspace ws = conv2d_cuda_workspace_per_image(p, DType::BF16);
  EXPECT_EQ(ws.padded_copy_bytes, 0u);
  EXPECT_EQ(ws.algorithm_bytes, 0u);
  Conv2dPlan nchw = p;
  nchw.channels_last = false;
  EXPECT_FALSE(conv2d_cuda_is_depthwise(nchw));
  EXPECT_GT(conv2d_cuda_workspace_per_image(nchw, DType::BF16).padded_copy_bytes, 0u);
  Conv2dPlan multiplier = p;
  multiplier.k = 64;
  EXPECT_FALSE(conv2d_cuda_is_depthwise(multiplier));
  EXPECT_GE(conv2d_cuda_workspace_per_image(multiplier, DType::BF16).algorithm_bytes, kCudaConvMinWorkspaceBytes);
  Conv2dPlan dense = p;
  dense.groups = 1;
  EXPECT_FALSE(conv2d_cuda_is_depthwise(dense));
}

}  // namespace
}  // namespace planrt::kernels
