// Method streams (docs/design.md §7): device work is enqueued on one stream per device and the host
// waits only where it reads. The test allocator's streams defer their work until they are
// synchronized, so a missing wait shows up as wrong numbers, not only as a count.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>

#include "planrt/runtime/program.h"
#include "runtime_test_util.h"
#include "support/test_device.h"

namespace planrt {
namespace {

using namespace runtime_test;
using testing::ScopedTestAllocator;
using testing::ScopedTestBackend;

fixtures::FixtureProgram device_program() {
  fixtures::ReluAddOptions o;
  o.on_cuda = true;
  return fixtures::relu_add_program(o);
}

std::unique_ptr<fb::InstructionT> instruction(fb::InstructionKind kind, std::vector<uint32_t> in,
                                              std::vector<uint32_t> out) {
  auto ins = std::make_unique<fb::InstructionT>();
  ins->kind = kind;
  ins->inputs = std::move(in);
  ins->outputs = std::move(out);
  return ins;
}

// y = relu(2 * relu(x + c) + c): device work, a host kernel reading its result (y + y, in
// place), then device work again reading what the host wrote. Value ids of the device
// fixture: x 0, y 1, x_dev 2, y_dev 3.
fixtures::FixtureProgram device_host_device_program() {
  fixtures::FixtureProgram f = device_program();
  auto& ins = f.program.methods[0]->instructions;
  auto add = instruction(fb::InstructionKind::Kernel, {1, 1}, {1});
  add->op = "add";
  ins.push_back(std::move(add));
  ins.push_back(instruction(fb::InstructionKind::Copy, {1}, {2}));
  auto call = instruction(fb::InstructionKind::Delegate, {2}, {3});
  call->segment = 0;
  ins.push_back(std::move(call));
  ins.push_back(instruction(fb::InstructionKind::Copy, {3}, {1}));
  return f;
}

std::vector<float> twice_then_again(const std::vector<float>& x) {
  std::vector<float> y = fixtures::relu_add_reference(x, kFeatures);
  for (float& v : y) v *= 2;
  return fixtures::relu_add_reference(y, kFeatures);
}

TEST(MethodStreams, DeviceMethodRunsOnOneStreamAndWaitsOncePerRun) {
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda", &cuda.allocator());
  Program p = load_fixture(device_program());
  Result<Method> m = p.load_method("forward");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(cuda->counts().streams_created, 1);
  EXPECT_EQ(m->run_stats().streams, 1);
  for (int64_t s : {3, 7, 16}) {
    std::vector<float> x = make_x(s);
    TensorView in = view_of(x, {s, kFeatures});
    Result<std::vector<Tensor>> out = m->execute({&in, 1});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(floats((*out)[0]), fixtures::relu_add_reference(x, kFeatures)) << "S=" << s;
    EXPECT_EQ(m->run_stats().last_run_synchronizations, 1);
  }
  EXPECT_EQ(m->run_stats().runs, 3);
  EXPECT_EQ(m->run_stats().synchronizations, 3);
  EXPECT_EQ(cuda->counts().synchronizations, 3);
  EXPECT_EQ(backend->counts().executes_on_stream, 3);
  EXPECT_EQ(backend->counts().finishes, 3);
}

// An input that only a device copy reads goes to the device from the caller's memory; one
// that a host kernel reads too is copied into its planned buffer first. Both give the
// same numbers, run after run with different inputs. (x 0, y 1, x_dev 2, y_dev 3.)
TEST(MethodStreams, InputsReachTheDeviceWhetherOrNotAHostKernelReadsThem) {
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda", &cuda.allocator());
  for (bool host_reads_x : {false, true}) {
    SCOPED_TRACE(host_reads_x ? "x read by a host kernel too" : "x read by the copy only");
    fixtures::FixtureProgram f = device_program();
    if (host_reads_x) {
      auto add = instruction(fb::InstructionKind::Kernel, {1, 0}, {1});
      add->op = "add";
      f.program.methods[0]->instructions.push_back(std::move(add));
    }
    Program p = load_fixture(std::move(f));
    Result<Method> m = p.load_method("forward");
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    for (int64_t s : {5, 2, 9}) {
      std::vector<float> x = make_x(s);
      std::vector<float> want = fixtures::relu_add_reference(x, kFeatures);
      if (host_reads_x) {
        for (size_t i = 0; i < want.size(); ++i) want[i] += x[i];
      }
      TensorView in = view_of(x, {s, kFeatures});
      Result<std::vector<Tensor>> out = m->execute({&in, 1});
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      EXPECT_EQ(floats((*out)[0]), want) << "S=" << s;
    }
  }
}

// The host arena a device-to-host copy writes is pinned once at load and unpinned when the
// method goes; copies from pinned memory read it late (the test allocator defers them as a
// GPU would), and the outputs stay right.
TEST(MethodStreams, HostArenaWrittenByDeviceCopiesIsPinnedWhileTheMethodLives) {
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda", &cuda.allocator());
  for (bool pin : {true, false}) {
    SCOPED_TRACE(pin ? "allocator pins" : "allocator does not pin");
    cuda->pin_host(pin);
    const int64_t pins_before = cuda->counts().pins;
    const int64_t unpins_before = cuda->counts().unpins;
    {
      Program p = load_fixture(device_host_device_program());
      Result<Method> m = p.load_method("forward");
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      EXPECT_EQ(cuda->counts().pins - pins_before, pin ? 1 : 0);
      for (int64_t s : {4, 11}) {
        std::vector<float> x = make_x(s);
        TensorView in = view_of(x, {s, kFeatures});
        Result<std::vector<Tensor>> out = m->execute({&in, 1});
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        EXPECT_EQ(floats((*out)[0]), twice_then_again(x)) << "S=" << s;
      }
      EXPECT_EQ(cuda->counts().unpins, unpins_before);
    }
    EXPECT_EQ(cuda->counts().unpins - unpins_before, pin ? 1 : 0);
    EXPECT_EQ(cuda->counts().bad_unpins, 0);
  }
}

TEST(MethodStreams, HostStepBetweenDeviceStepsWaitsForTheDevice) {
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda", &cuda.allocator());
  Program p = load_fixture(device_host_device_program());
  Result<Method> m = p.load_method("forward");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  for (int run = 0; run < 2; ++run) {
    std::vector<float> x = make_x(5);
    for (float& v : x) v += static_cast<float>(run);  // a stale value from run 0 would show
    TensorView in = view_of(x, {5, kFeatures});
    Result<std::vector<Tensor>> out = m->execute({&in, 1});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(floats((*out)[0]), twice_then_again(x)) << "run " << run;
    // Once before the host kernel, once at the end.
    EXPECT_EQ(m->run_stats().last_run_synchronizations, 2);
  }
  // The segment ran twice per run and is finished once per run.
  EXPECT_EQ(backend->counts().executes_on_stream, 4);
  EXPECT_EQ(backend->counts().finishes, 2);
}

TEST(MethodStreams, SynchronizeEachStepWaitsAfterEveryDeviceStep) {
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda", &cuda.allocator());
  Program p = load_fixture(device_host_device_program());
  LoadMethodOptions options;
  options.synchronize_each_step = true;
  Result<Method> m = p.load_method("forward", options);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::vector<float> x = make_x(3);
  TensorView in = view_of(x, {3, kFeatures});
  Result<std::vector<Tensor>> out = m->execute({&in, 1});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0]), twice_then_again(x));
  // Six device steps (copy, segment, copy, twice), one wait after each.
  EXPECT_EQ(m->run_stats().last_run_synchronizations, 6);
  // Each segment call is finished right after its own wait.
  EXPECT_EQ(backend->counts().finishes, 2);
}

