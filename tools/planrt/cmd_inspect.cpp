// planrt inspect FILE.prog [--json] [--steps] [--plot PLAN.svg]
//
// Everything but the plot comes from MethodMeta, the runtime's answer before loading
// (placement rule 6), so inspect reports exactly what the runtime will do.
#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "format/program_file.h"
#include "format_bytes.h"
#include "plan_plot.h"
#include "program_steps.h"
#include "planrt/runtime/program.h"

namespace planrt::cli {
namespace {

// An engine segment as inspect reports it: MethodMeta's figures and the engine's
// optimization profile, read from the segment's graph.
struct EngineReport {
  size_t segment = 0;
  const SegmentInfo* info = nullptr;
  std::vector<DimSpec> profile;  // name, min, max of each method dim the engine's shapes use
};

// The engines of `meta`, in segment order. The file is the one `meta` came from.
std::vector<EngineReport> engines_of(const format::ProgramFile& file, const MethodMeta& meta) {
  std::vector<EngineReport> out;
  const fb::Method* method = nullptr;
  for (const fb::Method* m : *file.program().methods()) {
    if (m->name()->string_view() == meta.name) method = m;
  }
  for (size_t i = 0; i < meta.segments.size(); ++i) {
    if (meta.segments[i].backend != "engine") continue;
    EngineReport e{i, &meta.segments[i], {}};
    const fb::Segment* seg = method != nullptr && method->segments() != nullptr && i < method->segments()->size()
                                 ? method->segments()->Get(static_cast<uint32_t>(i))
                                 : nullptr;
    const fb::Graph* graph = seg != nullptr && seg->blob() != nullptr && seg->blob()->size() != 0
                                 ? seg->blob_nested_root()
                                 : nullptr;
    if (graph != nullptr && graph->profile() != nullptr) {
      for (const fb::DimBound* b : *graph->profile()) {
        // The engine refuses a profile naming a dim the method lacks when it is loaded;
        // inspect still shows what the file says.
        std::string name = b->dim() < meta.dims.size() ? meta.dims[b->dim()].name : fmt::format("dim#{}", b->dim());
        e.profile.push_back(DimSpec{std::move(name), b->min(), b->max()});
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::string profile_string(const EngineReport& e) {
  if (e.profile.empty()) return "static shapes";
  std::vector<std::string> parts;
  for (const DimSpec& d : e.profile) parts.push_back(fmt::format("{} in [{}, {}]", d.name, d.min, d.max));
  return fmt::format("{}", fmt::join(parts, ", "));
}

double ratio_of(const PlanStatInfo& p) {
  return p.lower_bound_bytes == 0 ? 1.0
                                  : static_cast<double>(p.planned_bytes) / p.lower_bound_bytes;
}

std::vector<std::string> dim_strings(const MethodMeta& m) {
  std::vector<std::string> out;
  for (const DimSpec& d : m.dims) out.push_back(fmt::format("{} in [{}, {}]", d.name, d.min, d.max));
  return out;
}

nlohmann::json tensors_json(const MethodMeta& m, const std::vector<TensorSpec>& tensors) {
  nlohmann::json out = nlohmann::json::array();
  for (const TensorSpec& t : tensors) {
    out.push_back({{"name", t.name},
                   {"dtype", dtype_name(t.dtype)},
                   {"shape", shape_string(t.shape, m.dims)}});
  }
  return out;
}

// An engine's scratch plan over its lower bound (1 when it records none).
double scratch_ratio(const SegmentInfo& s) {
  return s.scratch_lower_bound_bytes == 0 ? 1.0
                                          : static_cast<double>(s.scratch_bytes) / s.scratch_lower_bound_bytes;
}

nlohmann::json method_json(const MethodMeta& m, const std::vector<EngineReport>& engine_reports) {
  nlohmann::json buffers = nlohmann::json::array();
  for (size_t i = 0; i < m.planned_buffers.size(); ++i) {
    buffers.push_back({{"index", i},
                       {"size_bytes", m.planned_buffers[i].size_bytes},
                       {"device", to_string(m.planned_buffers[i].device)}});
  }
  nlohmann::json plan = nlohmann::json::array();
  for (const PlanStatInfo& p : m.plan) {
    plan.push_back({{"device", to_string(p.device)},
                    {"planner", p.planner},
                    {"lower_bound_bytes", p.lower_bound_bytes},
                    {"planned_bytes", p.planned_bytes},
                    {"ratio", ratio_of(p)},
                    {"num_tensors", p.num_tensors}});
  }
  nlohmann::json segments = nlohmann::json::array();
  for (size_t i = 0; i < m.segments.size(); ++i) {
    const SegmentInfo& s = m.segments[i];
    segments.push_back({{"index", i},
                        {"name", s.name},
                        {"backend", s.backend},
                        {"device", to_string(s.device)},
                        {"num_nodes", s.num_nodes},
                        {"scratch_bytes", s.scratch_bytes},
                        {"planned_scratch", s.planned_scratch}});
  }
  nlohmann::json memory = nlohmann::json::array();
  for (const MemoryEstimate& e : m.memory) {
    memory.push_back({{"device", to_string(e.device)},
                      {"planned_bytes", e.planned_bytes},
                      {"weights_bytes", e.weights_bytes},
                      {"engine_scratch_bytes", e.engine_scratch_bytes},
                      {"total_bytes", e.planned_bytes + e.weights_bytes + e.engine_scratch_bytes},
                      {"library_bytes", e.library_bytes},
                      {"page_rounding_bytes", e.page_rounding_bytes},
                      {"uses_warm_pool", e.uses_warm_pool},
                      {"predicted_bytes", e.predicted_bytes()}});
  }
  nlohmann::json engines = nlohmann::json::array();
  for (const EngineReport& e : engine_reports) {
    nlohmann::json profile = nlohmann::json::array();
    for (const DimSpec& d : e.profile) profile.push_back({{"dim", d.name}, {"min", d.min}, {"max", d.max}});
    engines.push_back({{"segment", e.info->name},
                       {"index", e.segment},
                       {"device", to_string(e.info->device)},
                       {"scratch_bytes", e.info->scratch_bytes},
                       {"scratch_lower_bound_bytes", e.info->scratch_lower_bound_bytes},
                       {"scratch_ratio", scratch_ratio(*e.info)},
                       {"shared_scratch", e.info->shared_scratch},
                       {"planned_scratch", e.info->planned_scratch},
                       {"profile", profile}});
  }
  return {{"name", m.name},
          {"dims", dim_strings(m)},
          {"inputs", tensors_json(m, m.inputs)},
          {"outputs", tensors_json(m, m.outputs)},
          {"num_instructions", m.num_instructions},
          {"planned_buffers", buffers},
          {"plan", plan},
          {"backends", m.backends},
          {"segments", segments},
          {"engines", engines},
          {"memory_estimate", memory}};
}

void print_tensors(const char* label, const MethodMeta& m, const std::vector<TensorSpec>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    fmt::print("  {:<9}{} {} {}\n", i == 0 ? label : "", tensors[i].name,
               dtype_name(tensors[i].dtype), shape_string(tensors[i].shape, m.dims));
  }
}

void print_method(const MethodMeta& m, const std::vector<EngineReport>& engines) {
  fmt::print("\nmethod {} ({} instructions)\n", m.name, m.num_instructions);
  if (!m.dims.empty()) fmt::print("  dims     {}\n", fmt::join(dim_strings(m), ", "));
  print_tensors("inputs", m, m.inputs);
  print_tensors("outputs", m, m.outputs);
  fmt::print("  planned buffers\n");
  for (size_t i = 0; i < m.planned_buffers.size(); ++i) {
    fmt::print("    #{:<3} {:<7} {:>12}\n", i, to_string(m.planned_buffers[i].device),
               format_bytes(m.planned_buffers[i].size_bytes));
  }
  fmt::print("  plan\n");
  for (const PlanStatInfo& p : m.plan) {
    fmt::print("    {:<7} {:<15} lower bound {:>12}  planned {:>12}  ratio {:.3f}  ({} tensors)\n",
               to_string(p.device), p.planner, format_bytes(p.lower_bound_bytes),
               format_bytes(p.planned_bytes), ratio_of(p), p.num_tensors);
  }
  fmt::print("  backends {}\n", m.backends.empty() ? "cpu kernels only" : fmt::format("{}", fmt::join(m.backends, ", ")));
  fmt::print("  segments\n");
  for (size_t i = 0; i < m.segments.size(); ++i) {
    const SegmentInfo& s = m.segments[i];
    fmt::print("    #{:<3} {:<7} on {:<7} {} nodes{}{}\n", i, s.backend, to_string(s.device),
               s.num_nodes, s.name.empty() ? "" : "  " + s.name,
               s.planned_scratch ? fmt::format("  scratch {} planned in the method's arena", format_bytes(s.scratch_bytes))
                                 : "");
  }
  if (!engines.empty()) {
    fmt::print("  engines\n");
    for (const EngineReport& e : engines) {
      fmt::print("    #{:<3} {:<12} on {:<7} scratch_bytes() {:>12} ({} B, {})  lower bound {}  ratio {:.3f}  profile {}\n",
                 e.segment, e.info->name, to_string(e.info->device), format_bytes(e.info->scratch_bytes),
                 e.info->scratch_bytes,
                 e.info->planned_scratch ? "planned" : e.info->shared_scratch ? "shared pool" : "private",
                 format_bytes(e.info->scratch_lower_bound_bytes), scratch_ratio(*e.info), profile_string(e));
    }
  }
  fmt::print("  memory estimate\n");
  for (const MemoryEstimate& e : m.memory) {
    fmt::print("    {:<7} planned {:>12}  weights {:>12}  scratch {:>12}  total {:>12}\n",
               to_string(e.device), format_bytes(e.planned_bytes), format_bytes(e.weights_bytes),
               format_bytes(e.engine_scratch_bytes),
               format_bytes(e.planned_bytes + e.weights_bytes + e.engine_scratch_bytes));
    if (e.device.type == DeviceType::CUDA) {
      fmt::print("            + library handles {:>12}  + page rounding {:>12}  = predicted {:>12}{}\n",
                 format_bytes(e.library_bytes), format_bytes(e.page_rounding_bytes), format_bytes(e.predicted_bytes()),
                 e.uses_warm_pool ? " and the warm pool's reserve (a cuda segment takes its intermediates from it)"
                                  : " (kernel images loaded on first launch not included)");
    }
  }
}

Status write_plot(const std::string& program_path, const std::string& plot_path) {
  PLANRT_ASSIGN_OR_RETURN(format::ProgramFile file, format::ProgramFile::open(program_path));
  PLANRT_ASSIGN_OR_RETURN(std::vector<BufferLayout> layouts, plan_layouts(file));
  std::ofstream out(plot_path, std::ios::binary | std::ios::trunc);
  out << render_plan_svg(layouts);
  out.close();
  if (!out) return make_error(ErrorCode::IoError, "cannot write plot '{}'", plot_path);
  return {};
}

}  // namespace

int run_inspect(const InspectArgs& args) {
  Result<Program> program = Program::load(args.program);
  if (!program.ok()) return report_error(program.status());
  std::vector<MethodMeta> metas;
  for (const std::string& name : program->method_names()) {
    Result<MethodMeta> meta = program->method_meta(name);
    if (!meta.ok()) return report_error(meta.status());
    metas.push_back(std::move(meta).value());
  }

  // MethodMeta does not carry an engine's profile; it is read from the segment's graph.
  Result<format::ProgramFile> file = format::ProgramFile::open(args.program);
  if (!file.ok()) return report_error(file.status());
  std::vector<std::vector<EngineReport>> engines;
  for (const MethodMeta& m : metas) engines.push_back(engines_of(*file, m));

  if (!args.plot.empty()) {
    Status s = write_plot(args.program, args.plot);
    if (!s.ok()) return report_error(s);
    if (!args.json) fmt::print(stderr, "plan plot written to {}\n", args.plot);
  }
  if (args.json) {
    nlohmann::json methods = nlohmann::json::array();
    for (size_t i = 0; i < metas.size(); ++i) methods.push_back(method_json(metas[i], engines[i]));
    // The program-level compile specs (e.g. use_shared_activation_scratch from
    // `planrt build --shared-scratch`), which every segment's init receives.
    nlohmann::json specs = nlohmann::json::array();
    if (const auto* kvs = file->program().compile_specs()) {
      for (const fb::KeyValue* kv : *kvs) {
        specs.push_back({{"key", kv->key()->str()}, {"value", kv->value() ? kv->value()->str() : ""}});
      }
    }
    nlohmann::json j = {{"path", args.program},
                        {"constants_bytes", program->constants_bytes()},
                        {"compile_specs", specs},
                        {"methods", methods}};
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  fmt::print("program {}: {} method(s), constants {}\n", args.program, metas.size(),
             format_bytes(program->constants_bytes()));
  if (const auto* kvs = file->program().compile_specs(); kvs != nullptr && kvs->size() != 0) {
    std::vector<std::string> specs;
    for (const fb::KeyValue* kv : *kvs) {
      specs.push_back(fmt::format("{}={}", kv->key()->str(), kv->value() ? kv->value()->str() : ""));
    }
    fmt::print("compile specs {}\n", fmt::join(specs, ", "));
  }
  for (size_t i = 0; i < metas.size(); ++i) {
    print_method(metas[i], engines[i]);
    if (args.steps) print_method_steps(*file, metas[i].name);
  }
  return kExitOk;
}

}  // namespace planrt::cli
