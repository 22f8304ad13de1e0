// resize on the CPU (kernels/op_plans.h: plan_resize): ONNX's own examples written out, then
// every mode, coordinate transform, nearest rounding and exclude_outside, upsampling and
// downsampling, from scales and from sizes, against a reference written here as ONNX's
// reference implementation (onnx/reference/ops/op_resize.py) reads: one output element at a
// time, the dims interpolated one inside the other, the taps found as "the n nearest
// indices of the edge-padded axis" by sorting them. The kernel finds its taps another way
// (a window), so the two agreeing is a real check. Then the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernel_test_util.h"
#include "kernels/op_plans.h"

// A Result's value, or the test fails with its status.
#define RESIZE_ASSERT_OK_AND_ASSIGN(lhs, expr)                                               \
  auto PLANRT_CONCAT_(resize_tmp_, __LINE__) = (expr);                                       \
  ASSERT_TRUE(PLANRT_CONCAT_(resize_tmp_, __LINE__).ok())                                    \
      << PLANRT_CONCAT_(resize_tmp_, __LINE__).status().to_string();                         \
  lhs = std::move(PLANRT_CONCAT_(resize_tmp_, __LINE__)).value()

namespace planrt::kernels {
namespace {

using testing::HostTensor;
using testing::IsError;
using testing::run_op;

struct Config {
  std::string mode = "nearest";
  std::string ctm = "half_pixel";
  std::string nearest = "round_prefer_floor";
  double a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

// ---- the reference (ONNX's op_resize.py, step for step) --------------------------------

std::vector<double> coeffs(const Config& c, double ratio) {
  if (c.mode == "nearest") {
    if (ratio == std::floor(ratio)) return {0, 1};
    if (c.nearest == "round_prefer_floor") return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
    if (c.nearest == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (c.nearest == "floor") return {1, 0};
    return {0, 1};
  }
  if (c.mode == "linear") return {1 - ratio, ratio};
  const double A = c.a;
  auto near = [&](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };          // |x| <= 1
  auto far = [&](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };      // 1 < |x| < 2
  return {far(ratio + 1), near(ratio), near(1 - ratio), far(2 - ratio)};
}

double interpolate_1d(const Config& c, const std::vector<double>& data, double scale, int64_t out_size, int64_t x,
                      double roi_start, double roi_end) {
  const auto in = static_cast<double>(data.size());
  const double out_w = scale * in;
  const auto xd = static_cast<double>(x);
  double xo = 0;
  if (c.ctm == "align_corners") {
    xo = out_w == 1 ? 0 : xd * (in - 1) / (out_w - 1);
  } else if (c.ctm == "asymmetric") {
    xo = xd / scale;
  } else if (c.ctm == "tf_half_pixel_for_nn") {
    xo = (xd + 0.5) / scale;
  } else if (c.ctm == "tf_crop_and_resize") {
    xo = out_w == 1 ? (roi_end - roi_start) * (in - 1) / 2 : xd * (roi_end - roi_start) * (in - 1) / (out_w - 1);
    xo += roi_start * (in - 1);
    if (xo < 0 || xo > in - 1) return c.extrapolation;
  } else if (c.ctm == "pytorch_half_pixel") {
    xo = out_w == 1 ? -0.5 : (xd + 0.5) / scale - 0.5;
  } else if (c.ctm == "half_pixel") {
    xo = (xd + 0.5) / scale - 0.5;
  } else {  // half_pixel_symmetric
    const double adjustment = static_cast<double>(out_size) / out_w;
    const double center = in / 2;
    xo = center * (1 - adjustment) + (xd + 0.5) / scale - 0.5;
  }
  const double ratio = xo == std::floor(xo) ? 1.0 : xo - std::floor(xo);
  std::vector<double> w = coeffs(c, ratio);
  const auto n = static_cast<int64_t>(w.size());
  // _get_neighbor: the edge-padded data, the n indices nearest xo (ties: the smaller).
  const int64_t pad = (n + 1) / 2;
  const auto len = static_cast<int64_t>(data.size()) + 2 * pad;
  std::vector<int64_t> idx(static_cast<size_t>(len));
  std::iota(idx.begin(), idx.end(), 0);
  const double xp = xo + static_cast<double>(pad);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t p, int64_t q) {
    const double dp = std::abs(xp - static_cast<double>(p)), dq = std::abs(xp - static_cast<double>(q));
    return dp != dq ? dp < dq : p < q;
  });
  idx.resize(static_cast<size_t>(n));
  std::sort(idx.begin(), idx.end());
  if (c.exclude_outside) {
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = idx[j] - pad;
      if (i < 0 || i >= static_cast<int64_t>(data.size())) w[j] = 0;
      sum += w[j];
    }
    for (double& v : w) v /= sum;
  }
  double out = 0;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t i = std::clamp<int64_t>(idx[j] - pad, 0, static_cast<int64_t>(data.size()) - 1);
    out += w[j] * data[static_cast<size_t>(i)];
  }
  return out;
}

