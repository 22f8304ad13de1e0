// The bf16 paths of the CUDA kernels against the CPU kernel in f32 on the same values: the
// inputs are rounded to bf16 once, the CPU computes in f32 on those rounded values, and the
// CUDA kernel's bf16 output (widened) must agree within kBf16Tolerance. That bound is what
// an output rounded to bf16 (relative step 2^-8) plus f32 accumulation leaves, with room;
// a wrong fragment layout or a missed rescale shows as errors of order 1. Mixed dtypes and
// the paths without a bf16 kernel are refused before anything runs.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <fmt/format.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_test_util.h"
#include "support/gpu.h"

namespace planrt::kernels::cuda {
namespace {

using testing::CudaRunner;
using testing::HostTensor;
using testing::IsError;

constexpr double kBf16Tolerance = 5e-3;

OpAttrs attrs_of(std::initializer_list<std::pair<const char*, AttrValue>> values) {
  OpAttrs a;
  for (const auto& [k, v] : values) a.set(k, v);
  return a;
}

HostTensor rnd(Shape s, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  return HostTensor::random(s, seed, lo, hi);
}

// f32 values -> the bf16 tensor holding them rounded (none stays none).
HostTensor to_bf16(const HostTensor& t) {
  if (t.is_none()) return t;
  HostTensor out(DType::BF16, t.shape());
  auto* dst = static_cast<uint16_t*>(out.data());
  for (int64_t i = 0; i < t.shape().numel(); ++i) dst[i] = f32_to_bf16_bits(t.f()[i]);
  return out;
}

HostTensor to_f32(const HostTensor& t) {
  if (t.is_none() || t.dtype() == DType::F32) return t;
  HostTensor out(DType::F32, t.shape());
  const auto* src = static_cast<const uint16_t*>(t.data());
  for (int64_t i = 0; i < t.shape().numel(); ++i) out.f()[i] = bf16_bits_to_f32(src[i]);
  return out;
}

// The f32 values the bf16 kernel sees.
HostTensor rounded(const HostTensor& t) { return to_f32(to_bf16(t)); }

struct Bf16Run {
  Status cuda;
  double error = 0.0;
};

// The CUDA kernel on the bf16 inputs against the CPU kernel on their f32 values.
Bf16Run run_bf16(CudaRunner& r, std::string_view op, const OpAttrs& attrs,
                 const std::vector<HostTensor>& inputs, const Shape& out_shape,
                 size_t offset_bytes = 0) {
  std::vector<HostTensor> reference_in;
  std::vector<TensorView> host_in;
  std::vector<TensorView> dev_in;
  for (const HostTensor& t : inputs) reference_in.push_back(rounded(t));
  for (const HostTensor& t : reference_in) host_in.push_back(t.view());
  for (const HostTensor& t : inputs) dev_in.push_back(r.upload(to_bf16(t), offset_bytes));
  HostTensor reference(DType::F32, out_shape);
  std::vector<TensorView> host_out{reference.view()};
  Result<KernelFn> cpu = find_cpu_kernel(op);
  EXPECT_TRUE(cpu.ok());
  Status cpu_status = (*cpu)(attrs, host_in, host_out);
  EXPECT_TRUE(cpu_status.ok()) << cpu_status.to_string();
  std::vector<TensorView> dev_out{r.device_output(DType::BF16, out_shape, offset_bytes)};
  Result<CudaKernelFn> kernel = find_cuda_kernel(op);
  EXPECT_TRUE(kernel.ok());
  Bf16Run run;
  run.cuda = (*kernel)(r.ctx(), attrs, dev_in, dev_out);
  if (run.cuda.ok()) run.cuda = r.synchronize();
  run.error = testing::relative_error(to_f32(r.download(dev_out[0])), reference);
  return run;
}

void ExpectBf16Agrees(CudaRunner& r, std::string_view op, const OpAttrs& attrs,
                      const std::vector<HostTensor>& inputs, const Shape& out_shape,
                      size_t offset_bytes = 0) {
  Bf16Run run = run_bf16(r, op, attrs, inputs, out_shape, offset_bytes);
  EXPECT_TRUE(run.cuda.ok()) << op << ": " << run.cuda.to_string();
  EXPECT_LT(run.error, kBf16Tolerance) << op << " output " << out_shape.to_string();
}

TEST(CudaBf16Kernels, ElementwiseMatchesTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  // 1001: the 8-wide vector loop and a tail; a 2-byte offset: the element-wise fallback.
  for (size_t offset : {size_t{0}, size_t{2}}) {
    SCOPED_TRACE(fmt::format("offset {}", offset));
    for (std::string_view op : {"add", "sub", "mul"}) {
      ExpectBf16Agrees(r, op, {}, {rnd({1001}, 1), rnd({1001}, 2)}, {1001}, offset);
    }
    ExpectBf16Agrees(r, "div", {}, {rnd({1001}, 3), rnd({1001}, 4, 0.5f, 2.0f)}, {1001}, offset);
    ExpectBf16Agrees(r, "gelu", {}, {rnd({3, 333}, 5, -6.0f, 6.0f)}, {3, 333}, offset);
    ExpectBf16Agrees(r, "gelu", attrs_of({{"approximate", std::string("tanh")}}),
                     {rnd({3, 333}, 6, -6.0f, 6.0f)}, {3, 333}, offset);
    ExpectBf16Agrees(r, "silu", {}, {rnd({999}, 7, -6.0f, 6.0f)}, {999}, offset);
  }
  ExpectBf16Agrees(r, "add", {}, {rnd({2, 3, 4}, 8), rnd({3, 1}, 9)}, {2, 3, 4});  // broadcast
}

TEST(CudaBf16Kernels, NormalizationsAndSoftmaxMatchTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  HostTensor x = rnd({3, 7, 1000}, 11, -3.0f, 3.0f);
  ExpectBf16Agrees(r, "layer_norm", {}, {x, rnd({1000}, 12), rnd({1000}, 13)}, x.shape());
  ExpectBf16Agrees(r, "layer_norm", {}, {x}, x.shape());
  ExpectBf16Agrees(r, "rms_norm", {}, {rnd({4, 4097}, 14), rnd({4097}, 15)}, {4, 4097});
  HostTensor s = rnd({3, 7, 300}, 16, -8.0f, 8.0f);
  ExpectBf16Agrees(r, "softmax", {}, {s}, s.shape());
  ExpectBf16Agrees(r, "softmax", attrs_of({{"dim", int64_t{1}}}), {s}, s.shape());
}

// The fused kernel's sum is rounded to bf16 before it is normalised, as add then layer_norm.
TEST(CudaBf16Kernels, AddLayerNormMatchesAddThenLayerNorm) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const Shape shape{3, 5, 512};
  HostTensor a = rnd(shape, 21, -3.0f, 3.0f);
  HostTensor b = rnd(shape, 22);
  HostTensor w = rnd({512}, 23);
  HostTensor bias = rnd({512}, 24);
  HostTensor sum(DType::F32, shape);  // the bf16 sum, widened
  {
    HostTensor ra = rounded(a);
    HostTensor rb = rounded(b);
    for (int64_t i = 0; i < shape.numel(); ++i) sum.f()[i] = ra.f()[i] + rb.f()[i];
    sum = rounded(sum);
  }
  HostTensor normed(DType::F32, shape);
  std::vector<HostTensor> norm_in{sum, rounded(w), rounded(bias)};
  std::vector<TensorView> host_in;
  for (const HostTensor& t : norm_in) host_in.push_back(t.view());
  std::vector<TensorView> host_out{normed.view()};
  ASSERT_TRUE((*find_cpu_kernel("layer_norm"))({}, host_in, host_out).ok());

