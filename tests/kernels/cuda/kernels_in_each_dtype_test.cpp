// The arithmetic CUDA kernels against the CPU kernels, written once and run in each dtype
// the CUDA kernels compute in (f32, bf16 and f16; dtype_agreement.h says what "agree" means in
// each): elementwise ops with broadcasting, activations, norms, softmax, the fused
// add + layer_norm, linear and matmul over every batch layout, and the fused attention,
// each also on operands one element off 16-byte alignment (the vectorized kernels'
// fallback paths). What only one dtype has stays in that dtype's file: the f32-only paths
// (unfused attention, data movement, ...) in cuda_kernels_test.cpp; the 16-bit refusals below.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dtype_agreement.h"
#include "kernels/operands.h"
#include "support/gpu.h"

namespace planrt::kernels::cuda {
namespace {

using testing::CudaRunner;
using testing::ExpectAgreeIn;
using testing::attrs_of;
using testing::HostTensor;
using testing::IsError;
using testing::rnd;


class CudaKernelsInEachDtype : public ::testing::TestWithParam<DType> {
 protected:
  DType dtype() const { return GetParam(); }
  // One element off 16-byte alignment.
  size_t off_alignment() const { return element_size(GetParam()); }
  void Agree(CudaRunner& r, std::string_view op, const OpAttrs& attrs,
             const std::vector<HostTensor>& inputs, const Shape& out, size_t offset = 0) {
    ExpectAgreeIn(dtype(), r, op, attrs, inputs, out, offset);
  }
};

TEST_P(CudaKernelsInEachDtype, BinaryOpsMatchTheCpuWithBroadcasting) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{4, 33, 65}, {4, 33, 65}}, {{2, 3, 4}, {3, 1}}, {{4}, {2, 1, 4}},
      {{}, {3}},                  {{5, 1, 7}, {1, 6, 1}}, {{}, {}}, {{1001}, {1001}},
      // One operand repeated along the other's dims (the channel kernel): per channel over
      // NCHW planes, per channel over channels-last rows, a squeeze-excitation gate on the
      // left, a row of odd length (the one-element-a-thread path).
      {{2, 16, 5, 8}, {16, 1, 1}}, {{2, 6, 6, 32}, {32}}, {{3, 24, 1, 1}, {3, 24, 4, 4}}, {{7, 9}, {9}}};
  uint32_t seed = 1;
  for (std::string_view op : {"add", "sub", "mul", "div", "pow"}) {
    for (const auto& [sa, sb] : cases) {
      SCOPED_TRACE(std::string(op) + " " + sa.to_string() + " " + sb.to_string());
      Result<Shape> shape = broadcast_shapes(op, sa, sb);
      ASSERT_TRUE(shape.ok());
      HostTensor a = rnd(sa, seed++);
      // div: b away from zero, so that the comparison measures the kernel, not 1/0; pow:
      // positive bases (a negative one to a fractional power is NaN on both sides).
      if (op == "pow") a = rnd(sa, seed++, 0.5f, 2.0f);
      HostTensor b = op == "div" ? rnd(sb, seed++, 0.5f, 2.0f) : rnd(sb, seed++);
      Agree(r, op, {}, {a, b}, *shape);
    }
    // 1001: the vector loop and a tail; off alignment: the element-wise fallback.
    HostTensor a = op == "pow" ? rnd({1001}, seed++, 0.5f, 2.0f) : rnd({1001}, seed++);
    HostTensor b = op == "div" ? rnd({1001}, seed++, 0.5f, 2.0f) : rnd({1001}, seed++);
    Agree(r, op, {}, {a, b}, {1001}, off_alignment());
  }
}

TEST_P(CudaKernelsInEachDtype, ActivationsMatchTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const OpAttrs tanh = attrs_of({{"approximate", std::string("tanh")}});
  HostTensor x = rnd({3, 1031}, 11, -6.0f, 6.0f);
  for (std::string_view op : {"relu", "silu", "gelu", "neg", "exp", "erf", "tanh", "sigmoid"}) {
    Agree(r, op, {}, {x}, x.shape());
  }
  Agree(r, "sqrt", {}, {rnd({3, 1031}, 12, 0.0f, 9.0f)}, {3, 1031});
  Agree(r, "gelu", tanh, {x}, x.shape());
  for (size_t offset : {size_t{0}, off_alignment()}) {
    SCOPED_TRACE(fmt::format("offset {}", offset));
    Agree(r, "gelu", {}, {rnd({3, 333}, 5, -6.0f, 6.0f)}, {3, 333}, offset);
    Agree(r, "gelu", tanh, {rnd({3, 333}, 6, -6.0f, 6.0f)}, {3, 333}, offset);
    Agree(r, "silu", {}, {rnd({999}, 7, -6.0f, 6.0f)}, {999}, offset);
  }
}