// _interpolate_nd_with_x: the first dim outermost, the rest of the dims inside it.
double interpolate_nd(const Config& c, const std::vector<double>& data, const std::vector<int64_t>& shape,
                      const std::vector<double>& scales, const std::vector<int64_t>& out, const std::vector<int64_t>& x,
                      const std::vector<double>& roi, size_t d) {
  const size_t rank = shape.size();
  const double r0 = roi.empty() ? 0.0 : roi[d], r1 = roi.empty() ? 1.0 : roi[d + rank];
  if (d + 1 == rank) return interpolate_1d(c, data, scales[d], out[d], x[d], r0, r1);
  int64_t inner = 1;
  for (size_t k = d + 1; k < rank; ++k) inner *= shape[k];
  std::vector<double> line;
  for (int64_t i = 0; i < shape[d]; ++i) {
    std::vector<double> sub(data.begin() + i * inner, data.begin() + (i + 1) * inner);
    line.push_back(interpolate_nd(c, sub, shape, scales, out, x, roi, d + 1));
  }
  return interpolate_1d(c, line, scales[d], out[d], x[d], r0, r1);
}

std::vector<double> reference(const Config& c, const HostTensor& x, const std::vector<double>& scales,
                              const std::vector<int64_t>& out, const std::vector<double>& roi = {}) {
  std::vector<int64_t> shape;
  for (int d = 0; d < x.shape().rank(); ++d) shape.push_back(x.shape()[d]);
  const std::vector<double> data = x.doubles();
  int64_t n = 1;
  for (int64_t v : out) n *= v;
  std::vector<double> y;
  for (int64_t o = 0; o < n; ++o) {
    std::vector<int64_t> idx(out.size());
    int64_t rest = o;
    for (size_t d = out.size(); d-- > 0;) {
      idx[d] = rest % out[d];
      rest /= out[d];
    }
    y.push_back(interpolate_nd(c, data, shape, scales, out, idx, roi, 0));
  }
  return y;
}

// ---- calls -----------------------------------------------------------------------------

OpAttrs attrs_of(const Config& c) {
  OpAttrs a;
  a.set("mode", c.mode);
  a.set("coordinate_transformation_mode", c.ctm);
  a.set("nearest_mode", c.nearest);
  a.set("cubic_coeff_a", c.a);
  a.set("exclude_outside", c.exclude_outside);
  a.set("extrapolation_value", c.extrapolation);
  return a;
}

Shape shape_of(const std::vector<int64_t>& v) { return *Shape::from(v); }

// The kernel's output (f32), or the error.
Result<HostTensor> run(const OpAttrs& attrs, const HostTensor& x, const std::vector<int64_t>& out) {
  HostTensor y(DType::F32, shape_of(out));
  PLANRT_RETURN_IF_ERROR(run_op("resize", attrs, {x.view()}, {y.view()}));
  return y;
}

