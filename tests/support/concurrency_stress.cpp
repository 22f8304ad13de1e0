#include "support/concurrency_stress.h"

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>

#include "planrt/backends/engine.h"
#include "planrt/builder/builder.h"
#include "support/built_programs.h"

namespace planrt::stress {
namespace {

constexpr int64_t kFeatures = 32;
constexpr int64_t kMaxS = 48;
// Input sizes, so pooled engines grow their pool while other threads run on it.
constexpr int64_t kSizes[] = {1, 7, 16, 33, kMaxS, 5};
constexpr size_t kVariants = std::size(kSizes);

constexpr const char* kModelTemplate = R"({
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
      "device": "ENGINES_DEVICE",
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

}  // namespace

std::string model_json(std::string_view engines_device) {
  std::string s = kModelTemplate;
  const std::string_view key = "ENGINES_DEVICE";
  s.replace(s.find(key), key.size(), engines_device);
  return s;
}

Result<std::vector<uint8_t>> program_bytes(std::string_view engines_device) {
  PLANRT_ASSIGN_OR_RETURN(builder::Model model, builder::parse_model_json(model_json(engines_device)));
  return fixtures::built_program_bytes(model);
}

const std::vector<std::string>& method_names() { return kMethods; }

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  int n = std::atoi(v);
  return n > 0 ? n : fallback;
}

Result<Counts> run(const Program& program, const Program& transient, const Options& options) {
  const int threads = options.threads;
  const int iterations = options.iterations;
  const size_t num_methods = kMethods.size();

  // The serial run: every method on every input, one call at a time, engines private.
  std::vector<std::vector<std::vector<uint8_t>>> want(num_methods);
  for (size_t m = 0; m < num_methods; ++m) {
    Result<Method> method = program.load_method(kMethods[m], options_for(false, false));
    if (!method.ok()) return method.status().with_context("the serial run");
    for (size_t v = 0; v < kVariants; ++v) {
      Result<std::vector<uint8_t>> out = run_once(*method, v);
      if (!out.ok()) return out.status().with_context("the serial run of " + kMethods[m]);
      want[m].push_back(std::move(out).value());
    }
  }

  // One instance of each method shared by every thread: host arenas shared, engines pooled.
  std::vector<Method> shared;
  for (const std::string& name : kMethods) {
    Result<Method> method = program.load_method(name, options_for(false, true));
    if (!method.ok()) return method.status().with_context("the shared instances");
    shared.push_back(std::move(method).value());
  }

  std::atomic<int64_t> runs{0}, transient_runs{0}, mismatches{0}, errors{0}, reloads{0}, trims{0};
  std::mutex first_mu;
  std::string first_failure;
  auto report = [&](const std::string& what) {
    std::lock_guard lock(first_mu);
    if (first_failure.empty()) first_failure = what;
  };
  std::barrier start(threads);

  auto work = [&](int t) {
    // Per thread: its own arenas or the shared set, pooled or private engines, so every
    // combination runs beside the others (t = 0: own + pooled, 1: shared + private,
    // 2: own + private, 3: shared + pooled, and round again).
    const bool own_arenas = t % 2 == 0;
    const bool pooled = (t + t / 2) % 2 == 0;
    const LoadMethodOptions load_options = options_for(own_arenas, pooled);
    start.arrive_and_wait();  // the loads below race each other
    std::vector<std::optional<Method>> own(num_methods);
    for (size_t m = 0; m < num_methods; ++m) {
      Result<Method> method = program.load_method(kMethods[m], load_options);
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
      // host_mlp, host_norm or engines of the transient program (engines is device-tagged when
      // its engines run on a GPU), loaded with the default options (so its engines follow
      // the process-wide option thread 1 flips), run once and destroyed.
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
        Result<Method> again = program.load_method(kMethods[r], load_options);
        if (!again.ok()) {
          ++errors;
          report("reloading " + kMethods[r] + ": " + again.status().to_string());
          return;
        }
        own[r].emplace(std::move(again).value());
        ++reloads;
      }
      // The process-wide option changes while contexts are created: the threads' own and
      // shared instances name the option at load (the load-time option wins), the transient
      // ones follow it; pooled or private, no output may change.
      if (t == 1 && i % 50 == 49) {
        Status set = set_backend_option("engine", kSharedScratchOption, (i / 50) % 2 ? "true" : "false");
        if (!set.ok()) {
          ++errors;
          report("set_backend_option: " + set.to_string());
        }
      }
      if (t == 0 && i % 50 == 49) {
        Status trimmed = trim_engine_scratch_pool(options.pool_device);
        Result<EngineScratchStats> stats = engine_scratch_stats(options.pool_device);
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
  Status reset = set_backend_option("engine", kSharedScratchOption, "false");
  if (!reset.ok()) return reset;
  Counts counts{runs.load(), transient_runs.load(), mismatches.load(), errors.load(),
                reloads.load(), trims.load(), first_failure};
  PLANRT_ASSIGN_OR_RETURN(EngineScratchStats stats, engine_scratch_stats(options.pool_device));
  counts.pooled_contexts_left = stats.pooled_contexts;
  counts.private_contexts_left = stats.private_contexts;
  return counts;

}

}  // namespace planrt::stress
