// The CUDA reductions (reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod), argmax,
// argmin, cumsum and log_softmax against the CPU kernels (kernels/cpu/reductions.cpp,
// normalization.cpp) and against values written out by hand: rows (inner == 1, a block per
// row) and lines along a middle dim (a thread per line), kept and dropped output dims, lines
// of no elements, NaN, ties, integer sums that wrap, and refusals. f32, bf16 and f16 as
// dtype_agreement.h compares them (the CPU on the rounded values); indices and integer
// sums byte for byte. GPU tests skip without a visible GPU and fail instead with
// PLANRT_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dtype_agreement.h"
#include "support/gpu.h"

namespace planrt::kernels::cuda {
namespace {

using testing::attrs_of;
using testing::CudaRunner;
using testing::HostTensor;
using testing::IsError;
using testing::rnd;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

OpAttrs dims_attr(std::vector<int64_t> dims) { return attrs_of({{"dims", std::move(dims)}}); }

HostTensor f32_of(const Shape& shape, const std::vector<float>& values) {
  HostTensor t(DType::F32, shape);
  for (size_t i = 0; i < values.size(); ++i) t.f()[i] = values[i];
  return t;
}

template <typename T>
HostTensor ints_of(DType dtype, const Shape& shape, const std::vector<T>& values) {
  HostTensor t(dtype, shape);
  for (size_t i = 0; i < values.size(); ++i) static_cast<T*>(t.data())[i] = values[i];
  return t;
}

template <typename T>
std::vector<T> values_of(const HostTensor& t) {
  const auto* p = static_cast<const T*>(t.data());
  return std::vector<T>(p, p + t.shape().numel());
}

// The CUDA kernel of `op` on `inputs` (uploaded as they are): its status, and its output of
// `dtype` and `shape`.
struct CudaRun {
  Status status;
  HostTensor out;
};
CudaRun run_cuda(CudaRunner& r, std::string_view op, const OpAttrs& attrs,
                 const std::vector<HostTensor>& inputs, DType dtype, const Shape& shape) {
  std::vector<TensorView> in;
  for (const HostTensor& t : inputs) in.push_back(r.upload(t));
  std::vector<TensorView> out{r.device_output(dtype, shape)};
  Result<CudaKernelFn> fn = find_cuda_kernel(op);
  CudaRun run;
  run.status = fn.ok() ? (*fn)(r.ctx(), attrs, in, out) : fn.status();
  if (run.status.ok()) run.status = r.synchronize();
  run.out = r.download(out[0]);
  return run;
}

// The CPU kernel's f32 (or i64) output on f32 inputs.
HostTensor run_cpu(std::string_view op, const OpAttrs& attrs, const std::vector<HostTensor>& inputs,
                   DType dtype, const Shape& shape) {
  std::vector<TensorView> in;
  for (const HostTensor& t : inputs) in.push_back(t.view());
  HostTensor out(dtype, shape);
  std::vector<TensorView> outs{out.view()};
  Result<KernelFn> fn = find_cpu_kernel(op);
  EXPECT_TRUE(fn.ok()) << op;
  if (fn.ok()) {
    Status s = (*fn)(attrs, in, outs);
    EXPECT_TRUE(s.ok()) << op << " (CPU): " << s.to_string();
  }
  return out;
}

// f32 values that may hold NaN and infinities: those where the reference has them, the
// rest within `tolerance` (relative_error over the finite elements).
::testing::AssertionResult Close(const HostTensor& got, const HostTensor& want, double tolerance) {
  if (got.shape().numel() != want.shape().numel()) {
    return ::testing::AssertionFailure() << "sizes " << got.shape().to_string() << " and "
                                         << want.shape().to_string();
  }
  double diff = 0.0;
  double norm = 0.0;
  for (int64_t i = 0; i < want.shape().numel(); ++i) {
    const float g = got.f()[i];
    const float w = want.f()[i];
    if (std::isnan(w) || std::isinf(w) || std::isnan(g) || std::isinf(g)) {
      if (!(std::isnan(w) && std::isnan(g)) && g != w) {
        return ::testing::AssertionFailure() << "element " << i << " is " << g << ", expected " << w;
      }
      continue;
    }
    diff += (double{g} - w) * (double{g} - w);
    norm += double{w} * w;
  }
  const double error = norm == 0.0 ? std::sqrt(diff) : std::sqrt(diff / norm);
  if (error <= tolerance) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative error " << error << " over the finite elements";
}

class CudaReductionsInEachDtype : public ::testing::TestWithParam<DType> {
 protected:
  DType dtype() const { return GetParam(); }
  void Agree(CudaRunner& r, std::string_view op, const OpAttrs& attrs, const HostTensor& x,
             const Shape& out) {
    testing::ExpectAgreeIn(dtype(), r, op, attrs, {x}, out);
  }
  // The CUDA kernel on x in this dtype against the CPU on the values it sees, NaN and
  // infinities included.
  void AgreeWithNaN(CudaRunner& r, std::string_view op, const OpAttrs& attrs, const HostTensor& x,
                    const Shape& out) {
    CudaRun run = run_cuda(r, op, attrs, {testing::in_dtype(x, dtype())}, dtype(), out);
    ASSERT_TRUE(run.status.ok()) << run.status.to_string();
    HostTensor want = run_cpu(op, attrs, {testing::rounded_to(x, dtype())}, DType::F32, out);
    EXPECT_TRUE(Close(testing::widened(run.out), want, testing::tolerance_of(dtype()))) << op;
  }
  // argmax / argmin: the same indices as the CPU on the values this dtype holds.
  void SameIndices(CudaRunner& r, std::string_view op, const OpAttrs& attrs, const HostTensor& x,
                   const Shape& out) {
    CudaRun run = run_cuda(r, op, attrs, {testing::in_dtype(x, dtype())}, DType::I64, out);
    ASSERT_TRUE(run.status.ok()) << run.status.to_string();
    HostTensor want = run_cpu(op, attrs, {testing::rounded_to(x, dtype())}, DType::I64, out);
    EXPECT_EQ(values_of<int64_t>(run.out), values_of<int64_t>(want)) << op << " " << out.to_string();
  }
};

constexpr const char* kFolds[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                                  "reduce_prod"};

// Rows (the last dim: a block per row; two dims: one long row), strided lines (a middle dim,
// the leading dims), the reduced dims kept as 1 or dropped.
TEST_P(CudaReductionsInEachDtype, FoldsMatchTheCpuOverRowsAndStridedLines) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  uint32_t seed = 700;
  for (std::string_view op : kFolds) {
    SCOPED_TRACE(std::string(op));
    // Products: factors e^u, u uniform in [-0.05, 0.05), whose logs average 0, so that the
    // product of 152k of them stays near 1 (factors uniform in [0.95, 1.05) drift to 1e-41,
    // below bf16's smallest subnormal). f16 (at most 65504, normal from 6e-5): u in
    // [-0.005, 0.005), since the log of 152k such products spreads by about 11 at 0.05.
    const float spread = dtype() == DType::F16 ? 0.005f : 0.05f;
    auto input = [&](const Shape& s) {
      if (op != "reduce_prod") return rnd(s, seed++, -2.0f, 2.0f);
      HostTensor t = rnd(s, seed++, -spread, spread);
      for (int64_t i = 0; i < s.numel(); ++i) t.f()[i] = std::exp(t.f()[i]);
      return t;
    };
    HostTensor x = input({4, 37, 1029});
    Agree(r, op, dims_attr({-1}), x, {4, 37, 1});
    Agree(r, op, dims_attr({2}), x, {4, 37});
    Agree(r, op, dims_attr({1}), x, {4, 1029});
    Agree(r, op, dims_attr({1}), x, {4, 1, 1029});
    Agree(r, op, dims_attr({0, 1}), x, {1029});
    Agree(r, op, dims_attr({1, 2}), x, {4, 1, 1});
    Agree(r, op, dims_attr({0, 1, 2}), x, {});
    Agree(r, op, dims_attr({0}), input({3}), {1});
    Agree(r, op, dims_attr({0}), input({}), {});
    // Many short rows, a block each.
    Agree(r, op, dims_attr({-1}), input({3000, 5}), {3000});
  }
}

// n == 0: the identity of each, on both paths (rows and strided lines).
TEST_P(CudaReductionsInEachDtype, LinesOfNoElementsGiveTheIdentity) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const std::vector<std::pair<std::string_view, float>> identities = {
      {"reduce_sum", 0.0f}, {"reduce_prod", 1.0f}, {"reduce_max", -kInf}, {"reduce_min", kInf},
      {"reduce_mean", kNaN}};
  struct Case {
    Shape x;
    std::vector<int64_t> dims;
    Shape out;
  };
  const std::vector<Case> cases = {{{5, 0}, {-1}, {5, 1}}, {{3, 0, 4}, {1}, {3, 4}},
                                   {{2, 0, 0, 3}, {1, 2}, {2, 3}}};
  for (const auto& [op, identity] : identities) {
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} {}", op, c.x.to_string()));
      HostTensor x(DType::F32, c.x);
      CudaRun run = run_cuda(r, op, dims_attr(c.dims), {testing::in_dtype(x, dtype())}, dtype(), c.out);
      ASSERT_TRUE(run.status.ok()) << run.status.to_string();
      HostTensor want(DType::F32, c.out);
      for (int64_t i = 0; i < c.out.numel(); ++i) want.f()[i] = identity;
      EXPECT_TRUE(Close(testing::widened(run.out), want, 0.0));
      EXPECT_TRUE(Close(run_cpu(op, dims_attr(c.dims), {x}, DType::F32, c.out), want, 0.0));
    }
  }
  // No lines at all: nothing to write, nothing refused.
  CudaRun none = run_cuda(r, "reduce_sum", dims_attr({1}), {testing::in_dtype(HostTensor(DType::F32, {0, 6}), dtype())},
                          dtype(), {0});
  EXPECT_TRUE(none.status.ok()) << none.status.to_string();
}

