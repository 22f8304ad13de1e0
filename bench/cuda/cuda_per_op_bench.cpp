// cuda_per_op_bench: what a model of many delegates costs. The transformer template
// partitioned `cuda-per-op` (one cuda segment per op: 40 delegates at 2 layers) beside the
// same model as one `cuda` segment, run through the runtime in one process, rounds
// alternating the configurations so drift hits all. Reported:
//   - the cost of each extra delegate call: (median of cuda-per-op - median of cuda) /
//     (delegates - 1), both with the warm pool, and the host waits per inference (the
//     runtime waits once per run, however many delegates);
//   - the warm private pool against the device's default pool (an A/B with no target:
//     planned arenas leave a delegate call almost nothing to allocate, so the pool barely
//     shows; see docs/performance.md), as the runtime runs and with synchronize_each_step
//     (a wait after every device step, as the reference's delegates did), where the default
//     pool gives freed memory back to the driver at each wait.
// Checks that outputs are identical in every configuration, and that device-used memory
// (cudaMemGetInfo) after the program is released is within 2 MiB of the figure before it
// was loaded: for the process's first load (which also loads kernel modules for good) and
// for a second load/release cycle.
//
// Appends one JSON line to bench/results/cuda_per_op.jsonl (or --out=PATH).
//   cuda_per_op_bench [--layers=N] [--d-model=N] [--seq=N] [--iters=N] [--rounds=N] [--out=PATH]
//                     [--smoke]
// --smoke (the GPU lane): d_model 128, S = 32, 10 runs x 2 rounds, the same checks; a line
// only with --out. Exit 0: checks pass; 1: an error; 2: a check failed; 77: no GPU visible.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../bench_stats.h"
#include "gpu_bench.h"
#include "planrt/backends/cuda.h"
#include "planrt/builder/builder.h"
#include "planrt/platform/cuda.h"
#include "planrt/runtime/program.h"

namespace {

using namespace planrt;

int fail(const std::string& what) {
  std::fprintf(stderr, "cuda_per_op_bench: %s\n", what.c_str());
  return 1;
}

using planrt::bench::median;

struct ModeResult {
  std::vector<double> ms;  // every timed run, all rounds
  std::vector<float> output;
  int64_t syncs_per_run = 0;
  int64_t streams = 0;
  uint64_t pool_used_high = 0;
};

// Loads the method with the pool choice, warms up, times `iters` runs; appends to `r`.
Status run_round(const Program& program, bool private_pool, bool sync_each_step,
                 const TensorView& input, int iters, ModeResult& r) {
  LoadMethodOptions options;
  options.synchronize_each_step = sync_each_step;
  options.backend_options["cuda"].push_back({"use_private_pool", private_pool ? "true" : "false"});
  PLANRT_ASSIGN_OR_RETURN(Method method, program.load_method("forward", options));
  for (int i = 0; i < 5; ++i) PLANRT_RETURN_IF_ERROR(method.run({&input, 1}));
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    PLANRT_RETURN_IF_ERROR(method.run({&input, 1}));
    auto t1 = std::chrono::steady_clock::now();
    r.ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  PLANRT_ASSIGN_OR_RETURN(std::vector<TensorView> outs, method.outputs());
  const auto* y = static_cast<const float*>(outs[0].data);
  r.output.assign(y, y + outs[0].numel());
  r.syncs_per_run = method.run_stats().last_run_synchronizations;
  r.streams = method.run_stats().streams;
  Result<CudaPoolStats> stats = cuda_pool_stats(Device::cuda(0));
  if (stats.ok()) r.pool_used_high = std::max(r.pool_used_high, stats->used_high_bytes);
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path source_dir =
      std::filesystem::path(__FILE__).parent_path().parent_path();
  std::string out_flag;  // --out=PATH
  int64_t layers = 2, d_model = 512, seq = 128;
  int iters = 60, rounds = 6;
  bool smoke = false;
  std::string command;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    command += (i ? " " : "") + a;
    auto value = [&](const char* flag) -> std::optional<std::string> {
      std::string f = flag;
      if (a.rfind(f, 0) == 0) return a.substr(f.size());
      return std::nullopt;
    };
    if (auto v = value("--out=")) out_flag = *v;
    else if (auto v = value("--layers=")) layers = std::atoll(v->c_str());
    else if (auto v = value("--d-model=")) d_model = std::atoll(v->c_str());
    else if (auto v = value("--seq=")) seq = std::atoll(v->c_str());
    else if (auto v = value("--iters=")) iters = std::max(10, std::atoi(v->c_str()));
    else if (auto v = value("--rounds=")) rounds = std::max(2, std::atoi(v->c_str()));
    else if (a == "--smoke") smoke = true;
    else if (i > 0) return fail("unknown argument " + a);
  }
  if (smoke) {
    d_model = 128;
    seq = 32;
    iters = 10;
    rounds = 2;
  }
  const std::string out_path =
      planrt::bench::results_path(out_flag, smoke, (source_dir / "results" / "cuda_per_op.jsonl").string());
  const std::optional<planrt::bench::GpuBenchDevice> gpu = planrt::bench::open_gpu_bench("cuda_per_op_bench");
  if (!gpu) return planrt::bench::no_gpu_exit();
  const std::string& commit = gpu->commit;
  if (Status s = register_cuda_backend(); !s.ok()) return fail(s.to_string());

