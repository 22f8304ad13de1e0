// scaled_dot_product_attention's mask input (kernels/attention_layout.h): bool (true: attend)
// or additive, broadcast over batches, heads and query rows; a padded batch gives, row for
// row, what each sequence gives alone; a query row left without keys gives zeros.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "kernel_test_util.h"

namespace planrt::kernels {
namespace {

using testing::HostTensor;
using testing::IsError;
using testing::relative_error;
using testing::run_op;
using testing::swap_middle;

constexpr std::string_view kOp = "scaled_dot_product_attention";
constexpr double kInf = std::numeric_limits<double>::infinity();

// What the mask adds to score (b, h, i, j): 0 or -inf (bool), or its value (additive).
using Bias = std::function<double(int64_t b, int64_t h, int64_t i, int64_t j)>;

// softmax(scale * q k^T + bias) v over q, k, v [B, H, S, D], in double; a row whose keys are
// all masked gives zeros.
std::vector<double> reference(const HostTensor& q, const HostTensor& k, const HostTensor& v, bool causal,
                              double scale, const Bias& bias) {
  const int64_t b_n = q.shape()[0], h_n = q.shape()[1], sq = q.shape()[2], sk = k.shape()[2];
  const int64_t d = q.shape()[3], dv = v.shape()[3];
  std::vector<double> ref;
  for (int64_t b = 0; b < b_n; ++b) {
    for (int64_t h = 0; h < h_n; ++h) {
      const int64_t head = b * h_n + h;
      for (int64_t i = 0; i < sq; ++i) {
        std::vector<double> s(static_cast<size_t>(sk));
        double mx = -kInf;
        for (int64_t j = 0; j < sk; ++j) {
          double dot = 0;
          for (int64_t p = 0; p < d; ++p) dot += q.at((head * sq + i) * d + p) * k.at((head * sk + j) * d + p);
          double x = dot * scale + bias(b, h, i, j);
          if (causal && j > i) x = -kInf;
          s[static_cast<size_t>(j)] = x;
          mx = std::max(mx, x);
        }
        double sum = 0;
        for (double& e : s) sum += (e = mx == -kInf ? 0.0 : std::exp(e - mx));
        for (int64_t c = 0; c < dv; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < sk; ++j) acc += sum == 0 ? 0 : s[static_cast<size_t>(j)] / sum * v.at((head * sk + j) * dv + c);
          ref.push_back(acc);
        }
      }
    }
  }
  return ref;
}

// A bool mask of `shape`, true with probability `keep`.
HostTensor random_bool(Shape shape, uint32_t seed, double keep = 0.7) {
  HostTensor m(DType::Bool, std::move(shape));
  std::mt19937 gen(seed);
  std::bernoulli_distribution pick(keep);
  for (int64_t i = 0; i < m.numel(); ++i) m.as<uint8_t>()[i] = pick(gen) ? 1 : 0;
  return m;
}

// Index of (b, h, i, j) in a mask of `shape` broadcast to [B, H, Sq, Sk] (right-aligned).
int64_t mask_index(const Shape& shape, int64_t b, int64_t h, int64_t i, int64_t j) {
  const int64_t at[4] = {b, h, i, j};
  int64_t flat = 0;
  for (int d = 0; d < shape.rank(); ++d) {
    const int64_t dim = shape[d];
    const int64_t index = at[4 - shape.rank() + d];
    flat = flat * dim + (dim == 1 ? 0 : index);
  }
  return flat;
}

Bias bias_of(const HostTensor& mask) {
  return [&mask](int64_t b, int64_t h, int64_t i, int64_t j) -> double {
    const int64_t at = mask_index(mask.shape(), b, h, i, j);
    if (mask.dtype() == DType::Bool) return mask.as<uint8_t>()[at] != 0 ? 0.0 : -kInf;
    return mask.f()[at];
  };
}

Status attend(const OpAttrs& attrs, const HostTensor& q, const HostTensor& k, const HostTensor& v,
              const HostTensor& mask, HostTensor& y) {
  return run_op(kOp, attrs, {q.view(), k.view(), v.view(), mask.view()}, {y.view()});
}

struct Case {
  int64_t b, h, sq, sk, d;
};

void expect_masked_matches(const Case& c, const HostTensor& mask, bool causal) {
  HostTensor q = HostTensor::random({c.b, c.h, c.sq, c.d}, 61, -2.0f, 2.0f);
  HostTensor k = HostTensor::random({c.b, c.h, c.sk, c.d}, 62, -2.0f, 2.0f);
  HostTensor v = HostTensor::random({c.b, c.h, c.sk, c.d}, 63);
  HostTensor y(DType::F32, {c.b, c.h, c.sq, c.d});
  OpAttrs attrs;
  attrs.set("causal", causal);
  Status s = attend(attrs, q, k, v, mask, y);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_LT(relative_error(y, reference(q, k, v, causal, 1.0 / std::sqrt(double(c.d)), bias_of(mask))), 1e-5);
}

TEST(AttentionMask, BoolMasksOfEveryBroadcastShapeMatchTheReference) {
  // Sk = 600 spans two key tiles of the kernel (kernels/cpu/attention.cpp).
  for (const Case& c : {Case{2, 3, 5, 9, 8}, Case{2, 2, 130, 600, 16}}) {
    for (const Shape& shape : {Shape{c.b, 1, 1, c.sk}, Shape{c.b, 1, c.sq, c.sk}, Shape{1, 1, c.sq, c.sk},
                               Shape{c.sq, c.sk}, Shape{c.b, c.h, c.sq, c.sk}, Shape{c.h, 1, c.sk}}) {
      for (bool causal : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "sk " << c.sk << " mask " << shape.to_string() << " causal " << causal);
        expect_masked_matches(c, random_bool(shape, 7), causal);
      }
    }
  }
}