// A NaN anywhere in a line makes its max, min, sum, mean and product NaN; the other lines
// keep their values. Infinities are values like any other.
TEST_P(CudaReductionsInEachDtype, NaNPropagatesThroughEveryFold) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  // Factors near 1: a product that underflowed to 0 would make inf * 0 (NaN) depend on the
  // order of the products. f16: nearer 1 still (700 factors in [0.5, 1.5) multiply to about
  // e^-32, below f16's range).
  HostTensor rows = dtype() == DType::F16 ? rnd({4, 700}, 731, 0.9f, 1.1f) : rnd({4, 700}, 731, 0.5f, 1.5f);
  rows.f()[0 * 700 + 0] = kNaN;    // the first element of a row
  rows.f()[1 * 700 + 699] = kNaN;  // the last, in another thread's share
  rows.f()[2 * 700 + 300] = kInf;
  HostTensor lines = rnd({3, 50, 6}, 732, 0.9f, 1.1f);
  lines.f()[(1 * 50 + 17) * 6 + 2] = kNaN;
  lines.f()[(2 * 50 + 0) * 6 + 5] = -kInf;
  for (std::string_view op : kFolds) {
    SCOPED_TRACE(std::string(op));
    AgreeWithNaN(r, op, dims_attr({-1}), rows, {4});
    AgreeWithNaN(r, op, dims_attr({1}), lines, {3, 6});
    CudaRun run = run_cuda(r, op, dims_attr({-1}), {testing::in_dtype(rows, dtype())}, dtype(), {4, 1});
    ASSERT_TRUE(run.status.ok());
    HostTensor got = testing::widened(run.out);
    EXPECT_TRUE(std::isnan(got.f()[0]) && std::isnan(got.f()[1]));
    EXPECT_FALSE(std::isnan(got.f()[2]) || std::isnan(got.f()[3]));
  }
}

