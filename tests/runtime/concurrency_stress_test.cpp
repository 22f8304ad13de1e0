// Concurrency stress (issue 6, item 4): T threads run M methods of one loaded Program for
// many iterations, and every output must be bit-identical to a serial run of the same input.
// It runs in the normal lane and, labelled "concurrency" by its name, under ThreadSanitizer.
//
// The program (built from the model below) has four methods over one set of weights:
//   host_mlp     CPU kernels                       a host method (shares the host arenas)
//   host_norm    CPU kernels, larger buffers       a host method
//   engines      two engine segments on the CPU    a host method, pooled or private scratch
//                with a CPU kernel between them    as loaded
//   device_mlp   a "cuda" segment on cuda:0        a device-tagged method: own arenas on the
//                between two CPU kernels           test allocator, its work on TestStreams
//
// What each thread holds, by the contracts in the public headers:
// - the Program, shared by every thread (its const accessors and load_method may be called
//   concurrently);
// - one shared instance of each method, used by every thread (a Method serializes its runs);
// - its own instance of each method, loaded concurrently with the other threads' loads and
//   unloaded and loaded again while they run; by thread, with its own or the shared host
//   arenas and with pooled or private engine scratch, so pooled and private engines and
//   arena sets run side by side;
// - thread 0 also trims the CPU scratch pool and reads its statistics now and then, and
//   thread 1 flips the engine backend's process-wide pool option (those functions may be
//   called from any thread while pooled runs are in flight); every thread reads the
//   Program's and its Methods' const accessors between runs;
// - now and then a host method of a second Program (the same bytes) loaded for one run and
//   destroyed: nothing holds that Program's shared host arena set for long, so the threads
//   create and release it under each other's feet.
//
// Environment: PLANRT_STRESS_THREADS (default 4), PLANRT_STRESS_ITERATIONS per thread
// (default 10000: under 2 s in the normal lane, about 30 s under TSan, on 2 busy cores).
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "planrt/backends/engine.h"
#include "planrt/builder/builder.h"
#include "planrt/runtime/program.h"
#include "support/test_device.h"
#ifdef PLANRT_HAVE_CUDA
#include "planrt/platform/cuda.h"
#endif

