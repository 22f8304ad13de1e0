// LoadMethodOptions::share_device_arenas (docs/design.md §3, placement rule 3): methods with
// device memory loaded with it share one arena per device, sized to the largest any such
// method of the program plans there, and a run that would overlap another on the set is
// refused, never serialized and never a race. On the test device (host memory standing for
// cuda:0, counted), so the CPU lane holds it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "builder/builder_test_util.h"
#include "planrt/builder/builder.h"
#include "planrt/runtime/program.h"
#include "support/built_programs.h"
#include "support/program_fixtures.h"
#include "support/test_device.h"

namespace planrt {
namespace {

// Two cuda methods of different sizes: y = relu(relu(x)) over [S, 16], S up to 8 and 64.
Result<Program> two_device_methods() {
  auto method = [](const char* name, int max_s) {
    return fmt::format(R"({{"name": "{}", "backend": "cuda", "dims": {{"S": {{"min": 1, "max": {}}}}},
      "inputs": [{{"name": "x", "dtype": "f32", "shape": ["S", 16]}}], "outputs": ["y"], "nodes": [
        {{"op": "relu", "inputs": ["x"], "outputs": ["a"]}},
        {{"op": "relu", "inputs": ["a"], "outputs": ["y"]}}]}})", name, max_s);
  };
  std::string text = fmt::format(R"({{"format": "planrt-model/1", "methods": [{}, {}]}})",
                                 method("small", 8), method("large", 64));
  PLANRT_ASSIGN_OR_RETURN(builder::Model model, builder::parse_model_json(text));
  return fixtures::load_built_program(model);
}

std::vector<float> input(int64_t s) {
  std::vector<float> x(static_cast<size_t>(s * 16));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.f;
  return x;
}

Status run_and_check(Method& m, int64_t s) {
  std::vector<float> x = input(s);
  TensorView in = TensorView::contiguous(x.data(), DType::F32, {s, 16});
  PLANRT_ASSIGN_OR_RETURN(std::vector<Tensor> out, m.execute({&in, 1}));
  auto y = out[0].values<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (y[i] != std::max(x[i], 0.f)) return make_error(ErrorCode::Internal, "y[{}] = {}", i, y[i]);
  }
  return {};
}

uint64_t planned_on(const MethodMeta& m, Device d) { return m.planned_bytes_on(d); }

class SharedDeviceArenas : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cuda_.status().ok());
    ASSERT_TRUE(backend_.status().ok());
  }
  testing::ScopedTestAllocator cuda_;
  testing::ScopedTestBackend backend_{"cuda", &cuda_.allocator()};
};

TEST_F(SharedDeviceArenas, LoadsShareOneSetSizedToTheLargestMethodAndRunInTurn) {
  ASSERT_OK_AND_ASSIGN(Program p, two_device_methods());
  ASSERT_OK_AND_ASSIGN(MethodMeta small, p.method_meta("small"));
  ASSERT_OK_AND_ASSIGN(MethodMeta large, p.method_meta("large"));
  const uint64_t large_cuda = planned_on(large, Device::cuda(0));
  ASSERT_GT(large_cuda, planned_on(small, Device::cuda(0)));
  LoadMethodOptions share;
  share.share_device_arenas = true;
  {
    ASSERT_OK_AND_ASSIGN(Method a, p.load_method("small", share));
    ASSERT_OK_AND_ASSIGN(Method b, p.load_method("large", share));
    ASSERT_OK_AND_ASSIGN(Method c, p.load_method("large", share));
    EXPECT_TRUE(a.shares_device_arenas() && b.shares_device_arenas() && c.shares_device_arenas());
    EXPECT_FALSE(a.shares_memory_arenas());
    // One arena on the device for all three: the largest method's.
    EXPECT_EQ(cuda_->counts().bytes_live, static_cast<int64_t>(large_cuda));
    for (int round = 0; round < 2; ++round) {
      ASSERT_OK(run_and_check(a, 8));
      ASSERT_OK(run_and_check(b, 64));
      ASSERT_OK(run_and_check(c, 33));
      ASSERT_OK(run_and_check(a, 3));
    }
  }
  EXPECT_EQ(cuda_->counts().bytes_live, 0) << "the set goes with the last method holding it";
  // Without the option each load has its own arenas.
  ASSERT_OK_AND_ASSIGN(Method a, p.load_method("small"));
  ASSERT_OK_AND_ASSIGN(Method b, p.load_method("large"));
  EXPECT_FALSE(a.shares_device_arenas());
  EXPECT_EQ(cuda_->counts().bytes_live, static_cast<int64_t>(large_cuda + planned_on(small, Device::cuda(0))));
  // A load with the option beside them makes the shared set anew.
  ASSERT_OK_AND_ASSIGN(Method s, p.load_method("small", share));
  EXPECT_EQ(cuda_->counts().bytes_live,
            static_cast<int64_t>(2 * large_cuda + planned_on(small, Device::cuda(0))));
  ASSERT_OK(run_and_check(s, 5));
}

