#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <limits>
#include <optional>

#include "kernel_test_util.h"

namespace planrt::kernels {
namespace {

using testing::HostTensor;
using testing::IsError;
using testing::run_op;
using testing::unravel;

// An i64 tensor whose every element is its own flat index: moves are checked exactly.
HostTensor iota(const Shape& shape) {
  HostTensor t(DType::I64, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<int64_t>()[i] = i;
  return t;
}

int64_t flat_index(const std::vector<int64_t>& index, const Shape& shape) {
  int64_t flat = 0;
  for (int d = 0; d < shape.rank(); ++d) flat = flat * shape[d] + index[static_cast<size_t>(d)];
  return flat;
}

// out[i0..] == x[index mapped by perm]: out dim d is x dim perm[d].
void expect_permuted(const HostTensor& x, const HostTensor& out, const std::vector<int>& perm) {
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> oi = unravel(i, out.shape());
    std::vector<int64_t> xi(oi.size());
    for (size_t d = 0; d < perm.size(); ++d) xi[static_cast<size_t>(perm[d])] = oi[d];
    ASSERT_EQ(out.as<int64_t>()[i], x.as<int64_t>()[flat_index(xi, x.shape())]) << "at " << i;
  }
}

// Calls fn(perm, out_shape, attrs) for every permutation of shape's dims: attrs holds the
// permute's `dims`, out_shape the permuted shape.
template <typename Fn>
void for_each_permutation(const Shape& shape, Fn&& fn) {
  std::vector<int> perm(static_cast<size_t>(shape.rank()));
  for (int d = 0; d < shape.rank(); ++d) perm[static_cast<size_t>(d)] = d;
  do {
    std::vector<int64_t> out_shape, dims;
    for (int d : perm) {
      out_shape.push_back(shape[d]);
      dims.push_back(d);
    }
    OpAttrs attrs;
    attrs.set("dims", dims);
    fn(perm, *Shape::from(out_shape), attrs);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(Reshape, CopiesElementsInOrder) {
  HostTensor x = iota({2, 3, 4});
  HostTensor y(DType::I64, {6, 4});
  ASSERT_TRUE(run_op("reshape", {}, {x.view()}, {y.view()}).ok());
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(y.as<int64_t>()[i], i);
}

TEST(Reshape, InPlaceIsANoOp) {
  HostTensor x = iota({2, 3});
  TensorView out = x.view();
  out.sizes = Shape{3, 2};
  out.strides = contiguous_strides(out.sizes);
  ASSERT_TRUE(run_op("reshape", {}, {x.view()}, {out}).ok());
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(x.as<int64_t>()[i], i);
}

TEST(Reshape, ElementCountMismatchIsRejected) {
  HostTensor x = iota({2, 3});
  HostTensor y(DType::I64, {7});
  EXPECT_TRUE(IsError(run_op("reshape", {}, {x.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"reshape", "output i64 [7] (7 elements)", "x i64 [2, 3] (6 elements)"}));
}

TEST(Reshape, DtypeMismatchIsRejected) {
  HostTensor x = iota({2, 3});
  HostTensor y(DType::F32, {6});
  EXPECT_TRUE(IsError(run_op("reshape", {}, {x.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"reshape", "output f32 [6]"}));
}

TEST(Permute, MovesEveryElement) {
  HostTensor x = iota({2, 3, 4, 5});
  HostTensor y(DType::I64, {4, 2, 5, 3});
  OpAttrs attrs;
  attrs.set("dims", std::vector<int64_t>{2, 0, 3, 1});
  ASSERT_TRUE(run_op("permute", attrs, {x.view()}, {y.view()}).ok());
  expect_permuted(x, y, {2, 0, 3, 1});
}

TEST(Permute, KeepingTheLastDimCopiesRows) {
  HostTensor x = iota({3, 4, 5});
  HostTensor y(DType::I64, {4, 3, 5});
  OpAttrs attrs;
  attrs.set("dims", std::vector<int64_t>{1, 0, -1});
  ASSERT_TRUE(run_op("permute", attrs, {x.view()}, {y.view()}).ok());
  expect_permuted(x, y, {1, 0, 2});
}

// Every permutation of shapes with tile edges (the tiled transpose's 32-element tiles, dims
// of 1 that merging drops, dims the source holds contiguously) moves every element: NCHW <->
// NHWC, matrix transposes, head splits.
TEST(Permute, EveryPermutationOfShapesAcrossTileEdgesMovesEveryElement) {
  const std::vector<Shape> shapes = {{33, 65}, {2, 3, 40, 37}, {1, 70, 1, 3}, {4, 1, 33, 2, 5}, {3, 64, 64}};
  for (const Shape& shape : shapes) {
    HostTensor x = iota(shape);
    for_each_permutation(shape, [&](const std::vector<int>& perm, const Shape& out_shape, const OpAttrs& attrs) {
      HostTensor y(DType::I64, out_shape);
      ASSERT_TRUE(run_op("permute", attrs, {x.view()}, {y.view()}).ok());
      SCOPED_TRACE(::testing::Message() << "shape " << shape.to_string());
      expect_permuted(x, y, perm);
    });
  }
}

// Four-byte elements whose output rows are 3 or 4 long (an RGB or RGBA image going
// channels-last takes the narrow-row transpose, in tiles of 1024 rows) and the shapes around
// them, in every permutation: every element lands where the permutation says.
TEST(Permute, NarrowRowsOfFourByteElementsMoveEveryElement) {
  const std::vector<Shape> shapes = {{2, 3, 37, 41}, {1, 4, 33, 40}, {3, 1100}, {5, 4, 300}, {2, 3, 4}};
  for (const Shape& shape : shapes) {
    HostTensor x(DType::I32, shape);
    for (int64_t i = 0; i < x.numel(); ++i) x.as<int32_t>()[i] = static_cast<int32_t>(i);
    for_each_permutation(shape, [&](const std::vector<int>& perm, const Shape& out_shape, const OpAttrs& attrs) {
      HostTensor y(DType::I32, out_shape);
      ASSERT_TRUE(run_op("permute", attrs, {x.view()}, {y.view()}).ok());
      for (int64_t i = 0; i < y.numel(); ++i) {
        std::vector<int64_t> oi = unravel(i, y.shape());
        std::vector<int64_t> xi(oi.size());
        for (size_t d = 0; d < perm.size(); ++d) xi[static_cast<size_t>(perm[d])] = oi[d];
        ASSERT_EQ(y.as<int32_t>()[i], x.as<int32_t>()[flat_index(xi, x.shape())])
            << "shape " << shape.to_string() << " output index " << i;
      }
    });
  }
}

TEST(Permute, WorksForTwoByteElements) {
  HostTensor x(DType::BF16, {2, 3});
  for (int i = 0; i < 6; ++i) x.as<uint16_t>()[i] = static_cast<uint16_t>(i + 1);
  HostTensor y(DType::BF16, {3, 2});
  OpAttrs attrs;
  attrs.set("dims", std::vector<int64_t>{-1, -2});
  ASSERT_TRUE(run_op("permute", attrs, {x.view()}, {y.view()}).ok());
  const uint16_t expected[] = {1, 4, 2, 5, 3, 6};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y.as<uint16_t>()[i], expected[i]) << i;
}

TEST(Permute, InvalidDimsAreRejected) {
  HostTensor x = iota({2, 3, 4});
  HostTensor y(DType::I64, {2, 3, 4});
  struct Case {
    std::vector<int64_t> dims;
    const char* fragment;
  } cases[] = {
      {{0, 1}, "dims has 2 entries for x of rank 3"},
      {{0, 1, 1}, "repeats dim 1"},
      {{0, 1, 3}, "dims entry = 3 is out of range"},
      {{0, 1, -4}, "dims entry = -4 is out of range"},
  };
  for (const Case& c : cases) {
    OpAttrs attrs;
    attrs.set("dims", c.dims);
    EXPECT_TRUE(IsError(run_op("permute", attrs, {x.view()}, {y.view()}),
                        ErrorCode::InvalidArgument, {"permute", c.fragment}));
  }
}

TEST(Permute, MissingOrMistypedDimsAreRejected) {
  HostTensor x = iota({2, 3});
  HostTensor y(DType::I64, {3, 2});
  EXPECT_TRUE(IsError(run_op("permute", {}, {x.view()}, {y.view()}), ErrorCode::NotFound,
                      {"permute", "'dims'"}));
  OpAttrs attrs;
  attrs.set("dims", int64_t{1});
  EXPECT_TRUE(IsError(run_op("permute", attrs, {x.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"permute", "'dims'", "list of ints"}));
}

TEST(Permute, WrongOutputShapeIsRejected) {
  HostTensor x = iota({2, 3});
  HostTensor y(DType::I64, {2, 3});
  OpAttrs attrs;
  attrs.set("dims", std::vector<int64_t>{1, 0});
  EXPECT_TRUE(IsError(run_op("permute", attrs, {x.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"output is i64 [2, 3]", "expected i64 [3, 2]"}));
}

TEST(Transpose, SwapsTwoDimsWithNegativeIndices) {
  HostTensor x = iota({2, 3, 4});
  HostTensor y(DType::I64, {4, 3, 2});
  OpAttrs attrs;
  attrs.set("dim0", int64_t{-1});
  attrs.set("dim1", int64_t{0});
  ASSERT_TRUE(run_op("transpose", attrs, {x.view()}, {y.view()}).ok());
  expect_permuted(x, y, {2, 1, 0});
}

TEST(Transpose, WorksForF32) {
  HostTensor x = HostTensor::f32({2, 2}, {1, 2, 3, 4});
  HostTensor y(DType::F32, {2, 2});
  OpAttrs attrs;
  attrs.set("dim0", int64_t{0});
  attrs.set("dim1", int64_t{1});
  ASSERT_TRUE(run_op("transpose", attrs, {x.view()}, {y.view()}).ok());
  EXPECT_EQ(std::vector<float>(y.f(), y.f() + 4), (std::vector<float>{1, 3, 2, 4}));
}

TEST(Transpose, MissingOrOutOfRangeDimIsRejected) {
  HostTensor x = iota({2, 3});
  HostTensor y(DType::I64, {3, 2});
  OpAttrs only_one;
  only_one.set("dim0", int64_t{0});
  EXPECT_TRUE(IsError(run_op("transpose", only_one, {x.view()}, {y.view()}), ErrorCode::NotFound,
                      {"transpose", "'dim1'"}));
  OpAttrs bad;
  bad.set("dim0", int64_t{0});
  bad.set("dim1", int64_t{2});
  EXPECT_TRUE(IsError(run_op("transpose", bad, {x.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"transpose", "dim1 = 2 is out of range"}));
}

TEST(Concat, JoinsAlongAMiddleDim) {
  HostTensor a = iota({2, 1, 3});
  HostTensor b = iota({2, 2, 3});
  for (int64_t i = 0; i < b.numel(); ++i) b.as<int64_t>()[i] += 100;
  HostTensor y(DType::I64, {2, 3, 3});
  OpAttrs attrs;
  attrs.set("dim", int64_t{1});
  ASSERT_TRUE(run_op("concat", attrs, {a.view(), b.view()}, {y.view()}).ok());
  const int64_t expected[] = {0, 1, 2, 100, 101, 102, 103, 104, 105,
                              3, 4, 5, 106, 107, 108, 109, 110, 111};
  for (int i = 0; i < 18; ++i) EXPECT_EQ(y.as<int64_t>()[i], expected[i]) << i;
}

TEST(Concat, NegativeDimAndEmptyInputs) {
  HostTensor a = HostTensor::f32({2, 1}, {1, 2});
  HostTensor empty(DType::F32, {2, 0});
  HostTensor b = HostTensor::f32({2, 2}, {3, 4, 5, 6});
  HostTensor y(DType::F32, {2, 3});
  OpAttrs attrs;
  attrs.set("dim", int64_t{-1});
  ASSERT_TRUE(run_op("concat", attrs, {a.view(), empty.view(), b.view()}, {y.view()}).ok());
  EXPECT_EQ(std::vector<float>(y.f(), y.f() + 6), (std::vector<float>{1, 3, 4, 2, 5, 6}));
}

TEST(Concat, DefaultDimIsZero) {
  HostTensor a = iota({1, 2});
  HostTensor b = iota({2, 2});
  HostTensor y(DType::I64, {3, 2});
  ASSERT_TRUE(run_op("concat", {}, {a.view(), b.view()}, {y.view()}).ok());
  const int64_t expected[] = {0, 1, 0, 1, 2, 3};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y.as<int64_t>()[i], expected[i]) << i;
}

TEST(Concat, MismatchedSizesOrDtypesAreRejected) {
  HostTensor a = iota({2, 3});
  HostTensor b = iota({3, 3});
  HostTensor y(DType::I64, {2, 6});
  OpAttrs attrs;
  attrs.set("dim", int64_t{1});
  EXPECT_TRUE(IsError(run_op("concat", attrs, {a.view(), b.view()}, {y.view()}),
                      ErrorCode::InvalidArgument,
                      {"concat", "xs[0] i64 [2, 3]", "xs[1] i64 [3, 3]"}));
  HostTensor f(DType::F32, {2, 3});
  EXPECT_TRUE(IsError(run_op("concat", attrs, {a.view(), f.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"concat", "share dtype", "xs[1] f32 [2, 3]"}));
}

TEST(Concat, BadDimAbsentInputAndWrongOutputAreRejected) {
  HostTensor a = iota({2, 3});
  HostTensor y(DType::I64, {4, 3});
  OpAttrs bad_dim;
  bad_dim.set("dim", int64_t{2});
  EXPECT_TRUE(IsError(run_op("concat", bad_dim, {a.view(), a.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"concat", "dim = 2 is out of range"}));
  EXPECT_TRUE(IsError(run_op("concat", {}, {a.view(), TensorView::none()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"concat", "xs[1] is absent"}));
  HostTensor scalar = iota({});
  EXPECT_TRUE(IsError(run_op("concat", {}, {scalar.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"concat", "rank >= 1"}));
  HostTensor wrong(DType::I64, {2, 6});
  EXPECT_TRUE(IsError(run_op("concat", {}, {a.view(), a.view()}, {wrong.view()}),
                      ErrorCode::InvalidArgument, {"output is i64 [2, 6]", "expected i64 [4, 3]"}));
}

// Runs slice on iota({4, 6}) along dim 1 and returns the column indices it kept.
Result<std::vector<int64_t>> slice_columns(std::optional<int64_t> start, std::optional<int64_t> end,
                                           int64_t expected_len) {
  HostTensor x = iota({4, 6});
  HostTensor y(DType::I64, {4, expected_len});
  OpAttrs attrs;
  attrs.set("dim", int64_t{-1});
  if (start) attrs.set("start", *start);
  if (end) attrs.set("end", *end);
  Status s = run_op("slice", attrs, {x.view()}, {y.view()});
  if (!s.ok()) return s;
  std::vector<int64_t> cols;
  for (int64_t i = 0; i < expected_len; ++i) cols.push_back(y.as<int64_t>()[i]);
  for (int64_t r = 1; r < 4; ++r) {
    for (int64_t i = 0; i < expected_len; ++i) {
      EXPECT_EQ(y.as<int64_t>()[r * expected_len + i], r * 6 + cols[static_cast<size_t>(i)]);
    }
  }
  return cols;
}

TEST(Slice, FollowsPythonSlicing) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(*slice_columns(1, 4, 3), (V{1, 2, 3}));
  EXPECT_EQ(*slice_columns(-2, std::nullopt, 2), (V{4, 5}));
  EXPECT_EQ(*slice_columns(std::nullopt, -1, 5), (V{0, 1, 2, 3, 4}));
  EXPECT_EQ(*slice_columns(-100, 2, 2), (V{0, 1}));
  EXPECT_EQ(*slice_columns(3, std::numeric_limits<int64_t>::max(), 3), (V{3, 4, 5}));
  EXPECT_EQ(*slice_columns(std::nullopt, std::nullopt, 6), (V{0, 1, 2, 3, 4, 5}));
}

TEST(Slice, WithoutAnEndTheOutputSaysHowLongItIs) {
  using V = std::vector<int64_t>;
  // What a slice to a named dim ([0:S] of a fixed table) runs as: no end attribute.
  EXPECT_EQ(*slice_columns(1, std::nullopt, 3), (V{1, 2, 3}));
  EXPECT_EQ(*slice_columns(0, std::nullopt, 6), (V{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(IsError(slice_columns(2, std::nullopt, 5).status(), ErrorCode::InvalidArgument,
                      {"slice", "output is i64 [4, 5]", "expected i64 [4, 4]"}));
}

TEST(Slice, EmptyWhenEndIsNotAfterStart) {
  EXPECT_TRUE(slice_columns(4, 2, 0).ok());
  EXPECT_TRUE(slice_columns(7, 9, 0).ok());
}

TEST(Slice, AlongTheFirstDimOfF32) {
  HostTensor x = HostTensor::f32({3, 2}, {1, 2, 3, 4, 5, 6});
  HostTensor y(DType::F32, {1, 2});
  OpAttrs attrs;
  attrs.set("start", int64_t{-2});
  attrs.set("end", int64_t{-1});
  ASSERT_TRUE(run_op("slice", attrs, {x.view()}, {y.view()}).ok());
  EXPECT_EQ(std::vector<float>(y.f(), y.f() + 2), (std::vector<float>{3, 4}));
}

TEST(Slice, WrongOutputLengthIsRejected) {
  EXPECT_TRUE(IsError(slice_columns(1, 4, 2).status(), ErrorCode::InvalidArgument,
                      {"slice", "output is i64 [4, 2]", "expected i64 [4, 3]"}));
}

TEST(Slice, BadAttributesAreRejected) {
  HostTensor x = iota({4, 6});
  HostTensor y(DType::I64, {4, 6});
  OpAttrs bad_dim;
  bad_dim.set("dim", int64_t{2});
  EXPECT_TRUE(IsError(run_op("slice", bad_dim, {x.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"slice", "dim = 2 is out of range for rank 2"}));
  OpAttrs step;
  step.set("step", int64_t{2});
  EXPECT_TRUE(IsError(run_op("slice", step, {x.view()}, {y.view()}), ErrorCode::NotSupported,
                      {"slice", "step = 2"}));
  OpAttrs mistyped;
  mistyped.set("start", 1.0);
  EXPECT_TRUE(IsError(run_op("slice", mistyped, {x.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"slice", "'start'", "a float"}));
}

// numpy.pad's rules, written directly: constant, edge (clamp) and reflect (about the ends).
int64_t pad_index(int64_t o, int64_t begin, int64_t n, const std::string& mode) {
  int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  if (mode == "constant") return -1;
  if (mode == "edge") return i < 0 ? 0 : n - 1;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
  return i;
}

TEST(Pad, ConstantEdgeAndReflectMatchNumpysRules) {
  HostTensor x = HostTensor::random({2, 3, 4}, 9);
  const std::vector<int64_t> pads = {1, 0, 5, 0, 2, 2};  // begins, then ends; reflect wraps twice on dim 2
  for (std::string mode : {"constant", "edge", "reflect"}) {
    OpAttrs a;
    a.set("pads", pads);
    a.set("mode", mode);
    a.set("value", 1.5);
    HostTensor y(DType::F32, {3, 5, 11});
    Status s = run_op("pad", a, {x.view()}, {y.view()});
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (int64_t i = 0; i < y.numel(); ++i) {
      const std::vector<int64_t> idx = unravel(i, y.shape());
      const int64_t a0 = pad_index(idx[0], 1, 2, mode), a1 = pad_index(idx[1], 0, 3, mode),
                    a2 = pad_index(idx[2], 5, 4, mode);
      const double want = (a0 < 0 || a1 < 0 || a2 < 0) ? 1.5 : x.at((a0 * 3 + a1) * 4 + a2);
      ASSERT_EQ(y.at(i), want) << mode << " at " << i;
    }
  }
}

TEST(Pad, NegativePadsCropAndBadPadsAreRefused) {
  HostTensor x = HostTensor::f32({2, 3}, {1, 2, 3, 4, 5, 6});
  OpAttrs a;
  a.set("pads", std::vector<int64_t>{0, -1, 0, 1});
  HostTensor y(DType::F32, {2, 3});
  ASSERT_TRUE(run_op("pad", a, {x.view()}, {y.view()}).ok());
  const float want[] = {2, 3, 0, 5, 6, 0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y.at(i), want[i]);
  OpAttrs short_pads;
  short_pads.set("pads", std::vector<int64_t>{1, 1});
  EXPECT_TRUE(IsError(run_op("pad", short_pads, {x.view()}, {y.view()}), ErrorCode::InvalidArgument, {"pads"}));
  OpAttrs wrap;
  wrap.set("pads", std::vector<int64_t>{0, 0, 0, 0});
  wrap.set("mode", std::string("wrap"));
  EXPECT_TRUE(IsError(run_op("pad", wrap, {x.view()}, {y.view()}), ErrorCode::InvalidArgument, {"wrap"}));
  OpAttrs crop;
  crop.set("pads", std::vector<int64_t>{-2, 0, -1, 0});
  EXPECT_TRUE(IsError(run_op("pad", crop, {x.view()}, {y.view()}), ErrorCode::InvalidArgument, {"below zero"}));
  HostTensor wrong(DType::F32, {2, 4});
  EXPECT_TRUE(IsError(run_op("pad", a, {x.view()}, {wrong.view()}), ErrorCode::InvalidArgument, {"output"}));
}

TEST(Expand, BroadcastsToTheOutputsShapeForEveryDtype) {
  HostTensor x = HostTensor::f32({1, 3, 1}, {1, 2, 3});
  HostTensor y(DType::F32, {2, 2, 3, 4});
  ASSERT_TRUE(run_op("expand", {}, {x.view()}, {y.view()}).ok());
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.at(i), 1 + unravel(i, y.shape())[2]);
  HostTensor ids = HostTensor::i64({2}, {7, 9});
  HostTensor out(DType::I64, {3, 2});
  ASSERT_TRUE(run_op("expand", {}, {ids.view()}, {out.view()}).ok());
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(out.as<int64_t>()[i], i % 2 == 0 ? 7 : 9);
  HostTensor bad(DType::F32, {2, 2});
  EXPECT_TRUE(IsError(run_op("expand", {}, {x.view()}, {bad.view()}), ErrorCode::InvalidArgument));
}

}  // namespace
}  // namespace planrt::kernels
