#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "kernel_test_util.h"
#include "kernels/cpu/packed_linear.h"

namespace planrt::kernels {
namespace {

using testing::broadcast_source;
using testing::HostTensor;
using testing::IsError;
using testing::kTolerance;
using testing::relative_error;
using testing::run_op;
using testing::unravel;

// y[..., o] = sum_i x[..., i] * w[o, i] + b[o], in double.
std::vector<double> linear_reference(const HostTensor& x, const HostTensor& w,
                                     const HostTensor* b) {
  const int64_t in = w.shape()[1];
  const int64_t out = w.shape()[0];
  const int64_t rows = in == 0 ? x.numel() : x.numel() / in;
  std::vector<double> ref;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = b != nullptr ? b->at(o) : 0.0;
      for (int64_t i = 0; i < in; ++i) acc += x.at(r * in + i) * w.at(o * in + i);
      ref.push_back(acc);
    }
  }
  return ref;
}

TEST(Linear, WithBiasMatchesReference) {
  HostTensor x = HostTensor::random({2, 5, 16}, 1);
  HostTensor w = HostTensor::random({7, 16}, 2);
  HostTensor b = HostTensor::random({7}, 3);
  HostTensor y(DType::F32, {2, 5, 7});
  ASSERT_TRUE(run_op("linear", {}, {x.view(), w.view(), b.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, linear_reference(x, w, &b)), kTolerance);
}

// A fused activation (attribute activation, builder/rewrite.h), on the plain kernel and on
// the packed one (oneDNN post-ops), against the reference then the activation in double.
TEST(Linear, FusedActivationsMatchTheProductThenTheActivation) {
  HostTensor x = HostTensor::random({3, 9, 48}, 4);
  HostTensor w = HostTensor::random({40, 48}, 5);
  HostTensor b = HostTensor::random({40}, 6);
  const std::vector<double> product = linear_reference(x, w, &b);
  struct Case {
    const char* activation;
    const char* approximate;
    double (*f)(double);
  };
  const Case cases[] = {
      {"relu", nullptr, [](double v) { return v > 0 ? v : 0.0; }},
      {"gelu", nullptr, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {"gelu", "tanh",
       [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))); }},
  };
  Result<std::unique_ptr<cpu::PackedLinear>> packed = cpu::PackedLinear::create(w.view());
  ASSERT_TRUE(packed.ok()) << packed.status().to_string();
  for (const Case& c : cases) {
    OpAttrs attrs;
    attrs.set("activation", std::string(c.activation));
    if (c.approximate != nullptr) attrs.set("approximate", std::string(c.approximate));
    std::vector<double> want = product;
    for (double& v : want) v = c.f(v);
    HostTensor plain(DType::F32, {3, 9, 40}), fused(DType::F32, {3, 9, 40});
    ASSERT_TRUE(run_op("linear", attrs, {x.view(), w.view(), b.view()}, {plain.view()}).ok()) << c.activation;
    EXPECT_LT(relative_error(plain, want), 1e-5) << c.activation;
    const std::vector<TensorView> in = {x.view(), w.view(), b.view()};
    const TensorView out = fused.view();
    Status s = (*packed)->run(attrs, in, {&out, 1});
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_LT(relative_error(fused, want), 1e-5) << c.activation << " (packed)";
  }
}

