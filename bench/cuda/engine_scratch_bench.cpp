// engine_scratch_bench: activation scratch of engines, private vs pooled (the shared
// per-device pool, docs/design.md §6) vs planned (a value of the method's arena, the program
// built with plan_engine_scratch), on the scenarios the reference measured, in one process:
//   four_contexts   four execution contexts of one engine holding two f32 8-head attention
//                   blocks over [1, 2048, 512] (the 2-block template, partition `engine`,
//                   loaded as four methods)
//   interleaved     one method holding six one-block engines interleaved with six `cuda`
//                   segments (partition engine-cuda-interleaved: each block's attention
//                   half an engine, its MLP half a cuda segment)
//   differing       one method of six one-block engines of differing sizes (partition
//                   engine-per-block with FFN widths 2048..24576; the interleaved engines
//                   hold only attention, which the FFN width does not change)
// For each: the sum of the contexts' private scratch, the largest, the pool's capacity
// after the runs (target: exactly the largest, ratio 1.00), device-used memory
// (cudaMemGetInfo) above the figure before loading in each mode, median latency of each
// mode (target: pooled within 3% of private) and whether outputs are identical; planned mode's
// device-used delta, latency and outputs beside them (issue 19 item 4: at most pooled's
// where a method's activations and scratch can overlap, the same bits, within 3%; the four
// loads of four_contexts share one device arena set, LoadMethodOptions::share_device_arenas,
// as pooled loads share the pool). Then a
// dynamic-S check: the pool settles at the largest call made, not the profile max.
//
// Attention is unfused by default (--attention=unfused): the reference's figures come from
// engines that hold the [heads, S, S] scores; --attention=fused measures the one-pass kernel.
// Appends JSON lines to bench/results/engine_scratch.jsonl (or --out=PATH).
//   engine_scratch_bench [--seq=N] [--iters=N] [--attention=unfused|fused] [--out=PATH] [--smoke]
// --smoke (the GPU lane, scripts/gpu-test.sh): S = 256, FFN widths 256..3072, 3 timed runs
// per round; every condition but the latency ratio is still checked (capacity = largest,
// identical outputs, dynamic S), and lines are written only with --out. Exit 0: conditions
// met; 1: an error; 2: a condition not met; 77: no GPU visible (a skip, as ctest reads it).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../bench_stats.h"
#include "gpu_bench.h"
#include "planrt/backends/cuda.h"
#include "planrt/backends/engine.h"
#include "planrt/builder/builder.h"
#include "planrt/platform/cuda.h"
#include "planrt/runtime/program.h"

