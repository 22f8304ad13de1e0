// resize on CUDA against the CPU kernel (kernels/op_plans.h: plan_resize), in f32 (1e-5) and
// bf16 (dtype_agreement.h): every mode, coordinate transform and nearest rounding,
// exclude_outside, tf_crop_and_resize with its extrapolation, upsampling and downsampling,
// from scales and from sizes, ranks 1 to 5; nearest in f32 bit for bit (an element copied,
// so a tap that lands one off shows); and the refusals, which are the plan's.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dtype_agreement.h"
#include "kernels/op_plans.h"
#include "support/gpu.h"

namespace planrt::kernels::cuda {
namespace {

using testing::CudaRunner;
using testing::ExpectAgreeIn;
using testing::HostTensor;
using testing::IsError;
using testing::rnd;

struct Config {
  std::string mode, ctm, nearest = "round_prefer_floor";
  bool exclude_outside = false;
};

std::vector<Config> all_configs() {
  std::vector<Config> out;
  for (const char* ctm : {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                          "tf_half_pixel_for_nn"}) {
    for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      out.push_back({"nearest", ctm, nearest});
    }
    for (const char* mode : {"linear", "cubic"}) {
      for (bool exclude : {false, true}) out.push_back({mode, ctm, "round_prefer_floor", exclude});
    }
  }
  return out;
}

OpAttrs attrs_of(const Config& c) {
  OpAttrs a;
  a.set("mode", c.mode);
  a.set("coordinate_transformation_mode", c.ctm);
  a.set("nearest_mode", c.nearest);
  a.set("exclude_outside", c.exclude_outside);
  if (c.exclude_outside) a.set("cubic_coeff_a", -0.5);
  return a;
}

Shape out_shape(const Shape& x, const std::vector<double>& scales) {
  Shape out;
  for (int d = 0; d < x.rank(); ++d) {
    EXPECT_TRUE(out.push_back(static_cast<int64_t>(std::floor(static_cast<double>(x[d]) * scales[d]))).ok());
  }
  return out;
}

class CudaResize : public ::testing::TestWithParam<DType> {
 protected:
  DType dtype() const { return GetParam(); }
};

TEST_P(CudaResize, EveryModeMatchesTheCpuFromScales) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const HostTensor x = rnd({2, 3, 7, 6}, 5, -2.0f, 2.0f);
  const std::vector<std::vector<double>> cases = {
      {1, 1, 2, 3}, {1, 1, 0.5, 0.75}, {1, 1, 1.7, 0.6000000238418579}, {1, 0.5, 1.5, 1}};
  for (const Config& c : all_configs()) {
    for (const std::vector<double>& scales : cases) {
      SCOPED_TRACE(fmt::format("{} {} {} exclude_outside {} scales [{}]", c.mode, c.ctm, c.nearest,
                               c.exclude_outside, fmt::join(scales, ", ")));
      OpAttrs a = attrs_of(c);
      a.set("scales", format_float_list(scales));
      ExpectAgreeIn(dtype(), r, "resize", a, {x}, out_shape(x.shape(), scales));
    }
  }
}

TEST_P(CudaResize, EveryModeMatchesTheCpuFromSizesInEveryRank) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  struct Case {
    Shape x;
    std::vector<int64_t> sizes;
    Shape out;
  };
  const std::vector<Case> cases = {
      {{9}, {14}, {14}},
      {{3, 8}, {-1, 5}, {3, 5}},
      {{2, 4, 11}, {2, 7, 3}, {2, 7, 3}},
      {{1, 2, 6, 7}, {1, 2, 1, 13}, {1, 2, 1, 13}},
      {{2, 2, 3, 4, 5}, {2, 2, 6, 2, 9}, {2, 2, 6, 2, 9}},
  };
  uint32_t seed = 40;
  for (const Config& c : all_configs()) {
    for (const Case& k : cases) {
      SCOPED_TRACE(fmt::format("{} {} {} exclude_outside {} x {} sizes [{}]", c.mode, c.ctm, c.nearest,
                               c.exclude_outside, k.x.to_string(), fmt::join(k.sizes, ", ")));
      OpAttrs a = attrs_of(c);
      a.set("sizes", k.sizes);
      ExpectAgreeIn(dtype(), r, "resize", a, {rnd(k.x, seed++, -2.0f, 2.0f)}, k.out);
    }
  }
}

