// The CPU reductions (reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod), argmax,
// argmin, cumsum and log_softmax against references written from kernels/op_plans.h.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "kernel_test_util.h"

namespace planrt::kernels {
namespace {

using testing::HostTensor;
using testing::IsError;
using testing::kTolerance;
using testing::relative_error;
using testing::run_op;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// x viewed as [outer, n, inner] over dims [begin, end): fn over each line, in double.
std::vector<double> reduce_reference(const HostTensor& x, int begin, int end, const std::string& op) {
  int64_t outer = 1, n = 1, inner = 1;
  for (int d = 0; d < x.shape().rank(); ++d) {
    (d < begin ? outer : d < end ? n : inner) *= x.shape()[d];
  }
  std::vector<double> ref;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double acc = op == "reduce_prod" ? 1.0 : op == "reduce_max" ? -kInf : op == "reduce_min" ? kInf : 0.0;
      for (int64_t j = 0; j < n; ++j) {
        const double v = x.at((o * n + j) * inner + i);
        if (op == "reduce_sum" || op == "reduce_mean") acc += v;
        if (op == "reduce_prod") acc *= v;
        if (op == "reduce_max") acc = std::isnan(acc) || std::isnan(v) ? NAN : std::max(acc, v);
        if (op == "reduce_min") acc = std::isnan(acc) || std::isnan(v) ? NAN : std::min(acc, v);
      }
      ref.push_back(op == "reduce_mean" ? acc / static_cast<double>(n) : acc);
    }
  }
  return ref;
}

OpAttrs dims_attr(std::vector<int64_t> dims, bool keepdim = false) {
  OpAttrs a;
  a.set("dims", std::move(dims));
  a.set("keepdim", keepdim);
  return a;
}

const char* const kReductions[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"};

TEST(Reductions, EveryReductionMatchesTheReferenceOverRowsMiddleDimsAndEverything) {
  // Values near 1 keep the products of 150 factors finite.
  HostTensor x = HostTensor::random({3, 5, 6, 300}, 41, 0.9f, 1.1f);
  struct Case {
    std::vector<int64_t> dims;
    int begin, end;
    Shape kept, dropped;
  };
  const Case cases[] = {
      {{-1}, 3, 4, {3, 5, 6, 1}, {3, 5, 6}},             // rows (inner 1)
      {{1}, 1, 2, {3, 1, 6, 300}, {3, 6, 300}},          // a middle dim: strided lines
      {{1, 2}, 1, 3, {3, 1, 1, 300}, {3, 300}},          // a run of two
      {{0, 1, 2, 3}, 0, 4, {1, 1, 1, 1}, {}},            // everything
  };
  for (const char* op : kReductions) {
    for (const Case& c : cases) {
      for (const Shape& out : {c.kept, c.dropped}) {
        SCOPED_TRACE(std::string(op) + " to " + out.to_string());
        HostTensor y(DType::F32, out);
        Status s = run_op(op, dims_attr(c.dims, out == c.kept), {x.view()}, {y.view()});
        ASSERT_TRUE(s.ok()) << s.to_string();
        EXPECT_LT(relative_error(y, reduce_reference(x, c.begin, c.end, op)), kTolerance);
      }
    }
  }
}

TEST(Reductions, AnEmptyLineGivesTheIdentityAndMaxAndMinKeepNaN) {
  HostTensor empty(DType::F32, {2, 0, 3});
  const std::pair<const char*, double> identities[] = {
      {"reduce_sum", 0.0}, {"reduce_prod", 1.0}, {"reduce_max", -kInf}, {"reduce_min", kInf}};
  for (const auto& [op, identity] : identities) {
    HostTensor y(DType::F32, {2, 3});
    ASSERT_TRUE(run_op(op, dims_attr({1}), {empty.view()}, {y.view()}).ok()) << op;
    for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.at(i), identity) << op;
  }
  HostTensor mean(DType::F32, {2, 3});
  ASSERT_TRUE(run_op("reduce_mean", dims_attr({1}), {empty.view()}, {mean.view()}).ok());
  EXPECT_TRUE(std::isnan(mean.at(0)));

  // A NaN anywhere on the line, first or later, wins over every number, as torch.amax.
  for (int64_t at : {0, 2}) {
    HostTensor x = HostTensor::f32({4}, {1.0f, 5.0f, -2.0f, 3.0f});
    x.f()[at] = kNaN;
    for (const char* op : {"reduce_max", "reduce_min"}) {
      HostTensor y(DType::F32, {});
      ASSERT_TRUE(run_op(op, dims_attr({0}), {x.view()}, {y.view()}).ok());
      EXPECT_TRUE(std::isnan(y.at(0))) << op << " with NaN at " << at;
    }
  }
}

