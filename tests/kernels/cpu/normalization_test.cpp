#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"

namespace planrt::kernels {
namespace {

using testing::HostTensor;
using testing::IsError;
using testing::kTolerance;
using testing::relative_error;
using testing::run_op;

std::vector<double> layer_norm_reference(const HostTensor& x, const HostTensor* w,
                                         const HostTensor* b, double eps) {
  const int64_t n = x.shape().size(-1);
  std::vector<double> ref;
  for (int64_t r = 0; r < x.numel() / n; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += x.at(r * n + i);
    mean /= n;
    for (int64_t i = 0; i < n; ++i) var += (x.at(r * n + i) - mean) * (x.at(r * n + i) - mean);
    var /= n;
    for (int64_t i = 0; i < n; ++i) {
      double v = (x.at(r * n + i) - mean) / std::sqrt(var + eps);
      ref.push_back(v * (w ? w->at(i) : 1.0) + (b ? b->at(i) : 0.0));
    }
  }
  return ref;
}

std::vector<double> rms_norm_reference(const HostTensor& x, const HostTensor* w, double eps) {
  const int64_t n = x.shape().size(-1);
  std::vector<double> ref;
  for (int64_t r = 0; r < x.numel() / n; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < n; ++i) ms += x.at(r * n + i) * x.at(r * n + i);
    ms /= n;
    for (int64_t i = 0; i < n; ++i) {
      ref.push_back(x.at(r * n + i) / std::sqrt(ms + eps) * (w ? w->at(i) : 1.0));
    }
  }
  return ref;
}

TEST(LayerNorm, WithWeightAndBiasMatchesReference) {
  // An offset mean checks the variance is not computed as E[x^2] - E[x]^2.
  HostTensor x = HostTensor::random({3, 4, 64}, 1, 99.0f, 101.0f);
  HostTensor w = HostTensor::random({64}, 2);
  HostTensor b = HostTensor::random({64}, 3);
  HostTensor y(DType::F32, {3, 4, 64});
  ASSERT_TRUE(run_op("layer_norm", {}, {x.view(), w.view(), b.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, layer_norm_reference(x, &w, &b, 1e-5)), kTolerance);
}

TEST(LayerNorm, OptionalOperandsMayBeAbsent) {
  HostTensor x = HostTensor::random({5, 17}, 4);
  HostTensor b = HostTensor::random({17}, 5);
  HostTensor y(DType::F32, {5, 17});
  ASSERT_TRUE(run_op("layer_norm", {}, {x.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, layer_norm_reference(x, nullptr, nullptr, 1e-5)), kTolerance);
  ASSERT_TRUE(run_op("layer_norm", {}, {x.view(), TensorView::none(), b.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, layer_norm_reference(x, nullptr, &b, 1e-5)), kTolerance);
}

TEST(LayerNorm, EpsAttributeIsUsed) {
  // Tiny values: the variance (~1e-6) is comparable to eps, so eps shows in the output.
  HostTensor x = HostTensor::random({2, 32}, 6, -2e-3f, 2e-3f);
  HostTensor y(DType::F32, {2, 32});
  OpAttrs attrs;
  attrs.set("eps", 1e-3);
  ASSERT_TRUE(run_op("layer_norm", attrs, {x.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, layer_norm_reference(x, nullptr, nullptr, 1e-3)), kTolerance);
  EXPECT_GT(relative_error(y, layer_norm_reference(x, nullptr, nullptr, 1e-5)), 1e-2);
}

TEST(LayerNorm, WrongWeightShapeIsRejected) {
  HostTensor x = HostTensor::random({2, 8}, 1);
  HostTensor w = HostTensor::random({4}, 2);
  HostTensor y(DType::F32, {2, 8});
  EXPECT_TRUE(IsError(run_op("layer_norm", {}, {x.view(), w.view()}, {y.view()}),
                      ErrorCode::InvalidArgument,
                      {"layer_norm", "weight must be [8]", "weight f32 [4]"}));
}

TEST(LayerNorm, ScalarInputIsRejected) {
  HostTensor x = HostTensor::random({}, 1);
  HostTensor y(DType::F32, {});
  EXPECT_TRUE(IsError(run_op("layer_norm", {}, {x.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"layer_norm", "rank >= 1"}));
}

TEST(LayerNorm, EpsOfWrongTypeIsRejected) {
  HostTensor x = HostTensor::random({2, 8}, 1);
  HostTensor y(DType::F32, {2, 8});
  OpAttrs attrs;
  attrs.set("eps", std::string("1e-5"));
  EXPECT_TRUE(IsError(run_op("layer_norm", attrs, {x.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"layer_norm", "'eps'", "a string"}));
}

TEST(LayerNorm, NonF32IsNotSupported) {
  HostTensor x(DType::F16, {2, 8});
  HostTensor y(DType::F16, {2, 8});
  EXPECT_TRUE(IsError(run_op("layer_norm", {}, {x.view()}, {y.view()}), ErrorCode::NotSupported,
                      {"layer_norm", "x has dtype f16"}));
}

TEST(RmsNorm, WithWeightMatchesReference) {
  HostTensor x = HostTensor::random({4, 3, 48}, 7);
  HostTensor w = HostTensor::random({48}, 8);
  HostTensor y(DType::F32, {4, 3, 48});
  ASSERT_TRUE(run_op("rms_norm", {}, {x.view(), w.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, rms_norm_reference(x, &w, 1e-6)), kTolerance);
}

TEST(RmsNorm, DefaultEpsIsOneInAMillion) {
  HostTensor x = HostTensor::random({3, 16}, 9, -2e-3f, 2e-3f);
  HostTensor y(DType::F32, {3, 16});
  ASSERT_TRUE(run_op("rms_norm", {}, {x.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, rms_norm_reference(x, nullptr, 1e-6)), kTolerance);
  OpAttrs attrs;
  attrs.set("eps", 1e-4);
  ASSERT_TRUE(run_op("rms_norm", attrs, {x.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, rms_norm_reference(x, nullptr, 1e-4)), kTolerance);
  EXPECT_GT(relative_error(y, rms_norm_reference(x, nullptr, 1e-6)), 1e-2);
}

TEST(RmsNorm, WrongWeightShapeIsRejected) {
  HostTensor x = HostTensor::random({2, 8}, 1);
  HostTensor w = HostTensor::random({1, 8}, 2);
  HostTensor y(DType::F32, {2, 8});
  EXPECT_TRUE(IsError(run_op("rms_norm", {}, {x.view(), w.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"rms_norm", "weight must be [8]"}));
}

TEST(RmsNorm, WrongOutputShapeIsRejected) {
  HostTensor x = HostTensor::random({2, 8}, 1);
  HostTensor y(DType::F32, {2, 9});
  EXPECT_TRUE(IsError(run_op("rms_norm", {}, {x.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"rms_norm", "output is f32 [2, 9]", "expected f32 [2, 8]"}));
}

std::vector<double> softmax_reference(const HostTensor& x, int dim) {
  const Shape& s = x.shape();
  int64_t inner = 1;
  for (int d = dim + 1; d < s.rank(); ++d) inner *= s[d];
  const int64_t n = s[dim];
  const int64_t outer = x.numel() / (n * inner);
  std::vector<double> ref(static_cast<size_t>(x.numel()));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return o * n * inner + j * inner + i; };
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x.at(at(j)));
      for (int64_t j = 0; j < n; ++j) sum += std::exp(x.at(at(j)) - mx);
      for (int64_t j = 0; j < n; ++j)
        ref[static_cast<size_t>(at(j))] = std::exp(x.at(at(j)) - mx) / sum;
    }
  }
  return ref;
}

TEST(Softmax, EveryDimMatchesReference) {
  HostTensor x = HostTensor::random({3, 4, 5}, 11, -5.0f, 5.0f);
  for (int64_t dim : {0, 1, 2, -1, -2, -3}) {
    HostTensor y(DType::F32, {3, 4, 5});
    OpAttrs attrs;
    attrs.set("dim", dim);
    ASSERT_TRUE(run_op("softmax", attrs, {x.view()}, {y.view()}).ok()) << dim;
    EXPECT_LT(relative_error(y, softmax_reference(x, static_cast<int>(dim < 0 ? dim + 3 : dim))),
              kTolerance)
        << "dim " << dim;
  }
}

TEST(Softmax, DefaultsToTheLastDim) {
  HostTensor x = HostTensor::random({4, 6}, 12);
  HostTensor y(DType::F32, {4, 6});
  ASSERT_TRUE(run_op("softmax", {}, {x.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, softmax_reference(x, 1)), kTolerance);
}

TEST(Softmax, LargeLogitsDoNotOverflow) {
  HostTensor x = HostTensor::f32({1, 3}, {1000.0f, 1001.0f, 1002.0f});
  HostTensor y(DType::F32, {1, 3});
  ASSERT_TRUE(run_op("softmax", {}, {x.view()}, {y.view()}).ok());
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0), s = 1 + e1 + e2;
  EXPECT_LT(relative_error(y, {e2 / s, e1 / s, 1 / s}), kTolerance);
}

TEST(Softmax, ScalarIsOne) {
  HostTensor x = HostTensor::f32({}, {3.0f});
  HostTensor y(DType::F32, {});
  ASSERT_TRUE(run_op("softmax", {}, {x.view()}, {y.view()}).ok());
  EXPECT_EQ(y.f()[0], 1.0f);
}

TEST(Softmax, DimOutOfRangeIsRejected) {
  HostTensor x = HostTensor::random({2, 3}, 1);
  HostTensor y(DType::F32, {2, 3});
  for (int64_t dim : {2, -3}) {
    OpAttrs attrs;
    attrs.set("dim", dim);
    EXPECT_TRUE(IsError(run_op("softmax", attrs, {x.view()}, {y.view()}),
                        ErrorCode::InvalidArgument,
                        {"softmax", "dim = " + std::to_string(dim), "rank 2"}));
  }
}

TEST(Softmax, DimOfWrongTypeIsRejected) {
  HostTensor x = HostTensor::random({2, 3}, 1);
  HostTensor y(DType::F32, {2, 3});
  OpAttrs attrs;
  attrs.set("dim", 1.0);
  EXPECT_TRUE(IsError(run_op("softmax", attrs, {x.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"softmax", "'dim'", "a float"}));
}

TEST(Softmax, NonF32IsNotSupported) {
  HostTensor x(DType::BF16, {2, 3});
  HostTensor y(DType::BF16, {2, 3});
  EXPECT_TRUE(IsError(run_op("softmax", {}, {x.view()}, {y.view()}), ErrorCode::NotSupported,
                      {"softmax", "bf16"}));
}

// The mean over dims [begin, end) of x, by brute force in double.
std::vector<double> mean_reference(const HostTensor& x, int begin, int end) {
  const Shape& s = x.shape();
  int64_t outer = 1, n = 1, inner = 1;
  for (int d = 0; d < s.rank(); ++d) (d < begin ? outer : d < end ? n : inner) *= s[d];
  std::vector<double> ref;
  const std::vector<double> v = x.doubles();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < n; ++j) sum += v[(o * n + j) * inner + i];
      ref.push_back(sum / static_cast<double>(n));
    }
  }
  return ref;
}

TEST(ReduceMean, AveragesAdjacentDimsKeptOrDropped) {
  HostTensor x = HostTensor::random({3, 4, 5, 6}, 21);
  struct Case {
    std::vector<int64_t> dims;
    int begin, end;
    Shape kept, dropped;
  };
  const Case cases[] = {
      {{-1}, 3, 4, {3, 4, 5, 1}, {3, 4, 5}},
      {{1}, 1, 2, {3, 1, 5, 6}, {3, 5, 6}},
      {{2, 1}, 1, 3, {3, 1, 1, 6}, {3, 6}},
      {{0, 1, 2, 3}, 0, 4, {1, 1, 1, 1}, {}},
  };
  for (const Case& c : cases) {
    for (const Shape& out : {c.kept, c.dropped}) {
      SCOPED_TRACE(out.to_string());
      OpAttrs attrs;
      attrs.set("dims", c.dims);
      HostTensor y(DType::F32, out);
      Status s = run_op("reduce_mean", attrs, {x.view()}, {y.view()});
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_LT(relative_error(y, mean_reference(x, c.begin, c.end)), kTolerance);
    }
  }
}

TEST(ReduceMean, RejectsSeparatedDimsAWrongOutputAndMissingDims) {
  HostTensor x = HostTensor::random({2, 3, 4}, 22);
  OpAttrs split;
  split.set("dims", std::vector<int64_t>{0, 2});
  HostTensor y(DType::F32, {3});
  EXPECT_TRUE(IsError(run_op("reduce_mean", split, {x.view()}, {y.view()}), ErrorCode::NotSupported,
                      {"reduce_mean", "adjacent"}));
  OpAttrs last;
  last.set("dims", std::vector<int64_t>{-1});
  HostTensor wrong(DType::F32, {2, 4});
  EXPECT_TRUE(IsError(run_op("reduce_mean", last, {x.view()}, {wrong.view()}),
                      ErrorCode::InvalidArgument, {"reduce_mean", "output is f32 [2, 4]", "[2, 3]"}));
  HostTensor ok(DType::F32, {2, 3});
  EXPECT_TRUE(IsError(run_op("reduce_mean", {}, {x.view()}, {ok.view()}), ErrorCode::NotFound,
                      {"reduce_mean", "dims"}));
  OpAttrs out_of_range;
  out_of_range.set("dims", std::vector<int64_t>{3});
  EXPECT_TRUE(IsError(run_op("reduce_mean", out_of_range, {x.view()}, {ok.view()}),
                      ErrorCode::InvalidArgument, {"reduce_mean", "dims = 3"}));
}

}  // namespace
}  // namespace planrt::kernels
