// planrt inspect FILE.prog [--json] [--plot PLAN.svg]
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
#include "planrt/runtime/program.h"

namespace planrt::cli {
namespace {

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

nlohmann::json method_json(const MethodMeta& m) {
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
                        {"scratch_bytes", s.scratch_bytes}});
  }
  nlohmann::json memory = nlohmann::json::array();
  for (const MemoryEstimate& e : m.memory) {
    memory.push_back({{"device", to_string(e.device)},
                      {"planned_bytes", e.planned_bytes},
                      {"weights_bytes", e.weights_bytes},
                      {"engine_scratch_bytes", e.engine_scratch_bytes},
                      {"total_bytes", e.planned_bytes + e.weights_bytes + e.engine_scratch_bytes}});
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
          {"memory_estimate", memory}};
}

void print_tensors(const char* label, const MethodMeta& m, const std::vector<TensorSpec>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    fmt::print("  {:<9}{} {} {}\n", i == 0 ? label : "", tensors[i].name,
               dtype_name(tensors[i].dtype), shape_string(tensors[i].shape, m.dims));
  }
}

void print_method(const MethodMeta& m) {
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
    fmt::print("    #{:<3} {:<7} on {:<7} {} nodes{}\n", i, s.backend, to_string(s.device),
               s.num_nodes, s.name.empty() ? "" : "  " + s.name);
  }
  fmt::print("  memory estimate\n");
  for (const MemoryEstimate& e : m.memory) {
    fmt::print("    {:<7} planned {:>12}  weights {:>12}  scratch {:>12}  total {:>12}\n",
               to_string(e.device), format_bytes(e.planned_bytes), format_bytes(e.weights_bytes),
               format_bytes(e.engine_scratch_bytes),
               format_bytes(e.planned_bytes + e.weights_bytes + e.engine_scratch_bytes));
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

  if (!args.plot.empty()) {
    Status s = write_plot(args.program, args.plot);
    if (!s.ok()) return report_error(s);
    if (!args.json) fmt::print(stderr, "plan plot written to {}\n", args.plot);
  }
  if (args.json) {
    nlohmann::json methods = nlohmann::json::array();
    for (const MethodMeta& m : metas) methods.push_back(method_json(m));
    nlohmann::json j = {{"path", args.program},
                        {"constants_bytes", program->constants_bytes()},
                        {"methods", methods}};
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  fmt::print("program {}: {} method(s), constants {}\n", args.program, metas.size(),
             format_bytes(program->constants_bytes()));
  for (const MethodMeta& m : metas) print_method(m);
  return kExitOk;
}

}  // namespace planrt::cli