std::vector<float> values(const HostTensor& t) { return std::vector<float>(t.f(), t.f() + t.numel()); }

// ---- ONNX's examples -------------------------------------------------------------------

TEST(Resize, UpsamplesNearestAsOnnxsExample) {
  // test_resize_upsample_scales_nearest: [[1, 2], [3, 4]], scales [1, 1, 2, 3].
  HostTensor x = HostTensor::f32({1, 1, 2, 2}, {1, 2, 3, 4});
  OpAttrs a;
  a.set("scales", std::string("1,1,2,3"));
  RESIZE_ASSERT_OK_AND_ASSIGN(HostTensor y, run(a, x, {1, 1, 4, 6}));
  EXPECT_EQ(values(y), (std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}));
}

TEST(Resize, DownsamplesNearestAsOnnxsExample) {
  // test_resize_downsample_scales_nearest: [[1, 2, 3, 4], [5, 6, 7, 8]], scales 0.6 -> [[1, 3]].
  HostTensor x = HostTensor::f32({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  OpAttrs a;
  a.set("scales", std::string("1, 1, 0.6000000238418579, 0.6000000238418579"));  // float32 0.6
  RESIZE_ASSERT_OK_AND_ASSIGN(HostTensor y, run(a, x, {1, 1, 1, 2}));
  EXPECT_EQ(values(y), (std::vector<float>{1, 3}));
}

TEST(Resize, UpsamplesLinearAsOnnxsExample) {
  // test_resize_upsample_scales_linear (half_pixel) and ..._align_corners.
  HostTensor x = HostTensor::f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Config c;
  c.mode = "linear";
  OpAttrs a = attrs_of(c);
  a.set("scales", std::string("1,1,2,2"));
  RESIZE_ASSERT_OK_AND_ASSIGN(HostTensor y, run(a, x, {1, 1, 4, 4}));
  const std::vector<float> half_pixel{1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4};
  EXPECT_EQ(values(y), half_pixel);
  a.set("coordinate_transformation_mode", std::string("align_corners"));
  RESIZE_ASSERT_OK_AND_ASSIGN(HostTensor z, run(a, x, {1, 1, 4, 4}));
  const double t = 1.0 / 3, u = 2.0 / 3;
  const std::vector<double> corners{1, 1 + t, 1 + u, 2, 1 + u, 2, 2 + t, 2 + u, 2 + t, 2 + u, 3, 3 + t, 3, 3 + t, 3 + u, 4};
  EXPECT_LT(testing::relative_error(z, corners), 1e-7);
}

TEST(Resize, CropsAndResizesWithTheExtrapolationValueOutsideTheImage) {
  // test_resize_tf_crop_and_resize's roi; and a roi reaching past the image.
  HostTensor x = HostTensor::f32({1, 1, 4, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  Config c;
  c.mode = "linear";
  c.ctm = "tf_crop_and_resize";
  c.extrapolation = 10;
  for (const std::vector<double>& roi :
       {std::vector<double>{0, 0, 0.4, 0.6, 1, 1, 0.6, 0.8}, std::vector<double>{0, 0, -0.5, 0.3, 1, 1, 1.5, 1.2},
        std::vector<double>{0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7}}) {
    OpAttrs a = attrs_of(c);
    a.set("sizes", std::vector<int64_t>{1, 1, 3, 3});
    a.set("roi", format_float_list(roi));
    RESIZE_ASSERT_OK_AND_ASSIGN(HostTensor y, run(a, x, {1, 1, 3, 3}));
    const std::vector<double> ref = reference(c, x, {1, 1, 0.75, 0.75}, {1, 1, 3, 3}, roi);
    EXPECT_LT(testing::relative_error(y, ref), 1e-6) << fmt::format("{}", fmt::join(values(y), ", "));
  }
  // test_resize_tf_crop_and_resize's output, as its data gives it (its roi in float32).
  OpAttrs a = attrs_of(c);
  a.set("sizes", std::vector<int64_t>{1, 1, 3, 3});
  a.set("roi", std::string("0,0,0.4000000059604645,0.6000000238418579,1,1,1.2000000476837158,1.7000000476837158"));
  RESIZE_ASSERT_OK_AND_ASSIGN(HostTensor y, run(a, x, {1, 1, 3, 3}));
  EXPECT_LT(testing::relative_error(y, {7.6, 10, 10, 12.4, 10, 10, 10, 10, 10}), 1e-6);
}

// ---- every mode against the reference ---------------------------------------------------

std::vector<Config> all_configs() {
  std::vector<Config> out;
  const char* ctms[] = {"half_pixel",      "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                        "asymmetric",      "tf_half_pixel_for_nn"};
  for (const char* ctm : ctms) {
    for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      Config c;
      c.ctm = ctm;
      c.nearest = nearest;
      out.push_back(c);
    }
    for (const char* mode : {"linear", "cubic"}) {
      for (bool exclude : {false, true}) {
        Config c;
        c.mode = mode;
        c.ctm = ctm;
        c.exclude_outside = exclude;
        c.a = exclude ? -0.5 : -0.75;
        out.push_back(c);
      }
    }
  }
  return out;
}

// Nearest copies elements: the kernel must give the reference's exactly. The others within
// an f32 rounding.
void expect_matches(const Config& c, const HostTensor& y, const std::vector<double>& ref) {
  if (c.mode == "nearest") {
    std::vector<float> want;
    for (double v : ref) want.push_back(static_cast<float>(v));
    EXPECT_EQ(values(y), want);
  } else {
    EXPECT_LT(testing::relative_error(y, ref), 1e-6);
  }
}

TEST(Resize, EveryModeFollowsOnnxsReferenceFromScales) {
  HostTensor x = HostTensor::random({2, 3, 5, 4}, 7, -2.0f, 2.0f);
  // Upsampling, downsampling, both, a scale whose product is not whole, and an unchanged dim.
  const std::vector<std::vector<double>> cases = {
      {1, 1, 2, 3}, {1, 1, 0.5, 0.75}, {1, 1, 1.7, 0.6000000238418579}, {1, 1, 3, 1}, {1, 0.5, 1.5, 2}};
  for (const Config& c : all_configs()) {
    for (const std::vector<double>& scales : cases) {
      SCOPED_TRACE(fmt::format("{} {} {} exclude_outside {} scales [{}]", c.mode, c.ctm, c.nearest,
                               c.exclude_outside, fmt::join(scales, ", ")));
      std::vector<int64_t> out;
      for (int d = 0; d < 4; ++d) out.push_back(static_cast<int64_t>(std::floor(x.shape()[d] * scales[d])));
      OpAttrs a = attrs_of(c);
      a.set("scales", format_float_list(scales));
      RESIZE_ASSERT_OK_AND_ASSIGN(HostTensor y, run(a, x, out));
      expect_matches(c, y, reference(c, x, scales, out));
    }
  }
}

TEST(Resize, EveryModeFollowsOnnxsReferenceFromSizes) {
  HostTensor x = HostTensor::random({1, 2, 6, 7}, 11, -2.0f, 2.0f);
  const std::vector<std::vector<int64_t>> cases = {{1, 2, 9, 10}, {1, 2, 4, 3}, {1, 2, 1, 1}, {1, 2, 6, 13}};
  for (const Config& c : all_configs()) {
    for (const std::vector<int64_t>& sizes : cases) {
      SCOPED_TRACE(fmt::format("{} {} {} exclude_outside {} sizes [{}]", c.mode, c.ctm, c.nearest, c.exclude_outside,
                               fmt::join(sizes, ", ")));
      std::vector<double> scales;
      for (int d = 0; d < 4; ++d) scales.push_back(static_cast<double>(sizes[d]) / static_cast<double>(x.shape()[d]));
      OpAttrs a = attrs_of(c);
      a.set("sizes", sizes);
      RESIZE_ASSERT_OK_AND_ASSIGN(HostTensor y, run(a, x, sizes));
      expect_matches(c, y, reference(c, x, scales, sizes));
    }
  }
}

TEST(Resize, ResizesAnyRankAndKeepsSizeMinusOneDims) {
  // 1-D and 3-D inputs; sizes -1 keeps a dim as it is.
  HostTensor x1 = HostTensor::random({7}, 3);
  Config c;
  c.mode = "cubic";
  OpAttrs a = attrs_of(c);
  a.set("sizes", std::vector<int64_t>{12});
  RESIZE_ASSERT_OK_AND_ASSIGN(HostTensor y1, run(a, x1, {12}));
  EXPECT_LT(testing::relative_error(y1, reference(c, x1, {12.0 / 7}, {12})), 1e-6);
  HostTensor x3 = HostTensor::random({3, 4, 5}, 4);
  c.mode = "linear";
  c.ctm = "align_corners";
  a = attrs_of(c);
  a.set("sizes", std::vector<int64_t>{-1, 7, 2});
  RESIZE_ASSERT_OK_AND_ASSIGN(HostTensor y3, run(a, x3, {3, 7, 2}));
  EXPECT_LT(testing::relative_error(y3, reference(c, x3, {1, 7.0 / 4, 2.0 / 5}, {3, 7, 2})), 1e-6);
  // An unchanged size with a given scale other than 1 still interpolates by that scale.
  a = attrs_of(c);
  a.set("sizes", std::vector<int64_t>{3, 4, 5});
  a.set("scales", std::string("1,2,1"));
  c.ctm = "asymmetric";
  a.set("coordinate_transformation_mode", c.ctm);
  RESIZE_ASSERT_OK_AND_ASSIGN(HostTensor y4, run(a, x3, {3, 4, 5}));
  EXPECT_LT(testing::relative_error(y4, reference(c, x3, {1, 2, 1}, {3, 4, 5})), 1e-6);
}

TEST(Resize, ScaleOneIsACopy) {
  HostTensor x = HostTensor::random({2, 3, 4, 5}, 9);
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    Config c;
    c.mode = mode;
    OpAttrs a = attrs_of(c);
    a.set("scales", std::string("1,1,1,1"));
    RESIZE_ASSERT_OK_AND_ASSIGN(HostTensor y, run(a, x, {2, 3, 4, 5}));
    EXPECT_EQ(values(y), values(x)) << mode;
  }
}

TEST(Resize, FloatListsReadBackExactly) {
  const std::vector<double> v{1, 0.6000000238418579, 1.0 / 3, 1e-30, 2.5};
  RESIZE_ASSERT_OK_AND_ASSIGN(std::vector<double> back, parse_float_list(format_float_list(v), "scales"));
  EXPECT_EQ(back, v);
  RESIZE_ASSERT_OK_AND_ASSIGN(std::vector<double> spaced, parse_float_list(" 1 , +2.5,3e0 ", "scales"));
  EXPECT_EQ(spaced, (std::vector<double>{1, 2.5, 3}));
  EXPECT_TRUE(IsError(parse_float_list("1,,2", "scales").status(), ErrorCode::InvalidArgument, {"scales", "entry 1"}));
  EXPECT_TRUE(IsError(parse_float_list("1;2", "roi").status(), ErrorCode::InvalidArgument, {"roi", "','"}));
}

// ---- errors -----------------------------------------------------------------------------

TEST(Resize, RefusesBadAttributesShapesAndDtypes) {
  HostTensor x = HostTensor::random({1, 1, 2, 2}, 1);
  auto with = [](std::initializer_list<std::pair<const char*, AttrValue>> values) {
    OpAttrs a;
    for (const auto& [k, v] : values) a.set(k, v);
    return a;
  };
  const std::vector<int64_t> out{1, 1, 4, 4};
  EXPECT_TRUE(IsError(run(with({}), x, out).status(), ErrorCode::InvalidArgument, {"resize", "sizes or scales"}));
  EXPECT_TRUE(IsError(run(with({{"scales", std::string("1,1,2,2")}, {"mode", std::string("bilinear")}}), x, out)
                          .status(),
                      ErrorCode::InvalidArgument, {"resize", "mode 'bilinear'"}));
  EXPECT_TRUE(IsError(run(with({{"scales", std::string("1,1,2,2")},
                                {"coordinate_transformation_mode", std::string("corners")}}),
                          x, out)
                          .status(),
                      ErrorCode::InvalidArgument, {"coordinate_transformation_mode 'corners'"}));
  EXPECT_TRUE(IsError(run(with({{"scales", std::string("1,1,2,2")}, {"nearest_mode", std::string("round")}}), x, out)
                          .status(),
                      ErrorCode::InvalidArgument, {"nearest_mode 'round'"}));
  EXPECT_TRUE(IsError(run(with({{"scales", std::string("1,2,2")}}), x, out).status(), ErrorCode::InvalidArgument,
                      {"scales has 3 entries", "rank 4"}));
  EXPECT_TRUE(IsError(run(with({{"scales", std::string("1,1,0,2")}}), x, out).status(), ErrorCode::InvalidArgument,
                      {"scales[2]", "> 0"}));
  EXPECT_TRUE(IsError(run(with({{"scales", std::string("1,1,two,2")}}), x, out).status(), ErrorCode::InvalidArgument,
                      {"scales", "not a number"}));
  EXPECT_TRUE(IsError(run(with({{"sizes", std::vector<int64_t>{1, 1, 4}}}), x, out).status(),
                      ErrorCode::InvalidArgument, {"sizes has 3 entries"}));
  EXPECT_TRUE(IsError(run(with({{"sizes", std::vector<int64_t>{1, 1, -2, 4}}}), x, out).status(),
                      ErrorCode::InvalidArgument, {"sizes[2] is -2"}));
  EXPECT_TRUE(IsError(run(with({{"sizes", std::vector<int64_t>{1, 1, 0, 4}}}), x, {1, 1, 0, 4}).status(),
                      ErrorCode::InvalidArgument, {"dim 2", "resizes to 0"}));
  EXPECT_TRUE(IsError(run(with({{"scales", std::string("1,1,2,2")}, {"roi", std::string("0,0,1,1")}}), x, out)
                          .status(),
                      ErrorCode::InvalidArgument, {"roi has 4 entries", "needs 8"}));
  EXPECT_TRUE(IsError(run(with({{"scales", std::vector<int64_t>{1, 1, 2, 2}}}), x, out).status(),
                      ErrorCode::InvalidArgument, {"'scales'", "a string"}));
  EXPECT_TRUE(IsError(run(with({{"exclude_outside", int64_t{1}}, {"scales", std::string("1,1,2,2")}}), x, out)
                          .status(),
                      ErrorCode::InvalidArgument, {"'exclude_outside'", "a bool"}));
  // The output's shape is the attributes' (floor(2 * 1.5) = 3).
  EXPECT_TRUE(IsError(run(with({{"scales", std::string("1,1,1.5,1.5")}}), x, out).status(),
                      ErrorCode::InvalidArgument, {"resize", "[1, 1, 3, 3]"}));
  // f32 only on the CPU.
  HostTensor i(DType::I32, {1, 1, 2, 2});
  HostTensor y(DType::I32, {1, 1, 4, 4});
  EXPECT_TRUE(IsError(run_op("resize", with({{"scales", std::string("1,1,2,2")}}), {i.view()}, {y.view()}),
                      ErrorCode::NotSupported, {"resize"}));
  // A scalar has no dim to resize.
  HostTensor s = HostTensor::f32({}, {1});
  HostTensor sy(DType::F32, {});
  EXPECT_TRUE(IsError(run_op("resize", with({{"scales", std::string("")}}), {s.view()}, {sy.view()}),
                      ErrorCode::InvalidArgument, {"resize", "scalar"}));
}

}  // namespace
}  // namespace planrt::kernels