TEST(AttentionMask, AdditiveMasksWithInfinitiesMatchTheReference) {
  const Case c{2, 2, 6, 11, 8};
  HostTensor mask = HostTensor::random({c.b, 1, c.sq, c.sk}, 9, -3.0f, 3.0f);
  for (int64_t i = 0; i < mask.numel(); i += 4) mask.f()[i] = -std::numeric_limits<float>::infinity();
  expect_masked_matches(c, mask, false);
  expect_masked_matches(c, mask, true);
}

// A batch padded to one length gives, at each sequence's own positions, what the sequence
// gives alone: the padding-mask contract the Hugging Face exports rely on.
TEST(AttentionMask, APaddedBatchEqualsEachSequenceAlone) {
  const int64_t h = 2, s = 7, d = 8;
  const int64_t lengths[] = {7, 4, 1};
  const int64_t b = 3;
  HostTensor q = HostTensor::random({b, h, s, d}, 71, -2.0f, 2.0f);
  HostTensor k = HostTensor::random({b, h, s, d}, 72, -2.0f, 2.0f);
  HostTensor v = HostTensor::random({b, h, s, d}, 73);
  HostTensor mask(DType::Bool, {b, 1, 1, s});
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < s; ++j) mask.as<uint8_t>()[i * s + j] = j < lengths[i] ? 1 : 0;
  for (bool causal : {false, true}) {
    OpAttrs attrs;
    attrs.set("causal", causal);
    HostTensor y(DType::F32, {b, h, s, d});
    ASSERT_TRUE(attend(attrs, q, k, v, mask, y).ok());
    for (int64_t i = 0; i < b; ++i) {
      const int64_t n = lengths[i];
      SCOPED_TRACE(::testing::Message() << "sequence " << i << " of length " << n << " causal " << causal);
      // The sequence alone: [1, H, n, D].
      auto alone = [&](const HostTensor& t) {
        HostTensor out(DType::F32, {1, h, n, d});
        for (int64_t hh = 0; hh < h; ++hh)
          for (int64_t r = 0; r < n; ++r)
            for (int64_t p = 0; p < d; ++p) out.f()[(hh * n + r) * d + p] = t.f()[((i * h + hh) * s + r) * d + p];
        return out;
      };
      HostTensor y1(DType::F32, {1, h, n, d});
      ASSERT_TRUE(run_op(kOp, attrs, {alone(q).view(), alone(k).view(), alone(v).view()}, {y1.view()}).ok());
      HostTensor got = alone(y);
      EXPECT_LT(relative_error(got, std::vector<double>(y1.f(), y1.f() + y1.numel())), 1e-6);
    }
  }
}

TEST(AttentionMask, RowsWithoutKeysGiveZerosAndLaterKeysAfterAnEmptyTileCount) {
  // Batch 1 masks every key; in batch 0 only keys from 560 on (the second key tile) are kept,
  // and with causal the rows before 560 have no key left at all.
  const Case c{2, 1, 600, 600, 8};
  HostTensor mask(DType::Bool, {c.b, 1, 1, c.sk});
  for (int64_t j = 0; j < c.sk; ++j) mask.as<uint8_t>()[j] = j >= 560 ? 1 : 0;
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal);
    HostTensor q = HostTensor::random({c.b, c.h, c.sq, c.d}, 61, -2.0f, 2.0f);
    HostTensor k = HostTensor::random({c.b, c.h, c.sk, c.d}, 62, -2.0f, 2.0f);
    HostTensor v = HostTensor::random({c.b, c.h, c.sk, c.d}, 63);
    HostTensor y(DType::F32, {c.b, c.h, c.sq, c.d});
    OpAttrs attrs;
    attrs.set("causal", causal);
    ASSERT_TRUE(attend(attrs, q, k, v, mask, y).ok());
    for (int64_t i = c.sq * c.d; i < 2 * c.sq * c.d; ++i) ASSERT_EQ(y.f()[i], 0.0f) << i;
    if (causal) {
      for (int64_t i = 0; i < 560 * c.d; ++i) ASSERT_EQ(y.f()[i], 0.0f) << i;
    }
    EXPECT_LT(relative_error(y, reference(q, k, v, causal, 1.0 / std::sqrt(8.0), bias_of(mask))), 1e-5);
  }
}