TEST_P(CudaReductionsInEachDtype, ArgmaxAndArgminMatchTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  // bf16 holds these with many ties, so the first-or-last rule is exercised there too.
  HostTensor x = rnd({4, 37, 1029}, 741);
  for (std::string_view op : {"argmax", "argmin"}) {
    for (bool last : {false, true}) {
      SCOPED_TRACE(fmt::format("{} select_last_index {}", op, last));
      auto attrs = [&](int64_t dim) {
        return attrs_of({{"dim", dim}, {"select_last_index", last}});
      };
      SameIndices(r, op, attrs(-1), x, {4, 37});      // rows
      SameIndices(r, op, attrs(2), x, {4, 37, 1});    // rows, kept
      SameIndices(r, op, attrs(1), x, {4, 1029});     // strided
      SameIndices(r, op, attrs(0), x, {1, 37, 1029});  // strided, kept
      SameIndices(r, op, attrs(0), rnd({}, 742), {});
      // Few distinct values: ties everywhere, within a warp and across warps.
      HostTensor coarse = rnd({6, 2000}, 743, -3.0f, 3.0f);
      for (int64_t i = 0; i < coarse.shape().numel(); ++i) coarse.f()[i] = std::round(coarse.f()[i]);
      SameIndices(r, op, attrs(1), coarse, {6});
      SameIndices(r, op, attrs(0), coarse, {2000});
    }
  }
}

