// scaled_dot_product_attention's optional mask (input 3, kernels/attention_layout.h) on the
// CUDA paths, against the CPU kernel (the reference): bool masks (true: attend) of every shape
// that broadcasts to the scores, additive masks with -inf and finite values, masks with the
// causal mask, a batch whose keys are all masked (zeros, never NaN), in each layout (bhsd,
// bshd with attribute heads, a packed q|k|v projection, sbhd), on the fused kernels (head dim
// 64, f32, bf16 and f16) and the unfused f32 path (head dim 32, or attribute fused = false), with
// key counts off the kernels' 64-key tiles and operands off 16-byte alignment. bf16 and f16:
// the CPU computes in f32 on the rounded operands and additive mask; a bool mask is the same
// bytes on both sides. With a cuDNN handle, a mask keeps cuDNN out (planrt's kernel runs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
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
using testing::rnd;

constexpr std::string_view kOp = "scaled_dot_product_attention";
constexpr float kInf = std::numeric_limits<float>::infinity();

// Bool mask of `shape`, each element true with probability `p`.
HostTensor random_bool(const Shape& shape, uint32_t seed, double p = 0.7) {
  HostTensor t(DType::Bool, shape);
  std::mt19937 gen(seed);
  std::bernoulli_distribution keep(p);
  auto* bytes = static_cast<uint8_t*>(t.data());
  for (int64_t i = 0; i < shape.numel(); ++i) bytes[i] = keep(gen) ? 1 : 0;
  return t;
}

// Key padding [B, 1, 1, Sk]: batch b attends to keys [0, lengths[b]) (0: none at all).
HostTensor key_padding(const std::vector<int64_t>& lengths, int64_t sk) {
  const int64_t b = static_cast<int64_t>(lengths.size());
  HostTensor t(DType::Bool, {b, 1, 1, sk});
  auto* bytes = static_cast<uint8_t*>(t.data());
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t j = 0; j < sk; ++j) bytes[i * sk + j] = j < lengths[i] ? 1 : 0;
  }
  return t;
}

// Additive f32 mask of `shape`: finite values in [-3, 1), about a fifth of them -inf; the
// first row of keys all -inf and the second all -3e38 (transformers' "min of the dtype":
// finite, so that row averages the values rather than giving zeros) when `extreme_rows`;
// for an f16 mask -65504 (f16's min: -3e38 would round to -inf there).
HostTensor random_additive(const Shape& shape, uint32_t seed, bool extreme_rows = true,
                           DType dtype = DType::F32) {
  const float lowest = dtype == DType::F16 ? -65504.0f : -3.0e38f;
  HostTensor t = rnd(shape, seed, -3.0f, 1.0f);
  std::mt19937 gen(seed + 7919);
  std::bernoulli_distribution drop(0.2);
  const int64_t sk = shape[shape.rank() - 1];
  for (int64_t i = 0; i < shape.numel(); ++i) {
    if (drop(gen)) t.f()[i] = -kInf;
  }
  if (extreme_rows && shape.numel() >= 2 * sk) {
    for (int64_t j = 0; j < sk; ++j) {
      t.f()[j] = -kInf;
      t.f()[sk + j] = lowest;
    }
  }
  return t;
}

// What each side sees: f32 operands and additive masks in `dtype` (CUDA) and rounded to it
// (CPU); bool masks and absent inputs as they are.
HostTensor device_operand(const HostTensor& t, DType dtype) {
  return t.is_none() || t.dtype() == DType::Bool ? t : testing::in_dtype(t, dtype);
}
HostTensor reference_operand(const HostTensor& t, DType dtype) {
  return t.is_none() || t.dtype() == DType::Bool ? t : testing::rounded_to(t, dtype);
}

struct MaskedRun {
  Status cuda;
  double error = 0.0;
  HostTensor out;  // the CUDA kernel's output, widened to f32
};

