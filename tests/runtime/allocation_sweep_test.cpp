// Allocation-failure sweeps (issue 6, item 3): for load_method and execute, the N-th
// allocation of a counting allocator fails, for N = 1, 2, ... until the call succeeds.
// Every failure must be an OutOfMemory naming the method and the allocation that failed,
// leave the allocators' live bytes where they started, and be followed by an attempt that
// succeeds with the outputs of an undisturbed run. The number of points each sweep tried
// is recorded (RecordProperty "sweep_points:<case>", and a "[sweep]" line) for
// docs/reliability.md.
//
// Host memory is counted by a TestDeviceAllocator registered for the CPU: the arenas, the
// engines' private scratch and the engine pool's CPU buffer all come from the registered
// CPU allocator. Output tensors do not (Tensor uses host_allocator() itself, so a Tensor
// never depends on a registration's lifetime); LeakSanitizer covers those.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>

#include "planrt/backends/engine.h"
#include "planrt/builder/builder.h"
#include "planrt/runtime/program.h"
#include "runtime_test_util.h"
#include "support/built_programs.h"
#include "support/test_device.h"

namespace planrt {
namespace {

using namespace runtime_test;
using testing::ScopedTestAllocator;
using testing::ScopedTestBackend;
using testing::TestDeviceAllocator;

constexpr int64_t kMaxPoints = 1000;  // far above any case here: a sweep that never ends fails

// One attempt of the swept call: `n` > 0 arms `armed` to fail its n-th allocation during
// that call only (0: nothing fails). On success the attempt also checks the outputs and
// releases what it made, so the allocators' live bytes are back at their starting figure.
using Attempt = std::function<Status(int64_t n)>;

struct Sweep {
  std::string name;                              // the case, for the record
  TestDeviceAllocator* armed = nullptr;          // whose allocations fail
  std::vector<TestDeviceAllocator*> watched;     // whose live bytes must come back
  std::vector<std::string> must_name;            // what every error message must contain
};

std::vector<int64_t> live_bytes(const std::vector<TestDeviceAllocator*>& watched) {
  std::vector<int64_t> out;
  for (TestDeviceAllocator* a : watched) out.push_back(a->counts().bytes_live);
  return out;
}

// Returns the number of points tried (the failures plus the success), 0 on a defect.
int64_t run_sweep(const Sweep& sweep, const Attempt& attempt) {
  SCOPED_TRACE(sweep.name);
  const std::vector<int64_t> live0 = live_bytes(sweep.watched);
  for (int64_t n = 1; n <= kMaxPoints; ++n) {
    SCOPED_TRACE(::testing::Message() << "failing allocation " << n);
    const int64_t failed0 = sweep.armed->counts().failed_allocations;
    Status s = attempt(n);
    const bool fired = sweep.armed->counts().failed_allocations > failed0;
    EXPECT_EQ(live_bytes(sweep.watched), live0) << "leaked after: " << s.to_string();
    if (s.ok()) {
      // A call that succeeded although an allocation failed swallowed the failure.
      EXPECT_FALSE(fired) << "the call succeeded though allocation " << n << " failed";
      EXPECT_EQ(sweep.armed->counts().bad_deallocations, 0);
      ::testing::Test::RecordProperty("sweep_points:" + sweep.name, static_cast<int>(n));
      std::cout << "[sweep] " << sweep.name << ": " << n << " points (" << n - 1
                << " failing allocations, then success)\n";
      return n;
    }
    std::cout << "[sweep] " << sweep.name << ": point " << n << ": " << s.to_string() << "\n";
    EXPECT_TRUE(fired) << "failed without the injected failure: " << s.to_string();
    EXPECT_EQ(s.code(), ErrorCode::OutOfMemory) << s.to_string();
    const std::string& msg = s.message();
    EXPECT_TRUE(contains(msg, "test allocator: allocation")) << msg;
    for (const std::string& part : sweep.must_name) EXPECT_TRUE(contains(msg, part)) << msg;
    Status again = attempt(0);
    EXPECT_TRUE(again.ok()) << "the attempt after the failure: " << again.to_string();
    EXPECT_EQ(live_bytes(sweep.watched), live0) << "leaked after the retry";
    if (::testing::Test::HasFatalFailure()) return 0;
  }
  ADD_FAILURE() << sweep.name << ": still failing after " << kMaxPoints << " points";
  return 0;
}

Result<std::vector<float>> relu_add_outputs(Method& m, int64_t s) {
  std::vector<float> x = make_x(s);
  TensorView in = view_of(x, {s, kFeatures});
  PLANRT_ASSIGN_OR_RETURN(std::vector<Tensor> out, m.execute({&in, 1}));
  return floats(out[0]);
}

Status expect_equal(const std::vector<float>& got, const std::vector<float>& want) {
  if (got == want) return {};
  return Status(ErrorCode::Internal, "the outputs differ from an undisturbed run");
}

// --------------------------------------------------------------- the mixed program

class MixedProgramSweep : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(host_.status().ok() && cuda_.status().ok() && backend_.status().ok());
    backend_->check_device_memory(&cuda_.allocator());
    program_ = std::make_unique<Program>(load_fixture(host_and_device_program()));
  }