namespace {

using namespace planrt;

constexpr double kMiB = 1024.0 * 1024.0;

int fail(const std::string& what) {
  std::fprintf(stderr, "engine_scratch_bench: %s\n", what.c_str());
  return 1;
}

using planrt::bench::median;

struct Scenario {
  std::string name;
  std::string partition;
  int64_t layers = 2;
  std::vector<int64_t> ffn_per_block;
  int methods = 1;  // loads of the method (contexts of each engine)
};

struct ModeResult {
  int64_t device_delta = 0;  // device-used above the figure before loading
  uint64_t private_bytes = 0, pool_capacity = 0, largest = 0, sum = 0;
  int64_t contexts = 0;
  std::vector<double> ms;
  std::vector<float> output;
};

Result<std::vector<uint8_t>> build(const Scenario& s, int64_t seq, bool fused_attention,
                                   bool planned = false) {
  builder::TransformerOptions t;
  t.layers = s.layers;
  t.d_model = 512;
  t.heads = 8;
  t.ffn = 2048;
  t.ffn_per_block = s.ffn_per_block;
  t.max_seq = seq;
  t.partition = s.partition;
  t.device = "cuda:0";
  t.fused_attention = fused_attention;
  PLANRT_ASSIGN_OR_RETURN(builder::Model model, builder::make_transformer(t));
  builder::BuildOptions options;
  options.plan_engine_scratch = planned;
  PLANRT_ASSIGN_OR_RETURN(builder::BuiltProgram built, builder::build_program(model, options));
  return built.serialize();
}

// Loads `s.methods` methods in one mode, runs each once, reads memory, times `iters` runs
// of the first; everything is released before returning.
Status measure(const Program& program, const Scenario& s, bool pooled, const TensorView& input,
               int iters, ModeResult& r, bool share_device_arenas = false) {
  PLANRT_RETURN_IF_ERROR(trim_engine_scratch_pool(Device::cuda(0)));
  cudaDeviceSynchronize();
  const int64_t before = static_cast<int64_t>(planrt::bench::device_used_bytes());
  LoadMethodOptions options;
  options.backend_options["engine"].push_back({std::string(kSharedScratchOption), pooled ? "true" : "false"});
  options.share_device_arenas = share_device_arenas;
  std::vector<Method> methods;
  for (int i = 0; i < s.methods; ++i) {
    PLANRT_ASSIGN_OR_RETURN(Method m, program.load_method("forward", options));
    methods.push_back(std::move(m));
  }
  for (Method& m : methods) PLANRT_RETURN_IF_ERROR(m.run({&input, 1}));
  cudaDeviceSynchronize();
  r.device_delta = static_cast<int64_t>(planrt::bench::device_used_bytes()) - before;
  PLANRT_ASSIGN_OR_RETURN(EngineScratchStats st, engine_scratch_stats(Device::cuda(0)));
  r.private_bytes = st.private_scratch_bytes;
  r.pool_capacity = st.pool_capacity_bytes;
  r.contexts = st.pooled_contexts + st.private_contexts + st.planned_contexts;
  r.largest = r.sum = 0;
  for (const EngineContextInfo& c : st.contexts) {
    r.largest = std::max(r.largest, c.scratch_bytes);
    r.sum += c.scratch_bytes;
  }
  for (int i = 0; i < 3; ++i) PLANRT_RETURN_IF_ERROR(methods[0].run({&input, 1}));
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    PLANRT_RETURN_IF_ERROR(methods[0].run({&input, 1}));
    r.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  PLANRT_ASSIGN_OR_RETURN(std::vector<TensorView> outs, methods[0].outputs());
  const auto* y = static_cast<const float*>(outs[0].data);
  r.output.assign(y, y + outs[0].numel());
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path source_dir =
      std::filesystem::path(__FILE__).parent_path().parent_path();
  std::string out_flag;  // --out=PATH
  int64_t seq = 2048;
  int iters = 20;
  bool fused_attention = false;
  bool smoke = false;
  std::string command;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    command += (i ? " " : "") + a;
    if (a.rfind("--out=", 0) == 0) out_flag = a.substr(6);
    else if (a.rfind("--seq=", 0) == 0) seq = std::atoll(a.c_str() + 6);
    else if (a.rfind("--iters=", 0) == 0) iters = std::max(3, std::atoi(a.c_str() + 8));
    else if (a == "--attention=fused") fused_attention = true;
    else if (a == "--attention=unfused") fused_attention = false;
    else if (a == "--smoke") smoke = true;
    else if (i > 0) return fail("unknown argument " + a);
  }
  if (smoke) {
    seq = 256;
    iters = 3;
  }
  const std::string out_path =
      planrt::bench::results_path(out_flag, smoke, (source_dir / "results" / "engine_scratch.jsonl").string());
  const std::optional<planrt::bench::GpuBenchDevice> gpu = planrt::bench::open_gpu_bench("engine_scratch_bench");
  if (!gpu) return planrt::bench::no_gpu_exit();
  const std::string& commit = gpu->commit;
  if (Status s = register_cuda_backend(); !s.ok()) return fail(s.to_string());
  if (Status s = register_engine_backend(); !s.ok()) return fail(s.to_string());
  std::ofstream out;
  if (!out_path.empty()) {
    out.open(out_path, std::ios::app);
    if (!out) return fail("cannot open " + out_path);
  }

