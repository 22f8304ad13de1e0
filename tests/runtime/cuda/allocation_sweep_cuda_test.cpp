// Allocation-failure sweeps on a GPU (issue 6, item 3, the GPU lane's half): the real CUDA
// allocator, the warm pool and the engines' shared scratch, failed at their N-th allocation
// for N = 1, 2, ... until the call succeeds (platform/cuda/fault_injection.h makes the
// N-th cudaMalloc / cudaMallocFromPoolAsync / cudaMallocHost take its out-of-memory path).
//
// Every failure must be an OutOfMemory naming the method; afterwards the device's used
// memory (cudaMemGetInfo: what the driver really holds) must be back at its figure before
// the attempt, as must the `cuda` backend's live segments and resident weights; the next
// attempt must succeed with outputs bit-identical to an undisturbed run. The CPU half, with
// counting allocators and LeakSanitizer, is tests/runtime/allocation_sweep_test.cpp.
// Points per case are printed ("[sweep]") for docs/reliability.md.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <memory>

#include "planrt/backends/cuda.h"
#include "planrt/backends/engine.h"
#include "planrt/builder/builder.h"
#include "planrt/platform/cuda.h"
#include "planrt/runtime/program.h"
#include "platform/cuda/fault_injection.h"
#include "runtime/runtime_test_util.h"
#include "support/built_programs.h"
#include "support/gpu.h"

