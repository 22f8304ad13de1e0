// The host kernels' load-time options: cpu.num_threads (kernels/cpu/threading.h) and
// cpu.pack_weights (kernels/cpu/packed_linear.h). A bad value or an unknown cpu option fails
// the load naming it; one and two threads give the same outputs, host kernels and CPU engines
// alike, and leave the caller's thread count as it was; packed and plain weights give the
// same outputs, and the packed copies are counted. No test name says "Thread": those join
// the ThreadSanitizer lane, which cannot check OpenMP's workers (threading_test.cpp says why).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/threading.h"
#include "planrt/backends/engine.h"
#include "planrt/runtime/method.h"
#include "support/built_programs.h"
#include "support/status_matchers.h"

namespace planrt {
namespace {

using testing::IsError;

Result<Program> transformer(const std::string& partition) {
  builder::TransformerOptions o;
  o.layers = 2;
  o.d_model = 64;
  o.heads = 4;
  o.ffn = 256;
  o.max_seq = 300;  // attention over more than one key tile
  o.weights = "random:7";
  o.partition = partition;
  o.device = "cpu";
  return fixtures::load_transformer(o);
}

LoadMethodOptions with_threads(const std::string& value) {
  LoadMethodOptions options;
  options.backend_options["cpu"] = {{"num_threads", value}};
  return options;
}

std::vector<float> input(int64_t s) {
  std::vector<float> x(static_cast<size_t>(s * 64));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
  return x;
}

// max |a - b| / max |b| over the first n floats.
double relative_max_difference(const Tensor& a, const Tensor& b, int64_t n) {
  const float* pa = static_cast<const float*>(a.data());
  const float* pb = static_cast<const float*>(b.data());
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(pa[i] - pb[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(pb[i])));
  }
  return worst / std::max(scale, 1e-30);
}

TEST(CpuOptions, ABadCountOrAnUnknownKeyFailsTheLoadNamingIt) {
  Result<Program> p = transformer("cpu");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  for (const char* bad : {"0", "-2", "many", "3.5"}) {
    Result<Method> m = p->load_method("forward", with_threads(bad));
    EXPECT_TRUE(IsError(m.status(), ErrorCode::InvalidArgument, {"cpu.num_threads", bad})) << bad;
  }
  LoadMethodOptions unknown;
  unknown.backend_options["cpu"] = {{"threads", "2"}};
  Result<Method> m = p->load_method("forward", unknown);
  EXPECT_TRUE(IsError(m.status(), ErrorCode::InvalidArgument, {"cpu.threads", "num_threads"}));
  EXPECT_TRUE(p->load_method("forward", with_threads("auto")).ok());
  LoadMethodOptions bad_pack;
  bad_pack.backend_options["cpu"] = {{"pack_weights", "maybe"}};
  EXPECT_TRUE(IsError(p->load_method("forward", bad_pack).status(), ErrorCode::InvalidArgument,
                      {"cpu.pack_weights", "maybe"}));
}

TEST(CpuOptions, PackedAndPlainWeightsGiveTheSameOutputsAndTheCopiesAreCounted) {
  Result<Program> p = transformer("cpu");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  LoadMethodOptions plain_options;
  plain_options.backend_options["cpu"] = {{"pack_weights", "false"}};
  Result<Method> packed = p->load_method("forward");
  Result<Method> plain = p->load_method("forward", plain_options);
  ASSERT_TRUE(packed.ok() && plain.ok()) << packed.status().to_string() << plain.status().to_string();
  // Two blocks of four d x d products and two FFN products: at least the weights' bytes.
  EXPECT_GE(packed->packed_weight_bytes(), uint64_t{2} * (4 * 64 * 64 + 2 * 64 * 256) * sizeof(float));
  EXPECT_EQ(plain->packed_weight_bytes(), 0u);
  for (int64_t s : {int64_t{1}, int64_t{33}, int64_t{300}}) {
    std::vector<float> x = input(s);
    TensorView in = TensorView::contiguous(x.data(), DType::F32, Shape({1, s, 64}), Device::cpu());
    Result<std::vector<Tensor>> a = packed->execute({&in, 1});
    Result<std::vector<Tensor>> b = plain->execute({&in, 1});
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
    EXPECT_LE(relative_max_difference((*a)[0], (*b)[0], s * 64), 1e-5) << "S=" << s;
  }
}

TEST(CpuOptions, OneAndTwoWorkersGiveTheSameOutputsOnHostKernelsAndCpuEngines) {
  ASSERT_TRUE(register_engine_backend().ok());
  for (const char* partition : {"cpu", "engine-per-block"}) {
    Result<Program> p = transformer(partition);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    Result<Method> one = p->load_method("forward", with_threads("1"));
    Result<Method> two = p->load_method("forward", with_threads("2"));
    ASSERT_TRUE(one.ok() && two.ok()) << one.status().to_string() << two.status().to_string();
    for (int64_t s : {int64_t{1}, int64_t{45}, int64_t{300}}) {
      std::vector<float> x = input(s);
      TensorView in = TensorView::contiguous(x.data(), DType::F32, Shape({1, s, 64}), Device::cpu());
      const int before = kernels::cpu::current_num_threads();
      Result<std::vector<Tensor>> a = one->execute({&in, 1});
      Result<std::vector<Tensor>> b = two->execute({&in, 1});
      ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
      EXPECT_EQ(kernels::cpu::current_num_threads(), before);
      EXPECT_LE(relative_max_difference((*a)[0], (*b)[0], s * 64), 1e-6) << partition << " S=" << s;
    }
  }
}

}  // namespace
}  // namespace planrt
