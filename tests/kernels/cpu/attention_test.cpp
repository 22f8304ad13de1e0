#include <gtest/gtest.h>

#include <array>

#include <cmath>

#include "kernel_test_util.h"

namespace planrt::kernels {
namespace {

using testing::HostTensor;
using testing::IsError;
using testing::kTolerance;
using testing::relative_error;
using testing::run_op;
using testing::swap_middle;

// softmax(scale * q k^T + mask) v per (batch, head), in double; causal keeps key j for
// query i when j <= i (top-left aligned).
std::vector<double> sdpa_reference(const HostTensor& q, const HostTensor& k, const HostTensor& v,
                                   bool causal, double scale) {
  const int64_t sq = q.shape()[2], sk = k.shape()[2], d = q.shape()[3], dv = v.shape()[3];
  const int64_t heads = q.shape()[0] * q.shape()[1];
  std::vector<double> ref;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < sq; ++i) {
      std::vector<double> s(static_cast<size_t>(sk));
      double mx = -INFINITY;
      for (int64_t j = 0; j < sk; ++j) {
        double dot = 0;
        for (int64_t p = 0; p < d; ++p)
          dot += q.at((h * sq + i) * d + p) * k.at((h * sk + j) * d + p);
        s[static_cast<size_t>(j)] = (causal && j > i) ? -INFINITY : dot * scale;
        mx = std::max(mx, s[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (int64_t c = 0; c < dv; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < sk; ++j)
          acc += s[static_cast<size_t>(j)] / sum * v.at((h * sk + j) * dv + c);
        ref.push_back(acc);
      }
    }
  }
  return ref;
}

Status attend(const OpAttrs& attrs, const HostTensor& q, const HostTensor& k, const HostTensor& v,
              const HostTensor& y) {
  return run_op("scaled_dot_product_attention", attrs, {q.view(), k.view(), v.view()}, {y.view()});
}

struct Dims {
  int64_t b, h, sq, sk, d, dv;
};

void expect_sdpa_matches(Dims n, const OpAttrs& attrs, bool causal, double scale) {
  HostTensor q = HostTensor::random({n.b, n.h, n.sq, n.d}, 31, -2.0f, 2.0f);
  HostTensor k = HostTensor::random({n.b, n.h, n.sk, n.d}, 32, -2.0f, 2.0f);
  HostTensor v = HostTensor::random({n.b, n.h, n.sk, n.dv}, 33);
  HostTensor y(DType::F32, {n.b, n.h, n.sq, n.dv});
  Status s = attend(attrs, q, k, v, y);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_LT(relative_error(y, sdpa_reference(q, k, v, causal, scale)), kTolerance);
}

TEST(Attention, NonCausalWithMoreKeysThanQueries) {
  expect_sdpa_matches({2, 3, 5, 9, 16, 16}, {}, false, 1.0 / 4.0);
}

TEST(Attention, CausalWithMoreKeysThanQueriesIsTopLeftAligned) {
  OpAttrs attrs;
  attrs.set("causal", true);
  expect_sdpa_matches({2, 2, 4, 7, 8, 8}, attrs, true, 1.0 / std::sqrt(8.0));
}

TEST(Attention, CausalWithMoreQueriesThanKeys) {
  OpAttrs attrs;
  attrs.set("causal", true);
  expect_sdpa_matches({1, 3, 9, 4, 8, 8}, attrs, true, 1.0 / std::sqrt(8.0));
}

TEST(Attention, CausalDiffersFromNonCausal) {
  // Guards the mask itself: the same inputs must give different outputs.
  HostTensor q = HostTensor::random({1, 1, 4, 4}, 1);
  HostTensor k = HostTensor::random({1, 1, 4, 4}, 2);
  HostTensor v = HostTensor::random({1, 1, 4, 4}, 3);
  HostTensor plain(DType::F32, {1, 1, 4, 4});
  HostTensor masked(DType::F32, {1, 1, 4, 4});
  OpAttrs causal;
  causal.set("causal", true);
  ASSERT_TRUE(attend({}, q, k, v, plain).ok());
  ASSERT_TRUE(attend(causal, q, k, v, masked).ok());
  EXPECT_GT(relative_error(masked, plain.doubles()), 1e-3);
}

// The kernel works in tiles of 128 queries by 512 keys, folding each key tile into a running
// softmax: these sizes cross both tile edges (and leave partial tiles), so the online
// rescaling and the causal tile skipping are what is compared with the reference.
TEST(Attention, SequencesSpanningSeveralTilesMatchTheReference) {
  expect_sdpa_matches({1, 2, 150, 1100, 16, 16}, {}, false, 1.0 / 4.0);
}

TEST(Attention, CausalSequencesSpanningSeveralTilesMatchTheReference) {
  OpAttrs attrs;
  attrs.set("causal", true);
  expect_sdpa_matches({1, 2, 530, 530, 8, 8}, attrs, true, 1.0 / std::sqrt(8.0));
  expect_sdpa_matches({1, 1, 300, 1100, 8, 4}, attrs, true, 1.0 / std::sqrt(8.0));
}

// Scores whose row maximum grows from one key tile to the next: the rows accumulated under
// the smaller maximum must be rescaled, or the later keys would swamp them (or the sums
// overflow: scores of 80 and more do, unrescaled, in f32).
TEST(Attention, AMaximumThatGrowsAcrossKeyTilesIsRescaled) {
  const int64_t sk = 1100, d = 4;
  HostTensor q = HostTensor::random({1, 1, 3, d}, 5, 0.5f, 1.0f);
  HostTensor k(DType::F32, {1, 1, sk, d});
  for (int64_t j = 0; j < sk; ++j) {
    for (int64_t p = 0; p < d; ++p) k.f()[j * d + p] = static_cast<float>(j) / 10.0f;
  }
  HostTensor v = HostTensor::random({1, 1, sk, d}, 6);
  HostTensor y(DType::F32, {1, 1, 3, d});
  OpAttrs attrs;
  attrs.set("scale", 1.0);
  ASSERT_TRUE(attend(attrs, q, k, v, y).ok());
  EXPECT_LT(relative_error(y, sdpa_reference(q, k, v, false, 1.0)), kTolerance);
}

TEST(Attention, ExplicitScaleAndValueWidthDifferentFromKeyWidth) {
  OpAttrs attrs;
  attrs.set("scale", 0.3);
  expect_sdpa_matches({1, 2, 6, 5, 12, 7}, attrs, false, 0.3);
}


// layout "bshd" reads [B, S, H, D] where it lies: the same result as the default layout on
// the permuted operands (the unoptimised path the builder's rewrite replaces), with more
// keys and queries than one tile, unequal key and value widths, two batches.
TEST(Attention, BshdLayoutEqualsThePermutedDefaultLayout) {
  struct Case {
    int64_t b, h, sq, sk, d, dv;
  };
  for (const Case& c : {Case{2, 3, 5, 7, 8, 6}, Case{1, 2, 70, 300, 16, 16}, Case{2, 1, 33, 1, 4, 4}}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "sq " << c.sq << " sk " << c.sk << " causal " << causal);
      HostTensor q = HostTensor::random({c.b, c.sq, c.h, c.d}, 41, -2.0f, 2.0f);
      HostTensor k = HostTensor::random({c.b, c.sk, c.h, c.d}, 42, -2.0f, 2.0f);
      HostTensor v = HostTensor::random({c.b, c.sk, c.h, c.dv}, 43);
      OpAttrs attrs;
      attrs.set("causal", causal);
      HostTensor y_bhsd(DType::F32, {c.b, c.h, c.sq, c.dv});
      ASSERT_TRUE(attend(attrs, swap_middle(q), swap_middle(k), swap_middle(v), y_bhsd).ok());
      attrs.set("layout", std::string("bshd"));
      HostTensor y(DType::F32, {c.b, c.sq, c.h, c.dv});
      Status s = attend(attrs, q, k, v, y);
      ASSERT_TRUE(s.ok()) << s.to_string();
      const HostTensor want = swap_middle(y_bhsd);
      EXPECT_LT(relative_error(y, std::vector<double>(want.f(), want.f() + want.numel())), 1e-6);
    }
  }
}