namespace planrt {
namespace {

using runtime_test::contains;
namespace fault = cuda::testing;

constexpr int64_t kMaxPoints = 2000;  // far above any case here: a sweep that never ends fails
const Device kGpu = Device::cuda(0);

// What must come back after every attempt.
struct Figures {
  uint64_t device_used = 0;  // cudaMemGetInfo
  int64_t live_segments = 0;
  int64_t resident_weights = 0;
  friend bool operator==(const Figures&, const Figures&) = default;
};

std::ostream& operator<<(std::ostream& os, const Figures& f) {
  return os << "{device used " << f.device_used << " B, live segments " << f.live_segments
            << ", resident weights " << f.resident_weights << "}";
}

Figures figures() {
  Figures f;
  Result<CudaDeviceMemory> mem = cuda_device_memory(kGpu);
  EXPECT_TRUE(mem.ok()) << mem.status().to_string();
  if (mem.ok()) f.device_used = mem->used_bytes();
  CudaBackendStats s = cuda_backend_stats();
  f.live_segments = s.live_segments;
  f.resident_weights = s.resident_weights;
  return f;
}

// One attempt: the swept call made with the n-th allocation armed to fail (0: none), then,
// if it succeeded, the outputs checked and everything the attempt made released again.
using Attempt = std::function<Status(int64_t n)>;

// Returns the points tried (the failures plus the success), 0 on a defect.
int64_t run_sweep(const std::string& name, const std::string& must_name, const Attempt& attempt) {
  SCOPED_TRACE(name);
  const Figures before = figures();
  for (int64_t n = 1; n <= kMaxPoints; ++n) {
    SCOPED_TRACE(::testing::Message() << "failing allocation " << n);
    const int64_t failed0 = fault::injected_allocation_counts().failed;
    Status s = attempt(n);
    fault::fail_nth_allocation(0);
    const bool fired = fault::injected_allocation_counts().failed > failed0;
    EXPECT_EQ(figures(), before) << "after: " << s.to_string();
    if (s.ok()) {
      EXPECT_FALSE(fired) << "the call succeeded though allocation " << n << " failed";
      ::testing::Test::RecordProperty("sweep_points:" + name, static_cast<int>(n));
      std::cout << "[sweep] " << name << ": " << n << " points (" << n - 1
                << " failing allocations, then success)\n";
      return n;
    }
    if (n <= 3 || n % 10 == 0) std::cout << "[sweep] " << name << ": point " << n << ": " << s.to_string() << "\n";
    EXPECT_TRUE(fired) << "failed without the injected failure: " << s.to_string();
    EXPECT_EQ(s.code(), ErrorCode::OutOfMemory) << s.to_string();
    EXPECT_TRUE(contains(s.message(), "out of memory")) << s.to_string();
    EXPECT_TRUE(contains(s.message(), must_name)) << s.to_string();
    Status again = attempt(0);
    EXPECT_TRUE(again.ok()) << "the attempt after the failure: " << again.to_string();
    EXPECT_EQ(figures(), before) << "after the retry";
    if (::testing::Test::HasFailure()) return 0;
  }
  ADD_FAILURE() << name << ": still failing after " << kMaxPoints << " points";
  return 0;
}

Status expect_equal(const std::vector<float>& got, const std::vector<float>& want) {
  if (got == want) return {};
  return Status(ErrorCode::Internal, "the outputs differ from an undisturbed run");
}

// ------------------------------------------------------------------------ the models

constexpr int64_t kModel = 64;

builder::TransformerOptions transformer(const std::string& partition) {
  builder::TransformerOptions o;
  o.layers = 2;
  o.d_model = kModel;
  o.heads = 4;
  o.ffn_per_block = {128, 256};  // two engines needing different scratch
  o.max_seq = 64;
  o.weights = "random:7";
  o.partition = partition;
  o.device = "cuda:0";
  return o;
}

Result<std::vector<float>> forward(Method& m, int64_t s) {
  std::vector<float> x(static_cast<size_t>(s * kModel));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.13f * static_cast<float>(i));
  TensorView in = TensorView::contiguous(x.data(), DType::F32, {1, s, kModel});
  PLANRT_ASSIGN_OR_RETURN(std::vector<Tensor> out, m.execute({&in, 1}));
  auto v = out[0].values<float>();
  return std::vector<float>(v.begin(), v.end());
}

Result<std::vector<float>> relu_add(Method& m, int64_t s) {
  std::vector<float> x = runtime_test::make_x(s);
  TensorView in = runtime_test::view_of(x, {s, runtime_test::kFeatures});
  PLANRT_ASSIGN_OR_RETURN(std::vector<Tensor> out, m.execute({&in, 1}));
  return runtime_test::floats(out[0]);
}

LoadMethodOptions engine_scratch(bool pooled) {
  LoadMethodOptions o;
  o.backend_options["engine"].push_back({std::string(kSharedScratchOption), pooled ? "true" : "false"});
  return o;
}

class AllocationSweepCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    PLANRT_REQUIRE_GPU_OR_SKIP();
    ASSERT_TRUE(register_cuda_backend().ok());
    ASSERT_TRUE(register_engine_backend().ok());
    ASSERT_TRUE(trim_engine_scratch_pool(kGpu).ok());
  }
  void TearDown() override {
    fault::fail_nth_allocation(0);
    if (visible_) {
      EXPECT_TRUE(trim_engine_scratch_pool(kGpu).ok());
    }
  }

  // Load `method` with the n-th allocation failing, then run it unarmed and compare.
  static Attempt load_attempt(const Program& p, const std::string& method,
                              const LoadMethodOptions& options,
                              std::function<Result<std::vector<float>>(Method&)> run,
                              const std::vector<float>& want) {
    return [&p, method, options, run, &want](int64_t n) -> Status {
      fault::fail_nth_allocation(n);
      Result<Method> m = p.load_method(method, options);
      fault::fail_nth_allocation(0);
      if (!m.ok()) return m.status();
      PLANRT_ASSIGN_OR_RETURN(std::vector<float> out, run(*m));
      Status same = expect_equal(out, want);
      // The pooled engines' buffer outlives the method: give it back, as before the attempt.
      PLANRT_RETURN_IF_ERROR(trim_engine_scratch_pool(kGpu));
      return same;
    };
  }

  // Run the loaded `m` with the n-th allocation failing, then compare.
  static Attempt execute_attempt(Method& m, std::function<Result<std::vector<float>>(Method&)> run,
                                 const std::vector<float>& want, bool trim) {
    return [&m, run, &want, trim](int64_t n) -> Status {
      fault::fail_nth_allocation(n);
      Result<std::vector<float>> out = run(m);
      fault::fail_nth_allocation(0);
      // Each attempt starts from an empty shared scratch pool, so it makes the same growths.
      if (trim) PLANRT_RETURN_IF_ERROR(trim_engine_scratch_pool(kGpu));
      if (!out.ok()) return out.status();
      return expect_equal(*out, want);
    };
  }

  // The outputs of an undisturbed load and run (also warms the kernels, so their lazily
  // loaded code is on the device before the figures are first read).
  static std::vector<float> reference(const Program& p, const std::string& method,
                                      const LoadMethodOptions& options,
                                      const std::function<Result<std::vector<float>>(Method&)>& run) {
    Result<Method> m = p.load_method(method, options);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    if (!m.ok()) return {};
    Result<std::vector<float>> out = run(*m);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_TRUE(trim_engine_scratch_pool(kGpu).ok());
    return out.ok() ? *out : std::vector<float>();
  }

  bool visible_ = testing_support::visible_gpu_count() > 0;
};

