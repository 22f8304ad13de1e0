#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "kernel_test_util.h"
#include "kernels/cpu/threading.h"

namespace planrt::kernels {
namespace {

using testing::broadcast_source;
using testing::HostTensor;
using testing::IsError;
using testing::kTolerance;
using testing::relative_error;
using testing::run_op;
using testing::unravel;

using BinaryRef = std::function<double(double, double)>;

std::vector<double> binary_reference(const HostTensor& a, const HostTensor& b, const Shape& out,
                                     const BinaryRef& f) {
  std::vector<double> ref(static_cast<size_t>(out.numel()));
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> index = unravel(i, out);
    ref[static_cast<size_t>(i)] = f(a.at(broadcast_source(index, out, a.shape())),
                                    b.at(broadcast_source(index, out, b.shape())));
  }
  return ref;
}

struct BinaryCase {
  const char* op;
  BinaryRef ref;
};

const BinaryCase kBinaryOps[] = {
    {"add", [](double a, double b) { return a + b; }},
    {"sub", [](double a, double b) { return a - b; }},
    {"mul", [](double a, double b) { return a * b; }},
    {"div", [](double a, double b) { return a / b; }},
};

void expect_binary_matches(const Shape& sa, const Shape& sb, const Shape& so) {
  uint32_t seed = 10;
  for (const BinaryCase& c : kBinaryOps) {
    HostTensor a = HostTensor::random(sa, ++seed);
    // Divisors away from zero, so the relative error measures the kernel, not the input.
    HostTensor b = HostTensor::random(sb, ++seed, 0.5f, 2.0f);
    HostTensor y(DType::F32, so);
    Status s = run_op(c.op, {}, {a.view(), b.view()}, {y.view()});
    ASSERT_TRUE(s.ok()) << c.op << ": " << s.to_string();
    EXPECT_LT(relative_error(y, binary_reference(a, b, so, c.ref)), kTolerance)
        << c.op << " " << sa.to_string() << " with " << sb.to_string();
  }
}

TEST(Elementwise, SameShapeMatchesReference) {
  expect_binary_matches({3, 5, 7}, {3, 5, 7}, {3, 5, 7});
}

TEST(Elementwise, TrailingVectorBroadcasts) { expect_binary_matches({2, 3, 4}, {4}, {2, 3, 4}); }

TEST(Elementwise, BothOperandsBroadcast) {
  expect_binary_matches({2, 1, 4}, {3, 1}, {2, 3, 4});
  expect_binary_matches({5, 1}, {1, 6}, {5, 6});
}

TEST(Elementwise, LeadingOperandBroadcastsAlongInnerDim) {
  expect_binary_matches({2, 3, 1}, {2, 3, 5}, {2, 3, 5});
}

TEST(Elementwise, ScalarsBroadcast) {
  expect_binary_matches({}, {2, 3}, {2, 3});
  expect_binary_matches({4, 3}, {1}, {4, 3});
  expect_binary_matches({}, {}, {});
}

// Enough rows that two OpenMP workers split them (each range starts its own operand walk): a
// squeeze-excitation's scale, a per-channel bias, a broadcast in a middle dim. (No "Thread"
// in the name: that would put it in the ThreadSanitizer lane, which cannot see OpenMP's
// workers, threading_test.cpp.)
TEST(Elementwise, LargeBroadcastsSplitBetweenWorkersMatchReference) {
  cpu::ThreadCountScope two(2);
  expect_binary_matches({4, 33, 17, 96}, {4, 1, 1, 96}, {4, 33, 17, 96});
  expect_binary_matches({4, 33, 17, 96}, {96}, {4, 33, 17, 96});
  expect_binary_matches({3, 1, 40, 7}, {3, 50, 1, 7}, {3, 50, 40, 7});
}

TEST(Elementwise, ZeroSizedBroadcastGivesEmptyOutput) {
  expect_binary_matches({0, 3}, {3}, {0, 3});
}

TEST(Elementwise, DivisionByZeroFollowsIeee) {
  HostTensor a = HostTensor::f32({3}, {1.0f, -1.0f, 0.0f});
  HostTensor b = HostTensor::f32({1}, {0.0f});
  HostTensor y(DType::F32, {3});
  ASSERT_TRUE(run_op("div", {}, {a.view(), b.view()}, {y.view()}).ok());
  EXPECT_EQ(y.f()[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(y.f()[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(y.f()[2]));
}

TEST(Elementwise, OutputMayAliasAnInputOfTheSameShape) {
  HostTensor a = HostTensor::random({4, 5}, 3);
  HostTensor b = HostTensor::random({5}, 4);
  std::vector<double> ref = binary_reference(a, b, {4, 5}, kBinaryOps[0].ref);
  ASSERT_TRUE(run_op("add", {}, {a.view(), b.view()}, {a.view()}).ok());
  EXPECT_LT(relative_error(a, ref), kTolerance);
}

TEST(Elementwise, ShapesThatDoNotBroadcastAreRejected) {
  HostTensor a = HostTensor::random({2, 3}, 1);
  HostTensor b = HostTensor::random({4}, 2);
  HostTensor y(DType::F32, {2, 3});
  EXPECT_TRUE(IsError(run_op("mul", {}, {a.view(), b.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"mul", "[2, 3]", "[4]", "do not broadcast"}));
}

TEST(Elementwise, WrongOutputShapeIsRejected) {
  HostTensor a = HostTensor::random({2, 3}, 1);
  HostTensor b = HostTensor::random({3}, 2);
  HostTensor y(DType::F32, {3, 2});
  EXPECT_TRUE(IsError(run_op("sub", {}, {a.view(), b.view()}, {y.view()}),
                      ErrorCode::InvalidArgument,
                      {"sub", "output is f32 [3, 2]", "expected f32 [2, 3]", "a f32 [2, 3]"}));
}

TEST(Elementwise, WrongOutputDtypeIsRejected) {
  HostTensor a = HostTensor::random({3}, 1);
  HostTensor y(DType::I32, {3});
  EXPECT_TRUE(IsError(run_op("add", {}, {a.view(), a.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"output is i32 [3]", "expected f32 [3]"}));
}

TEST(Elementwise, NonF32InputIsNotSupported) {
  HostTensor a = HostTensor::random({3}, 1);
  HostTensor b(DType::F16, {3});
  HostTensor y(DType::F32, {3});
  EXPECT_TRUE(IsError(run_op("add", {}, {a.view(), b.view()}, {y.view()}), ErrorCode::NotSupported,
                      {"add", "b has dtype f16"}));
  HostTensor ids(DType::I64, {3});
  EXPECT_TRUE(IsError(run_op("relu", {}, {ids.view()}, {y.view()}), ErrorCode::NotSupported,
                      {"relu", "x has dtype i64"}));
}

std::vector<double> unary_reference(const HostTensor& x, const std::function<double(double)>& f) {
  std::vector<double> ref;
  for (double v : x.doubles()) ref.push_back(f(v));
  return ref;
}

void expect_unary_matches(const char* op, const OpAttrs& attrs,
                          const std::function<double(double)>& f) {
  HostTensor x = HostTensor::random({4, 33}, 7, -4.0f, 4.0f);
  HostTensor y(DType::F32, {4, 33});
  Status s = run_op(op, attrs, {x.view()}, {y.view()});
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_LT(relative_error(y, unary_reference(x, f)), kTolerance) << op;
}

TEST(Activations, ReluMatchesReference) {
  expect_unary_matches("relu", {}, [](double v) { return v > 0 ? v : 0.0; });
}

TEST(Activations, SiluMatchesReference) {
  expect_unary_matches("silu", {}, [](double v) { return v / (1.0 + std::exp(-v)); });
}

TEST(Activations, GeluDefaultsToExactErfForm) {
  auto exact = [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); };
  expect_unary_matches("gelu", {}, exact);
  OpAttrs none;
  none.set("approximate", std::string("none"));
  expect_unary_matches("gelu", none, exact);
}

TEST(Activations, GeluTanhMatchesReference) {
  OpAttrs attrs;
  attrs.set("approximate", std::string("tanh"));
  expect_unary_matches("gelu", attrs, [](double v) {
    const double c = std::sqrt(2.0 / M_PI);
    return 0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v)));
  });
}

TEST(Activations, GeluTanhDiffersFromExact) {
  // Guards against the mode being ignored: the two forms differ by ~1e-4 near |x| = 2.
  HostTensor x = HostTensor::f32({1}, {2.0f});
  HostTensor exact(DType::F32, {1});
  HostTensor approx(DType::F32, {1});
  OpAttrs tanh_mode;
  tanh_mode.set("approximate", std::string("tanh"));
  ASSERT_TRUE(run_op("gelu", {}, {x.view()}, {exact.view()}).ok());
  ASSERT_TRUE(run_op("gelu", tanh_mode, {x.view()}, {approx.view()}).ok());
  EXPECT_GT(std::abs(exact.f()[0] - approx.f()[0]), 1e-5f);
}

TEST(Activations, ReluPropagatesNaN) {
  HostTensor x = HostTensor::f32({2}, {std::nanf(""), -1.0f});
  HostTensor y(DType::F32, {2});
  ASSERT_TRUE(run_op("relu", {}, {x.view()}, {y.view()}).ok());
  EXPECT_TRUE(std::isnan(y.f()[0]));
  EXPECT_EQ(y.f()[1], 0.0f);
}

TEST(Activations, GeluRejectsUnknownApproximation) {
  HostTensor x = HostTensor::random({3}, 1);
  HostTensor y(DType::F32, {3});
  OpAttrs attrs;
  attrs.set("approximate", std::string("sigmoid"));
  EXPECT_TRUE(IsError(run_op("gelu", attrs, {x.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"gelu", "'sigmoid'", "'none' or 'tanh'"}));
}

TEST(Activations, GeluRejectsNonStringApproximation) {
  HostTensor x = HostTensor::random({3}, 1);
  HostTensor y(DType::F32, {3});
  OpAttrs attrs;
  attrs.set("approximate", true);
  EXPECT_TRUE(IsError(run_op("gelu", attrs, {x.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"gelu", "'approximate'", "a bool"}));
}

TEST(Activations, PointwiseFunctionsMatchReference) {
  expect_unary_matches("neg", {}, [](double v) { return -v; });
  expect_unary_matches("exp", {}, [](double v) { return std::exp(v); });
  expect_unary_matches("erf", {}, [](double v) { return std::erf(v); });
  expect_unary_matches("tanh", {}, [](double v) { return std::tanh(v); });
  expect_unary_matches("sigmoid", {}, [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
}

TEST(Activations, SqrtMatchesReferenceAndGivesNaNBelowZero) {
  HostTensor x = HostTensor::random({4, 33}, 3, 0.0f, 9.0f);
  HostTensor y(DType::F32, {4, 33});
  ASSERT_TRUE(run_op("sqrt", {}, {x.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, unary_reference(x, [](double v) { return std::sqrt(v); })), kTolerance);
  HostTensor neg = HostTensor::f32({2}, {-1.0f, 4.0f});
  HostTensor out(DType::F32, {2});
  ASSERT_TRUE(run_op("sqrt", {}, {neg.view()}, {out.view()}).ok());
  EXPECT_TRUE(std::isnan(out.f()[0]));
  EXPECT_EQ(out.f()[1], 2.0f);
}

TEST(Elementwise, PowBroadcastsAndSquaresExactly) {
  HostTensor a = HostTensor::random({2, 3, 4}, 5, 0.1f, 3.0f);
  HostTensor b = HostTensor::random({4}, 6, -2.0f, 2.0f);
  HostTensor y(DType::F32, {2, 3, 4});
  ASSERT_TRUE(run_op("pow", {}, {a.view(), b.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, binary_reference(a, b, {2, 3, 4}, [](double x, double e) { return std::pow(x, e); })),
            kTolerance);
  // x ** 2 is x * x, negative bases included (what layer norm's variance squares).
  HostTensor x = HostTensor::f32({3}, {-1.5f, 0.0f, 3.0f});
  HostTensor two = HostTensor::f32({}, {2.0f});
  HostTensor sq(DType::F32, {3});
  ASSERT_TRUE(run_op("pow", {}, {x.view(), two.view()}, {sq.view()}).ok());
  EXPECT_EQ(sq.f()[0], 2.25f);
  EXPECT_EQ(sq.f()[1], 0.0f);
  EXPECT_EQ(sq.f()[2], 9.0f);
}

TEST(Activations, OutputShapeMustMatchInput) {
  HostTensor x = HostTensor::random({2, 3}, 1);
  HostTensor y(DType::F32, {6});
  EXPECT_TRUE(IsError(run_op("silu", {}, {x.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"silu", "output is f32 [6]", "expected f32 [2, 3]"}));
}

TEST(Clamp, ClipHardSigmoidAndHardSwishAgainstTheirFormulas) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  HostTensor x = HostTensor::f32({9}, {-5.0f, -3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 2.9f, 6.5f, nan});
  auto check = [&](std::string_view op, const OpAttrs& a, auto formula) {
    HostTensor y(DType::F32, {9});
    Status s = run_op(op, a, {x.view()}, {y.view()});
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (int64_t i = 0; i < 8; ++i) EXPECT_NEAR(y.at(i), formula(x.at(i)), 1e-6) << op << " at " << x.at(i);
    EXPECT_TRUE(std::isnan(y.at(8))) << op << " keeps NaN";
  };
  OpAttrs relu6;
  relu6.set("min", 0.0);
  relu6.set("max", 6.0);
  check("clip", relu6, [](double v) { return std::min(std::max(v, 0.0), 6.0); });
  OpAttrs lower;
  lower.set("min", -1.0);
  check("clip", lower, [](double v) { return std::max(v, -1.0); });
  OpAttrs hs;
  hs.set("alpha", 1.0 / 6);
  hs.set("beta", 0.5);
  check("hard_sigmoid", hs, [](double v) { return std::min(std::max(v / 6 + 0.5, 0.0), 1.0); });
  check("hard_sigmoid", OpAttrs{}, [](double v) { return std::min(std::max(0.2 * v + 0.5, 0.0), 1.0); });
  check("hard_swish", OpAttrs{}, [](double v) { return v * std::min(std::max(v / 6 + 0.5, 0.0), 1.0); });
  OpAttrs bad;
  bad.set("min", std::string("zero"));
  HostTensor y(DType::F32, {9});
  EXPECT_TRUE(IsError(run_op("clip", bad, {x.view()}, {y.view()}), ErrorCode::InvalidArgument, {"min"}));
}

}  // namespace
}  // namespace planrt::kernels