TEST(Attention, BshdLayoutChecksItsShapes) {
  OpAttrs attrs;
  attrs.set("layout", std::string("bshd"));
  HostTensor q = HostTensor::random({1, 3, 2, 8}, 1);
  HostTensor k = HostTensor::random({1, 5, 4, 8}, 2);  // 4 heads against q's 2
  HostTensor y(DType::F32, {1, 3, 2, 8});
  EXPECT_TRUE(IsError(attend(attrs, q, k, k, y), ErrorCode::InvalidArgument, {"layout bshd", "k f32 [1, 5, 4, 8]"}));
  attrs.set("layout", std::string("hsbd"));
  EXPECT_TRUE(IsError(attend(attrs, q, q, q, y), ErrorCode::InvalidArgument, {"layout", "'hsbd'", "\"sbhd\""}));
}

// [b, s, h, d] viewed as [b, s, h * d]: the same bytes.
TensorView merged_heads(const HostTensor& t) {
  TensorView v = t.view();
  v.sizes = Shape{t.shape()[0], t.shape()[1], t.shape()[2] * t.shape()[3]};
  v.strides = contiguous_strides(v.sizes);
  return v;
}

// q, k, v [b, s, h, d] side by side in each row: [b, s, 3 h d].
HostTensor packed_rows(const HostTensor& q, const HostTensor& k, const HostTensor& v) {
  const int64_t rows = q.shape()[0] * q.shape()[1], width = q.shape()[2] * q.shape()[3];
  HostTensor out(DType::F32, {q.shape()[0], q.shape()[1], 3 * width});
  for (int64_t r = 0; r < rows; ++r) {
    const HostTensor* parts[] = {&q, &k, &v};
    for (int64_t p = 0; p < 3; ++p) {
      std::copy_n(parts[p]->f() + r * width, width, out.f() + (r * 3 + p) * width);
    }
  }
  return out;
}