TEST(Linear, AnUnknownActivationIsRefusedNamingIt) {
  HostTensor x = HostTensor::random({2, 8}, 1);
  HostTensor w = HostTensor::random({4, 8}, 2);
  HostTensor y(DType::F32, {2, 4});
  OpAttrs bad;
  bad.set("activation", std::string("swish"));
  EXPECT_TRUE(IsError(run_op("linear", bad, {x.view(), w.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"activation 'swish'"}));
  OpAttrs stray;
  stray.set("activation", std::string("relu"));
  stray.set("approximate", std::string("tanh"));
  EXPECT_TRUE(IsError(run_op("linear", stray, {x.view(), w.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"'approximate' needs activation gelu"}));
  OpAttrs mode;
  mode.set("activation", std::string("gelu"));
  mode.set("approximate", std::string("fast"));
  EXPECT_TRUE(IsError(run_op("linear", mode, {x.view(), w.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"'fast'"}));
}

TEST(Linear, WithoutBiasMatchesReference) {
  HostTensor x = HostTensor::random({9, 33}, 4);
  HostTensor w = HostTensor::random({12, 33}, 5);
  HostTensor y(DType::F32, {9, 12});
  // Pre-filled garbage must not leak in: beta is 0 without a bias.
  for (int64_t i = 0; i < y.numel(); ++i) y.f()[i] = 1e6f;
  ASSERT_TRUE(run_op("linear", {}, {x.view(), w.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, linear_reference(x, w, nullptr)), kTolerance);
  ASSERT_TRUE(run_op("linear", {}, {x.view(), w.view(), TensorView::none()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, linear_reference(x, w, nullptr)), kTolerance);
}

TEST(Linear, VectorInputMatchesReference) {
  HostTensor x = HostTensor::random({8}, 6);
  HostTensor w = HostTensor::random({3, 8}, 7);
  HostTensor b = HostTensor::random({3}, 8);
  HostTensor y(DType::F32, {3});
  ASSERT_TRUE(run_op("linear", {}, {x.view(), w.view(), b.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, linear_reference(x, w, &b)), kTolerance);
}

TEST(Linear, ZeroInputFeaturesGiveTheBias) {
  HostTensor x(DType::F32, {2, 0});
  HostTensor w(DType::F32, {3, 0});
  HostTensor b = HostTensor::f32({3}, {1.0f, 2.0f, 3.0f});
  HostTensor y = HostTensor::random({2, 3}, 9);
  ASSERT_TRUE(run_op("linear", {}, {x.view(), w.view(), b.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, {1, 2, 3, 1, 2, 3}), kTolerance);
}

TEST(Linear, MismatchedFeaturesAreRejected) {
  HostTensor x = HostTensor::random({2, 5}, 1);
  HostTensor w = HostTensor::random({3, 4}, 2);
  HostTensor y(DType::F32, {2, 3});
  EXPECT_TRUE(IsError(run_op("linear", {}, {x.view(), w.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"linear", "x f32 [2, 5]", "weight f32 [3, 4]"}));
}

TEST(Linear, WrongBiasShapeIsRejected) {
  HostTensor x = HostTensor::random({2, 4}, 1);
  HostTensor w = HostTensor::random({3, 4}, 2);
  HostTensor b = HostTensor::random({4}, 3);
  HostTensor y(DType::F32, {2, 3});
  EXPECT_TRUE(IsError(run_op("linear", {}, {x.view(), w.view(), b.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"linear", "bias f32 [4]"}));
}

TEST(Linear, WeightOfWrongRankIsRejected) {
  HostTensor x = HostTensor::random({2, 4}, 1);
  HostTensor w = HostTensor::random({4}, 2);
  HostTensor y(DType::F32, {2});
  EXPECT_TRUE(IsError(run_op("linear", {}, {x.view(), w.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"linear", "weight f32 [4]"}));
}

TEST(Linear, WrongOutputShapeIsRejected) {
  HostTensor x = HostTensor::random({2, 4}, 1);
  HostTensor w = HostTensor::random({3, 4}, 2);
  HostTensor y(DType::F32, {3, 2});
  EXPECT_TRUE(IsError(run_op("linear", {}, {x.view(), w.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"linear", "output is f32 [3, 2]", "[2, 3]"}));
}

TEST(Linear, NonF32WeightIsNotSupported) {
  HostTensor x = HostTensor::random({2, 4}, 1);
  HostTensor w(DType::BF16, {3, 4});
  HostTensor y(DType::F32, {2, 3});
  EXPECT_TRUE(IsError(run_op("linear", {}, {x.view(), w.view()}, {y.view()}),
                      ErrorCode::NotSupported, {"linear", "weight has dtype bf16"}));
}

// torch.matmul in double, from the shapes alone.
std::vector<double> matmul_reference(const HostTensor& a, const HostTensor& b, const Shape& out) {
  const bool a_vec = a.shape().rank() == 1;
  const bool b_vec = b.shape().rank() == 1;
  const int64_t m = a_vec ? 1 : a.shape().size(-2);
  const int64_t k = a.shape().size(-1);
  const int64_t n = b_vec ? 1 : b.shape().size(-1);
  Shape a_batch, b_batch, batch;
  for (int i = 0; i < a.shape().rank() - (a_vec ? 1 : 2); ++i)
    (void)a_batch.push_back(a.shape()[i]);
  for (int i = 0; i < b.shape().rank() - (b_vec ? 1 : 2); ++i)
    (void)b_batch.push_back(b.shape()[i]);
  const int batch_rank = out.rank() - (a_vec ? 0 : 1) - (b_vec ? 0 : 1);
  for (int i = 0; i < batch_rank; ++i) (void)batch.push_back(out[i]);
  std::vector<double> ref;
  for (int64_t bi = 0; bi < batch.numel(); ++bi) {
    std::vector<int64_t> index = unravel(bi, batch);
    const int64_t ao = broadcast_source(index, batch, a_batch) * m * k;
    const int64_t bo = broadcast_source(index, batch, b_batch) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t p = 0; p < k; ++p) acc += a.at(ao + i * k + p) * b.at(bo + p * n + j);
        ref.push_back(acc);
      }
    }
  }
  return ref;
}

void expect_matmul_matches(const Shape& sa, const Shape& sb, const Shape& so) {
  HostTensor a = HostTensor::random(sa, 21);
  HostTensor b = HostTensor::random(sb, 22);
  HostTensor y(DType::F32, so);
  Status s = run_op("matmul", {}, {a.view(), b.view()}, {y.view()});
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_LT(relative_error(y, matmul_reference(a, b, so)), kTolerance)
      << sa.to_string() << " @ " << sb.to_string();
}

TEST(Matmul, MatrixTimesMatrix) { expect_matmul_matches({5, 7}, {7, 3}, {5, 3}); }

TEST(Matmul, BatchedWithSharedRightOperand) {
  expect_matmul_matches({2, 3, 5, 7}, {7, 4}, {2, 3, 5, 4});
}

TEST(Matmul, BatchedWithSharedLeftOperand) { expect_matmul_matches({5, 7}, {3, 7, 4}, {3, 5, 4}); }

TEST(Matmul, BatchDimsBroadcastBothWays) {
  expect_matmul_matches({2, 1, 3, 4}, {5, 4, 6}, {2, 5, 3, 6});
  expect_matmul_matches({1, 3, 2, 4}, {2, 1, 4, 5}, {2, 3, 2, 5});
}

TEST(Matmul, VectorTimesVectorIsAScalar) { expect_matmul_matches({6}, {6}, {}); }

TEST(Matmul, VectorTimesMatrixDropsTheRowDim) {
  expect_matmul_matches({4}, {4, 3}, {3});
  expect_matmul_matches({4}, {2, 4, 3}, {2, 3});
}

TEST(Matmul, MatrixTimesVectorDropsTheColumnDim) {
  expect_matmul_matches({3, 4}, {4}, {3});
  expect_matmul_matches({2, 3, 4}, {4}, {2, 3});
}

TEST(Matmul, EmptyInnerDimGivesZeros) {
  HostTensor a(DType::F32, {2, 0});
  HostTensor b(DType::F32, {0, 3});
  HostTensor y = HostTensor::random({2, 3}, 1);
  ASSERT_TRUE(run_op("matmul", {}, {a.view(), b.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, std::vector<double>(6, 0.0)), kTolerance);
}

TEST(Matmul, MismatchedInnerDimsAreRejected) {
  HostTensor a = HostTensor::random({2, 3}, 1);
  HostTensor b = HostTensor::random({4, 5}, 2);
  HostTensor y(DType::F32, {2, 5});
  EXPECT_TRUE(IsError(run_op("matmul", {}, {a.view(), b.view()}, {y.view()}),
                      ErrorCode::InvalidArgument,
                      {"matmul", "inner dims differ (3 vs 4)", "b f32 [4, 5]"}));
}

TEST(Matmul, BatchDimsThatDoNotBroadcastAreRejected) {
  HostTensor a = HostTensor::random({2, 3, 4}, 1);
  HostTensor b = HostTensor::random({3, 4, 5}, 2);
  HostTensor y(DType::F32, {3, 3, 5});
  EXPECT_TRUE(IsError(run_op("matmul", {}, {a.view(), b.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"matmul", "[2]", "[3]", "do not broadcast"}));
}

TEST(Matmul, ScalarOperandIsRejected) {
  HostTensor a = HostTensor::random({}, 1);
  HostTensor b = HostTensor::random({3}, 2);
  HostTensor y(DType::F32, {3});
  EXPECT_TRUE(IsError(run_op("matmul", {}, {a.view(), b.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"matmul", "rank >= 1", "a f32 []"}));
}

TEST(Matmul, WrongOutputShapeIsRejected) {
  HostTensor a = HostTensor::random({3, 4}, 1);
  HostTensor b = HostTensor::random({4}, 2);
  HostTensor y(DType::F32, {3, 1});
  EXPECT_TRUE(IsError(run_op("matmul", {}, {a.view(), b.view()}, {y.view()}),
                      ErrorCode::InvalidArgument,
                      {"matmul", "output is f32 [3, 1]", "expected f32 [3]"}));
}

TEST(Matmul, NonF32IsNotSupported) {
  HostTensor a(DType::I32, {3, 4});
  HostTensor b = HostTensor::random({4, 2}, 2);
  HostTensor y(DType::F32, {3, 2});
  EXPECT_TRUE(IsError(run_op("matmul", {}, {a.view(), b.view()}, {y.view()}),
                      ErrorCode::NotSupported, {"matmul", "a has dtype i32"}));
}

}  // namespace
}  // namespace planrt::kernels