  // The model of many delegates, and the same model (weights included) as one segment.
  auto program_bytes = [&](const char* partition) -> Result<std::vector<uint8_t>> {
    builder::TransformerOptions t;
    t.layers = layers;
    t.d_model = d_model;
    t.heads = 8;
    t.ffn = 4 * d_model;
    t.max_seq = seq;
    t.partition = partition;
    PLANRT_ASSIGN_OR_RETURN(builder::Model model, builder::make_transformer(t));
    PLANRT_ASSIGN_OR_RETURN(builder::BuiltProgram built, builder::build_program(model));
    return built.serialize();
  };
  // Program::load_bytes takes the bytes; each cycle loads its own copy.
  Result<std::vector<uint8_t>> bytes = program_bytes("cuda-per-op");
  if (!bytes.ok()) return fail(bytes.status().to_string());
  Result<std::vector<uint8_t>> one_segment_bytes = program_bytes("cuda");
  if (!one_segment_bytes.ok()) return fail(one_segment_bytes.status().to_string());

  std::vector<float> x(static_cast<size_t>(seq * d_model));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  TensorView input = TensorView::contiguous(x.data(), DType::F32, *Shape::from(std::vector<int64_t>{1, seq, d_model}));

  // Configurations: {program, warm pool?, wait after every step?}.
  struct Config {
    const char* name;
    bool one_segment;
    bool warm;
    bool sync_each;
    ModeResult r;
  };
  std::vector<Config> configs = {{"warm", false, true, false, {}},
                                 {"default", false, false, false, {}},
                                 {"warm_sync_each_step", false, true, true, {}},
                                 {"default_sync_each_step", false, false, true, {}},
                                 {"one_segment_warm", true, true, false, {}}};
  size_t delegates = 0;
  double first_diff_mib = 0, second_diff_mib = 0;
  uint64_t used_before = 0, used_after = 0;
  for (int cycle = 0; cycle < 2; ++cycle) {
    // Cycle 0 is the process's first load and release; cycle 1 a second one.
    const uint64_t before = planrt::bench::device_used_bytes();
    {
      Result<Program> program = Program::load_bytes(*bytes);
      if (!program.ok()) return fail(program.status().to_string());
      Result<Program> one_segment = Program::load_bytes(*one_segment_bytes);
      if (!one_segment.ok()) return fail(one_segment.status().to_string());
      Result<MethodMeta> meta = program->method_meta("forward");
      if (meta.ok()) delegates = meta->segments.size();
      for (int r = 0; r < (cycle == 0 ? rounds : 1); ++r) {
        // Rotate the order, so no configuration always runs on a freshly released pool.
        for (size_t k = 0; k < configs.size(); ++k) {
          Config& c = configs[(k + static_cast<size_t>(r)) % configs.size()];
          Status s = run_round(c.one_segment ? *one_segment : *program, c.warm, c.sync_each, input,
                               cycle == 0 ? iters : 10, c.r);
          if (!s.ok()) return fail(std::string(c.name) + ": " + s.to_string());
        }
      }
    }
    const uint64_t after = planrt::bench::device_used_bytes();
    double diff = (static_cast<double>(after) - static_cast<double>(before)) / (1 << 20);
    if (cycle == 0) {
      first_diff_mib = diff;
      used_before = before;
    } else {
      second_diff_mib = diff;
      used_after = after;
    }
  }
  ModeResult& warm = configs[0].r;
  ModeResult& dflt = configs[1].r;
  ModeResult& warm_each = configs[2].r;
  ModeResult& dflt_each = configs[3].r;
  ModeResult& one = configs[4].r;
  // The timed runs of cycle 0 only (cycle 1 exists for the memory figure).
  auto timed = [&](const ModeResult& r) {
    return median(std::vector<double>(r.ms.begin(), r.ms.begin() + rounds * iters));
  };
  const double warm_ms = timed(warm), default_ms = timed(dflt);
  const double warm_each_ms = timed(warm_each), default_each_ms = timed(dflt_each);
  const double one_segment_ms = timed(one);
  const double per_delegate_ms =
      delegates > 1 ? (warm_ms - one_segment_ms) / static_cast<double>(delegates - 1) : 0.0;
  const double ratio = warm_ms / default_ms;
  const double ratio_each = warm_each_ms / default_each_ms;
  // The four runs of the many-delegate program run the same kernels in the same order: bit
  // for bit the same. The one-segment program may fuse (add + layer_norm): a tolerance.
  const bool same = warm.output == dflt.output && warm.output == warm_each.output &&
                    warm.output == dflt_each.output;
  double num = 0, den = 0;
  for (size_t i = 0; i < one.output.size() && i < warm.output.size(); ++i) {
    const double d = static_cast<double>(one.output[i]) - warm.output[i];
    num += d * d;
    den += static_cast<double>(warm.output[i]) * warm.output[i];
  }
  const double one_segment_rel = one.output.size() == warm.output.size() && den > 0
                                     ? std::sqrt(num / den)
                                     : INFINITY;
  const bool one_segment_agrees = one_segment_rel <= 1e-5;
  const double diff_mib = second_diff_mib;
  std::printf("%s, transformer %lld layers d%lld S=%lld, partition cuda-per-op: %zu delegates\n",
              gpu->name.c_str(), static_cast<long long>(layers), static_cast<long long>(d_model),
              static_cast<long long>(seq), delegates);
  std::printf("each extra delegate call: %.4f ms ((%.3f ms for %zu delegates - %.3f ms for one "
              "segment) / %zu); host waits per inference %lld (one segment: %lld)\n",
              per_delegate_ms, warm_ms, delegates, one_segment_ms, delegates > 0 ? delegates - 1 : 0,
              static_cast<long long>(warm.syncs_per_run), static_cast<long long>(one.syncs_per_run));
  std::printf("pool A/B, host waits %lld per inference: warm pool %.3f ms, default pool %.3f ms, "
              "ratio %.3f\n",
              static_cast<long long>(warm.syncs_per_run), warm_ms, default_ms, ratio);
  std::printf("pool A/B, host waits %lld per inference (synchronize_each_step): warm pool %.3f ms, "
              "default pool %.3f ms, ratio %.3f\n",
              static_cast<long long>(warm_each.syncs_per_run), warm_each_ms, default_each_ms,
              ratio_each);
  std::printf("medians of %d runs each; outputs identical in the four many-delegate runs: %s; one "
              "segment within %.1e of them: %s\n",
              rounds * iters, same ? "yes" : "NO", one_segment_rel, one_segment_agrees ? "yes" : "NO");
  std::printf("device used after release vs before load: first cycle %+.2f MiB, second cycle "
              "%+.2f MiB (%s)\n",
              first_diff_mib, second_diff_mib, diff_mib <= 2.0 ? "within 2 MiB" : "MORE than 2 MiB");