  // Load (armed), then run and compare (unarmed), then unload.
  Attempt load_attempt(TestDeviceAllocator& armed, const std::string& method) {
    return [this, &armed, method](int64_t n) -> Status {
      armed.fail_nth_allocation(n);
      Result<Method> m = program_->load_method(method);
      armed.fail_nth_allocation(0);
      if (!m.ok()) return m.status();
      PLANRT_ASSIGN_OR_RETURN(std::vector<float> out, relu_add_outputs(*m, 5));
      return expect_equal(out, fixtures::relu_add_reference(make_x(5), kFeatures));
    };
  }

  // Declared first: they outlive the program and every method.
  ScopedTestAllocator host_{DeviceType::CPU};
  ScopedTestAllocator cuda_;
  ScopedTestBackend backend_{"cuda"};
  std::unique_ptr<Program> program_;
};

TEST_F(MixedProgramSweep, LoadingTheHostMethodFailsCleanlyAtEveryHostAllocation) {
  int64_t points = run_sweep({"load_method host method, cpu allocations", &host_.allocator(),
                              {&host_.allocator(), &cuda_.allocator()}, {"method 'host'", "cpu"}},
                             load_attempt(host_.allocator(), "host"));
  EXPECT_GE(points, 2);  // at least its one arena: a sweep that failed nothing proves nothing
  EXPECT_FALSE(program_->shared_host_arenas_allocated());
}

// Device buffers first (rule 3), then host: each side swept on its own.
TEST_F(MixedProgramSweep, LoadingTheDeviceMethodFailsCleanlyAtEveryDeviceAndHostAllocation) {
  for (auto [armed, device] : {std::pair{&cuda_.allocator(), "cuda"}, {&host_.allocator(), "cpu"}}) {
    int64_t points = run_sweep({std::string("load_method device method, ") + device + " allocations",
                                armed, {&host_.allocator(), &cuda_.allocator()},
                                {"method 'device'", device, "bytes"}},
                               load_attempt(*armed, "device"));
    EXPECT_GE(points, 2) << device;
  }
}

// Not an allocate() call, but the other resource a device load takes: its stream.
TEST_F(MixedProgramSweep, AFailedStreamCreationLeavesNothingAndTheNextLoadWorks) {
  cuda_->fail_next_stream();
  Result<Method> m = program_->load_method("device");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(contains(m.status().message(), "method 'device'")) << m.status().to_string();
  EXPECT_TRUE(contains(m.status().message(), "stream")) << m.status().to_string();
  EXPECT_EQ(cuda_->counts().bytes_live, 0);
  EXPECT_EQ(host_->counts().bytes_live, 0);
  EXPECT_EQ(cuda_->counts().streams_created, cuda_->counts().streams_destroyed);
  EXPECT_TRUE(load_attempt(cuda_.allocator(), "device")(0).ok());
}

// execute() of either method allocates nothing through the allocators (the arenas exist,
// outputs come from host_allocator()): the sweep's first point succeeds, and must.
TEST_F(MixedProgramSweep, ExecuteOfBothMethodsAllocatesNothingThroughTheAllocators) {
  for (const char* name : {"host", "device"}) {
    Result<Method> m = program_->load_method(name);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    for (TestDeviceAllocator* armed : {&host_.allocator(), &cuda_.allocator()}) {
      std::string label = std::string("execute ") + name + " method, " +
                          (armed == &host_.allocator() ? "cpu" : "cuda") + " allocations";
      int64_t points = run_sweep(
          {label, armed, {&host_.allocator(), &cuda_.allocator()}, {}},
          [&](int64_t n) -> Status {
            armed->fail_nth_allocation(n);
            Result<std::vector<float>> out = relu_add_outputs(*m, 7);
            armed->fail_nth_allocation(0);
            if (!out.ok()) return out.status();
            return expect_equal(*out, fixtures::relu_add_reference(make_x(7), kFeatures));
          });
      EXPECT_EQ(points, 1) << label;
    }
  }
}