// The mask means the same in every layout: [batch dims..., H, Sq, Sk].
TEST(AttentionMask, EveryLayoutReadsTheMaskAsTheDefaultLayoutDoes) {
  const int64_t b = 2, h = 3, s = 9, d = 4;
  HostTensor q = HostTensor::random({b, s, h, d}, 81, -2.0f, 2.0f);  // bshd
  HostTensor k = HostTensor::random({b, s, h, d}, 82, -2.0f, 2.0f);
  HostTensor v = HostTensor::random({b, s, h, d}, 83);
  for (const Shape& shape : {Shape{b, 1, 1, s}, Shape{b, h, s, s}, Shape{1, h, 1, s}}) {
    SCOPED_TRACE(shape.to_string());
    HostTensor mask = random_bool(shape, 5, 0.6);
    OpAttrs attrs;
    HostTensor want(DType::F32, {b, h, s, d});
    ASSERT_TRUE(attend(attrs, swap_middle(q), swap_middle(k), swap_middle(v), mask, want).ok());
    const HostTensor expected_bshd = swap_middle(want);
    const std::vector<double> expected(expected_bshd.f(), expected_bshd.f() + expected_bshd.numel());
    attrs.set("layout", std::string("bshd"));
    HostTensor y(DType::F32, {b, s, h, d});
    ASSERT_TRUE(attend(attrs, q, k, v, mask, y).ok());
    EXPECT_LT(relative_error(y, expected), 1e-6);
    // Packed q|k|v rows [b, s, 3 h d], k and v absent.
    HostTensor qkv(DType::F32, {b, s, 3 * h * d});
    for (int64_t r = 0; r < b * s; ++r) {
      const HostTensor* parts[] = {&q, &k, &v};
      for (int64_t p = 0; p < 3; ++p) std::copy_n(parts[p]->f() + r * h * d, h * d, qkv.f() + (r * 3 + p) * h * d);
    }
    attrs.set("heads", h);
    HostTensor yp(DType::F32, {b, s, h * d});
    Status st = run_op(kOp, attrs, {qkv.view(), TensorView{}, TensorView{}, mask.view()}, {yp.view()});
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_LT(relative_error(yp, expected), 1e-6);
  }
}

TEST(AttentionMask, MasksThatDoNotFitAreRejectedWithTheirShape) {
  const int64_t b = 2, h = 2, s = 5, d = 4;
  HostTensor q = HostTensor::random({b, h, s, d}, 1);
  HostTensor y(DType::F32, {b, h, s, d});
  OpAttrs attrs;
  HostTensor ints(DType::I64, {b, 1, 1, s});
  EXPECT_TRUE(IsError(attend(attrs, q, q, q, ints, y), ErrorCode::InvalidArgument, {"mask is i64", "bool"}));
  HostTensor short_keys(DType::Bool, {b, 1, 1, s - 1});
  EXPECT_TRUE(IsError(attend(attrs, q, q, q, short_keys, y), ErrorCode::InvalidArgument, {"[2, 1, 1, 4]", "Sk"}));
  HostTensor queries(DType::Bool, {b, 1, 3, s});
  EXPECT_TRUE(IsError(attend(attrs, q, q, q, queries, y), ErrorCode::InvalidArgument, {"Sq or 1"}));
  HostTensor heads(DType::Bool, {b, 3, 1, s});
  EXPECT_TRUE(IsError(attend(attrs, q, q, q, heads, y), ErrorCode::InvalidArgument, {"head dim"}));
  HostTensor too_many(DType::Bool, {1, b, h, s, s});
  EXPECT_TRUE(IsError(attend(attrs, q, q, q, too_many, y), ErrorCode::InvalidArgument, {"rank"}));
  // A batch dim broadcast over part of q's batch dims: [2, 1, 1, S] against q [3, 2, 2, S, D].
  HostTensor q5 = HostTensor::random({3, b, h, s, d}, 1);
  HostTensor y5(DType::F32, {3, b, h, s, d});
  HostTensor partial(DType::Bool, {b, 1, 1, s});
  EXPECT_TRUE(IsError(attend(attrs, q5, q5, q5, partial, y5), ErrorCode::InvalidArgument, {"batch dims"}));
}

}  // namespace
}  // namespace planrt::kernels