namespace planrt {
namespace {

using testing::ScopedTestAllocator;
using testing::ScopedTestBackend;

constexpr int64_t kFeatures = 32;
constexpr int64_t kMaxS = 48;
// Input sizes, so pooled engines grow their pool while other threads run on it.
constexpr int64_t kSizes[] = {1, 7, 16, 33, kMaxS, 5};
constexpr size_t kVariants = std::size(kSizes);

constexpr const char* kModel = R"({
  "format": "planrt-model/1",
  "weights": {"random": {"seed": 6, "std": 0.2}},
  "constants": {
    "ln.weight": {"dtype": "f32", "shape": [32], "init": "ones"},
    "ln.bias": {"dtype": "f32", "shape": [32], "init": "zeros"},
    "rms.weight": {"dtype": "f32", "shape": [32]},
    "w1": {"dtype": "f32", "shape": [64, 32]},
    "b1": {"dtype": "f32", "shape": [64]},
    "w2": {"dtype": "f32", "shape": [32, 64]},
    "b2": {"dtype": "f32", "shape": [32]},
    "w3": {"dtype": "f32", "shape": [96, 32]},
    "w4": {"dtype": "f32", "shape": [32, 96]}
  },
  "methods": [
    {
      "name": "host_mlp",
      "dims": {"S": {"min": 1, "max": 48}},
      "inputs": [{"name": "x", "dtype": "f32", "shape": ["S", 32]}],
      "outputs": ["y"],
      "nodes": [
        {"op": "layer_norm", "inputs": ["x", "ln.weight", "ln.bias"], "outputs": ["h"]},
        {"op": "linear", "inputs": ["h", "w1", "b1"], "outputs": ["f1"]},
        {"op": "gelu", "inputs": ["f1"], "outputs": ["g"]},
        {"op": "linear", "inputs": ["g", "w2", "b2"], "outputs": ["f2"]},
        {"op": "add", "inputs": ["x", "f2"], "outputs": ["y"]}
      ]
    },
    {
      "name": "host_norm",
      "dims": {"S": {"min": 1, "max": 48}},
      "inputs": [{"name": "x", "dtype": "f32", "shape": ["S", 32]}],
      "outputs": ["y"],
      "nodes": [
        {"op": "rms_norm", "inputs": ["x", "rms.weight"], "outputs": ["n"]},
        {"op": "linear", "inputs": ["n", "w3"], "outputs": ["u"]},
        {"op": "softmax", "inputs": ["u"], "outputs": ["p"]},
        {"op": "linear", "inputs": ["p", "w4"], "outputs": ["y"]}
      ]
    },
    {
      "name": "engines",
      "backend": "engine",
      "device": "cpu",
      "dims": {"S": {"min": 1, "max": 48}},
      "inputs": [{"name": "x", "dtype": "f32", "shape": ["S", 32]}],
      "outputs": ["y"],
      "nodes": [
        {"op": "linear", "inputs": ["x", "w1", "b1"], "outputs": ["f1"], "segment": "small"},
        {"op": "gelu", "inputs": ["f1"], "outputs": ["g"], "segment": "small"},
        {"op": "linear", "inputs": ["g", "w2", "b2"], "outputs": ["f2"], "segment": "small"},
        {"op": "add", "inputs": ["x", "f2"], "outputs": ["r"], "backend": "cpu"},
        {"op": "layer_norm", "inputs": ["r", "ln.weight", "ln.bias"], "outputs": ["h"], "segment": "large"},
        {"op": "linear", "inputs": ["h", "w3"], "outputs": ["u"], "segment": "large"},
        {"op": "relu", "inputs": ["u"], "outputs": ["a"], "segment": "large"},
        {"op": "linear", "inputs": ["a", "w4"], "outputs": ["y"], "segment": "large"}
      ]
    },
    {
      "name": "device_mlp",
      "device": "cuda:0",
      "dims": {"S": {"min": 1, "max": 48}},
      "inputs": [{"name": "x", "dtype": "f32", "shape": ["S", 32]}],
      "outputs": ["y"],
      "nodes": [
        {"op": "layer_norm", "inputs": ["x", "ln.weight", "ln.bias"], "outputs": ["h"]},
        {"op": "linear", "inputs": ["h", "w1", "b1"], "outputs": ["f1"], "backend": "cuda"},
        {"op": "gelu", "inputs": ["f1"], "outputs": ["g"], "backend": "cuda"},
        {"op": "linear", "inputs": ["g", "w2", "b2"], "outputs": ["f2"], "backend": "cuda"},
        {"op": "add", "inputs": ["x", "f2"], "outputs": ["y"]}
      ]
    }
  ]
})";

const std::vector<std::string> kMethods = {"host_mlp", "host_norm", "engines", "device_mlp"};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  int n = std::atoi(v);
  return n > 0 ? n : fallback;
}

// Input `variant`: kSizes[variant] rows, values of both signs that differ per variant.
std::vector<float> input(size_t variant) {
  std::vector<float> x(static_cast<size_t>(kSizes[variant] * kFeatures));
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = std::sin(0.37f * static_cast<float>(i) + static_cast<float>(variant)) *
           (1.0f + 0.25f * static_cast<float>(variant));
  }
  return x;
}

// The output's bytes, or the error.
Result<std::vector<uint8_t>> run_once(Method& m, size_t variant) {
  std::vector<float> x = input(variant);
  TensorView in = TensorView::contiguous(x.data(), DType::F32, {kSizes[variant], kFeatures});
  PLANRT_ASSIGN_OR_RETURN(std::vector<Tensor> out, m.execute({&in, 1}));
  if (out.size() != 1) return Status(ErrorCode::Internal, "expected one output");
  const auto* p = static_cast<const uint8_t*>(out[0].data());
  return std::vector<uint8_t>(p, p + out[0].nbytes());
}