  nlohmann::json line = {{"bench", "cuda_per_op"},
                         {"commit", commit},
                         {"device", gpu->name},
                         {"command", command},
                         {"model", {{"layers", layers}, {"d_model", d_model}, {"seq", seq}}},
                         {"delegates", delegates},
                         {"runs_per_config", rounds * iters},
                         {"one_segment_median_ms", one_segment_ms},
                         {"per_delegate_call_ms", per_delegate_ms},
                         {"host_waits_per_inference", warm.syncs_per_run},
                         {"host_waits_per_inference_one_segment", one.syncs_per_run},
                         {"warm_pool_median_ms", warm_ms},
                         {"default_pool_median_ms", default_ms},
                         {"ratio", ratio},
                         {"host_waits_per_inference_sync_each_step", warm_each.syncs_per_run},
                         {"warm_pool_sync_each_step_median_ms", warm_each_ms},
                         {"default_pool_sync_each_step_median_ms", default_each_ms},
                         {"ratio_sync_each_step", ratio_each},
                         {"streams", warm.streams},
                         {"outputs_identical", same},
                         {"one_segment_rel_error", one_segment_rel},
                         {"pool_used_high_bytes", warm.pool_used_high},
                         {"device_used_before_first_load_bytes", used_before},
                         {"device_used_after_second_release_bytes", used_after},
                         {"first_cycle_diff_mib", first_diff_mib},
                         {"second_cycle_diff_mib", second_diff_mib},
                         {"within_2_mib", diff_mib <= 2.0},
                         {"smoke", smoke}};
  if (!out_path.empty()) {
    std::ofstream out(out_path, std::ios::app);
    if (!out) return fail("cannot open " + out_path);
    out << line.dump() << "\n";
  }
  return same && one_segment_agrees && diff_mib <= 2.0 ? 0 : 2;
}