TEST_P(CudaKernelsInEachDtype, ReduceMeanMatchesTheCpuOverRowsAndStridedLines) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  HostTensor x = rnd({4, 37, 1029}, 31);
  Agree(r, "reduce_mean", attrs_of({{"dims", std::vector<int64_t>{-1}}}), {x}, {4, 37, 1});
  Agree(r, "reduce_mean", attrs_of({{"dims", std::vector<int64_t>{1}}}), {x}, {4, 1029});
  Agree(r, "reduce_mean", attrs_of({{"dims", std::vector<int64_t>{0, 1}}}), {x}, {1029});
}

TEST_P(CudaKernelsInEachDtype, NormalizationsAndSoftmaxMatchTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  // 1000 is not a multiple of the block; the offset mean tests the two-pass variance.
  HostTensor x = rnd({3, 7, 1000}, 41, 99.0f, 101.0f);
  Agree(r, "layer_norm", {}, {x, rnd({1000}, 42), rnd({1000}, 43)}, x.shape());
  Agree(r, "layer_norm", attrs_of({{"eps", 1e-3}}), {x}, x.shape());
  HostTensor centred = rnd({3, 7, 1000}, 11, -3.0f, 3.0f);
  Agree(r, "layer_norm", {}, {centred, rnd({1000}, 12), rnd({1000}, 13)}, centred.shape());
  Agree(r, "layer_norm", {}, {rnd({5, 3}, 44), HostTensor(), rnd({3}, 45)}, {5, 3});
  // From 8192 rows on, rows up to 512 take one warp each (300: a lane's last element past
  // the row); others a block each.
  Agree(r, "layer_norm", {}, {rnd({9000, 96}, 55, 9.0f, 11.0f), rnd({96}, 56), rnd({96}, 57)}, {9000, 96});
  Agree(r, "layer_norm", {}, {rnd({8200, 300}, 61, -5.0f, 5.0f), rnd({300}, 62), rnd({300}, 63)}, {8200, 300});
  Agree(r, "layer_norm", {}, {rnd({3, 2000}, 58, 99.0f, 101.0f), rnd({2000}, 59), rnd({2000}, 60)}, {3, 2000});
  Agree(r, "rms_norm", {}, {rnd({4, 4097}, 46), rnd({4097}, 47)}, {4, 4097});
  Agree(r, "rms_norm", attrs_of({{"eps", 1e-2}}), {rnd({6, 16}, 48, -0.1f, 0.1f)}, {6, 16});
  HostTensor s = rnd({3, 7, 300}, 51, -20.0f, 20.0f);
  Agree(r, "softmax", {}, {s}, s.shape());
  Agree(r, "softmax", attrs_of({{"dim", int64_t{1}}}), {s}, s.shape());
  Agree(r, "softmax", attrs_of({{"dim", int64_t{0}}}), {s}, s.shape());
  Agree(r, "softmax", {}, {rnd({}, 52)}, {});
}