TEST(MethodStreams, DeviceWithoutStreamsRunsSynchronously) {
  ScopedTestAllocator cuda;
  cuda->use_streams(false);
  ScopedTestBackend backend("cuda", &cuda.allocator());
  Program p = load_fixture(device_host_device_program());
  Result<Method> m = p.load_method("forward");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::vector<float> x = make_x(6);
  TensorView in = view_of(x, {6, kFeatures});
  Result<std::vector<Tensor>> out = m->execute({&in, 1});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0]), twice_then_again(x));
  EXPECT_EQ(m->run_stats().streams, 0);
  EXPECT_EQ(m->run_stats().synchronizations, 0);
  EXPECT_EQ(backend->counts().executes_on_stream, 0);
}

TEST(MethodStreams, HostMethodHasNoStream) {
  ScopedTestAllocator cuda;
  Program p = load_fixture(fixtures::relu_add_program());
  Result<Method> m = p.load_method("forward");
  ASSERT_TRUE(m.ok());
  std::vector<float> x = make_x(4);
  TensorView in = view_of(x, {4, kFeatures});
  ASSERT_TRUE(m->execute({&in, 1}).ok());
  EXPECT_EQ(m->run_stats().streams, 0);
  EXPECT_EQ(m->run_stats().synchronizations, 0);
  EXPECT_EQ(cuda->counts().streams_created, 0);
}