TEST(Reductions, RefuseSeparatedDimsAWrongOutputAndAnUnknownReduction) {
  HostTensor x = HostTensor::random({2, 3, 4}, 5);
  HostTensor y(DType::F32, {3});
  EXPECT_TRUE(IsError(run_op("reduce_max", dims_attr({0, 2}), {x.view()}, {y.view()}),
                      ErrorCode::NotSupported, {"reduce_max", "adjacent"}));
  HostTensor wrong(DType::F32, {2, 4});
  EXPECT_TRUE(IsError(run_op("reduce_prod", dims_attr({-1}), {x.view()}, {wrong.view()}),
                      ErrorCode::InvalidArgument, {"reduce_prod", "[2, 3]"}));
  HostTensor ints(DType::I64, {2, 3, 4});
  HostTensor ints_out(DType::I64, {2, 3});
  EXPECT_TRUE(IsError(run_op("reduce_sum", dims_attr({-1}), {ints.view()}, {ints_out.view()}),
                      ErrorCode::NotSupported, {"reduce_sum", "i64"}));
}

OpAttrs arg_attrs(int64_t dim, bool keepdim, bool last = false) {
  OpAttrs a;
  a.set("dim", dim);
  a.set("keepdim", keepdim);
  a.set("select_last_index", last);
  return a;
}

TEST(ArgReduce, FirstOrLastOfTiesAlongAnyDimAndNaNWins) {
  // [2, 3]: ties in row 0 (max 4 twice, min 1 twice); a NaN in row 1.
  HostTensor x = HostTensor::f32({2, 3}, {4.0f, 1.0f, 4.0f, 2.0f, kNaN, kNaN});
  x.f()[1] = 1.0f;
  HostTensor tie = HostTensor::f32({2, 3}, {4.0f, 1.0f, 4.0f, 1.0f, 7.0f, 1.0f});
  struct Case {
    const char* op;
    bool last;
    std::vector<int64_t> want;
  };
  const Case rows[] = {
      {"argmax", false, {0, 1}},
      {"argmax", true, {2, 1}},
      {"argmin", false, {1, 0}},
      {"argmin", true, {1, 2}},
  };
  for (const Case& c : rows) {
    HostTensor y(DType::I64, {2});
    ASSERT_TRUE(run_op(c.op, arg_attrs(1, false, c.last), {tie.view()}, {y.view()}).ok());
    EXPECT_EQ(y.as<int64_t>()[0], c.want[0]) << c.op << " last " << c.last;
    EXPECT_EQ(y.as<int64_t>()[1], c.want[1]) << c.op << " last " << c.last;
  }
  // The NaNs of row 1 (indices 1 and 2) beat every number for both ops.
  for (const char* op : {"argmax", "argmin"}) {
    for (bool last : {false, true}) {
      HostTensor y(DType::I64, {2, 1});
      ASSERT_TRUE(run_op(op, arg_attrs(-1, true, last), {x.view()}, {y.view()}).ok());
      EXPECT_EQ(y.as<int64_t>()[1], last ? 2 : 1) << op;
    }
  }
  // Along dim 0 of a [4, 5, 3] tensor: strided lines, against a plain scan.
  HostTensor r = HostTensor::random({4, 5, 3}, 8);
  HostTensor y(DType::I64, {5, 3});
  ASSERT_TRUE(run_op("argmax", arg_attrs(0, false), {r.view()}, {y.view()}).ok());
  for (int64_t l = 0; l < 15; ++l) {
    int64_t best = 0;
    for (int64_t i = 1; i < 4; ++i) {
      if (r.at(i * 15 + l) > r.at(best * 15 + l)) best = i;
    }
    EXPECT_EQ(y.as<int64_t>()[l], best) << l;
  }
}