// The rule by hand: ties to the first index (the last with select_last_index), a NaN beating
// every number (the first NaN, or the last), on a row and on a strided line of the same
// values, short and across a block's threads.
TEST_P(CudaReductionsInEachDtype, ArgReductionsBreakTiesAndPreferNaN) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  struct Case {
    std::vector<float> line;
    int64_t max_first, max_last, min_first, min_last;
  };
  std::vector<Case> cases = {
      {{1, 3, 3, 0, 3, 0}, 1, 4, 3, 5},
      {{1, 3, 3, kNaN, 2, kNaN, 3}, 3, 5, 3, 5},
      {{kNaN}, 0, 0, 0, 0},
      {{-kInf, -kInf, kInf, kInf}, 2, 3, 0, 1},
  };
  // 1000 elements, the ties and NaNs in different warps and threads.
  Case wide{std::vector<float>(1000, 0.0f), 7, 777, 0, 999};
  for (int64_t i : {7, 300, 777}) wide.line[i] = 5.0f;
  wide.line[0] = wide.line[999] = -1.0f;
  Case wide_nan = wide;
  wide_nan.line[500] = wide_nan.line[900] = kNaN;
  wide_nan.max_first = wide_nan.min_first = 500;
  wide_nan.max_last = wide_nan.min_last = 900;
  cases.push_back(wide);
  cases.push_back(wide_nan);
  for (const Case& c : cases) {
    const auto n = static_cast<int64_t>(c.line.size());
    HostTensor row = f32_of({n}, c.line);
    // The same line as column 1 of [n, 3] (a strided line, inner 3), beside other values.
    HostTensor column = rnd({n, 3}, 751);
    for (int64_t i = 0; i < n; ++i) column.f()[i * 3 + 1] = c.line[i];
    for (bool last : {false, true}) {
      for (std::string_view op : {"argmax", "argmin"}) {
        SCOPED_TRACE(fmt::format("{} of {} elements, select_last_index {}", op, n, last));
        const int64_t want = op == "argmax" ? (last ? c.max_last : c.max_first)
                                            : (last ? c.min_last : c.min_first);
        const OpAttrs attrs = attrs_of({{"dim", int64_t{0}}, {"select_last_index", last}});
        CudaRun on_row = run_cuda(r, op, attrs, {testing::in_dtype(row, dtype())}, DType::I64, {});
        ASSERT_TRUE(on_row.status.ok()) << on_row.status.to_string();
        EXPECT_EQ(values_of<int64_t>(on_row.out), std::vector<int64_t>{want});
        CudaRun on_column = run_cuda(r, op, attrs, {testing::in_dtype(column, dtype())}, DType::I64, {3});
        ASSERT_TRUE(on_column.status.ok()) << on_column.status.to_string();
        EXPECT_EQ(values_of<int64_t>(on_column.out)[1], want);
        EXPECT_EQ(values_of<int64_t>(run_cpu(op, attrs, {row}, DType::I64, {})), std::vector<int64_t>{want});
      }
    }
  }
}