MaskedRun run_masked(DType dtype, CudaRunner& r, const OpAttrs& attrs, const std::vector<HostTensor>& inputs,
                     const Shape& out_shape, size_t offset_bytes) {
  std::vector<HostTensor> reference_in;
  std::vector<TensorView> host_in;
  std::vector<TensorView> dev_in;
  for (const HostTensor& t : inputs) reference_in.push_back(reference_operand(t, dtype));
  for (const HostTensor& t : reference_in) host_in.push_back(t.view());
  for (const HostTensor& t : inputs) dev_in.push_back(r.upload(device_operand(t, dtype), offset_bytes));
  HostTensor reference(DType::F32, out_shape);
  std::vector<TensorView> host_out{reference.view()};
  Result<KernelFn> cpu = find_cpu_kernel(kOp);
  EXPECT_TRUE(cpu.ok());
  Status cpu_status = (*cpu)(attrs, host_in, host_out);
  EXPECT_TRUE(cpu_status.ok()) << "CPU: " << cpu_status.to_string();
  std::vector<TensorView> dev_out{r.device_output(dtype, out_shape, offset_bytes)};
  Result<CudaKernelFn> kernel = find_cuda_kernel(kOp);
  EXPECT_TRUE(kernel.ok());
  MaskedRun run;
  run.cuda = (*kernel)(r.ctx(), attrs, dev_in, dev_out);
  if (run.cuda.ok()) run.cuda = r.synchronize();
  run.out = testing::widened(r.download(dev_out[0]));
  run.error = testing::relative_error(run.out, reference);  // +inf on any NaN
  return run;
}

// EXPECT that the CUDA kernel succeeds and agrees with the CPU within tolerance_of(dtype);
// returns its output.
HostTensor ExpectMaskedAgree(DType dtype, CudaRunner& r, const OpAttrs& attrs, const std::vector<HostTensor>& inputs,
                             const Shape& out_shape, size_t offset_bytes = 0) {
  MaskedRun run = run_masked(dtype, r, attrs, inputs, out_shape, offset_bytes);
  EXPECT_TRUE(run.cuda.ok()) << "CUDA (" << dtype_name(dtype) << "): " << run.cuda.to_string();
  EXPECT_LT(run.error, testing::tolerance_of(dtype)) << "output " << out_shape.to_string() << " in "
                                                     << dtype_name(dtype);
  return run.out;
}

// The paths to try in `dtype`: head dim 64 fused; in f32 also head dim 32 (unfused) and head
// dim 64 with fused = false.
struct Path {
  int64_t d;
  bool fused;
  std::string name;
};
std::vector<Path> paths_in(DType dtype) {
  std::vector<Path> paths = {{64, true, "fused"}};
  if (dtype == DType::F32) {
    paths.push_back({32, true, "unfused d32"});
    paths.push_back({64, false, "unfused fused=false"});
  }
  return paths;
}

OpAttrs with(const Path& p, std::initializer_list<std::pair<const char*, AttrValue>> more = {}) {
  OpAttrs a = attrs_of(more);
  if (!p.fused) a.set("fused", false);
  return a;
}

class CudaAttentionMask : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    PLANRT_REQUIRE_GPU_OR_SKIP();
    runner_.emplace();
  }
  DType dtype() const { return GetParam(); }
  size_t off_alignment() const { return element_size(GetParam()); }
  HostTensor Agree(const OpAttrs& attrs, const std::vector<HostTensor>& inputs, const Shape& out,
                   size_t offset = 0) {
    return ExpectMaskedAgree(dtype(), *runner_, attrs, inputs, out, offset);
  }
  std::optional<CudaRunner> runner_;
};