  std::vector<TensorView> in{r.upload(to_bf16(a)), r.upload(to_bf16(b)), r.upload(to_bf16(w)),
                             r.upload(to_bf16(bias))};
  std::vector<TensorView> out{r.device_output(DType::BF16, shape),
                              r.device_output(DType::BF16, shape)};
  ASSERT_TRUE(add_layer_norm(r.ctx(), {}, in, out).ok());
  ASSERT_TRUE(r.synchronize().ok());
  EXPECT_EQ(testing::relative_error(to_f32(r.download(out[0])), sum), 0.0);
  EXPECT_LT(testing::relative_error(to_f32(r.download(out[1])), normed), kBf16Tolerance);
}

TEST(CudaBf16Kernels, LinearAndMatmulMatchTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  HostTensor x = rnd({2, 100, 512}, 31);
  HostTensor w = rnd({384, 512}, 32);
  HostTensor b = rnd({384}, 33);
  ExpectBf16Agrees(r, "linear", {}, {x, w, b}, {2, 100, 384});  // cuBLASLt, bias epilogue
  ExpectBf16Agrees(r, "linear", {}, {x, w}, {2, 100, 384});
  // Off 16-byte alignment: the bias goes in first and the GEMM accumulates onto it.
  ExpectBf16Agrees(r, "linear", {}, {rnd({33, 40}, 34), rnd({24, 40}, 35), rnd({24}, 36)},
                   {33, 24}, 2);
  struct Case {
    Shape a, b, out;
  };
  uint32_t seed = 41;
  for (const Case& c : {Case{{3, 4, 5}, {5, 6}, {3, 4, 6}},
                        Case{{2, 3, 4, 5}, {2, 3, 5, 6}, {2, 3, 4, 6}},
                        Case{{4, 5}, {2, 5, 3}, {2, 4, 3}},
                        Case{{2, 1, 4, 5}, {3, 5, 6}, {2, 3, 4, 6}}}) {
    SCOPED_TRACE(c.a.to_string() + " @ " + c.b.to_string());
    ExpectBf16Agrees(r, "matmul", {}, {rnd(c.a, seed++), rnd(c.b, seed++)}, c.out);
  }
}

// The tensor-core attention: row and key counts around its 64-row tiles, more keys than
// queries and fewer, causal and not, a scale, and operands off 16-byte alignment (its
// plain-load path).
TEST(CudaBf16Kernels, FusedAttentionMatchesTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  uint32_t seed = 51;
  for (const testing::AttentionCase& c : testing::kFusedAttentionCases) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(fmt::format("heads {} Sq {} Sk {} causal {}", c.heads, c.sq, c.sk, causal));
      HostTensor q = rnd({1, c.heads, c.sq, 64}, seed++, -2.0f, 2.0f);
      HostTensor k = rnd({1, c.heads, c.sk, 64}, seed++, -2.0f, 2.0f);
      HostTensor v = rnd({1, c.heads, c.sk, 64}, seed++);
      const Shape out{1, c.heads, c.sq, 64};
      ExpectBf16Agrees(r, "scaled_dot_product_attention", attrs_of({{"causal", causal}}),
                       {q, k, v}, out);
      ExpectBf16Agrees(r, "scaled_dot_product_attention",
                       attrs_of({{"causal", causal}, {"scale", 0.3}}), {q, k, v}, out, 2);
    }
  }
}

