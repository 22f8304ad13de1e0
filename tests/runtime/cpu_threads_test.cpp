// The host kernels' load-time option cpu.num_threads (kernels/cpu/threading.h): a bad value
// or an unknown cpu option fails the load naming it; a method run with one thread and with
// two gives the same outputs, host kernels and CPU engines alike, and leaves the caller's
// thread count as it was.
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

TEST(CpuThreadsOption, ABadCountOrAnUnknownKeyFailsTheLoadNamingIt) {
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
}

TEST(CpuThreadsOption, OneAndTwoThreadsGiveTheSameOutputsOnHostKernelsAndCpuEngines) {
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
      const float* ya = static_cast<const float*>((*a)[0].data());
      const float* yb = static_cast<const float*>((*b)[0].data());
      double worst = 0, scale = 0;
      for (int64_t i = 0; i < s * 64; ++i) {
        worst = std::max(worst, static_cast<double>(std::fabs(ya[i] - yb[i])));
        scale = std::max(scale, static_cast<double>(std::fabs(ya[i])));
      }
      EXPECT_LE(worst, 1e-6 * scale) << partition << " S=" << s;
    }
  }
}

}  // namespace
}  // namespace planrt
