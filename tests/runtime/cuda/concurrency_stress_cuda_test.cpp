// Concurrency stress (issue 6, item 4) on a GPU: the harness of support/concurrency_stress.h
// with everything real: the engines method's two engines are CUDA engines on cuda:0 (pooled
// and private scratch side by side, the pool grown and trimmed under load), the
// device-tagged method's `cuda` segment runs on the `cuda` backend with the CUDA allocator's
// arenas and the warm pool's temporaries. Every output must be bit-identical to a serial
// run. scripts/gpu-sanitize.sh also runs it under compute-sanitizer (memcheck, racecheck,
// synccheck), with fewer iterations.
//
// Environment: PLANRT_STRESS_THREADS (default 4), PLANRT_STRESS_ITERATIONS per thread
// (default 500).
#include <gtest/gtest.h>

#include <iostream>

#include "planrt/backends/cuda.h"
#include "planrt/backends/engine.h"
#include "planrt/builder/builder.h"
#include "planrt/runtime/program.h"
#include "support/concurrency_stress.h"
#include "support/gpu.h"

namespace planrt {
namespace {

Result<Program> load(const std::vector<uint8_t>& bytes) { return Program::load_bytes(bytes); }

TEST(ConcurrencyStressCuda, ThreadsRunningCudaSegmentsAndCudaEnginesMatchASerialRun) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  ASSERT_TRUE(register_cuda_backend().ok());
  ASSERT_TRUE(register_engine_backend().ok());
  const Device gpu = Device::cuda(0);
  ASSERT_TRUE(trim_engine_scratch_pool(gpu).ok());
  const int threads = stress::env_int("PLANRT_STRESS_THREADS", 4);
  const int iterations = stress::env_int("PLANRT_STRESS_ITERATIONS", 500);

  Result<std::vector<uint8_t>> bytes = stress::program_bytes("cuda:0");
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  {
    Result<Program> program = load(*bytes), transient = load(*bytes);
    ASSERT_TRUE(program.ok() && transient.ok()) << program.status().to_string();
    Result<stress::Counts> counts = stress::run(*program, *transient, {threads, iterations, gpu});
    ASSERT_TRUE(counts.ok()) << counts.status().to_string();
    if (!counts->first_failure.empty()) ADD_FAILURE() << "first failure: " << counts->first_failure;
    std::cout << "[stress] cuda: " << threads << " threads x " << stress::method_names().size()
              << " methods x " << iterations << " iterations: " << counts->runs << " runs ("
              << counts->transient_runs << " of them on a method loaded for that run), "
              << counts->mismatches << " mismatches, " << counts->errors << " errors, "
              << counts->reloads << " reloads, " << counts->trims << " pool trims\n";
    RecordProperty("stress_runs", static_cast<int>(counts->runs));
    RecordProperty("stress_mismatches", static_cast<int>(counts->mismatches));
    EXPECT_EQ(counts->runs - counts->transient_runs, int64_t{threads} * iterations);
    EXPECT_EQ(counts->mismatches, 0);
    EXPECT_EQ(counts->errors, 0);
    EXPECT_EQ(counts->pooled_contexts_left, 2) << "the shared 'engines' method's two engines";
    EXPECT_EQ(counts->private_contexts_left, 0);
  }
  // Every method is gone: no engine is left on the device, and the pool can be given back.
  ASSERT_TRUE(trim_engine_scratch_pool(gpu).ok());
  Result<EngineScratchStats> after = engine_scratch_stats(gpu);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->pooled_contexts + after->private_contexts, 0);
  EXPECT_EQ(after->pool_capacity_bytes, 0u);
  EXPECT_EQ(cuda_backend_stats().live_segments, 0);
}

}  // namespace
}  // namespace planrt