TEST_P(CudaReductionsInEachDtype, CumsumMatchesTheCpuExclusiveAndReverse) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  HostTensor x = rnd({3, 1000}, 761);  // rows of four chunks of a block, the last partial
  HostTensor lines = rnd({4, 37, 33}, 762);
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(fmt::format("exclusive {} reverse {}", exclusive, reverse));
      auto attrs = [&](int64_t dim) {
        return attrs_of({{"dim", dim}, {"exclusive", exclusive}, {"reverse", reverse}});
      };
      Agree(r, "cumsum", attrs(-1), x, x.shape());
      Agree(r, "cumsum", attrs(0), x, x.shape());
      Agree(r, "cumsum", attrs(1), lines, lines.shape());
      Agree(r, "cumsum", attrs(2), lines, lines.shape());
      Agree(r, "cumsum", attrs(0), rnd({}, 763), {});
      Agree(r, "cumsum", attrs(1), rnd({2, 1}, 764), {2, 1});
      AgreeWithNaN(r, "cumsum", attrs(1), f32_of({2, 4}, {1, kNaN, 2, 3, kInf, 1, -kInf, 2}), {2, 4});
    }
  }
  // Nothing to sum: an empty dim, or no lines.
  for (const Shape& empty : {Shape{3, 0}, Shape{0, 5}}) {
    CudaRun run = run_cuda(r, "cumsum", attrs_of({{"dim", int64_t{1}}}),
                           {testing::in_dtype(HostTensor(DType::F32, empty), dtype())}, dtype(), empty);
    EXPECT_TRUE(run.status.ok()) << run.status.to_string();
  }
}

TEST_P(CudaReductionsInEachDtype, LogSoftmaxMatchesTheCpuAlongAnyDim) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  HostTensor x = rnd({3, 7, 300}, 771, -20.0f, 20.0f);
  Agree(r, "log_softmax", {}, x, x.shape());
  Agree(r, "log_softmax", attrs_of({{"dim", int64_t{1}}}), x, x.shape());  // a middle dim
  Agree(r, "log_softmax", attrs_of({{"dim", int64_t{0}}}), x, x.shape());
  Agree(r, "log_softmax", attrs_of({{"dim", int64_t{-1}}}), rnd({2, 5000}, 772, -5.0f, 5.0f), {2, 5000});
  Agree(r, "log_softmax", {}, rnd({}, 773), {});
  // A NaN makes its whole line NaN; a line all -inf is NaN (0 / 0 in the sum); +inf too.
  HostTensor special = rnd({4, 6}, 774);
  special.f()[0 * 6 + 2] = kNaN;
  for (int i = 0; i < 6; ++i) special.f()[1 * 6 + i] = -kInf;
  special.f()[2 * 6 + 4] = kInf;
  special.f()[3 * 6 + 1] = -kInf;  // one -inf among numbers: -inf, the rest finite
  AgreeWithNaN(r, "log_softmax", {}, special, special.shape());
  AgreeWithNaN(r, "log_softmax", attrs_of({{"dim", int64_t{0}}}), special, special.shape());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaReductionsInEachDtype, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

