// bf16 and f16 attention on cuDNN's fused attention (cudnn_attention_plan.h, attention.cpp): with a
// cuDNN handle in the context, every layout of kernels/attention_layout.h agrees with the CPU
// kernel, and the plan cache shows that cuDNN, not planrt's kernel, ran it (on cuDNN 9.13 or
// later; an older cuDNN has no such operation and every call falls back, which agrees too).
// Causal masks and operands off 16-byte alignment take planrt's kernel and make no plan.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_library.h"
#include "kernels/cuda/dtype_agreement.h"
#include "support/gpu.h"

namespace planrt::kernels::cuda {
namespace {

using testing::CudaRunner;
using testing::ExpectAgreeIn;
using testing::attrs_of;
using testing::HostTensor;
using testing::rnd;

constexpr std::string_view kOp = "scaled_dot_product_attention";

// Whether this cuDNN has the fused attention operation (9.13 and later).
bool cudnn_has_fused_attention() {
  Result<const CudnnLibrary*> lib = cudnn_library();
  return lib.ok() && (*lib)->cudnnGetVersion() >= 91300;
}

class CudnnAttention : public ::testing::TestWithParam<DType> {
 protected:
  // The runner is made only once a GPU is known to be there (a CudaRunner needs one).
  void SetUp() override {
    PLANRT_REQUIRE_GPU_OR_SKIP();
    runner_.emplace();
    ASSERT_TRUE(runner_->enable_cudnn());
  }
  DType dtype() const { return GetParam(); }
  const AttentionPlanCache& plans() { return runner_->ctx().cudnn->attention_plans(); }
  // EXPECT agreement, and that the call made a plan (a shape not seen before, on a cuDNN that
  // has the operation) or did not (planned = false: planrt's kernel ran).
  void AgreeOnCudnn(const OpAttrs& attrs, const std::vector<HostTensor>& inputs, const Shape& out, bool planned,
                    size_t offset = 0) {
    const size_t before = plans().size() + plans().refused();
    ExpectAgreeIn(dtype(), *runner_, kOp, attrs, inputs, out, offset);
    const size_t after = plans().size() + plans().refused();
    if (!planned) {
      EXPECT_EQ(after, before) << "planrt's kernel should have run";
    } else if (cudnn_has_fused_attention()) {
      EXPECT_EQ(plans().refused(), 0u) << "cuDNN refused a shape it should take";
      EXPECT_GT(after, before) << "no plan was made for a new shape";
    }
  }
  std::optional<CudaRunner> runner_;
};

TEST_P(CudnnAttention, EachLayoutAgreesWithTheCpu) {
  uint32_t seed = 701;
  for (const testing::AttentionCase& c : testing::kFusedAttentionCases) {
    SCOPED_TRACE(fmt::format("heads {} Sq {} Sk {}", c.heads, c.sq, c.sk));
    // bhsd, two batches.
    AgreeOnCudnn(attrs_of({}),
                 {rnd({2, c.heads, c.sq, 64}, seed++, -2.0f, 2.0f), rnd({2, c.heads, c.sk, 64}, seed++, -2.0f, 2.0f),
                  rnd({2, c.heads, c.sk, 64}, seed++)},
                 {2, c.heads, c.sq, 64}, true);
    // bshd with a scale, three batches: a key no other call of the loop has (the check counts
    // a new plan per call).
    AgreeOnCudnn(attrs_of({{"layout", std::string("bshd")}, {"scale", 0.3}}),
                 {rnd({3, c.sq, c.heads, 64}, seed++, -2.0f, 2.0f), rnd({3, c.sk, c.heads, 64}, seed++, -2.0f, 2.0f),
                  rnd({3, c.sk, c.heads, 64}, seed++)},
                 {3, c.sq, c.heads, 64}, true);
    // One packed q|k|v projection, heads merged.
    AgreeOnCudnn(attrs_of({{"layout", std::string("bshd")}, {"heads", c.heads}}),
                 {rnd({2, c.sq, 3 * c.heads * 64}, seed++, -2.0f, 2.0f)}, {2, c.sq, c.heads * 64}, true);
    // sbhd, three batches, packed.
    AgreeOnCudnn(attrs_of({{"layout", std::string("sbhd")}, {"heads", c.heads}}),
                 {rnd({c.sq, 3, 3 * c.heads * 64}, seed++, -2.0f, 2.0f)}, {c.sq, 3, c.heads * 64}, true);
  }
  if (cudnn_has_fused_attention()) {
    EXPECT_GT(plans().size(), 0u);
  }
}

TEST_P(CudnnAttention, CausalMasksAndUnalignedOperandsRunPlanrtsKernel) {
  const Shape shape{1, 4, 130, 64};
  const std::vector<HostTensor> in = {rnd(shape, 801, -2.0f, 2.0f), rnd(shape, 802, -2.0f, 2.0f), rnd(shape, 803)};
  AgreeOnCudnn(attrs_of({{"causal", true}}), in, shape, false);
  AgreeOnCudnn(attrs_of({}), in, shape, false, element_size(dtype()));
  EXPECT_EQ(plans().size(), 0u);
}

TEST_P(CudnnAttention, EachShapeIsPlannedOnceAndRunsToTheSameBits) {
  CudaRunner& r_ = *runner_;
  const Shape shape{1, 8, 128, 64};
  std::vector<TensorView> in;
  for (uint32_t seed : {811u, 812u, 813u}) {
    in.push_back(r_.upload(testing::in_dtype(rnd(shape, seed, -2.0f, 2.0f), dtype())));
  }
  const TensorView out[] = {r_.device_output(dtype(), shape)};
  std::vector<HostTensor> results;
  for (int call = 0; call < 3; ++call) {
    Status s = scaled_dot_product_attention(r_.ctx(), attrs_of({}), in, out);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_TRUE(r_.synchronize().ok());
    results.push_back(r_.download(out[0]));
  }
  if (cudnn_has_fused_attention()) {
    EXPECT_EQ(plans().size(), 1u);
  }
  for (const HostTensor& t : results) {
    EXPECT_EQ(std::memcmp(t.data(), results[0].data(), results[0].nbytes()), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudnnAttention, ::testing::Values(DType::BF16, DType::F16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

}  // namespace
}  // namespace planrt::kernels::cuda