TEST(MethodStreams, StreamsAreDestroyedWithTheMethodAfterTheirWork) {
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda", &cuda.allocator());
  Program p = load_fixture(device_program());
  {
    Result<Method> m = p.load_method("forward");
    ASSERT_TRUE(m.ok());
    std::vector<float> x = make_x(2);
    TensorView in = view_of(x, {2, kFeatures});
    ASSERT_TRUE(m->run({&in, 1}).ok());
    EXPECT_EQ(cuda->counts().streams_destroyed, 0);
  }
  EXPECT_EQ(cuda->counts().streams_created, 1);
  EXPECT_EQ(cuda->counts().streams_destroyed, 1);
  EXPECT_EQ(cuda->counts().bad_stream_uses, 0);
  EXPECT_EQ(cuda->counts().bytes_live, 0);
}

// A method of copies only (value `from` to value `to`, in order) over three planned
// buffers: the host's, cuda:0's and cuda:1's, of the given sizes.
void finish_copy_program(fixtures::FixtureProgram& f, std::unique_ptr<fb::MethodT> m,
                         const std::vector<std::pair<uint32_t, uint32_t>>& copies,
                         const std::array<uint64_t, 3>& buffer_bytes) {
  for (auto [from, to] : copies) {
    m->instructions.push_back(instruction(fb::InstructionKind::Copy, {from}, {to}));
  }
  m->planned_buffers.push_back(fixtures::planned_buffer(buffer_bytes[0], fb::DeviceType::CPU));
  m->planned_buffers.push_back(fixtures::planned_buffer(buffer_bytes[1], fb::DeviceType::CUDA, 0));
  m->planned_buffers.push_back(fixtures::planned_buffer(buffer_bytes[2], fb::DeviceType::CUDA, 1));
  f.program.methods.push_back(std::move(m));
}

// A copy from cuda:0 to cuda:1 goes on cuda:1's stream, after cuda:0's work; the planner may
// then give the copy's source to a later value on cuda:0. That later write must wait for the
// copy, which reads its source only when cuda:1's stream runs. Hand-made (the builder routes
// device-to-device through the host): a -> x0 (cuda:0), x0 -> y1 (cuda:1), b -> z0 (cuda:0,
// x0's bytes), y1 -> out_a, z0 -> out_b. Without the wait, out_a would be b.
fixtures::FixtureProgram two_device_reuse_program() {
  using fixtures::fixed_dim;
  using fixtures::planned_value;
  constexpr int64_t kN = 8;
  constexpr uint64_t kSlot = 256;
  fixtures::FixtureProgram f;
  f.program.producer = "planrt streams test";
  auto m = std::make_unique<fb::MethodT>();
  m->name = "forward";
  m->values.push_back(planned_value("a", {fixed_dim(kN)}, 0, 0));
  m->values.push_back(planned_value("b", {fixed_dim(kN)}, 0, kSlot));
  m->values.push_back(planned_value("out_a", {fixed_dim(kN)}, 0, 2 * kSlot));
  m->values.push_back(planned_value("out_b", {fixed_dim(kN)}, 0, 3 * kSlot));
  m->values.push_back(planned_value("x0", {fixed_dim(kN)}, 1, 0));
  m->values.push_back(planned_value("z0", {fixed_dim(kN)}, 1, 0));  // x0's bytes, after x0
  m->values.push_back(planned_value("y1", {fixed_dim(kN)}, 2, 0));
  m->inputs = {0, 1};
  m->outputs = {2, 3};
  finish_copy_program(f, std::move(m), {{0, 4}, {4, 6}, {1, 5}, {6, 2}, {5, 3}},
                      {4 * kSlot, kSlot, kSlot});
  return f;
}

TEST(MethodStreams, CopySourceOnAnotherDeviceIsNotOverwrittenBeforeTheCopyRuns) {
  ScopedTestAllocator cuda;
  ASSERT_TRUE(cuda.status().ok());
  Program p = load_fixture(two_device_reuse_program());
  Result<Method> m = p.load_method("forward");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->run_stats().streams, 2);
  for (float base : {1.0f, 100.0f, -7.0f}) {
    std::vector<float> a(8), b(8);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = base + static_cast<float>(i);
      b[i] = -base - static_cast<float>(i) - 0.5f;
    }
    TensorView in[] = {view_of(a, {8}), view_of(b, {8})};
    Result<std::vector<Tensor>> out = m->execute(in);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(floats((*out)[0]), a) << "the copy to cuda:1 read its source after cuda:0 reused it";
    EXPECT_EQ(floats((*out)[1]), b);
  }
  EXPECT_EQ(cuda->counts().copies_d2d, 3);
  EXPECT_EQ(cuda->counts().bad_stream_uses, 0);
}