LoadMethodOptions options_for(bool own_arenas, bool pooled) {
  LoadMethodOptions o;
  o.share_memory_arenas = !own_arenas;
  o.backend_options["engine"] = {{std::string(kSharedScratchOption), pooled ? "true" : "false"}};
  return o;
}

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

    Result<builder::Model> model = builder::parse_model_json(kModel);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    Result<builder::BuiltProgram> built = builder::build_program(*model);
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    Result<std::vector<uint8_t>> bytes = built->serialize();
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
  const Program& program = *program_;
  const Program& transient = *transient_;
  const size_t num_methods = kMethods.size();

  // The serial run: every method on every input, one call at a time, engines private.
  std::vector<std::vector<std::vector<uint8_t>>> want(num_methods);
  for (size_t m = 0; m < num_methods; ++m) {
    Result<Method> method = program.load_method(kMethods[m], options_for(false, false));
    ASSERT_TRUE(method.ok()) << method.status().to_string();
    for (size_t v = 0; v < kVariants; ++v) {
      Result<std::vector<uint8_t>> out = run_once(*method, v);
      ASSERT_TRUE(out.ok()) << kMethods[m] << ": " << out.status().to_string();
      want[m].push_back(std::move(out).value());
    }
  }

  // One instance of each method shared by every thread: host arenas shared, engines pooled.
  std::vector<Method> shared;
  for (const std::string& name : kMethods) {
    Result<Method> method = program.load_method(name, options_for(false, true));
    ASSERT_TRUE(method.ok()) << method.status().to_string();
    shared.push_back(std::move(method).value());
  }

  std::atomic<int64_t> runs{0}, transient_runs{0}, mismatches{0}, errors{0}, reloads{0}, trims{0};
  std::atomic<bool> reported{false};
  auto report = [&](const std::string& what) {
    if (!reported.exchange(true)) ADD_FAILURE() << "first failure: " << what;
  };
  std::barrier start(threads);

  auto work = [&](int t) {
    // Per thread: its own arenas or the shared set, pooled or private engines, so every
    // combination runs beside the others (t = 0: own + pooled, 1: shared + private,
    // 2: own + private, 3: shared + pooled, and round again).
    const bool own_arenas = t % 2 == 0;
    const bool pooled = (t + t / 2) % 2 == 0;
    const LoadMethodOptions options = options_for(own_arenas, pooled);
    start.arrive_and_wait();  // the loads below race each other
    std::vector<std::optional<Method>> own(num_methods);
    for (size_t m = 0; m < num_methods; ++m) {
      Result<Method> method = program.load_method(kMethods[m], options);
      if (!method.ok()) {
        ++errors;
        report(method.status().to_string());
        return;
      }
      own[m].emplace(std::move(method).value());
    }
    for (int i = 0; i < iterations; ++i) {
      const size_t m = static_cast<size_t>(t + i) % num_methods;
      const size_t v = static_cast<size_t>(i * 7 + t * 3) % kVariants;
      const bool use_shared = (i / static_cast<int>(num_methods)) % 2 == 1;
      Method& method = use_shared ? shared[m] : *own[m];
      Result<std::vector<uint8_t>> out = run_once(method, v);
      ++runs;
      if (!out.ok()) {
        ++errors;
        report(kMethods[m] + ": " + out.status().to_string());
      } else if (*out != want[m][v]) {
        ++mismatches;
        report(kMethods[m] + " (variant " + std::to_string(v) + (use_shared ? ", shared" : ", own") +
               " instance) differs from the serial run");
      }
      // The const accessors race the runs and loads (they only read, or take their locks).
      if (i % 10 == 9) {
        Result<MethodMeta> meta = program.method_meta(kMethods[m]);
        MethodRunStats stats = method.run_stats();
        (void)program.shared_host_arenas_allocated();
        if (!meta.ok() || stats.runs < 1) {
          ++errors;
          report("method_meta/run_stats of " + kMethods[m] + ": " + meta.status().to_string());
        }
      }
      // A host method of the transient program, loaded with the default options (so its
      // engines follow the process-wide option thread 1 flips), run once and destroyed.
      if (i % 5 == 4) {
        const size_t h = static_cast<size_t>(i / 5) % 3;  // host_mlp, host_norm, engines
        Result<Method> once = transient.load_method(kMethods[h]);
        Result<std::vector<uint8_t>> out =
            once.ok() ? run_once(*once, v) : Result<std::vector<uint8_t>>(once.status());
        ++runs;
        ++transient_runs;
        if (!out.ok()) {
          ++errors;
          report("transient " + kMethods[h] + ": " + out.status().to_string());
        } else if (*out != want[h][v]) {
          ++mismatches;
          report("transient " + kMethods[h] + " (variant " + std::to_string(v) +
                 ") differs from the serial run");
        }
      }
      // Unload one of its own methods and load it again while the others run: arena sets,
      // backend handles and pool registrations come and go under load.
      if (i % 25 == 24) {
        const size_t r = static_cast<size_t>(i / 25) % num_methods;
        own[r].reset();
        Result<Method> again = program.load_method(kMethods[r], options);
        if (!again.ok()) {
          ++errors;
          report("reloading " + kMethods[r] + ": " + again.status().to_string());
          return;
        }
        own[r].emplace(std::move(again).value());
        ++reloads;
      }
      // The process-wide option changes while contexts are created; every load here names
      // the option itself, and the load-time option wins, so no output may change.
      if (t == 1 && i % 50 == 49) {
        Status set = set_backend_option("engine", kSharedScratchOption, (i / 50) % 2 ? "true" : "false");
        if (!set.ok()) {
          ++errors;
          report("set_backend_option: " + set.to_string());
        }
      }
      if (t == 0 && i % 50 == 49) {
        Status trimmed = trim_engine_scratch_pool(Device::cpu());
        Result<EngineScratchStats> stats = engine_scratch_stats(Device::cpu());
        if (!trimmed.ok() || !stats.ok()) {
          ++errors;
          report("trim/stats: " + trimmed.to_string() + " " + stats.status().to_string());
        }
        ++trims;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
  for (std::thread& th : pool) th.join();
  EXPECT_TRUE(set_backend_option("engine", kSharedScratchOption, "false").ok());

  std::cout << "[stress] " << threads << " threads x " << num_methods << " methods x "
            << iterations << " iterations: " << runs.load() << " runs (" << transient_runs.load()
            << " of them on a method loaded for that run), " << mismatches.load()
            << " mismatches, " << errors.load() << " errors, " << reloads.load() << " reloads, "
            << trims.load() << " pool trims\n";
  RecordProperty("stress_runs", static_cast<int>(runs.load()));
  RecordProperty("stress_mismatches", static_cast<int>(mismatches.load()));
  EXPECT_EQ(runs.load() - transient_runs.load(), int64_t{threads} * iterations);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(errors.load(), 0);

  // Every thread's own methods are gone: the pool knows only the shared instance's engines.
  Result<EngineScratchStats> stats = engine_scratch_stats(Device::cpu());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->pooled_contexts, 2) << "the shared 'engines' method's two engines";
  EXPECT_EQ(stats->private_contexts, 0);
}

// builder.h: build_program may be called on one Model from several threads at once (it only
// reads the Model), and gives each the same program.
TEST(ConcurrentBuilds, OneModelBuiltOnSeveralThreadsGivesTheSameProgram) {
  Result<builder::Model> model = builder::parse_model_json(kModel);
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