// The fused residual add + layer_norm against the two CPU kernels it stands for, with and
// without the affine operands: the sum is rounded to the dtype before it is normalised, as
// add then layer_norm; operands of two shapes are refused before anything runs.
TEST_P(CudaKernelsInEachDtype, AddLayerNormMatchesAddThenLayerNorm) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  using testing::rounded_to;
  // A block per row, then (8200 rows of 96) a warp per row.
  for (const Shape& shape : {Shape{3, 5, 512}, Shape{2, 4100, 96}}) {
    SCOPED_TRACE(shape.to_string());
    const int64_t n = shape[2];
    HostTensor a = rnd(shape, 451, -3.0f, 3.0f);
    HostTensor b = rnd(shape, 452);
    HostTensor w = rnd({n}, 453);
    HostTensor bias = rnd({n}, 454);
    HostTensor sum(DType::F32, shape);  // the dtype's sum, widened
    {
      HostTensor ra = rounded_to(a, dtype());
      HostTensor rb = rounded_to(b, dtype());
      std::vector<TensorView> in{ra.view(), rb.view()};
      std::vector<TensorView> out{sum.view()};
      ASSERT_TRUE((*find_cpu_kernel("add"))({}, in, out).ok());
      sum = rounded_to(sum, dtype());
    }
    for (bool affine : {true, false}) {
      SCOPED_TRACE(affine ? "weight and bias" : "no affine");
      std::vector<HostTensor> norm_in{sum};
      if (affine) norm_in.insert(norm_in.end(), {rounded_to(w, dtype()), rounded_to(bias, dtype())});
      HostTensor normed(DType::F32, shape);
      std::vector<TensorView> host_in;
      for (const HostTensor& t : norm_in) host_in.push_back(t.view());
      std::vector<TensorView> host_out{normed.view()};
      ASSERT_TRUE((*find_cpu_kernel("layer_norm"))({}, host_in, host_out).ok());

      std::vector<TensorView> in{r.upload(testing::in_dtype(a, dtype())),
                                 r.upload(testing::in_dtype(b, dtype()))};
      if (affine) {
        in.insert(in.end(), {r.upload(testing::in_dtype(w, dtype())),
                             r.upload(testing::in_dtype(bias, dtype()))});
      }
      std::vector<TensorView> out{r.device_output(dtype(), shape), r.device_output(dtype(), shape)};
      ASSERT_TRUE(add_layer_norm(r.ctx(), {}, in, out).ok());
      ASSERT_TRUE(r.synchronize().ok());
      EXPECT_EQ(testing::relative_error(testing::widened(r.download(out[0])), sum), 0.0);
      EXPECT_LT(testing::relative_error(testing::widened(r.download(out[1])), normed),
                testing::tolerance_of(dtype()));
    }
  }
  const Shape shape{3, 5, 512};
  HostTensor a = rnd(shape, 451, -3.0f, 3.0f);
  std::vector<TensorView> mismatched{r.upload(testing::in_dtype(a, dtype())),
                                     r.upload(testing::in_dtype(rnd({3, 5, 1}, 455), dtype()))};
  std::vector<TensorView> out{r.device_output(dtype(), shape), r.device_output(dtype(), shape)};
  EXPECT_TRUE(IsError(add_layer_norm(r.ctx(), {}, mismatched, out), ErrorCode::InvalidArgument,
                      {"one shape"}));
}

TEST_P(CudaKernelsInEachDtype, LinearMatchesTheCpuWithAndWithoutBias) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  HostTensor x = rnd({2, 5, 64}, 21);
  HostTensor w = rnd({48, 64}, 22);
  HostTensor b = rnd({48}, 23);
  Agree(r, "linear", {}, {x, w, b}, {2, 5, 48});
  Agree(r, "linear", {}, {x, w}, {2, 5, 48});
  Agree(r, "linear", {}, {x, w, HostTensor()}, {2, 5, 48});
  Agree(r, "linear", {}, {rnd({64}, 24), w, b}, {48});
  // in = 0: the output is the bias (a sum over nothing), as on the CPU.
  Agree(r, "linear", {}, {rnd({3, 0}, 25), rnd({4, 0}, 26), rnd({4}, 27)}, {3, 4});
  HostTensor wide = rnd({2, 100, 512}, 31);
  HostTensor wide_w = rnd({384, 512}, 32);
  Agree(r, "linear", {}, {wide, wide_w, rnd({384}, 33)}, {2, 100, 384});  // cuBLASLt, bias epilogue
  Agree(r, "linear", {}, {wide, wide_w}, {2, 100, 384});
  // Off 16-byte alignment: the bias goes in first and the GEMM accumulates onto it.
  Agree(r, "linear", {}, {rnd({33, 40}, 431), rnd({24, 40}, 432), rnd({24}, 433)}, {33, 24},
        off_alignment());
}

