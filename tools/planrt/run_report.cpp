#include "run_report.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "format_bytes.h"

namespace planrt::cli {
namespace {

using nlohmann::json;

// Only host arenas can be shared: a method's device arenas are always its own.
bool arenas_shared(const DeviceMemory& d, const RunReport& r) {
  return d.device.is_cpu() && r.shared_host_arenas;
}

// ---- --json ----

json inputs_json(const std::vector<InputReport>& inputs) {
  json out = json::array();
  for (const InputReport& in : inputs) {
    out.push_back({{"name", in.name},
                   {"dtype", dtype_name(in.dtype)},
                   {"shape", in.shape},
                   {"source", in.source}});
  }
  return out;
}

json outputs_json(const std::vector<OutputReport>& outputs) {
  json out = json::array();
  for (const OutputReport& o : outputs) {
    json oj = {{"name", o.name}, {"dtype", dtype_name(o.dtype)}, {"shape", o.shape}};
    if (o.stats) {
      oj["min"] = o.stats->min;
      oj["max"] = o.stats->max;
      oj["mean"] = o.stats->mean;
    }
    if (!o.path.empty()) oj["path"] = o.path;
    out.push_back(std::move(oj));
  }
  return out;
}

json pool_json(const DeviceFigures& f) {
  return {{"private", f.private_pool},
          {"reserved_bytes", f.pool_reserved},
          {"reserved_high_bytes", f.pool_reserved_high},
          {"used_bytes", f.pool_used},
          {"used_high_bytes", f.pool_used_high},
          {"allocations", f.pool_allocations}};
}

json scratch_json(const EngineScratchStats& es) {
  json contexts = json::array();
  for (const EngineContextInfo& c : es.contexts) {
    contexts.push_back({{"method", c.method}, {"segment", c.segment}, {"pooled", c.pooled},
                        {"scratch_bytes", c.scratch_bytes}});
  }
  return {{"contexts", contexts},
          {"private_contexts", es.private_contexts},
          {"pooled_contexts", es.pooled_contexts},
          {"pool_growths", es.pool_growths},
          {"pooled_private_equivalent_bytes", es.pooled_private_equivalent_bytes},
          {"pooled_runs", es.pooled_runs}};
}

json device_json(const DeviceMemory& d, const RunReport& r) {
  json arenas = json::array();
  for (const PlannedArena& a : d.arenas) {
    arenas.push_back({{"index", a.index}, {"size_bytes", a.size_bytes}, {"shared", arenas_shared(d, r)}});
  }
  json dj = {{"device", to_string(d.device)},
             {"planned_bytes", d.planned_bytes},
             {"weights_bytes", d.weights_bytes},
             {"packed_weights_bytes", d.packed_weights_bytes},
             {"total_bytes", d.total_bytes()},
             {"arenas", arenas}};
  const DeviceFigures& f = d.figures;
  if (f.known) {
    dj["device_total_bytes"] = f.total;
    dj["device_used_before_load_bytes"] = f.used_before_load;
    dj["device_used_after_load_bytes"] = f.used_after_load;
    dj["device_used_after_run_bytes"] = f.used_after_run;
  }
  if (f.pool_known) dj["pool"] = pool_json(f);
  if (d.ledger.known) {
    json lines = json::array();
    for (const LedgerFigures::Line& l : d.ledger.lines) {
      lines.push_back({{"name", l.name}, {"bytes", l.bytes}, {"detail", l.detail}});
    }
    dj["ledger"] = {{"lines", lines},
                    {"measured_bytes", d.ledger.measured_bytes},
                    {"named_bytes", d.ledger.named_bytes},
                    {"remainder_bytes", d.ledger.remainder_bytes}};
  }
  const EngineScratchStats& es = d.scratch.stats;
  dj["scratch_private_bytes"] = es.private_scratch_bytes;
  dj["scratch_pool_capacity_bytes"] = es.pool_capacity_bytes;
  dj["scratch_pool_high_water_bytes"] = es.pool_high_water_bytes;
  dj["scratch"] = scratch_json(es);
  return dj;
}

// ---- text ----

// A shape as the JSON form writes it ("[1,32,512]"), so the two reports read alike.
std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

void print_tensors(const RunReport& r) {
  for (const InputReport& in : r.inputs) {
    fmt::print("  input  {} {} {} ({})\n", in.name, dtype_name(in.dtype), shape_text(in.shape),
               in.source);
  }
  for (const OutputReport& o : r.outputs) {
    fmt::print("  output {} {} {}", o.name, dtype_name(o.dtype), shape_text(o.shape));
    if (o.stats) {
      fmt::print("  min {:.6g}  max {:.6g}  mean {:.6g}", o.stats->min, o.stats->max, o.stats->mean);
    }
    if (!o.path.empty()) fmt::print("  -> {}", o.path);
    fmt::print("\n");
  }
}

void print_latency(const RunReport& r) {
  fmt::print("latency over {} iterations ({} warm-up): median {:.3f} ms, p90 {:.3f} ms\n",
             r.latency.iterations, r.latency.warmup, r.latency.median_ms, r.latency.p90_ms);
  if (r.run_stats.streams > 0) {
    fmt::print("device work on {} stream(s); the host waited {} time(s) per run\n", r.run_stats.streams,
               r.run_stats.last_run_synchronizations);
  }
}

void print_engine_scratch(const EngineScratchStats& es) {
  fmt::print("          engine scratch: {} private context(s) hold {}; {} pooled context(s) share "
             "{} (high-water {}, {} growth(s)) where private scratch would cost {}\n",
             es.private_contexts, format_bytes(es.private_scratch_bytes), es.pooled_contexts,
             format_bytes(es.pool_capacity_bytes), format_bytes(es.pool_high_water_bytes),
             es.pool_growths, format_bytes(es.pooled_private_equivalent_bytes));
  for (const EngineContextInfo& c : es.contexts) {
    fmt::print("            {:<20} {:>12}  {}\n", c.segment, format_bytes(c.scratch_bytes),
               c.pooled ? "pooled" : "private");
  }
}

// The warm pool and the device's own used memory; only a CUDA device has them.
void print_device_figures(const DeviceFigures& f) {
  if (f.pool_known) {
    fmt::print("          {} pool: reserved {} (high {}), in use {} (high {}), {} allocations\n",
               f.private_pool ? "warm" : "default", format_bytes(f.pool_reserved),
               format_bytes(f.pool_reserved_high), format_bytes(f.pool_used),
               format_bytes(f.pool_used_high), f.pool_allocations);
  }
  if (!f.known) return;
  // fmt, not "+" + std::string: GCC 12 at -O3 (the Release build bench/compare.sh
  // makes) reports a false -Wrestrict in that operator+, an error under -Werror.
  auto delta = [](uint64_t a, uint64_t b) {
    return a >= b ? fmt::format("+{}", format_bytes(a - b)) : fmt::format("-{}", format_bytes(b - a));
  };
  fmt::print("          device used (cudaMemGetInfo, all processes): {} before load, {} after "
             "load ({}), {} after the runs ({})\n",
             format_bytes(f.used_before_load), format_bytes(f.used_after_load),
             delta(f.used_after_load, f.used_before_load), format_bytes(f.used_after_run),
             delta(f.used_after_run, f.used_before_load));
}

void print_device_memory(const DeviceMemory& d, bool arenas_are_shared) {
  fmt::print("  {:<7} weights {:>12}  planned {:>12}\n", to_string(d.device),
             format_bytes(d.weights_bytes), format_bytes(d.planned_bytes));
  if (d.packed_weights_bytes > 0) {
    fmt::print("          weights reordered for the CPU products {:>12}  (cpu.pack_weights)\n",
               format_bytes(d.packed_weights_bytes));
  }
  for (const PlannedArena& a : d.arenas) {
    fmt::print("          arena #{:<3} {:>12}  {}\n", a.index, format_bytes(a.size_bytes),
               arenas_are_shared ? "shared with the program's other host methods" : "own");
  }
  if (d.scratch.known) print_engine_scratch(d.scratch.stats);
  print_device_figures(d.figures);
  if (d.ledger.known) {
    fmt::print("          ledger, since before the load: measured {}, of which\n",
               format_signed_bytes(d.ledger.measured_bytes));
    for (const LedgerFigures::Line& l : d.ledger.lines) {
      if (l.bytes != 0) fmt::print("            {:<16} {:>12}  {}\n", l.name, format_bytes(l.bytes), l.detail);
    }
    fmt::print("            {:<16} {:>12}  named by nothing: kernel images, streams, the driver, others\n",
               "remainder", format_signed_bytes(d.ledger.remainder_bytes));
  }
}

// --profile: the mean time per timed run by op (steps of one kind and op summed), then the
// slowest steps. Every step runs once per run, so a step's calls is the run count.
void print_profile(const RunReport& r) {
  if (r.profile.empty()) return;
  struct Total {
    double ms = 0;
    int64_t steps = 0;
  };
  std::map<std::pair<std::string, std::string>, Total> by_op;
  double all = 0;
  int64_t runs = 0;
  for (const StepProfile& p : r.profile) {
    runs = std::max(runs, p.calls);
    Total& t = by_op[{p.kind, p.op}];
    t.ms += p.total_ms;
    ++t.steps;
    all += p.total_ms;
  }
  if (runs == 0 || all <= 0) return;
  std::vector<std::pair<std::pair<std::string, std::string>, Total>> ops(by_op.begin(), by_op.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  fmt::print("profile over the {} timed run(s): {:.3f} ms per run in the steps (means)\n", runs,
             all / static_cast<double>(runs));
  fmt::print("  {:<9} {:<34} {:>6} {:>11} {:>7}\n", "kind", "op", "steps", "ms per run", "share");
  for (const auto& [key, t] : ops) {
    fmt::print("  {:<9} {:<34} {:>6} {:>11.3f} {:>6.1f}%\n", key.first, key.second, t.steps,
               t.ms / static_cast<double>(runs), 100.0 * t.ms / all);
  }
  std::vector<const StepProfile*> slowest;
  for (const StepProfile& p : r.profile) slowest.push_back(&p);
  std::sort(slowest.begin(), slowest.end(), [](const auto* a, const auto* b) { return a->total_ms > b->total_ms; });
  slowest.resize(std::min<size_t>(slowest.size(), 10));
  fmt::print("  slowest steps:\n");
  for (const StepProfile* p : slowest) {
    fmt::print("    {:>9.3f} ms  {} {} (node '{}')\n", p->total_ms / static_cast<double>(std::max<int64_t>(p->calls, 1)),
               p->kind, p->op, p->node);
  }
}

void print_memory(const RunReport& r) {
  fmt::print("memory\n");
  uint64_t total = 0;
  for (const DeviceMemory& d : r.memory) {
    print_device_memory(d, arenas_shared(d, r));
    total += d.total_bytes();
  }
  fmt::print("  total   {:>12} (weights are mapped from the file, resident once read)\n",
             format_bytes(total));
  if (r.shared_host_arenas) {
    fmt::print("  the shared host arenas hold {} for all host methods of the program\n",
               format_bytes(r.shared_host_arena_bytes));
  }
}

}  // namespace

void print_json(const RunReport& r) {
  json devices = json::array();
  for (const DeviceMemory& d : r.memory) devices.push_back(device_json(d, r));
  json j = {{"program", r.program},
            {"method", r.method},
            {"inputs", inputs_json(r.inputs)},
            {"outputs", outputs_json(r.outputs)},
            {"load_ms", r.load_ms},
            {"latency_ms",
             {{"median", r.latency.median_ms},
              {"p90", r.latency.p90_ms},
              {"iterations", r.latency.iterations},
              {"warmup", r.latency.warmup},
              {"samples", r.latency.samples_ms}}},
            {"streams", r.run_stats.streams},
            {"synchronizations_per_run", r.run_stats.last_run_synchronizations},
            {"memory",
             {{"devices", devices},
              {"shared_host_arenas", r.shared_host_arenas},
              {"shared_host_arena_bytes", r.shared_host_arena_bytes},
              {"constants_bytes", r.constants_bytes}}}};
  if (!r.profile.empty()) {
    json steps = json::array();
    for (const StepProfile& p : r.profile) {
      steps.push_back({{"kind", p.kind}, {"op", p.op}, {"node", p.node}, {"calls", p.calls}, {"total_ms", p.total_ms}});
    }
    j["profile"] = steps;
  }
  fmt::print("{}\n", j.dump(2));
}

void print_text(const RunReport& r) {
  fmt::print("method {} of {} (loaded in {:.2f} ms)\n", r.method, r.program, r.load_ms);
  print_tensors(r);
  print_latency(r);
  print_profile(r);
  print_memory(r);
}

}  // namespace planrt::cli