// What the builder writes for two GPUs: cuda:0 -> cuda:1 goes through a pinned host value,
// a device-to-host copy on cuda:0's stream, then a host-to-device copy on cuda:1's. The
// second must wait for the first (it reads the host bytes only when its stream runs), and a
// later device-to-host copy into the same host bytes (the plan reused them) must wait for
// the second. cuda:1 does the first device work, so its stream is drained first at the end
// of a run, which is the order that shows both hazards. Steps (host: a b c out_*, h and g
// on one slot; cuda:0: x0 z0; cuda:1: w1 y1 v1):
//   b -> w1 -> out_b   (cuda:1 first)
//   a -> x0 -> h -> y1 -> out_a,  c -> z0 -> g (h's bytes) -> v1 -> out_c
fixtures::FixtureProgram two_devices_through_the_host_program() {
  using fixtures::fixed_dim;
  using fixtures::planned_value;
  constexpr int64_t kN = 8;
  constexpr uint64_t kSlot = 256;
  fixtures::FixtureProgram f;
  f.program.producer = "planrt streams test";
  auto m = std::make_unique<fb::MethodT>();
  m->name = "forward";
  const char* host[] = {"a", "b", "c", "out_a", "out_b", "out_c", "h"};
  for (uint64_t i = 0; i < std::size(host); ++i) {
    m->values.push_back(planned_value(host[i], {fixed_dim(kN)}, 0, i * kSlot));
  }
  m->values.push_back(planned_value("g", {fixed_dim(kN)}, 0, 6 * kSlot));  // 7: h's bytes
  m->values.push_back(planned_value("x0", {fixed_dim(kN)}, 1, 0));         // 8
  m->values.push_back(planned_value("z0", {fixed_dim(kN)}, 1, kSlot));     // 9
  m->values.push_back(planned_value("w1", {fixed_dim(kN)}, 2, 0));         // 10
  m->values.push_back(planned_value("y1", {fixed_dim(kN)}, 2, kSlot));     // 11
  m->values.push_back(planned_value("v1", {fixed_dim(kN)}, 2, 2 * kSlot)); // 12
  m->inputs = {0, 1, 2};
  m->outputs = {3, 4, 5};
  finish_copy_program(f, std::move(m),
                      {{1, 10}, {10, 4}, {0, 8}, {8, 6}, {6, 11}, {2, 9}, {9, 7}, {7, 12}, {11, 3}, {12, 5}},
                      {7 * kSlot, 2 * kSlot, 3 * kSlot});
  return f;
}

TEST(MethodStreams, CopiesBetweenDevicesThroughPinnedHostMemoryWaitForEachOther) {
  ScopedTestAllocator cuda;
  ASSERT_TRUE(cuda.status().ok());
  Program p = load_fixture(two_devices_through_the_host_program());
  Result<Method> m = p.load_method("forward");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->run_stats().streams, 2);
  EXPECT_GE(cuda->counts().pins, 1);  // the host bytes are read when the stream runs
  for (float base : {1.0f, 100.0f, -7.0f}) {
    std::vector<float> a(8), b(8), c(8);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = base + static_cast<float>(i);
      b[i] = 2 * base - static_cast<float>(i);
      c[i] = -base - static_cast<float>(i) - 0.5f;
    }
    TensorView in[] = {view_of(a, {8}), view_of(b, {8}), view_of(c, {8})};
    Result<std::vector<Tensor>> out = m->execute(in);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(floats((*out)[0]), a) << "cuda:1 read the host bytes before cuda:0 wrote them, "
                                       "or after cuda:0 overwrote them";
    EXPECT_EQ(floats((*out)[1]), b);
    EXPECT_EQ(floats((*out)[2]), c) << "cuda:1 read the host bytes before cuda:0 wrote them";
  }
  EXPECT_EQ(cuda->counts().bad_stream_uses, 0);
}

TEST(MethodStreams, FailedStreamCreationFailsTheLoadAndLeavesNothing) {
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda", &cuda.allocator());
  Program p = load_fixture(device_program());
  cuda->fail_next_stream();
  Result<Method> m = p.load_method("forward");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(contains(m.status().message(), "creating its stream on cuda:0")) << m.status().to_string();
  EXPECT_EQ(cuda->counts().bytes_live, 0);
  EXPECT_EQ(backend->counts().inits, 0);  // streams come before the segments' init
  Result<Method> again = p.load_method("forward");
  EXPECT_TRUE(again.ok()) << again.status().to_string();
}

}  // namespace
}  // namespace planrt