// ------------------------------------------------ the builder's engines on the CPU device

builder::TransformerOptions engine_blocks(const std::string& partition) {
  builder::TransformerOptions o;
  o.layers = 3;
  o.d_model = 32;
  o.heads = 4;
  o.ffn_per_block = {64, 256, 1024};  // three engines, three different requirements
  o.max_seq = 32;
  o.weights = "random:3";
  o.partition = partition;
  o.device = "cpu";
  return o;
}

Result<Program> build_engines(bool shared, const std::string& partition = "engine-per-block") {
  builder::BuildOptions b;
  b.shared_scratch = shared;
  return fixtures::load_transformer(engine_blocks(partition), b);
}

std::vector<float> engine_input(int64_t s) {
  std::vector<float> x(static_cast<size_t>(s * 32));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  return x;
}

Result<std::vector<float>> forward(Method& m, int64_t s) {
  std::vector<float> x = engine_input(s);
  TensorView in = TensorView::contiguous(x.data(), DType::F32, {1, s, 32});
  PLANRT_ASSIGN_OR_RETURN(std::vector<Tensor> out, m.execute({&in, 1}));
  return floats(out[0]);
}

class EngineSweep : public ::testing::Test {
 protected:
  void SetUp() override {
    registered_here_ = get_backend("engine") == nullptr;
    ASSERT_TRUE(register_engine_backend().ok());
    // The pool may hold a buffer from another test's allocator: give it back first, so
    // every growth below comes from (and returns to) the counting allocator.
    ASSERT_TRUE(trim_engine_scratch_pool(Device::cpu()).ok());
    ASSERT_TRUE(host_.status().ok());
  }
  void TearDown() override {
    method_.reset();
    // The pool's buffer came from host_, which goes away with the fixture.
    EXPECT_TRUE(trim_engine_scratch_pool(Device::cpu()).ok());
    EXPECT_EQ(host_->counts().bytes_live, 0);
    EXPECT_EQ(host_->counts().bad_deallocations, 0);
    // Leave the registry as found: other tests list what is registered.
    if (registered_here_) {
      EXPECT_TRUE(unregister_backend("engine").ok());
    }
  }

  // The outputs of an undisturbed load and run of `program`.
  std::vector<float> reference(const Program& program, int64_t s) {
    Result<Method> m = program.load_method("forward");
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    if (!m.ok()) return {};
    Result<std::vector<float>> out = forward(*m, s);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_TRUE(trim_engine_scratch_pool(Device::cpu()).ok());
    return out.ok() ? *out : std::vector<float>();
  }

  // A pooled build, its undisturbed outputs at S = 32, and its method loaded.
  void load_pooled() {
    Result<Program> program = build_engines(true);
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    program_ = std::make_unique<Program>(std::move(program).value());
    want_ = reference(*program_, 32);
    ASSERT_FALSE(want_.empty());
    Result<Method> m = program_->load_method("forward");
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    method_ = std::make_unique<Method>(std::move(m).value());
  }

  ScopedTestAllocator host_{DeviceType::CPU};
  bool registered_here_ = false;
  std::unique_ptr<Program> program_;
  std::vector<float> want_;
  std::unique_ptr<Method> method_;
};

TEST_F(EngineSweep, LoadingPrivateEnginesFailsCleanlyAtEveryAllocation) {
  // One engine for the whole model, and one per block.
  for (auto [partition, least] : {std::pair{"engine", 2}, {"engine-per-block", 4}}) {
    Result<Program> program = build_engines(false, partition);
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    const std::vector<float> want = reference(*program, 32);
    ASSERT_FALSE(want.empty());
    int64_t points = run_sweep(
        {std::string("load_method ") + partition + " private scratch, cpu allocations",
         &host_.allocator(), {&host_.allocator()}, {"method 'forward'"}},
        [&](int64_t n) -> Status {
          host_->fail_nth_allocation(n);
          Result<Method> m = program->load_method("forward");
          host_->fail_nth_allocation(0);
          if (!m.ok()) return m.status();
          PLANRT_ASSIGN_OR_RETURN(std::vector<float> out, forward(*m, 32));
          return expect_equal(out, want);
        });
    EXPECT_GE(points, least) << partition;  // the arena and each engine's private scratch
  }
}

