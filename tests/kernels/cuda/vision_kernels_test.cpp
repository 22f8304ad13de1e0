// The convolutional networks' CUDA kernels against the CPU kernels, in f32, bf16 and f16
// (dtype_agreement.h): conv2d (cuDNN, depthwise planrt's own kernel) over strides, asymmetric pads (the padded copy
// in the workspace), dilations, groups and depthwise, bias and ReLU; the pools; both again
// channels-last (layout "nhwc") against the CPU's NCHW result, permuted; clip and the hard
// activations; pad and expand (bit-exact data movement); and conv2d's refusals.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/dtype_agreement.h"
#include "kernels/op_plans.h"
#include "kernels/workspace.h"
#include "support/gpu.h"

namespace planrt::kernels::cuda {
namespace {

using testing::attrs_of;
using testing::CudaRunner;
using testing::ExpectAgreeIn;
using testing::HostTensor;
using testing::IsError;
using testing::rnd;

struct ConvCase {
  Shape x;
  Shape w;
  std::vector<int64_t> strides, pads, dilations;
  int64_t groups;
  bool bias, relu;
};

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {{2, 3, 17, 15}, {8, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, false},
      {{1, 16, 14, 14}, {32, 16, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, false, true},
      {{3, 8, 12, 11}, {16, 8, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, true, true},
      {{2, 12, 10, 10}, {12, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 12, true, true},  // depthwise
      {{1, 12, 9, 13}, {24, 4, 3, 3}, {2, 1}, {1, 0, 2, 1}, {1, 1}, 3, true, false},  // asymmetric
      {{1, 4, 12, 12}, {6, 4, 3, 2}, {1, 2}, {2, 1, 2, 1}, {2, 3}, 1, false, false},  // dilations
      {{2, 3, 32, 32}, {16, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1, true, true},   // a stem
      {{2, 96, 28, 28}, {192, 96, 2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, true, false},  // patchify (convnext)
      {{2, 20, 15, 13}, {20, 1, 7, 7}, {1, 1}, {3, 3, 3, 3}, {1, 1}, 20, true, false},  // depthwise 7x7 (convnext)
      {{1, 9, 12, 12}, {9, 1, 5, 5}, {2, 2}, {1, 2, 2, 1}, {1, 1}, 9, false, true},     // depthwise 5x5, stride 2
  };
  return cases;
}

OpAttrs conv_attrs(const ConvCase& c) {
  OpAttrs a = attrs_of({{"strides", c.strides}, {"pads", c.pads}, {"dilations", c.dilations}, {"groups", c.groups}});
  if (c.relu) a.set("activation", std::string("relu"));
  return a;
}

// The channels-last cases, written in NCHW terms (x [N, C, H, W], w [K, C/groups, KH, KW]) and
// permuted: each feature on its own, batch 2, channel counts that are multiples of 8 (the
// tensor-core engines' NHWC vectors) and ones that are not.
const std::vector<ConvCase>& channels_last_conv_cases() {
  static const std::vector<ConvCase> cases = {
      {{2, 16, 12, 12}, {32, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, false},   // plain 3x3
      {{2, 8, 13, 11}, {16, 8, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, true, true},      // stride 2
      {{2, 8, 12, 12}, {8, 8, 3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1, false, true},      // dilation 2
      {{2, 16, 10, 10}, {32, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true, true},     // groups 2
      {{2, 24, 10, 9}, {24, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 24, true, true},     // depthwise
      {{2, 32, 7, 7}, {64, 32, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true, false},     // 1x1
      {{2, 12, 9, 13}, {24, 4, 3, 3}, {2, 1}, {1, 0, 2, 1}, {1, 1}, 3, true, false},     // asymmetric
      {{2, 16, 11, 10}, {16, 16, 3, 3}, {1, 1}, {0, 1, 1, 0}, {1, 1}, 1, false, false},  // asymmetric
      {{2, 3, 32, 32}, {16, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1, true, true},      // a stem, C = 3
      // Depthwise, planrt's kernel: the register strip (a window sliding by one column, at
      // most 7 wide; bf16 and f16 channel pairs when the count is even) and the one-per-output path.
      {{2, 20, 15, 13}, {20, 1, 7, 7}, {1, 1}, {3, 3, 3, 3}, {1, 1}, 20, true, false},   // 7x7 (convnext)
      {{2, 9, 11, 19}, {9, 1, 3, 3}, {1, 1}, {0, 1, 2, 1}, {1, 1}, 9, false, true},      // odd channels
      {{2, 6, 10, 4}, {6, 1, 1, 5}, {2, 1}, {0, 2, 0, 2}, {1, 1}, 6, true, false},       // 1x5, stride (2, 1)
      {{2, 16, 12, 12}, {16, 1, 5, 5}, {2, 2}, {2, 2, 2, 2}, {1, 1}, 16, true, true},    // 5x5 stride 2
      {{2, 8, 12, 12}, {8, 1, 3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 8, true, false},      // dilation 2
  };
  return cases;
}

// NCHW -> NHWC (and a weight's [K, C/groups, KH, KW] -> [K, KH, KW, C/groups]), and back.
constexpr std::array<int, 4> kToChannelsLast = {0, 2, 3, 1};
constexpr std::array<int, 4> kToChannelsFirst = {0, 3, 1, 2};

// The f32 tensor t of rank 4 with its dims reordered: dim d of the result is dim order[d] of t.
HostTensor permuted(const HostTensor& t, const std::array<int, 4>& order) {
  const Shape& in = t.shape();
  const std::array<int64_t, 4> in_strides = {in[1] * in[2] * in[3], in[2] * in[3], in[3], 1};
  HostTensor out(DType::F32, Shape{in[order[0]], in[order[1]], in[order[2]], in[order[3]]});
  const Shape& o = out.shape();
  float* dst = out.f();
  for (int64_t a = 0; a < o[0]; ++a) {
    for (int64_t b = 0; b < o[1]; ++b) {
      for (int64_t c = 0; c < o[2]; ++c) {
        for (int64_t d = 0; d < o[3]; ++d) {
          *dst++ = t.f()[a * in_strides[order[0]] + b * in_strides[order[1]] + c * in_strides[order[2]] +
                         d * in_strides[order[3]]];
        }
      }
    }
  }
  return out;
}

OpAttrs with_channels_last(OpAttrs a) {
  a.set("layout", std::string("nhwc"));
  return a;
}

class CudaVisionKernels : public ::testing::TestWithParam<DType> {
 protected:
  DType dtype() const { return GetParam(); }
};

TEST_P(CudaVisionKernels, ConvolutionMatchesTheCpuInEveryCase) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  ASSERT_TRUE(r.enable_cudnn());
  uint32_t seed = 3;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(fmt::format("x {} w {} groups {}", c.x.to_string(), c.w.to_string(), c.groups));
    // The f32 values each side computes on (bf16, f16: rounded once).
    HostTensor x = testing::rounded_to(rnd(c.x, seed++), dtype());
    HostTensor w = testing::rounded_to(rnd(c.w, seed++), dtype());
    HostTensor b = testing::rounded_to(rnd({c.w[0]}, seed++), dtype());
    const OpAttrs attrs = conv_attrs(c);
    std::vector<TensorView> host_in = {x.view(), w.view()};
    if (c.bias) host_in.push_back(b.view());
    Conv2dPlan plan;
    {
      // The output shape from the plan of a call without outputs checked: run it on a
      // probe output of the right rank and read the sizes it wanted.
      const int64_t oh = *window_output_size(c.x[2], c.w[2], c.strides[0], c.pads[0], c.pads[2], c.dilations[0], false);
      const int64_t ow = *window_output_size(c.x[3], c.w[3], c.strides[1], c.pads[1], c.pads[3], c.dilations[1], false);
      HostTensor probe(DType::F32, {c.x[0], c.w[0], oh, ow});
      const TensorView outs[] = {probe.view()};
      Result<Conv2dPlan> p = plan_conv2d(attrs, host_in, outs);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      plan = *p;
    }
    const Shape out{plan.n, plan.k, plan.oh, plan.ow};
    Conv2dPlan one = plan;
    one.n = 1;
    HostTensor cpu_y(DType::F32, out);
    HostTensor cpu_ws(DType::F32, {plan.n, static_cast<int64_t>((*conv2d_host_workspace_bytes_per_image(one) + 3) / 4)});
    Result<KernelFn> cpu = find_cpu_kernel("conv2d");
    ASSERT_TRUE(cpu.ok());
    ASSERT_TRUE((*cpu)(attrs, host_in, std::vector<TensorView>{cpu_y.view(), cpu_ws.view()}).ok());
    const CudaConvWorkspace per_image = conv2d_cuda_workspace_per_image(one, dtype());
    std::vector<TensorView> dev_in;
    for (const TensorView& v : host_in) {
      HostTensor t(DType::F32, v.sizes);
      std::memcpy(t.f(), v.data, v.nbytes());
      dev_in.push_back(r.upload(testing::in_dtype(t, dtype())));
    }
    const int64_t ws_floats = static_cast<int64_t>((per_image.padded_copy_bytes + per_image.algorithm_bytes) / 4) * plan.n;
    const TensorView dev_out[] = {r.device_output(dtype(), out), r.device_output(DType::F32, {ws_floats})};
    Status s = conv2d(r.ctx(), attrs, dev_in, dev_out);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_TRUE(r.synchronize().ok());
    HostTensor got = testing::widened(r.download(dev_out[0]));
    EXPECT_LT(testing::relative_error(got, cpu_y), testing::tolerance_of(dtype()));
  }
}

TEST_P(CudaVisionKernels, PoolsClampsAndHardActivationsMatchTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  HostTensor x = rnd({2, 3, 11, 10}, 21, -4.0f, 4.0f);
  const OpAttrs max3 = attrs_of({{"kernel", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                                 {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  ExpectAgreeIn(dtype(), r, "max_pool2d", max3, {x}, {2, 3, 6, 5});
  const OpAttrs dil = attrs_of({{"kernel", std::vector<int64_t>{2, 2}}, {"dilations", std::vector<int64_t>{2, 3}}});
  ExpectAgreeIn(dtype(), r, "max_pool2d", dil, {x}, {2, 3, 9, 7});
  for (bool include : {false, true}) {
    const OpAttrs avg = attrs_of({{"kernel", std::vector<int64_t>{3, 2}}, {"strides", std::vector<int64_t>{2, 2}},
                                  {"pads", std::vector<int64_t>{1, 0, 1, 1}}, {"ceil_mode", true},
                                  {"count_include_pad", include}});
    ExpectAgreeIn(dtype(), r, "avg_pool2d", avg, {x}, {2, 3, 6, 5});
  }
  ExpectAgreeIn(dtype(), r, "clip", attrs_of({{"min", 0.0}, {"max", 6.0}}), {x}, x.shape());
  ExpectAgreeIn(dtype(), r, "clip", attrs_of({{"max", 1.5}}), {x}, x.shape());
  ExpectAgreeIn(dtype(), r, "hard_sigmoid", attrs_of({{"alpha", 1.0 / 6}, {"beta", 0.5}}), {x}, x.shape());
  ExpectAgreeIn(dtype(), r, "hard_swish", {}, {x}, x.shape());
}

TEST_P(CudaVisionKernels, ChannelsLastConvolutionMatchesTheCpuNchwResult) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  ASSERT_TRUE(r.enable_cudnn());
  Result<KernelFn> cpu = find_cpu_kernel("conv2d");
  ASSERT_TRUE(cpu.ok());
  uint32_t seed = 41;
  for (const ConvCase& c : channels_last_conv_cases()) {
    SCOPED_TRACE(fmt::format("NCHW x {} w {} strides {} pads {} dilations {} groups {} bias {} relu {}",
                             c.x.to_string(), c.w.to_string(), fmt::join(c.strides, ","), fmt::join(c.pads, ","),
                             fmt::join(c.dilations, ","), c.groups, c.bias, c.relu));
    // The f32 values each side computes on (bf16, f16: rounded once), NCHW.
    HostTensor x = testing::rounded_to(rnd(c.x, seed++), dtype());
    HostTensor w = testing::rounded_to(rnd(c.w, seed++), dtype());
    HostTensor b = testing::rounded_to(rnd({c.w[0]}, seed++), dtype());
    const OpAttrs attrs = conv_attrs(c);
    const int64_t oh = *window_output_size(c.x[2], c.w[2], c.strides[0], c.pads[0], c.pads[2], c.dilations[0], false);
    const int64_t ow = *window_output_size(c.x[3], c.w[3], c.strides[1], c.pads[1], c.pads[3], c.dilations[1], false);

    // The reference: the CPU kernel in NCHW.
    std::vector<TensorView> host_in = {x.view(), w.view()};
    if (c.bias) host_in.push_back(b.view());
    HostTensor cpu_y(DType::F32, {c.x[0], c.w[0], oh, ow});
    Result<Conv2dPlan> cpu_plan = plan_conv2d(attrs, host_in, std::vector<TensorView>{cpu_y.view()});
    ASSERT_TRUE(cpu_plan.ok()) << cpu_plan.status().to_string();
    Conv2dPlan cpu_one = *cpu_plan;
    cpu_one.n = 1;
    HostTensor cpu_ws(DType::F32,
                      {cpu_plan->n, static_cast<int64_t>((*conv2d_host_workspace_bytes_per_image(cpu_one) + 3) / 4)});
    Status cpu_status = (*cpu)(attrs, host_in, std::vector<TensorView>{cpu_y.view(), cpu_ws.view()});
    ASSERT_TRUE(cpu_status.ok()) << cpu_status.to_string();

    // The CUDA kernel channels-last: x [N, H, W, C], weight [K, KH, KW, C/groups].
    const OpAttrs attrs_cl = with_channels_last(attrs);
    HostTensor x_cl = permuted(x, kToChannelsLast), w_cl = permuted(w, kToChannelsLast);
    const Shape out_cl{c.x[0], oh, ow, c.w[0]};
    std::vector<TensorView> host_in_cl = {x_cl.view(), w_cl.view()};
    if (c.bias) host_in_cl.push_back(b.view());
    HostTensor probe(DType::F32, out_cl);
    Result<Conv2dPlan> plan = plan_conv2d(attrs_cl, host_in_cl, std::vector<TensorView>{probe.view()});
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    ASSERT_TRUE(plan->channels_last);
    Conv2dPlan one = *plan;
    one.n = 1;
    const CudaConvWorkspace per_image = conv2d_cuda_workspace_per_image(one, dtype());
    std::vector<TensorView> dev_in = {r.upload(testing::in_dtype(x_cl, dtype())),
                                      r.upload(testing::in_dtype(w_cl, dtype()))};
    if (c.bias) dev_in.push_back(r.upload(testing::in_dtype(b, dtype())));
    const int64_t ws_floats = static_cast<int64_t>((per_image.padded_copy_bytes + per_image.algorithm_bytes) / 4) * plan->n;
    const TensorView dev_out[] = {r.device_output(dtype(), out_cl), r.device_output(DType::F32, {ws_floats})};
    // EXPECT, not ASSERT: a shape cuDNN has no engine for in this layout should not hide the
    // cases after it.
    Status s = conv2d(r.ctx(), attrs_cl, dev_in, dev_out);
    EXPECT_TRUE(s.ok()) << s.to_string();
    if (!s.ok()) continue;
    ASSERT_TRUE(r.synchronize().ok());
    HostTensor got = permuted(testing::widened(r.download(dev_out[0])), kToChannelsFirst);
    EXPECT_LT(testing::relative_error(got, cpu_y), testing::tolerance_of(dtype()));
  }
}

// A channels-last depthwise convolution runs planrt's own kernel: no workspace planned, no
// cuDNN handle needed. An NCHW one stays on cuDNN (its workspace planned as for any other).
TEST_P(CudaVisionKernels, DepthwiseConvolutionNeedsNeitherWorkspaceNorCudnn) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;  // cuDNN not enabled
  const ConvCase c{{2, 24, 14, 14}, {24, 1, 7, 7}, {1, 1}, {3, 3, 3, 3}, {1, 1}, 24, true, false};
  HostTensor x = testing::rounded_to(rnd(c.x, 5), dtype());
  HostTensor w = testing::rounded_to(rnd(c.w, 6), dtype());
  HostTensor b = testing::rounded_to(rnd({c.w[0]}, 7), dtype());
  const OpAttrs attrs = conv_attrs(c);
  const std::vector<TensorView> host_in = {x.view(), w.view(), b.view()};
  HostTensor cpu_y(DType::F32, c.x);
  Result<Conv2dPlan> plan = plan_conv2d(attrs, host_in, std::vector<TensorView>{cpu_y.view()});
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_FALSE(conv2d_cuda_is_depthwise(*plan));  // NCHW
  Conv2dPlan one = *plan;
  one.n = 1;
  EXPECT_GT(conv2d_cuda_workspace_per_image(one, dtype()).algorithm_bytes, 0u);
  one.channels_last = true;
  ASSERT_TRUE(conv2d_cuda_is_depthwise(one));
  const CudaConvWorkspace ws = conv2d_cuda_workspace_per_image(one, dtype());
  EXPECT_EQ(ws.padded_copy_bytes + ws.algorithm_bytes, 0u);
  HostTensor cpu_ws(DType::F32, {plan->n, static_cast<int64_t>((*conv2d_host_workspace_bytes_per_image(one) + 3) / 4)});
  Result<KernelFn> cpu = find_cpu_kernel("conv2d");
  ASSERT_TRUE(cpu.ok());
  ASSERT_TRUE((*cpu)(attrs, host_in, std::vector<TensorView>{cpu_y.view(), cpu_ws.view()}).ok());
  const std::vector<TensorView> dev_in = {r.upload(testing::in_dtype(permuted(x, kToChannelsLast), dtype())),
                                          r.upload(testing::in_dtype(permuted(w, kToChannelsLast), dtype())),
                                          r.upload(testing::in_dtype(b, dtype()))};
  const TensorView dev_out[] = {r.device_output(dtype(), Shape{c.x[0], c.x[2], c.x[3], c.x[1]})};
  Status s = conv2d(r.ctx(), with_channels_last(attrs), dev_in, dev_out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_TRUE(r.synchronize().ok());
  HostTensor got = permuted(testing::widened(r.download(dev_out[0])), kToChannelsFirst);
  EXPECT_LT(testing::relative_error(got, cpu_y), testing::tolerance_of(dtype()));
}

TEST_P(CudaVisionKernels, ChannelsLastPoolsMatchTheCpuNchwResultAndTheCudaNchwBits) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  struct PoolCase {
    std::string op;
    std::vector<int64_t> kernel, strides, pads, dilations;
    bool ceil_mode, count_include_pad;
  };
  const std::vector<PoolCase> cases = {
      {"max_pool2d", {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false},
      {"max_pool2d", {2, 2}, {1, 1}, {0, 0, 0, 0}, {2, 3}, false, false},
      {"max_pool2d", {3, 2}, {2, 2}, {1, 0, 0, 1}, {1, 1}, true, false},
      {"avg_pool2d", {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, false},
      {"avg_pool2d", {3, 2}, {2, 2}, {1, 0, 1, 1}, {1, 1}, true, false},
      {"avg_pool2d", {3, 2}, {2, 2}, {1, 0, 1, 1}, {1, 1}, true, true},
      {"avg_pool2d", {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true, true},  // the last window runs past the image
  };
  // Five channels: no vector width divides them.
  const HostTensor x = testing::rounded_to(rnd({2, 5, 11, 10}, 23, -4.0f, 4.0f), dtype());
  const HostTensor x_cl = permuted(x, kToChannelsLast);
  const TensorView dev_x = r.upload(testing::in_dtype(x, dtype()));
  const TensorView dev_x_cl = r.upload(testing::in_dtype(x_cl, dtype()));
  for (const PoolCase& c : cases) {
    SCOPED_TRACE(fmt::format("{} kernel {} strides {} pads {} dilations {} ceil_mode {} count_include_pad {}", c.op,
                             fmt::join(c.kernel, ","), fmt::join(c.strides, ","), fmt::join(c.pads, ","),
                             fmt::join(c.dilations, ","), c.ceil_mode, c.count_include_pad));
    OpAttrs attrs = attrs_of({{"kernel", c.kernel}, {"strides", c.strides}, {"pads", c.pads}, {"ceil_mode", c.ceil_mode}});
    if (c.op == "max_pool2d") {
      attrs.set("dilations", c.dilations);
    } else {
      attrs.set("count_include_pad", c.count_include_pad);
    }
    const int64_t oh =
        *window_output_size(x.shape()[2], c.kernel[0], c.strides[0], c.pads[0], c.pads[2], c.dilations[0], c.ceil_mode);
    const int64_t ow =
        *window_output_size(x.shape()[3], c.kernel[1], c.strides[1], c.pads[1], c.pads[3], c.dilations[1], c.ceil_mode);
    const Shape out{x.shape()[0], x.shape()[1], oh, ow};
    const Shape out_cl{out[0], oh, ow, out[1]};

    HostTensor cpu_y(DType::F32, out);
    Result<KernelFn> cpu = find_cpu_kernel(c.op);
    ASSERT_TRUE(cpu.ok());
    Status cpu_status = (*cpu)(attrs, std::vector<TensorView>{x.view()}, std::vector<TensorView>{cpu_y.view()});
    ASSERT_TRUE(cpu_status.ok()) << cpu_status.to_string();

    Result<CudaKernelFn> kernel = find_cuda_kernel(c.op);
    ASSERT_TRUE(kernel.ok());
    const TensorView y = r.device_output(dtype(), out), y_cl = r.device_output(dtype(), out_cl);
    Status s = (*kernel)(r.ctx(), attrs, std::vector<TensorView>{dev_x}, std::vector<TensorView>{y});
    ASSERT_TRUE(s.ok()) << s.to_string();
    s = (*kernel)(r.ctx(), with_channels_last(attrs), std::vector<TensorView>{dev_x_cl}, std::vector<TensorView>{y_cl});
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_TRUE(r.synchronize().ok());
    HostTensor got = permuted(testing::widened(r.download(y_cl)), kToChannelsFirst);
    EXPECT_LT(testing::relative_error(got, cpu_y), testing::tolerance_of(dtype()));
    // Each window is added in the same order in both layouts (vision_kernels.cu: pool_window).
    EXPECT_TRUE(testing::same_bytes(got, testing::widened(r.download(y))));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaVisionKernels, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

TEST(CudaDataMovement, PadAndExpandAreBitExact) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  HostTensor x = rnd({2, 3, 4}, 5);
  for (std::string mode : {"constant", "edge", "reflect"}) {
    SCOPED_TRACE(mode);
    const OpAttrs a = attrs_of({{"pads", std::vector<int64_t>{1, 0, 5, 0, 2, -1}}, {"mode", mode}, {"value", 2.5}});
    testing::Comparison c = r.compare("pad", a, {x}, DType::F32, {3, 5, 8});
    ASSERT_TRUE(c.cpu.ok()) << c.cpu.to_string();
    ASSERT_TRUE(c.cuda.ok()) << c.cuda.to_string();
    EXPECT_EQ(c.error, 0.0);
  }
  HostTensor row = rnd({1, 3, 1}, 6);
  testing::Comparison c = r.compare("expand", {}, {row}, DType::F32, {2, 2, 3, 5});
  ASSERT_TRUE(c.cuda.ok()) << c.cuda.to_string();
  EXPECT_EQ(c.error, 0.0);
}

TEST(CudaConvolution, EachShapeIsPlannedOnceOnItsHandle) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  ASSERT_TRUE(r.enable_cudnn());
  const ConvCase& c = conv_cases()[2];
  HostTensor x = rnd(c.x, 1), w = rnd(c.w, 2), b = rnd({c.w[0]}, 3);
  std::vector<TensorView> in = {r.upload(x), r.upload(w), r.upload(b)};
  const OpAttrs a = conv_attrs(c);
  const Shape y_shape{3, 16, 6, 6};
  const TensorView out[] = {r.device_output(DType::F32, y_shape), r.device_output(DType::F32, {3 * 16384})};
  EXPECT_EQ(r.ctx().cudnn->conv_plans().size(), 0u);
  std::vector<HostTensor> results;
  for (int call = 0; call < 3; ++call) {
    Status s = conv2d(r.ctx(), a, in, out);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_TRUE(r.synchronize().ok());
    results.push_back(r.download(out[0]));
  }
  // One plan, executed three times, to the same bits.
  EXPECT_EQ(r.ctx().cudnn->conv_plans().size(), 1u);
  for (const HostTensor& t : results) EXPECT_EQ(std::memcmp(t.f(), results[0].f(), results[0].nbytes()), 0);
  // Another batch is another shape: a second plan.
  HostTensor x1 = rnd({1, c.x[1], c.x[2], c.x[3]}, 4);
  std::vector<TensorView> in1 = {r.upload(x1), in[1], in[2]};
  const TensorView out1[] = {r.device_output(DType::F32, {1, 16, 6, 6}), out[1]};
  Status s = conv2d(r.ctx(), a, in1, out1);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(r.ctx().cudnn->conv_plans().size(), 2u);
}

TEST(CudaConvolution, ChannelsLastIsPlannedApartFromNchwAndAgreesWithIt) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  ASSERT_TRUE(r.enable_cudnn());
  const ConvCase& c = conv_cases()[2];  // [3, 8, 12, 11] by [16, 8, 3, 3], stride 2, bias and ReLU
  HostTensor x = rnd(c.x, 1), w = rnd(c.w, 2), b = rnd({c.w[0]}, 3);
  const OpAttrs a = conv_attrs(c);
  const TensorView workspace = r.device_output(DType::F32, {3 * 16384});
  const TensorView y = r.device_output(DType::F32, {3, 16, 6, 6});
  Status s = conv2d(r.ctx(), a, std::vector<TensorView>{r.upload(x), r.upload(w), r.upload(b)},
                    std::vector<TensorView>{y, workspace});
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(r.ctx().cudnn->conv_plans().size(), 1u);
  // The same shape channels-last: a plan of its own, not the NCHW one reading NHWC memory.
  const TensorView y_cl = r.device_output(DType::F32, {3, 6, 6, 16});
  s = conv2d(r.ctx(), with_channels_last(a),
             std::vector<TensorView>{r.upload(permuted(x, kToChannelsLast)), r.upload(permuted(w, kToChannelsLast)),
                                     r.upload(b)},
             std::vector<TensorView>{y_cl, workspace});
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(r.ctx().cudnn->conv_plans().size(), 2u);
  ASSERT_TRUE(r.synchronize().ok());
  // Two engines, so not bit for bit: within f32's tolerance (TF32 off).
  EXPECT_LT(testing::relative_error(permuted(r.download(y_cl), kToChannelsFirst), r.download(y)), testing::kTolerance);
}

TEST(CudaConvolution, RefusesAMissingHandleAndAShortWorkspace) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const ConvCase& c = conv_cases()[4];  // asymmetric pads: the padded copy needs room
  HostTensor x = rnd(c.x, 1), w = rnd(c.w, 2);
  std::vector<TensorView> in = {r.upload(x), r.upload(w)};
  const TensorView out1[] = {r.device_output(DType::F32, {1, 24, 5, 12})};
  OpAttrs a = conv_attrs(c);
  a = attrs_of({{"strides", c.strides}, {"pads", c.pads}, {"groups", c.groups}});
  EXPECT_TRUE(IsError(conv2d(r.ctx(), a, in, out1), ErrorCode::InvalidArgument, {"cuDNN handle"}));
  ASSERT_TRUE(r.enable_cudnn());
  EXPECT_TRUE(IsError(conv2d(r.ctx(), a, in, out1), ErrorCode::InvalidArgument, {"padded copy"}));
  // A clamp fused into the convolution is the host's (the builder fuses it only there).
  a = attrs_of({{"strides", c.strides}, {"pads", c.pads}, {"groups", c.groups}});
  a.set("activation", std::string("hard_swish"));
  EXPECT_TRUE(IsError(conv2d(r.ctx(), a, in, out1), ErrorCode::NotSupported, {"hard_swish", "host only"}));
}

}  // namespace
}  // namespace planrt::kernels::cuda