TEST(ArgReduce, RefusesAnEmptyDimAndAnF32Output) {
  HostTensor empty(DType::F32, {2, 0});
  HostTensor y(DType::I64, {2});
  EXPECT_TRUE(IsError(run_op("argmax", arg_attrs(1, false), {empty.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"argmax", "no elements along dim 1"}));
  HostTensor x = HostTensor::random({2, 3}, 1);
  HostTensor f(DType::F32, {2});
  EXPECT_TRUE(IsError(run_op("argmin", arg_attrs(1, false), {x.view()}, {f.view()}),
                      ErrorCode::InvalidArgument, {"argmin", "i64"}));
}

OpAttrs cumsum_attrs(int64_t dim, bool exclusive, bool reverse) {
  OpAttrs a;
  a.set("dim", dim);
  a.set("exclusive", exclusive);
  a.set("reverse", reverse);
  return a;
}

TEST(Cumsum, ExclusiveAndReverseAlongEitherDimInEachDtype) {
  // [2, 3] = [[1, 2, 3], [4, 5, 6]] along dim 1 and dim 0.
  struct Case {
    int64_t dim;
    bool exclusive, reverse;
    std::vector<int64_t> want;
  };
  const Case cases[] = {
      {1, false, false, {1, 3, 6, 4, 9, 15}},
      {1, true, false, {0, 1, 3, 0, 4, 9}},
      {1, false, true, {6, 5, 3, 15, 11, 6}},
      {1, true, true, {5, 3, 0, 11, 6, 0}},
      {0, false, false, {1, 2, 3, 5, 7, 9}},
      {-2, true, true, {4, 5, 6, 0, 0, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "dim " << c.dim << " exclusive " << c.exclusive << " reverse " << c.reverse);
    HostTensor f = HostTensor::f32({2, 3}, {1, 2, 3, 4, 5, 6});
    HostTensor fy(DType::F32, {2, 3});
    ASSERT_TRUE(run_op("cumsum", cumsum_attrs(c.dim, c.exclusive, c.reverse), {f.view()}, {fy.view()}).ok());
    HostTensor i = HostTensor::i32({2, 3}, {1, 2, 3, 4, 5, 6});
    HostTensor iy(DType::I32, {2, 3});
    ASSERT_TRUE(run_op("cumsum", cumsum_attrs(c.dim, c.exclusive, c.reverse), {i.view()}, {iy.view()}).ok());
    HostTensor l = HostTensor::i64({2, 3}, {1, 2, 3, 4, 5, 6});
    HostTensor ly(DType::I64, {2, 3});
    ASSERT_TRUE(run_op("cumsum", cumsum_attrs(c.dim, c.exclusive, c.reverse), {l.view()}, {ly.view()}).ok());
    for (size_t k = 0; k < c.want.size(); ++k) {
      EXPECT_EQ(fy.at(static_cast<int64_t>(k)), static_cast<double>(c.want[k])) << k;
      EXPECT_EQ(iy.as<int32_t>()[k], c.want[k]) << k;
      EXPECT_EQ(ly.as<int64_t>()[k], c.want[k]) << k;
    }
  }
  // Integer sums wrap as two's complement (PyTorch's), never trap.
  HostTensor big = HostTensor::i32({2}, {std::numeric_limits<int32_t>::max(), 1});
  HostTensor wrapped(DType::I32, {2});
  ASSERT_TRUE(run_op("cumsum", cumsum_attrs(0, false, false), {big.view()}, {wrapped.view()}).ok());
  EXPECT_EQ(wrapped.as<int32_t>()[1], std::numeric_limits<int32_t>::min());
}

TEST(Cumsum, RefusesAMissingDimAndABoolTensor) {
  HostTensor x = HostTensor::f32({3}, {1, 2, 3});
  HostTensor y(DType::F32, {3});
  EXPECT_TRUE(IsError(run_op("cumsum", {}, {x.view()}, {y.view()}), ErrorCode::NotFound, {"cumsum", "dim"}));
  HostTensor b(DType::Bool, {3});
  HostTensor by(DType::Bool, {3});
  EXPECT_TRUE(IsError(run_op("cumsum", cumsum_attrs(0, false, false), {b.view()}, {by.view()}),
                      ErrorCode::NotSupported, {"cumsum", "bool"}));
}

TEST(LogSoftmax, MatchesTheLogOfSoftmaxOnAMiddleDimAndLargeValues) {
  HostTensor x = HostTensor::random({3, 7, 5}, 17, -30.0f, 30.0f);
  x.f()[0] = 1000.0f;  // exp would overflow without the max shift
  OpAttrs a;
  a.set("dim", int64_t{1});
  HostTensor y(DType::F32, {3, 7, 5});
  ASSERT_TRUE(run_op("log_softmax", a, {x.view()}, {y.view()}).ok());
  std::vector<double> ref(static_cast<size_t>(x.numel()));
  for (int64_t o = 0; o < 3; ++o) {
    for (int64_t i = 0; i < 5; ++i) {
      double m = -kInf, s = 0;
      for (int64_t j = 0; j < 7; ++j) m = std::max(m, x.at((o * 7 + j) * 5 + i));
      for (int64_t j = 0; j < 7; ++j) s += std::exp(x.at((o * 7 + j) * 5 + i) - m);
      for (int64_t j = 0; j < 7; ++j) ref[static_cast<size_t>((o * 7 + j) * 5 + i)] = x.at((o * 7 + j) * 5 + i) - m - std::log(s);
    }
  }
  EXPECT_LT(relative_error(y, ref), kTolerance);
  OpAttrs bad;
  bad.set("dim", int64_t{3});
  EXPECT_TRUE(IsError(run_op("log_softmax", bad, {x.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"log_softmax", "dim"}));
}

}  // namespace
}  // namespace planrt::kernels