// Pooled engines allocate while running: the pool grows once per engine whose call needs
// more than the buffer holds (three here, each engine needing more than the one before).
TEST_F(EngineSweep, ExecutingPooledEnginesFailsCleanlyAtEveryPoolGrowth) {
  ASSERT_NO_FATAL_FAILURE(load_pooled());
  Method* m = method_.get();
  const std::vector<float>& want = want_;
  int64_t points = run_sweep(
      {"execute engine-per-block pooled scratch, cpu allocations", &host_.allocator(),
       {&host_.allocator()}, {"method 'forward'", "shared activation scratch on cpu"}},
      [&](int64_t n) -> Status {
        host_->fail_nth_allocation(n);
        Result<std::vector<float>> out = forward(*m, 32);
        host_->fail_nth_allocation(0);
        // Each attempt starts from an empty pool, so it makes the same growths.
        PLANRT_RETURN_IF_ERROR(trim_engine_scratch_pool(Device::cpu()));
        if (!out.ok()) return out.status();
        return expect_equal(*out, want);
      });
  EXPECT_GE(points, 2);
}

// Without a trim between attempts, a failed growth leaves the pool as it was and the next
// call grows it from there.
TEST_F(EngineSweep, APooledRunAfterAFailedGrowthGrowsFromWhereItStoppedAndIsCorrect) {
  ASSERT_NO_FATAL_FAILURE(load_pooled());
  Method* m = method_.get();
  const std::vector<float>& want = want_;
  const int64_t live0 = host_->counts().bytes_live;  // the method's arenas, an empty pool
  host_->fail_nth_allocation(2);  // the second growth: the first engine has run
  Result<std::vector<float>> failed = forward(*m, 32);
  host_->fail_nth_allocation(0);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), ErrorCode::OutOfMemory);
  Result<EngineScratchStats> stats = engine_scratch_stats(Device::cpu());
  ASSERT_TRUE(stats.ok());
  EXPECT_GT(stats->pool_capacity_bytes, 0u);
  // The first growth's buffer stays, nothing else does.
  EXPECT_EQ(host_->counts().bytes_live, live0 + static_cast<int64_t>(stats->pool_capacity_bytes));
  Result<std::vector<float>> out = forward(*m, 32);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, want);
}

// The pool's CPU buffer outlives the call that grew it, and the CPU registration can change
// in between: a buffer must go back to the allocator that gave it, never to whichever is
// registered when the pool grows again or is trimmed.
TEST(EnginePoolOnTheCpu, EachBufferGoesBackToTheAllocatorItCameFrom) {
  const bool registered_here = get_backend("engine") == nullptr;
  ASSERT_TRUE(register_engine_backend().ok());
  ASSERT_TRUE(trim_engine_scratch_pool(Device::cpu()).ok());
  Result<Program> program = build_engines(true);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  Result<Method> m = program->load_method("forward");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_TRUE(forward(*m, 1).ok());  // a small pool, from the built-in host allocator
  Result<EngineScratchStats> small = engine_scratch_stats(Device::cpu());
  ASSERT_TRUE(small.ok());
  ASSERT_GT(small->pool_capacity_bytes, 0u);
  {
    ScopedTestAllocator counted(DeviceType::CPU);
    ASSERT_TRUE(counted.status().ok());
    ASSERT_TRUE(forward(*m, 32).ok());  // grows from `counted`, frees the small one
    Result<EngineScratchStats> large = engine_scratch_stats(Device::cpu());
    ASSERT_TRUE(large.ok());
    ASSERT_GT(large->pool_capacity_bytes, small->pool_capacity_bytes);
    EXPECT_EQ(counted->counts().bad_deallocations, 0);  // the small buffer was not its own
    EXPECT_EQ(counted->counts().bytes_live, static_cast<int64_t>(large->pool_capacity_bytes));
    ASSERT_TRUE(trim_engine_scratch_pool(Device::cpu()).ok());
    EXPECT_EQ(counted->counts().bytes_live, 0);
    EXPECT_EQ(counted->counts().bad_deallocations, 0);
  }
  if (registered_here) {
    EXPECT_TRUE(unregister_backend("engine").ok());
  }
}

}  // namespace
}  // namespace planrt