// Key padding [B, 1, 1, Sk]: each batch its own length, one of them with no key at all
// (zeros), keys off the 64-key tiles; causal and not; off alignment on the fused kernels.
TEST_P(CudaAttentionMask, KeyPaddingMaskAgreesWithTheCpu) {
  uint32_t seed = 9001;
  struct Sizes {
    int64_t h, sq, sk;
  };
  for (const Sizes& z : {Sizes{2, 65, 130}, Sizes{3, 1, 1}, Sizes{2, 130, 65}, Sizes{1, 200, 333}}) {
    for (const Path& p : paths_in(dtype())) {
      for (bool causal : {false, true}) {
        SCOPED_TRACE(fmt::format("{} H {} Sq {} Sk {} causal {}", p.name, z.h, z.sq, z.sk, causal));
        const std::vector<int64_t> lengths = {z.sk, (z.sk + 1) / 2, 0, std::min<int64_t>(z.sk, 3)};
        const int64_t b = static_cast<int64_t>(lengths.size());
        const Shape out{b, z.h, z.sq, p.d};
        HostTensor q = rnd({b, z.h, z.sq, p.d}, seed++, -2.0f, 2.0f);
        HostTensor k = rnd({b, z.h, z.sk, p.d}, seed++, -2.0f, 2.0f);
        HostTensor v = rnd({b, z.h, z.sk, p.d}, seed++);
        const OpAttrs attrs = with(p, {{"causal", causal}});
        HostTensor got = Agree(attrs, {q, k, v, key_padding(lengths, z.sk)}, out);
        // Batch 2 attends to nothing: exact zeros.
        const int64_t per_batch = z.h * z.sq * p.d;
        if (got.shape() == out) {
          for (int64_t i = 2 * per_batch; i < 3 * per_batch; ++i) {
            ASSERT_EQ(got.f()[i], 0.0f) << "element " << i << " of the fully masked batch";
          }
        }
        if (p.fused && z.sq < 256) Agree(attrs, {q, k, v, key_padding(lengths, z.sk)}, out, off_alignment());
      }
    }
  }
}

// Every mask shape that broadcasts to the scores [B, H, Sq, Sk]: [B, 1, Sq, Sk],
// [1, 1, Sq, Sk], [Sq, Sk], [B, H, Sq, Sk], [B, H, 1, Sk], [H, Sq, Sk] (rank 3: one of H).
TEST_P(CudaAttentionMask, EachMaskShapeAgreesWithTheCpu) {
  uint32_t seed = 9101;
  const int64_t b = 2, h = 3, sq = 70, sk = 97;
  for (const Path& p : paths_in(dtype())) {
    for (const Shape& ms : {Shape{b, 1, sq, sk}, Shape{1, 1, sq, sk}, Shape{sq, sk}, Shape{b, h, sq, sk},
                            Shape{b, h, 1, sk}, Shape{h, sq, sk}}) {
      for (bool causal : {false, true}) {
        SCOPED_TRACE(fmt::format("{} mask {} causal {}", p.name, ms.to_string(), causal));
        HostTensor q = rnd({b, h, sq, p.d}, seed++, -2.0f, 2.0f);
        HostTensor k = rnd({b, h, sk, p.d}, seed++, -2.0f, 2.0f);
        HostTensor v = rnd({b, h, sk, p.d}, seed++);
        Agree(with(p, {{"causal", causal}}), {q, k, v, random_bool(ms, seed++)}, {b, h, sq, p.d});
      }
    }
  }
}

// Additive masks in the operands' dtype: finite values, -inf, a row of keys all -inf (zeros)
// and one all -3e38 (finite: the row averages its values, as on the CPU); with a scale,
// causal and not, and off alignment.
TEST_P(CudaAttentionMask, AdditiveMaskWithInfinitiesAgreesWithTheCpu) {
  uint32_t seed = 9201;
  const int64_t b = 2, h = 2;
  for (const Path& p : paths_in(dtype())) {
    for (const testing::AttentionCase& c : {testing::AttentionCase{1, 1, 1}, testing::AttentionCase{1, 65, 130},
                                            testing::AttentionCase{1, 130, 65}, testing::AttentionCase{1, 64, 64}}) {
      for (const Shape& ms : {Shape{b, 1, c.sq, c.sk}, Shape{b, h, c.sq, c.sk}, Shape{c.sq, c.sk}}) {
        for (bool causal : {false, true}) {
          SCOPED_TRACE(fmt::format("{} Sq {} Sk {} mask {} causal {}", p.name, c.sq, c.sk, ms.to_string(), causal));
          HostTensor q = rnd({b, h, c.sq, p.d}, seed++, -2.0f, 2.0f);
          HostTensor k = rnd({b, h, c.sk, p.d}, seed++, -2.0f, 2.0f);
          HostTensor v = rnd({b, h, c.sk, p.d}, seed++);
          HostTensor mask = random_additive(ms, seed++, true, dtype());
          const OpAttrs attrs = with(p, {{"causal", causal}, {"scale", 0.3}});
          Agree(attrs, {q, k, v, mask}, {b, h, c.sq, p.d});
          if (p.fused) Agree(attrs, {q, k, v, mask}, {b, h, c.sq, p.d}, off_alignment());
        }
      }
    }
  }
}