// Integers sum in their own width and wrap as two's complement, byte for byte as the CPU.
TEST(CudaReductions, IntegerCumsumWrapsAsTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  struct Case {
    bool exclusive, reverse;
    std::vector<int32_t> want;
  };
  const HostTensor small = ints_of<int32_t>(DType::I32, {3}, {kMax32, 1, 1});
  for (const Case& c : {Case{false, false, {kMax32, kMin32, kMin32 + 1}},
                        Case{true, false, {0, kMax32, kMin32}},
                        Case{false, true, {kMin32 + 1, 2, 1}},
                        Case{true, true, {2, 1, 0}}}) {
    SCOPED_TRACE(fmt::format("exclusive {} reverse {}", c.exclusive, c.reverse));
    const OpAttrs attrs =
        attrs_of({{"dim", int64_t{0}}, {"exclusive", c.exclusive}, {"reverse", c.reverse}});
    CudaRun run = run_cuda(r, "cumsum", attrs, {small}, DType::I32, {3});
    ASSERT_TRUE(run.status.ok()) << run.status.to_string();
    EXPECT_EQ(values_of<int32_t>(run.out), c.want);
  }
  const int64_t kMax64 = std::numeric_limits<int64_t>::max();
  CudaRun wrap64 = run_cuda(r, "cumsum", attrs_of({{"dim", int64_t{0}}}),
                            {ints_of<int64_t>(DType::I64, {2}, {kMax64, 2})}, DType::I64, {2});
  ASSERT_TRUE(wrap64.status.ok());
  EXPECT_EQ(values_of<int64_t>(wrap64.out),
            (std::vector<int64_t>{kMax64, std::numeric_limits<int64_t>::min() + 1}));

  // Large values over long rows (many wraps, across a block's chunks) and strided lines.
  uint32_t seed = 781;
  for (DType dtype : {DType::I32, DType::I64}) {
    const int64_t hi = dtype == DType::I32 ? kMax32 : kMax64;
    for (bool exclusive : {false, true}) {
      for (bool reverse : {false, true}) {
        SCOPED_TRACE(fmt::format("{} exclusive {} reverse {}", dtype_name(dtype), exclusive, reverse));
        for (int64_t dim : {int64_t{-1}, int64_t{1}}) {
          const HostTensor x = HostTensor::ids(dtype, {3, 700, 5}, seed++, -hi, hi);
          // dim -1: rows of 5 (a block each); dim 1: lines of 700 along a middle dim.
          testing::Comparison c = r.compare(
              "cumsum", attrs_of({{"dim", dim}, {"exclusive", exclusive}, {"reverse", reverse}}),
              {x}, dtype, x.shape());
          EXPECT_TRUE(c.cpu.ok()) << c.cpu.to_string();
          EXPECT_TRUE(c.cuda.ok()) << c.cuda.to_string();
          EXPECT_EQ(c.error, 0.0) << "dim " << dim;
        }
        const HostTensor row = HostTensor::ids(dtype, {2, 3000}, seed++, -hi, hi);
        testing::Comparison c = r.compare(
            "cumsum", attrs_of({{"dim", int64_t{1}}, {"exclusive", exclusive}, {"reverse", reverse}}),
            {row}, dtype, row.shape());
        EXPECT_TRUE(c.cuda.ok()) << c.cuda.to_string();
        EXPECT_EQ(c.error, 0.0) << "rows of 3000";
      }
    }
  }
}

// The row kernel reads each element before it writes it, and no other thread reads it: the
// output may be the input.
TEST(CudaReductions, CumsumMayWriteOverItsInput) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  for (const auto& [shape, dim] : {std::pair<Shape, int64_t>{{2, 1000}, 1}, {{40, 3}, 0}}) {
    SCOPED_TRACE(shape.to_string());
    HostTensor x = rnd(shape, 791);
    const OpAttrs attrs = attrs_of({{"dim", dim}});
    HostTensor want = run_cpu("cumsum", attrs, {x}, DType::F32, shape);
    TensorView dx = r.upload(x);
    std::vector<TensorView> in{dx};
    std::vector<TensorView> out{dx};
    ASSERT_TRUE(cumsum(r.ctx(), attrs, in, out).ok());
    ASSERT_TRUE(r.synchronize().ok());
    EXPECT_LT(testing::relative_error(r.download(dx), want), testing::kTolerance);
  }
}