TEST_P(CudaKernelsInEachDtype, MatmulMatchesTheCpuForEveryBatchLayout) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  struct Case {
    Shape a, b, out;
  };
  const std::vector<Case> cases = {
      {{3, 4, 5}, {5, 6}, {3, 4, 6}},               // shared b: folded into one GEMM
      {{2, 3, 4, 5}, {2, 3, 5, 6}, {2, 3, 4, 6}},   // equal batches: strided batched
      {{4, 5}, {2, 5, 3}, {2, 4, 3}},               // a broadcast: stride 0
      {{2, 1, 4, 5}, {3, 5, 6}, {2, 3, 4, 6}},      // mixed broadcast: pointer arrays
      {{5}, {5}, {}},                               // dot product
      {{5}, {2, 5, 3}, {2, 3}},                     // row vector
      {{2, 4, 5}, {5}, {2, 4}},                     // column vector
      {{2, 4, 0}, {2, 0, 3}, {2, 4, 3}},            // k = 0: zeros
  };
  uint32_t seed = 31;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.a.to_string() + " @ " + c.b.to_string());
    Agree(r, "matmul", {}, {rnd(c.a, seed++), rnd(c.b, seed++)}, c.out);
  }
}

// Head dim 64 takes the fused kernel (one pass, online softmax; bf16 and f16 on the tensor cores):
// row and key counts around its 64-row tiles, more keys than queries and fewer, causal and
// not, a scale, and operands off 16-byte alignment (its plain-load path).
TEST_P(CudaKernelsInEachDtype, FusedAttentionMatchesTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  for (const testing::AttentionInputs& c : testing::fused_attention_inputs(401)) {
    SCOPED_TRACE(c.label);
    Agree(r, "scaled_dot_product_attention", attrs_of({{"causal", c.causal}}), {c.q, c.k, c.v},
          c.out);
    Agree(r, "scaled_dot_product_attention", attrs_of({{"causal", c.causal}, {"scale", 0.3}}),
          {c.q, c.k, c.v}, c.out, off_alignment());
  }
  const Shape shape{1, 2, 97, 64};
  for (bool causal : {false, true}) {
    Agree(r, "scaled_dot_product_attention", attrs_of({{"causal", causal}}),
          {rnd(shape, 421, -2.0f, 2.0f), rnd(shape, 422, -2.0f, 2.0f), rnd(shape, 423)}, shape,
          off_alignment());
  }
}

// Enough blocks to fill the device: 32 heads of 600 queries are 160 blocks of 128 rows, at
// least three quarters of any current GPU's SMs, where the 16-bit kernel takes its 128-row
// shape (fused_attention's choice; the cases above are below it and take the key split).
// Keys off the 64-key tiles, causal and not, aligned and not.
TEST_P(CudaKernelsInEachDtype, FusedAttentionOnEnoughBlocksToFillTheDeviceMatchesTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const Shape q_shape{1, 32, 600, 64};
  const Shape kv_shape{1, 32, 450, 64};
  uint32_t seed = 431;
  for (bool causal : {false, true}) {
    SCOPED_TRACE(fmt::format("causal {}", causal));
    HostTensor q = rnd(q_shape, seed++, -2.0f, 2.0f);
    HostTensor k = rnd(kv_shape, seed++, -2.0f, 2.0f);
    HostTensor v = rnd(kv_shape, seed++);
    Agree(r, "scaled_dot_product_attention", attrs_of({{"causal", causal}}), {q, k, v}, q_shape);
    Agree(r, "scaled_dot_product_attention", attrs_of({{"causal", causal}}), {q, k, v}, q_shape,
          off_alignment());
  }
}

// layout "bshd" (the heads of a position side by side, as the builder's rewrite gives the
// attention of every transformer block): the fused kernel indexes rows H * 64 apart and the
// batches S * H * 64 apart; the CPU kernel (tested against the permuted default layout in
// attention_test.cpp) is the reference. Two batches, the tile-edge cases, off alignment.
TEST_P(CudaKernelsInEachDtype, FusedAttentionInBshdLayoutMatchesTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  uint32_t seed = 501;
  for (const testing::AttentionCase& c : testing::kFusedAttentionCases) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(fmt::format("heads {} Sq {} Sk {} causal {}", c.heads, c.sq, c.sk, causal));
      HostTensor q = rnd({2, c.sq, c.heads, 64}, seed++, -2.0f, 2.0f);
      HostTensor k = rnd({2, c.sk, c.heads, 64}, seed++, -2.0f, 2.0f);
      HostTensor v = rnd({2, c.sk, c.heads, 64}, seed++);
      const OpAttrs attrs = attrs_of({{"causal", causal}, {"layout", std::string("bshd")}});
      Agree(r, "scaled_dot_product_attention", attrs, {q, k, v}, {2, c.sq, c.heads, 64});
      if (c.sq < 256) {
        Agree(r, "scaled_dot_product_attention", attrs, {q, k, v}, {2, c.sq, c.heads, 64}, off_alignment());
      }
    }
  }
}

