// Concurrency stress (issue 6, item 4) on the CPU: the harness of
// support/concurrency_stress.h with the engines on the CPU and the device-tagged method's
// `cuda` segment on the test allocator and backend (device arenas, copies and deferred work
// on test streams). It runs in the normal lane and, labelled "concurrency" by its name,
// under ThreadSanitizer. The GPU lane's run: tests/runtime/cuda/concurrency_stress_cuda_test.cpp.
//
// Environment: PLANRT_STRESS_THREADS (default 4), PLANRT_STRESS_ITERATIONS per thread
// (default 10000: under 2 s in the normal lane, about 30 s under TSan, on 2 busy cores).
#include <gtest/gtest.h>

#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "planrt/backends/engine.h"
#include "planrt/builder/builder.h"
#include "planrt/runtime/program.h"
#include "support/concurrency_stress.h"
#include "support/test_device.h"
#ifdef PLANRT_HAVE_CUDA
#include "planrt/platform/cuda.h"
#endif

namespace planrt {
namespace {

using stress::env_int;
using testing::ScopedTestAllocator;
using testing::ScopedTestBackend;

class ConcurrencyStress : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_registered_here_ = get_backend("engine") == nullptr;
    ASSERT_TRUE(register_engine_backend().ok());
    // In CUDA builds the engine backend also registers the real CUDA allocator; this test's
    // device is the test allocator, which takes the CUDA slot instead (TearDown gives it back).
    if (get_device_allocator(DeviceType::CUDA) != nullptr) {
      ASSERT_TRUE(unregister_device_allocator(DeviceType::CUDA).ok());
      cuda_allocator_was_registered_ = true;
    }
    device_.emplace();
    backend_.emplace("cuda", &device_->allocator());
    ASSERT_TRUE(device_->status().ok()) << device_->status().to_string();
    ASSERT_TRUE((*backend_).status().ok()) << (*backend_).status().to_string();

    Result<std::vector<uint8_t>> bytes = stress::program_bytes("cpu");
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    Result<Program> program = Program::load_bytes(*bytes);
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    program_.emplace(std::move(program).value());
    Result<Program> transient = Program::load_bytes(std::move(bytes).value());
    ASSERT_TRUE(transient.ok()) << transient.status().to_string();
    transient_.emplace(std::move(transient).value());
  }

  void TearDown() override {
    program_.reset();
    transient_.reset();
    EXPECT_TRUE(trim_engine_scratch_pool(Device::cpu()).ok());
    if (device_) {
      testing::AllocatorCounts c = device_->allocator().counts();
      EXPECT_EQ(c.bytes_live, 0) << "device memory left after every method was destroyed";
      EXPECT_EQ(c.bad_deallocations, 0);
      EXPECT_EQ(c.bad_stream_uses, 0);
      EXPECT_EQ(c.streams_created, c.streams_destroyed);
    }
    backend_.reset();
    device_.reset();
#ifdef PLANRT_HAVE_CUDA
    if (cuda_allocator_was_registered_) {
      EXPECT_TRUE(register_cuda_allocator().ok());
    }
#endif
    if (engine_registered_here_) {
      EXPECT_TRUE(unregister_backend("engine").ok());
    }
  }

  bool engine_registered_here_ = false;
  bool cuda_allocator_was_registered_ = false;
  // Declared before the program: they outlive it and every method.
  std::optional<ScopedTestAllocator> device_;
  std::optional<ScopedTestBackend> backend_;
  std::optional<Program> program_;
  // The same program again, whose host methods live for one run each: no Method holds its
  // shared host arena set for long, so the set is created and released under load.
  std::optional<Program> transient_;
};

TEST_F(ConcurrencyStress, ThreadsRunningMethodsOfOneProgramMatchASerialRun) {
  const int threads = env_int("PLANRT_STRESS_THREADS", 4);
  const int iterations = env_int("PLANRT_STRESS_ITERATIONS", 10000);
  const size_t num_methods = stress::method_names().size();
  Result<stress::Counts> counts = stress::run(*program_, *transient_, {threads, iterations, Device::cpu()});
  ASSERT_TRUE(counts.ok()) << counts.status().to_string();
  const int64_t runs = counts->runs, transient_runs = counts->transient_runs;
  if (!counts->first_failure.empty()) ADD_FAILURE() << "first failure: " << counts->first_failure;

  std::cout << "[stress] " << threads << " threads x " << num_methods << " methods x "
            << iterations << " iterations: " << runs << " runs (" << transient_runs
            << " of them on a method loaded for that run), " << counts->mismatches
            << " mismatches, " << counts->errors << " errors, " << counts->reloads << " reloads, "
            << counts->trims << " pool trims\n";
  RecordProperty("stress_runs", static_cast<int>(runs));
  RecordProperty("stress_mismatches", static_cast<int>(counts->mismatches));
  EXPECT_EQ(runs - transient_runs, int64_t{threads} * iterations);
  EXPECT_EQ(counts->mismatches, 0);
  EXPECT_EQ(counts->errors, 0);

  // Every thread's own methods were gone: the pool knew only the shared instance's engines.
  EXPECT_EQ(counts->pooled_contexts_left, 2) << "the shared 'engines' method's two engines";
  EXPECT_EQ(counts->private_contexts_left, 0);
}

// builder.h: build_program may be called on one Model from several threads at once (it only
// reads the Model), and gives each the same program.
TEST(ConcurrentBuilds, OneModelBuiltOnSeveralThreadsGivesTheSameProgram) {
  Result<builder::Model> model = builder::parse_model_json(stress::model_json("cpu"));
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const int threads = env_int("PLANRT_STRESS_THREADS", 4);
  std::vector<Result<std::vector<uint8_t>>> bytes(static_cast<size_t>(threads),
                                                  Status(ErrorCode::Internal, "not built"));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      Result<builder::BuiltProgram> built = builder::build_program(*model);
      if (built.ok()) {
        bytes[static_cast<size_t>(t)] = built->serialize();
      } else {
        bytes[static_cast<size_t>(t)] = built.status();
      }
    });
  }
  for (std::thread& th : pool) th.join();
  for (int t = 0; t < threads; ++t) {
    const auto& b = bytes[static_cast<size_t>(t)];
    ASSERT_TRUE(b.ok()) << "thread " << t << ": " << b.status().to_string();
    EXPECT_EQ(*b, *bytes[0]) << "thread " << t << " built other bytes";
  }
}

}  // namespace
}  // namespace planrt