TEST_P(CudaResize, CropAndResizeMatchesTheCpuInsideAndOutsideTheImage) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const HostTensor x = rnd({1, 2, 6, 5}, 8);
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    for (const char* roi : {"0,0,0.4,0.6,1,1,0.6,0.8", "0,0,-0.5,0.3,1,1,1.5,1.2", "0,0,0.2,0.1,1,1,0.9,0.7"}) {
      SCOPED_TRACE(fmt::format("{} roi {}", mode, roi));
      OpAttrs a;
      a.set("mode", std::string(mode));
      a.set("coordinate_transformation_mode", std::string("tf_crop_and_resize"));
      a.set("extrapolation_value", 10.0);
      a.set("roi", std::string(roi));
      a.set("sizes", std::vector<int64_t>{1, 2, 4, 7});
      ExpectAgreeIn(dtype(), r, "resize", a, {x}, {1, 2, 4, 7});
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaResize, ::testing::Values(DType::F32, DType::BF16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

// Nearest copies one element: in f32 the CUDA kernel's output must be the CPU's, bit for bit,
// which catches a coordinate that rounds the other way on the device.
TEST(CudaResizeNearest, PicksTheSameElementsAsTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const HostTensor x = rnd({1, 3, 10, 9}, 12);
  for (const Config& c : all_configs()) {
    if (c.mode != "nearest") continue;
    for (const std::vector<double>& scales :
         {std::vector<double>{1, 1, 1.3, 2.7}, std::vector<double>{1, 1, 0.3, 0.6000000238418579}}) {
      SCOPED_TRACE(fmt::format("{} {} scales [{}]", c.ctm, c.nearest, fmt::join(scales, ", ")));
      OpAttrs a = attrs_of(c);
      a.set("scales", format_float_list(scales));
      testing::Comparison cmp = r.compare("resize", a, {x}, DType::F32, out_shape(x.shape(), scales));
      ASSERT_TRUE(cmp.cpu.ok()) << cmp.cpu.to_string();
      ASSERT_TRUE(cmp.cuda.ok()) << cmp.cuda.to_string();
      EXPECT_TRUE(testing::same_bytes(cmp.cpu_out, cmp.cuda_out));
    }
  }
}

TEST(CudaResizeErrors, RefusesWhatTheCpuRefuses) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  Result<CudaKernelFn> fn = find_cuda_kernel("resize");
  ASSERT_TRUE(fn.ok()) << fn.status().to_string();
  const HostTensor x = rnd({1, 1, 2, 2}, 1);
  const std::vector<TensorView> in = {r.upload(x)};
  const std::vector<TensorView> out = {r.device_output(DType::F32, {1, 1, 4, 4})};
  OpAttrs none;
  EXPECT_TRUE(IsError((*fn)(r.ctx(), none, in, out), ErrorCode::InvalidArgument, {"resize", "sizes or scales"}));
  OpAttrs wrong;
  wrong.set("scales", std::string("1,1,1.5,1.5"));
  EXPECT_TRUE(IsError((*fn)(r.ctx(), wrong, in, out), ErrorCode::InvalidArgument, {"resize", "[1, 1, 3, 3]"}));
  const HostTensor i(DType::I32, {1, 1, 2, 2});
  const std::vector<TensorView> in_i = {r.upload(i)};
  OpAttrs ok;
  ok.set("scales", std::string("1,1,2,2"));
  EXPECT_TRUE(IsError((*fn)(r.ctx(), ok, in_i, out), ErrorCode::NotSupported, {"resize"}));
}

}  // namespace
}  // namespace planrt::kernels::cuda