// Bad attributes, output shapes and dtypes are refused before anything runs, naming the op.
TEST(CudaReductions, BadAttributesAndOperandsAreRefused) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const HostTensor x = rnd({2, 3, 4}, 801);
  auto refused = [&](std::string_view op, const OpAttrs& attrs, const HostTensor& in, DType dtype,
                     const Shape& out) { return run_cuda(r, op, attrs, {in}, dtype, out).status; };
  EXPECT_TRUE(IsError(refused("reduce_sum", {}, x, DType::F32, {2, 3}), ErrorCode::NotFound,
                      {"reduce_sum", "dims"}));
  EXPECT_TRUE(IsError(refused("reduce_max", dims_attr({0, 2}), x, DType::F32, {3}),
                      ErrorCode::NotSupported, {"reduce_max", "adjacent"}));
  EXPECT_TRUE(IsError(refused("reduce_min", dims_attr({3}), x, DType::F32, {2, 3}),
                      ErrorCode::InvalidArgument, {"reduce_min", "dims = 3", "out of range"}));
  EXPECT_TRUE(IsError(refused("reduce_prod", dims_attr({1}), x, DType::F32, {2, 4, 1}),
                      ErrorCode::InvalidArgument, {"reduce_prod", "output"}));
  EXPECT_TRUE(IsError(refused("reduce_sum", dims_attr({1}), HostTensor::ids(DType::I32, {2, 3}, 1, 0, 9),
                              DType::I32, {2}),
                      ErrorCode::NotSupported, {"reduce_sum", "i32", "f32, f16 and bf16"}));
  EXPECT_TRUE(IsError(refused("argmax", attrs_of({{"dim", int64_t{1}}}), x, DType::F32, {2, 4}),
                      ErrorCode::InvalidArgument, {"argmax", "output", "i64"}));
  EXPECT_TRUE(IsError(refused("argmin", attrs_of({{"dim", int64_t{1}}}), HostTensor(DType::F32, {2, 0, 4}),
                              DType::I64, {2, 4}),
                      ErrorCode::InvalidArgument, {"argmin", "no elements"}));
  EXPECT_TRUE(IsError(refused("argmax", attrs_of({{"select_last_index", std::string("yes")}}), x,
                              DType::I64, {3, 4}),
                      ErrorCode::InvalidArgument, {"argmax", "select_last_index"}));
  EXPECT_TRUE(IsError(refused("cumsum", {}, x, DType::F32, x.shape()), ErrorCode::NotFound,
                      {"cumsum", "dim"}));
  EXPECT_TRUE(IsError(refused("cumsum", attrs_of({{"dim", int64_t{0}}}), HostTensor(DType::U8, {4}),
                              DType::U8, {4}),
                      ErrorCode::NotSupported, {"cumsum", "u8", "f32, f16, bf16, i32 and i64"}));
  EXPECT_TRUE(IsError(refused("cumsum", attrs_of({{"dim", int64_t{0}}}), HostTensor::ids(DType::I32, {4}, 2, 0, 9),
                              DType::I64, {4}),
                      ErrorCode::InvalidArgument, {"cumsum", "output"}));
  EXPECT_TRUE(IsError(refused("log_softmax", attrs_of({{"dim", int64_t{3}}}), x, DType::F32, x.shape()),
                      ErrorCode::InvalidArgument, {"log_softmax", "dim = 3"}));
  EXPECT_TRUE(IsError(refused("log_softmax", {}, x, DType::BF16, x.shape()),
                      ErrorCode::InvalidArgument, {"log_softmax", "output"}));
}

}  // namespace
}  // namespace planrt::kernels::cuda