// The two-method program of the CPU sweep: its device method's arenas from the real
// allocator, its `cuda` segment's error records and temporaries from CUDA.
TEST_F(AllocationSweepCuda, TheMixedProgramsDeviceMethodLoadsAndRunsOrFailsCleanly) {
  Program p = runtime_test::load_fixture(runtime_test::host_and_device_program());
  auto run = [](Method& m) { return relu_add(m, 5); };
  const std::vector<float> want = reference(p, "device", {}, run);
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(want, fixtures::relu_add_reference(runtime_test::make_x(5),
                                                             runtime_test::kFeatures));
  EXPECT_GE(run_sweep("gpu load_method mixed program device method", "method 'device'",
                      load_attempt(p, "device", {}, run, want)),
            4);  // a device arena, the segment's device and pinned error records, then success
  Result<Method> m = p.load_method("device");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_TRUE(run(*m).ok());  // the warm pool keeps what a run takes: reserve it first
  EXPECT_GE(run_sweep("gpu execute mixed program device method", "method 'device'",
                      execute_attempt(*m, run, want, false)),
            2);  // at least one warm-pool temporary per call (measured: exactly one)
}

TEST_F(AllocationSweepCuda, TheCudaPartitionLoadsAndRunsOrFailsCleanly) {
  // A planned scratch (the builder's default) allocates nothing per call: one point, the
  // success. The warm-pool form's temporaries are swept below.
  {
    Result<Program> planned = fixtures::load_transformer(transformer("cuda"));
    ASSERT_TRUE(planned.ok()) << planned.status().to_string();
    auto run = [](Method& m) { return forward(m, 48); };
    const std::vector<float> want = reference(*planned, "forward", {}, run);
    Result<Method> m = planned->load_method("forward");
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(run_sweep("gpu execute transformer cuda partition, planned scratch", "method 'forward'",
                        execute_attempt(*m, run, want, false)),
              1);
  }
  builder::BuildOptions pool_form;
  pool_form.plan_cuda_scratch = false;
  Result<Program> p = fixtures::load_transformer(transformer("cuda"), pool_form);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto run = [](Method& m) { return forward(m, 48); };
  const std::vector<float> want = reference(*p, "forward", {}, run);
  ASSERT_FALSE(want.empty());
  // Arenas, every weight's upload, each segment's error records.
  EXPECT_GE(run_sweep("gpu load_method transformer cuda partition", "method 'forward'",
                      load_attempt(*p, "forward", {}, run, want)),
            10);
  // The segments' per-call temporaries from the warm pool.
  Result<Method> m = p->load_method("forward");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_TRUE(run(*m).ok());  // the warm pool keeps what a run takes: reserve it first
  EXPECT_GE(run_sweep("gpu execute transformer cuda partition", "method 'forward'",
                      execute_attempt(*m, run, want, false)),
            5);
}

TEST_F(AllocationSweepCuda, EnginesLoadOrFailCleanlyPrivateAndPooled) {
  Result<Program> p = fixtures::load_transformer(transformer("engine-per-block"));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto run = [](Method& m) { return forward(m, 48); };
  for (bool pooled : {false, true}) {
    const std::vector<float> want = reference(*p, "forward", engine_scratch(pooled), run);
    ASSERT_FALSE(want.empty());
    EXPECT_GE(run_sweep(std::string("gpu load_method engine-per-block ") +
                            (pooled ? "pooled" : "private") + " scratch",
                        "method 'forward'", load_attempt(*p, "forward", engine_scratch(pooled), run, want)),
              pooled ? 4 : 6);
  }
}

// Pooled engines grow the shared scratch while running: each growth can fail.
TEST_F(AllocationSweepCuda, PooledEnginesRunOrFailCleanlyAtEveryScratchGrowth) {
  Result<Program> p = fixtures::load_transformer(transformer("engine-per-block"));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto run = [](Method& m) { return forward(m, 48); };
  const std::vector<float> want = reference(*p, "forward", engine_scratch(true), run);
  ASSERT_FALSE(want.empty());
  Result<Method> m = p->load_method("forward", engine_scratch(true));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_GE(run_sweep("gpu execute engine-per-block pooled scratch", "shared activation scratch",
                      execute_attempt(*m, run, want, true)),
            2);
}

}  // namespace
}  // namespace planrt