  std::vector<float> x(static_cast<size_t>(seq * 512));
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float& v : x) v = normal(rng);
  TensorView input = TensorView::contiguous(x.data(), DType::F32, *Shape::from(std::vector<int64_t>{1, seq, 512}));

  // Widths large enough that the MLP, not the attention scores, sets some engines'
  // scratch at S = 2048 (below ~9000 every block needs the attention's 144 MiB); the smoke
  // run's at S = 256 (the scores take 2 MiB, a width-3072 MLP 6 MiB).
  const std::vector<int64_t> differing_widths =
      smoke ? std::vector<int64_t>{256, 512, 1024, 1536, 2048, 3072}
            : std::vector<int64_t>{2048, 8192, 12288, 16384, 20480, 24576};
  const std::vector<Scenario> scenarios = {
      {"four_contexts", "engine", 2, {}, 4},
      {"interleaved", "engine-cuda-interleaved", 6, {}, 1},
      {"differing", "engine-per-block", 6, differing_widths, 1},
  };
  bool all_met = true;
  std::printf("%-14s %5s %11s %11s %11s %6s %12s %12s %9s %9s %7s %5s\n", "scenario", "ctx",
              "sum MiB", "largest", "pool MiB", "ratio", "dev priv MiB", "dev pool MiB",
              "priv ms", "pool ms", "lat", "same");
  for (const Scenario& s : scenarios) {
    Result<std::vector<uint8_t>> bytes = build(s, seq, fused_attention);
    if (!bytes.ok()) return fail(s.name + ": " + bytes.status().to_string());
    Result<Program> program = Program::load_bytes(std::move(bytes).value());
    if (!program.ok()) return fail(program.status().to_string());
    Result<std::vector<uint8_t>> planned_bytes = build(s, seq, fused_attention, /*planned=*/true);
    if (!planned_bytes.ok()) return fail(s.name + ": " + planned_bytes.status().to_string());
    Result<Program> planned_program = Program::load_bytes(std::move(planned_bytes).value());
    if (!planned_program.ok()) return fail(planned_program.status().to_string());
    // Warm-up load: kernel modules and the cuBLAS handle are loaded before any figure.
    ModeResult warm, priv, pool, plan, priv2, pool2, plan2;
    Status st = measure(*program, s, false, input, 1, warm);
    // Two rounds per mode, alternating, for the latency; memory from the first of each.
    if (st.ok()) st = measure(*program, s, false, input, iters, priv);
    if (st.ok()) st = measure(*program, s, true, input, iters, pool);
    // Planned: the loads of a method share one device arena set (share_device_arenas), as
    // the pooled ones share the pool; their runs here are one after another.
    if (st.ok()) st = measure(*planned_program, s, false, input, iters, plan, true);
    if (st.ok()) st = measure(*program, s, false, input, iters, priv2);
    if (st.ok()) st = measure(*program, s, true, input, iters, pool2);
    if (st.ok()) st = measure(*planned_program, s, false, input, iters, plan2, true);
    if (!st.ok()) return fail(s.name + ": " + st.to_string());
    priv.ms.insert(priv.ms.end(), priv2.ms.begin(), priv2.ms.end());
    pool.ms.insert(pool.ms.end(), pool2.ms.begin(), pool2.ms.end());
    plan.ms.insert(plan.ms.end(), plan2.ms.begin(), plan2.ms.end());
    const double ratio = pool.largest == 0 ? 0 : static_cast<double>(pool.pool_capacity) / pool.largest;
    const double priv_ms = median(priv.ms), pool_ms = median(pool.ms);
    const double latency_ratio = pool_ms / priv_ms;
    const bool same = priv.output == pool.output;
    const double plan_ms = median(plan.ms);
    const double planned_latency_ratio = plan_ms / priv_ms;
    const bool planned_same = plan.output == priv.output;
    // Planned against pooled, on every scenario (four loads share one arena set).
    const bool planned_judged = true;
    const bool planned_met = planned_same && (!planned_judged || plan.device_delta <= pool.device_delta) &&
                             (smoke || planned_latency_ratio <= 1.03);
    // A smoke run's few timings say nothing about latency; the other conditions hold at
    // any size.
    const bool met = ratio == 1.0 && (smoke || latency_ratio <= 1.03) && same && planned_met;
    all_met = all_met && met;
    std::printf("%-14s %5lld %11.1f %11.1f %11.1f %6.3f %12.1f %12.1f %9.3f %9.3f %7.3f %5s\n",
                s.name.c_str(), static_cast<long long>(pool.contexts), priv.private_bytes / kMiB,
                pool.largest / kMiB, pool.pool_capacity / kMiB, ratio, priv.device_delta / kMiB,
                pool.device_delta / kMiB, priv_ms, pool_ms, latency_ratio, same ? "yes" : "NO");
    std::printf("%-14s planned: dev %.1f MiB (pooled %.1f), %.3f ms (%.3fx private), same bits %s%s\n", "",
                plan.device_delta / kMiB, pool.device_delta / kMiB, plan_ms, planned_latency_ratio,
                planned_same ? "yes" : "NO", planned_judged ? "" : " (not judged)");
    nlohmann::json line = {
        {"bench", "engine_scratch"}, {"scenario", s.name}, {"commit", commit},
        {"device", gpu->name}, {"command", command}, {"partition", s.partition},
        {"attention", fused_attention ? "fused" : "unfused"}, {"layers", s.layers}, {"ffn_per_block", s.ffn_per_block}, {"seq", seq},
        {"contexts", pool.contexts},
        {"private_scratch_sum_bytes", priv.private_bytes},
        {"largest_requirement_bytes", pool.largest},
        {"pool_capacity_bytes", pool.pool_capacity},
        {"capacity_over_largest", ratio},
        {"expected_saving_bytes", priv.private_bytes - pool.largest},
        {"device_used_delta_private_bytes", priv.device_delta},
        {"device_used_delta_pooled_bytes", pool.device_delta},
        {"measured_saving_bytes", priv.device_delta - pool.device_delta},
        {"private_median_ms", priv_ms}, {"pooled_median_ms", pool_ms},
        {"latency_ratio", latency_ratio}, {"runs_per_mode", priv.ms.size()},
        {"device_used_delta_planned_bytes", plan.device_delta}, {"planned_median_ms", plan_ms},
        {"planned_latency_ratio", planned_latency_ratio}, {"planned_outputs_identical", planned_same},
        {"planned_judged", planned_judged}, {"planned_targets_met", planned_met},
        {"outputs_identical", same}, {"targets_met", met}, {"smoke", smoke}};
    if (out.is_open()) out << line.dump() << "\n";
  }

  // Dynamic S: calls at S = seq/4 then seq/2 on the differing-sizes method settle the pool at
  // the S = seq/2 requirement, below the profile max.
  {
    Result<std::vector<uint8_t>> bytes = build(scenarios[2], seq, fused_attention);
    if (!bytes.ok()) return fail(bytes.status().to_string());
    Result<Program> program = Program::load_bytes(std::move(bytes).value());
    if (!program.ok()) return fail(program.status().to_string());
    if (Status s = trim_engine_scratch_pool(Device::cuda(0)); !s.ok()) return fail(s.to_string());
    LoadMethodOptions options;
    options.backend_options["engine"].push_back({std::string(kSharedScratchOption), "true"});
    Result<Method> m = program->load_method("forward", options);
    if (!m.ok()) return fail(m.status().to_string());
    uint64_t capacity[2] = {0, 0};
    int64_t sizes[2] = {seq / 4, seq / 2};
    for (int k = 0; k < 2; ++k) {
      TensorView part = TensorView::contiguous(x.data(), DType::F32, *Shape::from(std::vector<int64_t>{1, sizes[k], 512}));
      if (Status s = m->run({&part, 1}); !s.ok()) return fail(s.to_string());
      capacity[k] = engine_scratch_stats(Device::cuda(0))->pool_capacity_bytes;
    }
    uint64_t profile_max = 0;
    for (const EngineContextInfo& c : engine_scratch_stats(Device::cuda(0))->contexts) {
      profile_max = std::max(profile_max, c.scratch_bytes);
    }
    const bool settles = capacity[1] > capacity[0] && capacity[1] < profile_max;
    all_met = all_met && settles;
    std::printf("dynamic S: capacity %.1f MiB after S=%lld, %.1f MiB after S=%lld; profile max %.1f MiB (%s)\n",
                capacity[0] / kMiB, static_cast<long long>(sizes[0]), capacity[1] / kMiB,
                static_cast<long long>(sizes[1]), profile_max / kMiB,
                settles ? "settles at the largest call" : "NOT below the profile max");
    nlohmann::json line = {{"bench", "engine_scratch_dynamic_s"}, {"commit", commit},
                           {"device", gpu->name}, {"command", command},
                           {"attention", fused_attention ? "fused" : "unfused"},
                           {"calls_seq", {sizes[0], sizes[1]}},
                           {"capacity_after_bytes", {capacity[0], capacity[1]}},
                           {"profile_max_bytes", profile_max},
                           {"settles_below_profile_max", settles}, {"smoke", smoke}};
    if (out.is_open()) out << line.dump() << "\n";
  }
  std::printf("targets (capacity = largest, %sidentical outputs, dynamic S): %s\n",
              smoke ? "smoke run: latency not judged, " : "pooled latency within 3%, ",
              all_met ? "met" : "NOT all met");
  return all_met ? 0 : 2;
}
