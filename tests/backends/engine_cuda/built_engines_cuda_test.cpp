// Builder-made engine programs on a GPU: every engine partition matches the `cuda`
// partition of the same model, private and pooled, and the pooled run settles the pool at
// the largest call made (exactly), not at the profile max.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>

#include "planrt/backends/cuda.h"
#include "planrt/backends/engine.h"
#include "planrt/builder/builder.h"
#include "planrt/runtime/program.h"
#include "support/built_programs.h"
#include "support/gpu.h"

namespace planrt {
namespace {

builder::TransformerOptions model(const std::string& partition) {
  builder::TransformerOptions o;
  o.layers = 2;
  o.d_model = 128;
  o.heads = 4;
  o.ffn = 256;
  o.ffn_per_block = {256, 512};
  o.max_seq = 256;
  o.weights = "random:5";
  o.partition = partition;
  o.device = "cuda:0";
  return o;
}

Result<Program> load(const std::string& partition) {
  return fixtures::load_transformer(model(partition));
}

// One forward of x[1, s, width], x = sin(0.11 i).
Result<std::vector<float>> run(Method& m, int64_t s, int64_t width = 128) {
  std::vector<float> x(static_cast<size_t>(s * width));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.11f * static_cast<float>(i));
  TensorView in = TensorView::contiguous(x.data(), DType::F32, *Shape::from(std::vector<int64_t>{1, s, width}));
  PLANRT_ASSIGN_OR_RETURN(std::vector<Tensor> out, m.execute({&in, 1}));
  auto v = out[0].values<float>();
  return std::vector<float>(v.begin(), v.end());
}

double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return a.size() == b.size() ? std::sqrt(num / den) : INFINITY;
}

TEST(BuiltEnginesCuda, EveryEnginePartitionMatchesTheCudaPartitionPrivateAndPooled) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  ASSERT_TRUE(register_cuda_backend().ok());
  ASSERT_TRUE(register_engine_backend().ok());
  Result<Program> reference = load("cuda");
  ASSERT_TRUE(reference.ok()) << reference.status().to_string();
  Result<Method> ref = reference->load_method("forward");
  ASSERT_TRUE(ref.ok());
  for (const char* partition : {"engine", "engine-per-block", "engine-cuda-interleaved"}) {
    Result<Program> p = load(partition);
    ASSERT_TRUE(p.ok()) << partition << ": " << p.status().to_string();
    for (const char* pooled : {"false", "true"}) {
      SCOPED_TRACE(testing::Message() << partition << " pooled=" << pooled);
      LoadMethodOptions options;
      options.backend_options["engine"].push_back({std::string(kSharedScratchOption), pooled});
      Result<Method> m = p->load_method("forward", options);
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      for (int64_t s : {7, 64, 256}) {
        Result<std::vector<float>> a = run(*m, s), b = run(*ref, s);
        ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
        EXPECT_LT(rel_error(*a, *b), 1e-5) << "S=" << s;
      }
    }
  }
}

// Head dim 64 is the fused kernel's, so only the `fused` attribute decides whether the
// attention keeps its [heads, S, S] scores: the engine's scratch plan must read it as the
// kernel does (issue 13: engines planned no workspace for unfused attention and failed).
// S = 512: the unfused scores of one call are 4 heads x 512 x 512 floats = 4 MiB.
TEST(BuiltEnginesCuda, EnginesRunUnfusedAndFusedAttentionAtHeadDim64) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  ASSERT_TRUE(register_cuda_backend().ok());
  ASSERT_TRUE(register_engine_backend().ok());
  for (bool fused : {false, true}) {
    auto load_with = [&](const char* partition) {
      builder::TransformerOptions o = model(partition);
      o.d_model = 256;  // 4 heads of 64
      o.ffn_per_block = {};
      o.max_seq = 512;
      o.fused_attention = fused;
      return fixtures::load_transformer(o);
    };
    Result<Program> reference = load_with("cuda");
    ASSERT_TRUE(reference.ok()) << reference.status().to_string();
    Result<Method> ref = reference->load_method("forward");
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    for (const char* partition : {"engine", "engine-per-block"}) {
      Result<Program> p = load_with(partition);
      ASSERT_TRUE(p.ok()) << partition << ": " << p.status().to_string();
      for (const char* pooled : {"false", "true"}) {
        SCOPED_TRACE(testing::Message() << partition << " fused=" << fused << " pooled=" << pooled);
        LoadMethodOptions options;
        options.backend_options["engine"].push_back({std::string(kSharedScratchOption), pooled});
        Result<Method> m = p->load_method("forward", options);
        ASSERT_TRUE(m.ok()) << m.status().to_string();
        for (int64_t s : {512, 37}) {
          Result<std::vector<float>> a = run(*m, s, 256), b = run(*ref, s, 256);
          ASSERT_TRUE(a.ok()) << "S=" << s << ": " << a.status().to_string();
          ASSERT_TRUE(b.ok()) << "S=" << s << ": " << b.status().to_string();
          EXPECT_LT(rel_error(*a, *b), 1e-5) << "S=" << s;
        }
      }
    }
  }
}

TEST(BuiltEnginesCuda, ThePoolSettlesAtTheLargestCallMadeNotTheProfileMax) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  ASSERT_TRUE(register_engine_backend().ok());
  ASSERT_TRUE(trim_engine_scratch_pool(Device::cuda(0)).ok());
  Result<Program> p = load("engine-per-block");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  LoadMethodOptions options;
  options.backend_options["engine"].push_back({std::string(kSharedScratchOption), "true"});
  Result<Method> m = p->load_method("forward", options);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  Result<EngineScratchStats> s0 = engine_scratch_stats(Device::cuda(0));
  ASSERT_TRUE(s0.ok());
  uint64_t profile_max = 0;
  for (const EngineContextInfo& c : s0->contexts) profile_max = std::max(profile_max, c.scratch_bytes);
  ASSERT_TRUE(run(*m, 32).ok());
  ASSERT_TRUE(run(*m, 100).ok());
  ASSERT_TRUE(run(*m, 60).ok());
  Result<EngineScratchStats> s1 = engine_scratch_stats(Device::cuda(0));
  ASSERT_TRUE(s1.ok());
  EXPECT_GT(s1->pool_capacity_bytes, 0u);
  EXPECT_LT(s1->pool_capacity_bytes, profile_max);
  EXPECT_EQ(s1->pooled_contexts, 2);
  // The largest call (S=100) sets it: the same calls on a fresh pool, S=100 alone, agree.
  ASSERT_TRUE(trim_engine_scratch_pool(Device::cuda(0)).ok());
  ASSERT_TRUE(run(*m, 100).ok());
  EXPECT_EQ(engine_scratch_stats(Device::cuda(0))->pool_capacity_bytes, s1->pool_capacity_bytes);
}

}  // namespace
}  // namespace planrt