// A 4-d tensor with its dims permuted (out dim i = in dim perm[i]).
HostTensor permuted4(const HostTensor& t, std::array<int, 4> perm) {
  const Shape& s = t.shape();
  HostTensor out(DType::F32, {s[perm[0]], s[perm[1]], s[perm[2]], s[perm[3]]});
  const std::array<int64_t, 4> stride{s[1] * s[2] * s[3], s[2] * s[3], s[3], 1};
  int64_t flat = 0;
  for (int64_t a = 0; a < out.shape()[0]; ++a)
    for (int64_t b = 0; b < out.shape()[1]; ++b)
      for (int64_t c = 0; c < out.shape()[2]; ++c)
        for (int64_t d = 0; d < out.shape()[3]; ++d) {
          const std::array<int64_t, 4> at{a, b, c, d};
          int64_t src = 0;
          for (int i = 0; i < 4; ++i) src += at[i] * stride[perm[i]];
          out.f()[flat++] = t.f()[src];
        }
  return out;
}

// layout "sbhd" reads a sequence-first model's [S, B, H, D] rows where they lie: the same
// result as the default layout on the operands permuted to [B, H, S, D]; with attribute
// heads on [S, B, H * D], and on one packed [S, B, 3 * H * D] input.
TEST(Attention, SbhdLayoutEqualsThePermutedDefaultLayout) {
  struct Case {
    int64_t b, h, sq, sk, d, dv;
  };
  for (const Case& c : {Case{2, 3, 5, 7, 8, 6}, Case{3, 2, 70, 300, 16, 16}, Case{2, 1, 33, 1, 4, 4}}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "b " << c.b << " sq " << c.sq << " sk " << c.sk << " causal " << causal);
      HostTensor q = HostTensor::random({c.sq, c.b, c.h, c.d}, 61, -2.0f, 2.0f);
      HostTensor k = HostTensor::random({c.sk, c.b, c.h, c.d}, 62, -2.0f, 2.0f);
      HostTensor v = HostTensor::random({c.sk, c.b, c.h, c.dv}, 63);
      constexpr std::array<int, 4> to_bhsd{1, 2, 0, 3}, to_sbhd{2, 0, 1, 3};
      OpAttrs attrs;
      attrs.set("causal", causal);
      HostTensor y_bhsd(DType::F32, {c.b, c.h, c.sq, c.dv});
      ASSERT_TRUE(attend(attrs, permuted4(q, to_bhsd), permuted4(k, to_bhsd), permuted4(v, to_bhsd), y_bhsd).ok());
      const HostTensor want = permuted4(y_bhsd, to_sbhd);
      const std::vector<double> expected(want.f(), want.f() + want.numel());
      attrs.set("layout", std::string("sbhd"));
      HostTensor y(DType::F32, {c.sq, c.b, c.h, c.dv});
      Status s = attend(attrs, q, k, v, y);
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_LT(relative_error(y, expected), 1e-6);
      if (c.sq != c.sk || c.d != c.dv) continue;  // flat and packed operands: self-attention
      attrs.set("heads", c.h);
      HostTensor yf(DType::F32, {c.sq, c.b, c.h * c.dv});
      s = run_op("scaled_dot_product_attention", attrs, {merged_heads(q), merged_heads(k), merged_heads(v)}, {yf.view()});
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_LT(relative_error(yf, expected), 1e-6);
      HostTensor qkv = packed_rows(q, k, v);
      HostTensor yp(DType::F32, {c.sq, c.b, c.h * c.dv});
      s = run_op("scaled_dot_product_attention", attrs, {qkv.view()}, {yp.view()});
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_LT(relative_error(yp, expected), 1e-6);
    }
  }
}

