// The vectorizable exp/erf/tanh (kernels/cpu/vector_math.h) against the float64 functions
// over dense grids, both inline and through the ops that run them (which call the
// instruction-set clone the CPU picks), and their special values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/vector_math.h"

namespace planrt::kernels {
namespace {

namespace vmath = cpu::vmath;
using testing::HostTensor;
using testing::run_op;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> grid(float lo, float hi, int n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) x[static_cast<size_t>(i)] = lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(n - 1);
  return x;
}

TEST(VectorMath, ExpIsWithinTwoUlpOverTheNormalRange) {
  double worst = 0;
  for (float x : grid(-87.0f, 88.5f, 200001)) {
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(vmath::exp(x) - ref) / ref);
  }
  EXPECT_LT(worst, 2.5 * std::numeric_limits<float>::epsilon()) << worst;
}

TEST(VectorMath, ExpSpecialValuesAreTheLibrarys) {
  EXPECT_EQ(vmath::exp(0.0f), 1.0f);
  EXPECT_EQ(vmath::exp(-kInf), 0.0f);
  EXPECT_EQ(vmath::exp(kInf), kInf);
  EXPECT_EQ(vmath::exp(100.0f), kInf);
  EXPECT_EQ(vmath::exp(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(vmath::exp(std::nanf(""))));
}

// The softmax's exp (x <= 0) gives exp's very bits wherever it is defined: over the whole
// non-positive range (denormal results included), at its edges and for -inf and NaN.
TEST(VectorMath, ExpOfNonPositiveArgumentsIsExpBitForBit) {
  for (float x : grid(-104.0f, 0.0f, 400001)) {
    ASSERT_EQ(std::bit_cast<uint32_t>(vmath::exp_nonpositive(x)), std::bit_cast<uint32_t>(vmath::exp(x))) << x;
  }
  for (float x : {-0.0f, -1e-30f, -87.33654f, -87.3366f, -1e30f, -std::numeric_limits<float>::max(), -kInf}) {
    EXPECT_EQ(std::bit_cast<uint32_t>(vmath::exp_nonpositive(x)), std::bit_cast<uint32_t>(vmath::exp(x))) << x;
  }
  EXPECT_EQ(vmath::exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(vmath::exp_nonpositive(-kInf), 0.0f);
  EXPECT_TRUE(std::isnan(vmath::exp_nonpositive(std::nanf(""))));
}

TEST(VectorMath, ErfIsWithinItsBoundsEverywhere) {
  double worst_abs = 0, worst_rel_small = 0;
  for (float x : grid(-6.0f, 6.0f, 240001)) {
    const double ref = std::erf(static_cast<double>(x));
    const double err = std::fabs(vmath::erf(x) - ref);
    worst_abs = std::max(worst_abs, err);
    if (std::fabs(x) < 0.5f && x != 0.0f) worst_rel_small = std::max(worst_rel_small, err / std::fabs(ref));
  }
  EXPECT_LT(worst_abs, 4e-7) << worst_abs;
  EXPECT_LT(worst_rel_small, 1e-6) << worst_rel_small;
  EXPECT_EQ(vmath::erf(0.0f), 0.0f);
  EXPECT_FLOAT_EQ(vmath::erf(1e-30f), static_cast<float>(std::erf(1e-30)));
  EXPECT_EQ(vmath::erf(kInf), 1.0f);
  EXPECT_EQ(vmath::erf(-kInf), -1.0f);
  EXPECT_TRUE(std::isnan(vmath::erf(std::nanf(""))));
}

TEST(VectorMath, TanhIsWithinItsBoundEverywhere) {
  double worst = 0;
  for (float x : grid(-12.0f, 12.0f, 240001)) {
    worst = std::max(worst, std::fabs(vmath::tanh(x) - std::tanh(static_cast<double>(x))));
  }
  EXPECT_LT(worst, 4e-7) << worst;
  EXPECT_EQ(vmath::tanh(kInf), 1.0f);
  EXPECT_EQ(vmath::tanh(-kInf), -1.0f);
  EXPECT_EQ(vmath::tanh(0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(vmath::tanh(std::nanf(""))));
}

// The ops run the clone for this CPU's instruction set, compiled separately from the inline
// calls above: the same bounds must hold there, NaN included.
TEST(VectorMath, TheOpsAgreeWithTheFloat64FunctionsThroughTheirDispatchedClones) {
  const std::vector<float> xs = grid(-9.0f, 9.0f, 40001);
  const Shape shape({static_cast<int64_t>(xs.size())});
  HostTensor x(DType::F32, shape);
  std::copy(xs.begin(), xs.end(), x.f());
  x.f()[7] = std::nanf("");
  struct Case {
    const char* op;
    double (*ref)(double);
    double bound;  // absolute, or relative for exp
  };
  const Case cases[] = {
      {"exp", [](double v) { return std::exp(v); }, 2.5 * std::numeric_limits<float>::epsilon()},
      {"erf", [](double v) { return std::erf(v); }, 4e-7},
      {"tanh", [](double v) { return std::tanh(v); }, 4e-7},
      {"sigmoid", [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, 3e-7},
  };
  for (const Case& c : cases) {
    HostTensor y(DType::F32, shape);
    ASSERT_TRUE(run_op(c.op, {}, {x.view()}, {y.view()}).ok()) << c.op;
    EXPECT_TRUE(std::isnan(y.f()[7])) << c.op;
    double worst = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (i == 7) continue;
      const double ref = c.ref(xs[i]);
      const double err = std::fabs(y.f()[i] - ref);
      worst = std::max(worst, std::string_view(c.op) == "exp" ? err / ref : err);
    }
    EXPECT_LT(worst, c.bound) << c.op;
  }
}

}  // namespace
}  // namespace planrt::kernels
