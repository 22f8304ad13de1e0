// LoadMethodOptions::profile_steps and Method::step_profile(): one entry per step in run
// order, each step's calls equal to the runs, host kernels named by their op and CPU engines
// by their segment; nothing recorded without the option.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planrt/backends/engine.h"
#include "planrt/runtime/method.h"
#include "builder/builder_test_util.h"
#include "support/built_programs.h"

namespace planrt {
namespace {

Result<Program> transformer(const std::string& partition) {
  return fixtures::load_transformer(builder::btest::small(2, partition, "cpu"));
}

std::vector<float> input(int64_t s) {
  std::vector<float> x(static_cast<size_t>(s * 64));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 29) % 97) / 48.0f - 1.0f;
  return x;
}

Result<Method> load_profiled(Program& p) {
  LoadMethodOptions options;
  options.profile_steps = true;
  return p.load_method("forward", options);
}

Status run_times(Method& m, int runs) {
  std::vector<float> x = input(8);
  TensorView v = TensorView::contiguous(x.data(), DType::F32, Shape({1, 8, 64}));
  for (int i = 0; i < runs; ++i) PLANRT_RETURN_IF_ERROR(m.run({&v, 1}));
  return {};
}

TEST(StepProfile, EveryHostKernelIsTimedOncePerRun) {
  Result<Program> p = transformer("cpu");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Result<Method> m = load_profiled(*p);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  for (const StepProfile& s : m->step_profile()) EXPECT_EQ(s.calls, 0) << s.op;
  ASSERT_TRUE(run_times(*m, 3).ok());
  const std::vector<StepProfile> profile = m->step_profile();
  ASSERT_GT(profile.size(), 5u);
  double total = 0;
  bool saw_linear = false, saw_attention = false;
  for (const StepProfile& s : profile) {
    EXPECT_EQ(s.kind, "kernel") << s.op;
    EXPECT_EQ(s.calls, 3) << s.op << " " << s.node;
    EXPECT_GE(s.total_ms, 0.0) << s.op;
    EXPECT_FALSE(s.node.empty()) << s.op;
    saw_linear |= s.op == "linear";
    saw_attention |= s.op == "scaled_dot_product_attention";
    total += s.total_ms;
  }
  EXPECT_TRUE(saw_linear);
  EXPECT_TRUE(saw_attention);
  EXPECT_GT(total, 0.0);
}

TEST(StepProfile, AnEngineIsOneDelegateStepNamedByItsSegment) {
  ASSERT_TRUE(register_engine_backend().ok());
  Result<Program> p = transformer("engine");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Result<Method> m = load_profiled(*p);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_TRUE(run_times(*m, 2).ok());
  int delegates = 0;
  for (const StepProfile& s : m->step_profile()) {
    EXPECT_EQ(s.calls, 2) << s.kind << " " << s.op;
    if (s.kind == "delegate") {
      ++delegates;
      EXPECT_FALSE(s.op.empty());
      EXPECT_GT(s.total_ms, 0.0);
    }
  }
  EXPECT_EQ(delegates, 1);
}

TEST(StepProfile, NothingIsRecordedWithoutTheOption) {
  Result<Program> p = transformer("cpu");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Result<Method> m = p->load_method("forward");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_TRUE(run_times(*m, 2).ok());
  EXPECT_TRUE(m->step_profile().empty());
}

}  // namespace
}  // namespace planrt