TEST(Attention, SbhdLayoutChecksItsShapes) {
  OpAttrs attrs;
  attrs.set("layout", std::string("sbhd"));
  HostTensor q = HostTensor::random({3, 2, 2, 8}, 1);
  HostTensor k = HostTensor::random({5, 3, 2, 8}, 2);  // 3 batches against q's 2
  HostTensor y(DType::F32, {3, 2, 2, 8});
  EXPECT_TRUE(IsError(attend(attrs, q, k, k, y), ErrorCode::InvalidArgument,
                      {"layout sbhd", "equal batch dims", "k f32 [5, 3, 2, 8]"}));
}

// Attribute heads: [.., S, H * D] operands, and one packed q|k|v input (a fused projection),
// each equal to layout bshd on the separate [.., S, H, D] operands it replaces.
TEST(Attention, HeadsAttributeAndPackedInputEqualTheBshdLayout) {
  struct Case {
    int64_t b, h, s, d;
  };
  for (const Case& c : {Case{2, 3, 5, 8}, Case{1, 2, 70, 16}, Case{2, 4, 1, 4}}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "s " << c.s << " h " << c.h << " causal " << causal);
      HostTensor q = HostTensor::random({c.b, c.s, c.h, c.d}, 51, -2.0f, 2.0f);
      HostTensor k = HostTensor::random({c.b, c.s, c.h, c.d}, 52, -2.0f, 2.0f);
      HostTensor v = HostTensor::random({c.b, c.s, c.h, c.d}, 53);
      OpAttrs attrs;
      attrs.set("causal", causal);
      attrs.set("layout", std::string("bshd"));
      HostTensor want(DType::F32, {c.b, c.s, c.h, c.d});
      ASSERT_TRUE(attend(attrs, q, k, v, want).ok());
      const std::vector<double> expected(want.f(), want.f() + want.numel());
      attrs.set("heads", c.h);
      HostTensor y(DType::F32, {c.b, c.s, c.h * c.d});
      Status s = run_op("scaled_dot_product_attention", attrs, {merged_heads(q), merged_heads(k), merged_heads(v)},
                        {y.view()});
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_LT(relative_error(y, expected), 1e-6);
      HostTensor qkv = packed_rows(q, k, v);
      HostTensor yp(DType::F32, {c.b, c.s, c.h * c.d});
      s = run_op("scaled_dot_product_attention", attrs, {qkv.view()}, {yp.view()});
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_LT(relative_error(yp, expected), 1e-6);
    }
  }
}