TEST(CudaBf16Kernels, MixedDtypesAndUnfusedAttentionAreRefused) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  Result<CudaKernelFn> add_fn = find_cuda_kernel("add");
  ASSERT_TRUE(add_fn.ok());
  std::vector<TensorView> mixed{r.upload(rnd({8}, 61)), r.upload(to_bf16(rnd({8}, 62)))};
  std::vector<TensorView> out{r.device_output(DType::F32, {8})};
  EXPECT_TRUE(IsError((*add_fn)(r.ctx(), {}, mixed, out), ErrorCode::NotSupported,
                      {"add", "bf16", "f32", "one dtype"}));
  std::vector<TensorView> ints{r.upload(HostTensor::ids(DType::I32, {8}, 63, 0, 4)),
                               r.upload(HostTensor::ids(DType::I32, {8}, 64, 0, 4))};
  std::vector<TensorView> int_out{r.device_output(DType::I32, {8})};
  EXPECT_TRUE(IsError((*add_fn)(r.ctx(), {}, ints, int_out), ErrorCode::NotSupported,
                      {"i32", "f32 and bf16"}));

  Bf16Run unfused =
      run_bf16(r, "scaled_dot_product_attention", attrs_of({{"fused", false}}),
               {rnd({1, 2, 8, 64}, 65), rnd({1, 2, 8, 64}, 66), rnd({1, 2, 8, 64}, 67)},
               {1, 2, 8, 64});
  EXPECT_TRUE(IsError(unfused.cuda, ErrorCode::NotSupported, {"bf16", "fused only"}));
  Bf16Run head32 = run_bf16(r, "scaled_dot_product_attention", {},
                            {rnd({1, 2, 8, 32}, 68), rnd({1, 2, 8, 32}, 69),
                             rnd({1, 2, 8, 32}, 70)},
                            {1, 2, 8, 32});
  EXPECT_TRUE(IsError(head32.cuda, ErrorCode::NotSupported, {"head dims 32 and 32"}));
}

}  // namespace
}  // namespace planrt::kernels::cuda