// A run that would overlap another on the set is refused, naming both methods, while the
// first runs on; the refused method runs once the first is done. Mutation caught: making
// the shared set serialize (a blocking lock) turns the refusal into a wait: the held run
// gives up after its 2 s bound, the second run then succeeds, and the refusal checks fail.
TEST_F(SharedDeviceArenas, AConcurrentRunIsRefusedNamingBothAndTheFirstFinishes) {
  ASSERT_OK_AND_ASSIGN(Program p, two_device_methods());
  LoadMethodOptions share;
  share.share_device_arenas = true;
  ASSERT_OK_AND_ASSIGN(Method a, p.load_method("small", share));
  ASSERT_OK_AND_ASSIGN(Method b, p.load_method("large", share));
  std::atomic<bool> inside{false}, release{false};
  backend_->set_execute_hook([&] {
    if (release.load()) return;
    inside = true;
    for (int i = 0; i < 20000 && !release.load(); ++i) std::this_thread::sleep_for(std::chrono::microseconds(100));
  });
  Status first;
  std::thread t([&] { first = run_and_check(a, 8); });
  while (!inside.load()) std::this_thread::yield();
  std::vector<float> x = input(4);
  TensorView in = TensorView::contiguous(x.data(), DType::F32, {4, 16});
  Result<std::vector<Tensor>> refused = b.execute({&in, 1});
  Status refused_run = a.run({&in, 1});  // the same method, too
  release = true;
  t.join();
  backend_->set_execute_hook(nullptr);
  ASSERT_OK(first);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::InvalidArgument);
  EXPECT_ERROR_CONTAINS(refused, "method 'large' shares its device arenas (share_device_arenas) with method 'small', which is running");
  EXPECT_EQ(refused_run.code(), ErrorCode::InvalidArgument);
  ASSERT_OK(run_and_check(b, 64));
  ASSERT_OK(run_and_check(a, 8));
}

TEST_F(SharedDeviceArenas, AMethodWithTwoBuffersOnOneDeviceCannotShareAndLoadsWithoutIt) {
  // The cuda fixture with y_dev moved to a second cuda:0 buffer: valid, but a shared set
  // holds one arena per device.
  fixtures::ReluAddOptions o;
  o.on_cuda = true;
  fixtures::FixtureProgram f = fixtures::relu_add_program(o);
  fb::MethodT& m = *f.program.methods[0];
  m.planned_buffers.push_back(fixtures::planned_buffer(m.planned_buffers[1]->size_bytes, fb::DeviceType::CUDA));
  m.values[3]->buffer = 2;
  m.values[3]->offset = 0;
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, f.serialize());
  ASSERT_OK_AND_ASSIGN(Program p, Program::load_bytes(std::move(bytes)));
  LoadMethodOptions share;
  share.share_device_arenas = true;
  Result<Method> refused = p.load_method("forward", share);
  EXPECT_EQ(refused.status().code(), ErrorCode::InvalidArgument);
  EXPECT_ERROR_CONTAINS(refused, "plans two buffers on cuda:0");
  EXPECT_EQ(cuda_->counts().bytes_live, 0) << "nothing allocated";
  ASSERT_OK_AND_ASSIGN(Method own, p.load_method("forward"));
  std::vector<float> x(3 * 4, 1.f);
  TensorView in = TensorView::contiguous(x.data(), DType::F32, {3, 4});
  ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, own.execute({&in, 1}));
  auto y = out[0].values<float>();
  const std::vector<float> want = fixtures::relu_add_reference(x, 4);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y[i], want[i]) << i;
}

}  // namespace
}  // namespace planrt