TEST(Attention, HeadsAttributeChecksItsOperands) {
  OpAttrs attrs;
  attrs.set("layout", std::string("bshd"));
  attrs.set("heads", int64_t{3});
  HostTensor qkv = HostTensor::random({1, 4, 32}, 1);  // 32 is no multiple of 3 x 3
  HostTensor y(DType::F32, {1, 4, 12});
  EXPECT_TRUE(IsError(run_op("scaled_dot_product_attention", attrs, {qkv.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"heads = 3", "a multiple of 3 x 3", "[1, 4, 32]"}));
  // 3 x heads would overflow: no divisor of anything, and no index past the tensor.
  attrs.set("heads", int64_t{6148914691236517207});
  HostTensor fifteen = HostTensor::random({1, 4, 15}, 3);
  HostTensor y5(DType::F32, {1, 4, 5});
  EXPECT_TRUE(IsError(run_op("scaled_dot_product_attention", attrs, {fifteen.view()}, {y5.view()}),
                      ErrorCode::InvalidArgument, {"a multiple of 3 x 6148914691236517207"}));
  attrs.set("heads", int64_t{3});
  HostTensor good = HostTensor::random({1, 4, 36}, 2);
  HostTensor wrong(DType::F32, {1, 4, 36});  // the output is [1, 4, 12]
  EXPECT_TRUE(IsError(run_op("scaled_dot_product_attention", attrs, {good.view()}, {wrong.view()}),
                      ErrorCode::InvalidArgument, {"output", "[1, 4, 12]"}));
  attrs.set("layout", std::string("bhsd"));  // heads needs bshd
  EXPECT_TRUE(IsError(run_op("scaled_dot_product_attention", attrs, {good.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"heads 3", "layout bhsd"}));
  attrs.set("layout", std::string("bshd"));
  attrs.set("heads", int64_t{-1});
  EXPECT_TRUE(IsError(run_op("scaled_dot_product_attention", attrs, {good.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"heads -1"}));
  attrs.set("heads", int64_t{3});
  EXPECT_TRUE(IsError(run_op("scaled_dot_product_attention", attrs, {good.view(), good.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"2 input(s)"}));
  // k absent but v given: neither three operands nor the packed form (k and v both absent).
  EXPECT_TRUE(IsError(run_op("scaled_dot_product_attention", attrs, {good.view(), TensorView::none(), good.view()},
                             {y.view()}),
                      ErrorCode::InvalidArgument, {"(one absent)"}));
  HostTensor rank1 = HostTensor::random({36}, 4);
  EXPECT_TRUE(IsError(run_op("scaled_dot_product_attention", attrs, {rank1.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"rank 2 to 7", "[36]"}));
  OpAttrs no_heads;  // one input without heads
  no_heads.set("layout", std::string("bshd"));
  EXPECT_TRUE(IsError(run_op("scaled_dot_product_attention", no_heads, {good.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"1 input(s)", "heads 0"}));
}

TEST(Attention, NoKeysGivesZeros) {
  HostTensor q = HostTensor::random({1, 1, 2, 4}, 1);
  HostTensor k(DType::F32, {1, 1, 0, 4});
  HostTensor v(DType::F32, {1, 1, 0, 3});
  HostTensor y = HostTensor::random({1, 1, 2, 3}, 2);
  ASSERT_TRUE(attend({}, q, k, v, y).ok());
  EXPECT_LT(relative_error(y, std::vector<double>(6, 0.0)), kTolerance);
}

TEST(Attention, MismatchedHeadDimsAreRejected) {
  HostTensor q = HostTensor::random({1, 2, 3, 8}, 1);
  HostTensor k = HostTensor::random({1, 2, 3, 4}, 2);
  HostTensor v = HostTensor::random({1, 2, 3, 8}, 3);
  HostTensor y(DType::F32, {1, 2, 3, 8});
  EXPECT_TRUE(
      IsError(attend({}, q, k, v, y), ErrorCode::InvalidArgument,
              {"scaled_dot_product_attention", "q f32 [1, 2, 3, 8]", "k f32 [1, 2, 3, 4]"}));
}

TEST(Attention, KeysAndValuesOfDifferentLengthAreRejected) {
  HostTensor q = HostTensor::random({1, 2, 3, 8}, 1);
  HostTensor k = HostTensor::random({1, 2, 5, 8}, 2);
  HostTensor v = HostTensor::random({1, 2, 4, 8}, 3);
  HostTensor y(DType::F32, {1, 2, 3, 8});
  EXPECT_TRUE(IsError(attend({}, q, k, v, y), ErrorCode::InvalidArgument, {"v f32 [1, 2, 4, 8]"}));
}

TEST(Attention, DifferentBatchOrHeadsAreRejected) {
  HostTensor q = HostTensor::random({1, 2, 3, 8}, 1);
  HostTensor k = HostTensor::random({1, 4, 3, 8}, 2);
  HostTensor y(DType::F32, {1, 2, 3, 8});
  EXPECT_TRUE(IsError(attend({}, q, k, k, y), ErrorCode::InvalidArgument, {"equal leading dims"}));
}

TEST(Attention, WrongRankIsRejected) {
  HostTensor q = HostTensor::random({8}, 1);
  HostTensor y(DType::F32, {8});
  EXPECT_TRUE(IsError(attend({}, q, q, q, y), ErrorCode::InvalidArgument, {"q f32 [8]"}));
}

TEST(Attention, WrongOutputShapeIsRejected) {
  HostTensor q = HostTensor::random({1, 1, 3, 4}, 1);
  HostTensor k = HostTensor::random({1, 1, 5, 4}, 2);
  HostTensor v = HostTensor::random({1, 1, 5, 6}, 3);
  HostTensor y(DType::F32, {1, 1, 3, 4});
  EXPECT_TRUE(IsError(attend({}, q, k, v, y), ErrorCode::InvalidArgument,
                      {"output is f32 [1, 1, 3, 4]", "expected f32 [1, 1, 3, 6]"}));
}

TEST(Attention, CausalOfWrongTypeIsRejected) {
  HostTensor q = HostTensor::random({1, 1, 3, 4}, 1);
  HostTensor y(DType::F32, {1, 1, 3, 4});
  OpAttrs attrs;
  attrs.set("causal", int64_t{1});
  EXPECT_TRUE(IsError(attend(attrs, q, q, q, y), ErrorCode::InvalidArgument,
                      {"scaled_dot_product_attention", "'causal'", "expected a bool"}));
}

TEST(Attention, NonF32IsNotSupported) {
  HostTensor q(DType::F16, {1, 1, 3, 4});
  HostTensor y(DType::F16, {1, 1, 3, 4});
  EXPECT_TRUE(IsError(attend({}, q, q, q, y), ErrorCode::NotSupported, {"q has dtype f16"}));
}

}  // namespace
}  // namespace planrt::kernels