// layout bshd (three operands [B, S, H, D], and with attribute heads [B, S, H D]), a packed
// q|k|v projection (qkv, none, none, mask), and sbhd (three operands and packed); bool key
// padding and a full [B, H, Sq, Sk] additive mask.
TEST_P(CudaAttentionMask, EachLayoutAgreesWithTheCpu) {
  uint32_t seed = 9301;
  const int64_t b = 3, h = 2;
  const HostTensor none;
  for (const Path& p : paths_in(dtype())) {
    for (const testing::AttentionCase& c : {testing::AttentionCase{1, 65, 130}, testing::AttentionCase{1, 100, 100},
                                            testing::AttentionCase{1, 1, 5}}) {
      const bool same_len = c.sq == c.sk;
      for (bool causal : {false, true}) {
        SCOPED_TRACE(fmt::format("{} Sq {} Sk {} causal {}", p.name, c.sq, c.sk, causal));
        const std::vector<int64_t> lengths = {c.sk, 0, (c.sk + 2) / 3};
        std::vector<HostTensor> masks = {key_padding(lengths, c.sk),
                                         random_additive({b, h, c.sq, c.sk}, seed++, false, dtype())};
        if (same_len) masks.push_back(random_bool({b, 1, c.sq, c.sk}, seed++));
        for (const HostTensor& mask : masks) {
          SCOPED_TRACE("mask " + mask.shape().to_string() + (mask.dtype() == DType::Bool ? " bool" : " additive"));
          // bshd, [B, S, H, D].
          const OpAttrs bshd = with(p, {{"causal", causal}, {"layout", std::string("bshd")}});
          HostTensor q = rnd({b, c.sq, h, p.d}, seed++, -2.0f, 2.0f);
          HostTensor k = rnd({b, c.sk, h, p.d}, seed++, -2.0f, 2.0f);
          HostTensor v = rnd({b, c.sk, h, p.d}, seed++);
          Agree(bshd, {q, k, v, mask}, {b, c.sq, h, p.d});
          // bshd with heads merged, [B, S, H D].
          const OpAttrs merged = with(p, {{"causal", causal}, {"layout", std::string("bshd")}, {"heads", h}});
          HostTensor qm = rnd({b, c.sq, h * p.d}, seed++, -2.0f, 2.0f);
          HostTensor km = rnd({b, c.sk, h * p.d}, seed++, -2.0f, 2.0f);
          HostTensor vm = rnd({b, c.sk, h * p.d}, seed++);
          Agree(merged, {qm, km, vm, mask}, {b, c.sq, h * p.d});
          // sbhd, [S, B, H, D].
          const OpAttrs sbhd = with(p, {{"causal", causal}, {"layout", std::string("sbhd")}});
          HostTensor qs = rnd({c.sq, b, h, p.d}, seed++, -2.0f, 2.0f);
          HostTensor ks = rnd({c.sk, b, h, p.d}, seed++, -2.0f, 2.0f);
          HostTensor vs = rnd({c.sk, b, h, p.d}, seed++);
          Agree(sbhd, {qs, ks, vs, mask}, {c.sq, b, h, p.d});
          if (p.fused) Agree(sbhd, {qs, ks, vs, mask}, {c.sq, b, h, p.d}, off_alignment());
          if (!same_len) continue;
          // One packed q|k|v projection: bshd [B, S, 3 H D] and sbhd [S, B, 3 H D].
          HostTensor qkv = rnd({b, c.sq, 3 * h * p.d}, seed++, -2.0f, 2.0f);
          Agree(merged, {qkv, none, none, mask}, {b, c.sq, h * p.d});
          if (p.fused) Agree(merged, {qkv, none, none, mask}, {b, c.sq, h * p.d}, off_alignment());
          const OpAttrs packed_sbhd = with(p, {{"causal", causal}, {"layout", std::string("sbhd")}, {"heads", h}});
          HostTensor qkv_s = rnd({c.sq, b, 3 * h * p.d}, seed++, -2.0f, 2.0f);
          Agree(packed_sbhd, {qkv_s, none, none, mask}, {c.sq, b, h * p.d});
        }
      }
    }
  }
}