// Attribute heads (the builder's fused q|k|v projection): one packed [B, S, 3 H 64] input,
// rows 3 H 64 apart, k and v H 64 and 2 H 64 into each row; and three [B, S, H 64] operands.
// The CPU kernel (tested against layout bshd in attention_test.cpp) is the reference.
TEST_P(CudaKernelsInEachDtype, FusedAttentionOnMergedHeadsAndAPackedProjectionMatchesTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  uint32_t seed = 551;
  for (const testing::AttentionCase& c : testing::kFusedAttentionCases) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(fmt::format("heads {} S {} causal {}", c.heads, c.sq, causal));
      const OpAttrs attrs =
          attrs_of({{"causal", causal}, {"layout", std::string("bshd")}, {"heads", c.heads}});
      HostTensor qkv = rnd({2, c.sq, 3 * c.heads * 64}, seed++, -2.0f, 2.0f);
      Agree(r, "scaled_dot_product_attention", attrs, {qkv}, {2, c.sq, c.heads * 64});
      HostTensor q = rnd({2, c.sq, c.heads * 64}, seed++, -2.0f, 2.0f);
      HostTensor k = rnd({2, c.sk, c.heads * 64}, seed++, -2.0f, 2.0f);
      HostTensor v = rnd({2, c.sk, c.heads * 64}, seed++);
      Agree(r, "scaled_dot_product_attention", attrs, {q, k, v}, {2, c.sq, c.heads * 64});
      if (c.sq < 256) {
        Agree(r, "scaled_dot_product_attention", attrs, {qkv}, {2, c.sq, c.heads * 64}, off_alignment());
      }
    }
  }
}

// layout "sbhd" (a sequence-first model's [S, B, H, 64] rows, as the builder's rewrite gives
// nn.TransformerEncoder without batch_first): rows B H 64 apart, batches H 64 apart; three
// operands and one packed [S, B, 3 H 64] projection. The CPU kernel (tested against the
// permuted default layout in attention_test.cpp) is the reference.
TEST_P(CudaKernelsInEachDtype, FusedAttentionInSbhdLayoutMatchesTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  uint32_t seed = 581;
  for (const testing::AttentionCase& c : testing::kFusedAttentionCases) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(fmt::format("heads {} Sq {} Sk {} causal {}", c.heads, c.sq, c.sk, causal));
      const OpAttrs attrs = attrs_of({{"causal", causal}, {"layout", std::string("sbhd")}});
      HostTensor q = rnd({c.sq, 3, c.heads, 64}, seed++, -2.0f, 2.0f);
      HostTensor k = rnd({c.sk, 3, c.heads, 64}, seed++, -2.0f, 2.0f);
      HostTensor v = rnd({c.sk, 3, c.heads, 64}, seed++);
      Agree(r, "scaled_dot_product_attention", attrs, {q, k, v}, {c.sq, 3, c.heads, 64});
      const OpAttrs packed = attrs_of({{"causal", causal}, {"layout", std::string("sbhd")}, {"heads", c.heads}});
      HostTensor qkv = rnd({c.sq, 3, 3 * c.heads * 64}, seed++, -2.0f, 2.0f);
      Agree(r, "scaled_dot_product_attention", packed, {qkv}, {c.sq, 3, c.heads * 64});
      if (c.sq < 256) {
        Agree(r, "scaled_dot_product_attention", attrs, {q, k, v}, {c.sq, 3, c.heads, 64}, off_alignment());
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaKernelsInEachDtype, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

// The 16-bit dtypes only: what has no bf16 or f16 kernel is refused before anything runs.
TEST(Cuda16BitKernels, MixedDtypesAndUnfusedAttentionAreRefused) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  using testing::in_dtype;
  Result<CudaKernelFn> add_fn = find_cuda_kernel("add");
  ASSERT_TRUE(add_fn.ok());
  std::vector<TensorView> out{r.device_output(DType::F32, {8})};
  for (DType half : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(half));
    std::vector<TensorView> mixed{r.upload(rnd({8}, 61)), r.upload(in_dtype(rnd({8}, 62), half))};
    EXPECT_TRUE(IsError((*add_fn)(r.ctx(), {}, mixed, out), ErrorCode::NotSupported,
                        {"add", std::string(dtype_name(half)), "f32", "one dtype"}));
  }
  // f16 against bf16: two 16-bit dtypes do not mix either.
  std::vector<TensorView> sixteen{r.upload(in_dtype(rnd({8}, 63), DType::F16)),
                                  r.upload(in_dtype(rnd({8}, 64), DType::BF16))};
  std::vector<TensorView> half_out{r.device_output(DType::F16, {8})};
  EXPECT_TRUE(IsError((*add_fn)(r.ctx(), {}, sixteen, half_out), ErrorCode::NotSupported,
                      {"add", "bf16", "f16", "one dtype"}));
  // A dtype the arithmetic kernels do not implement (bool: neither float nor integer; i32,
  // i64 and u8 take the integer forms, typed_elementwise_test.cpp).
  std::vector<TensorView> bools{r.upload(HostTensor(DType::Bool, {8})),
                                r.upload(HostTensor(DType::Bool, {8}))};
  std::vector<TensorView> bool_out{r.device_output(DType::Bool, {8})};
  EXPECT_TRUE(IsError((*add_fn)(r.ctx(), {}, bools, bool_out), ErrorCode::NotSupported,
                      {"add", "bool", "f32, f16 and bf16"}));

  for (DType half : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(half));
    testing::DtypeRun unfused = testing::run_in(
        half, r, "scaled_dot_product_attention", attrs_of({{"fused", false}}),
        {rnd({1, 2, 8, 64}, 65), rnd({1, 2, 8, 64}, 66), rnd({1, 2, 8, 64}, 67)}, {1, 2, 8, 64});
    EXPECT_TRUE(IsError(unfused.cuda, ErrorCode::NotSupported,
                        {std::string(dtype_name(half)) + " attention runs fused only"}));
    testing::DtypeRun head32 = testing::run_in(
        half, r, "scaled_dot_product_attention", {},
        {rnd({1, 2, 8, 32}, 68), rnd({1, 2, 8, 32}, 69), rnd({1, 2, 8, 32}, 70)}, {1, 2, 8, 32});
    EXPECT_TRUE(IsError(head32.cuda, ErrorCode::NotSupported, {"head dims 32 and 32"}));
  }
}

// f16's range is +-65504: a sum past it stores +inf (as PyTorch's f16 kernels), a value that
// bf16 (f32's range) would have kept; the norms and softmax, computed in f32 from f16 inputs,
// keep their outputs in range.
TEST(Cuda16BitKernels, F16OverflowsToInfinityWhereBf16DoesNot) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  using testing::in_dtype;
  using testing::widened;
  HostTensor big(DType::F32, {4});
  for (int64_t i = 0; i < 4; ++i) big.f()[i] = 40000.0f;
  Result<CudaKernelFn> add_fn = find_cuda_kernel("add");
  ASSERT_TRUE(add_fn.ok());
  for (DType half : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(half));
    TensorView a = r.upload(in_dtype(big, half));
    std::vector<TensorView> in{a, a};
    std::vector<TensorView> out{r.device_output(half, {4})};
    ASSERT_TRUE((*add_fn)(r.ctx(), {}, in, out).ok());
    ASSERT_TRUE(r.synchronize().ok());
    HostTensor y = widened(r.download(out[0]));
    for (int64_t i = 0; i < 4; ++i) {
      if (half == DType::F16) {
        EXPECT_TRUE(std::isinf(y.f()[i]) && y.f()[i] > 0) << y.f()[i];
      } else {
        EXPECT_NEAR(y.f()[i], 80000.0f, 80000.0f / 128);
      }
    }
    // layer_norm of a row that large is in range: computed in f32 and doubles.
    HostTensor row(DType::F32, {1, 4});
    for (int64_t i = 0; i < 4; ++i) row.f()[i] = 30000.0f + 8000.0f * static_cast<float>(i);
    testing::ExpectAgreeIn(half, r, "layer_norm", {}, {row}, {1, 4});
  }
}

}  // namespace
}  // namespace planrt::kernels::cuda