// Enough blocks that the 16-bit kernel takes its 128-row blocks (no key split; see
// fused_attention), and enough heads that the unfused path's groups split by batch in bshd.
TEST_P(CudaAttentionMask, ManyHeadsAgreeWithTheCpu) {
  uint32_t seed = 9401;
  const int64_t b = 2, h = 16, sq = 400, sk = 333;
  for (const Path& p : paths_in(dtype())) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(fmt::format("{} causal {}", p.name, causal));
      HostTensor q = rnd({b, h, sq, p.d}, seed++, -2.0f, 2.0f);
      HostTensor k = rnd({b, h, sk, p.d}, seed++, -2.0f, 2.0f);
      HostTensor v = rnd({b, h, sk, p.d}, seed++);
      Agree(with(p, {{"causal", causal}}), {q, k, v, key_padding({sk - 17, 150}, sk)}, {b, h, sq, p.d});
      Agree(with(p, {{"causal", causal}}), {q, k, v, random_additive({b, 1, sq, sk}, seed++, true, dtype())},
            {b, h, sq, p.d});
      const OpAttrs bshd = with(p, {{"causal", causal}, {"layout", std::string("bshd")}});
      HostTensor qb = rnd({b, sq, h, p.d}, seed++, -2.0f, 2.0f);
      HostTensor kb = rnd({b, sk, h, p.d}, seed++, -2.0f, 2.0f);
      HostTensor vb = rnd({b, sk, h, p.d}, seed++);
      Agree(bshd, {qb, kb, vb, random_bool({b, h, sq, sk}, seed++, 0.5)}, {b, sq, h, p.d});
    }
  }
}

// Every key of every row masked: zeros everywhere, on every path (sk < 64: one partial tile).
TEST_P(CudaAttentionMask, AllKeysMaskedGivesZeros) {
  uint32_t seed = 9501;
  for (const Path& p : paths_in(dtype())) {
    for (int64_t sk : {int64_t{5}, int64_t{130}}) {
      SCOPED_TRACE(fmt::format("{} Sk {}", p.name, sk));
      HostTensor q = rnd({1, 2, 33, p.d}, seed++, -2.0f, 2.0f);
      HostTensor k = rnd({1, 2, sk, p.d}, seed++, -2.0f, 2.0f);
      HostTensor v = rnd({1, 2, sk, p.d}, seed++);
      HostTensor drop_all(DType::Bool, {1, 1, 1, sk});  // zero-filled: false
      HostTensor minus_inf(DType::F32, {33, sk});
      for (int64_t i = 0; i < minus_inf.shape().numel(); ++i) minus_inf.f()[i] = -kInf;
      for (const HostTensor& mask : {drop_all, minus_inf}) {
        for (bool causal : {false, true}) {
          HostTensor got = Agree(with(p, {{"causal", causal}}), {q, k, v, mask}, {1, 2, 33, p.d});
          for (int64_t i = 0; i < got.shape().numel(); ++i) ASSERT_EQ(got.f()[i], 0.0f) << "element " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaAttentionMask, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

// bf16 and f16 with a cuDNN handle: a mask takes planrt's kernel (cuDNN is given no mask),
// makes no plan, and agrees with the CPU.
TEST(CudaAttentionMaskCudnn, AMaskKeepsCudnnOut) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  ASSERT_TRUE(r.enable_cudnn());
  const AttentionPlanCache& plans = r.ctx().cudnn->attention_plans();
  const Shape shape{2, 4, 130, 64};
  std::vector<HostTensor> in = {rnd(shape, 9601, -2.0f, 2.0f), rnd(shape, 9602, -2.0f, 2.0f), rnd(shape, 9603),
                                key_padding({100, 0}, 130)};
  for (DType half : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(half));
    in[3] = key_padding({100, 0}, 130);
    ExpectMaskedAgree(half, r, attrs_of({}), in, shape);
    in[3] = random_additive({2, 4, 130, 130}, 9604, true, half);
    ExpectMaskedAgree(half, r, attrs_of({}), in, shape);
  }
  EXPECT_EQ(plans.size() + plans.refused(), 0u) << "cuDNN was asked for a masked attention";
}

}  // namespace
}  // namespace planrt::kernels::cuda
