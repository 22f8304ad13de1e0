#include "planning/method_plan.h"

#include "planning/packing_search.h"

#include <algorithm>
#include <optional>

#include <flatbuffers/flatbuffers.h>
#include <fmt/format.h>

#include "planning/engine_scratch.h"
#include "format/fb_types.h"
#include "format/program_file.h"

namespace planrt::planning {
namespace {

using DimSpecs = std::vector<std::unique_ptr<fb::DimSpecT>>;
using Instructions = std::vector<std::unique_ptr<fb::InstructionT>>;

Result<uint64_t> value_bytes(const fb::ValueT& v, const DimSpecs& dims) {
  auto dtype = format::to_dtype(v.dtype);
  if (!dtype) return make_error(ErrorCode::Internal, "value '{}' has an unknown dtype", v.name);
  uint64_t n = element_size(*dtype);
  for (const fb::DimRef& d : v.shape) {
    int64_t size = d.value();
    if (d.dim() >= 0) {
      if (static_cast<size_t>(d.dim()) >= dims.size() ||
          __builtin_mul_overflow(d.value(), dims[d.dim()]->max, &size)) {
        return make_error(ErrorCode::InvalidArgument, "value '{}': shape overflows or names a missing dim", v.name);
      }
    }
    if (size < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(size), &n)) {
      return make_error(ErrorCode::InvalidArgument, "value '{}': byte size overflows 64 bits", v.name);
    }
  }
  return n;
}

// [first, last] instruction of every Planned or Temporary value (nullopt: never touched
// and not an input/output). Constants are not planned and have no lifetime.
Result<std::vector<std::optional<TensorLifetime>>> lifetimes(
    const std::vector<std::unique_ptr<fb::ValueT>>& values, const Instructions& instructions,
    const std::vector<uint32_t>& inputs, const std::vector<uint32_t>& outputs) {
  const size_t num_values = values.size();
  std::vector<std::optional<TensorLifetime>> out(num_values);
  const auto last = static_cast<int64_t>(instructions.empty() ? 0 : instructions.size() - 1);
  auto touch = [&](uint32_t v, int64_t at, bool writes) -> Status {
    if (v == format::kNoValue) return {};
    if (v >= num_values) return make_error(ErrorCode::Internal, "instruction {} names value {} of {}", at, v, num_values);
    if (values[v]->kind == fb::ValueKind::Constant) return {};
    if (!out[v]) {
      if (!writes) {
        return make_error(ErrorCode::Internal, "value {} '{}' is read by instruction {} before it is written", v,
                          values[v]->name, at);
      }
      out[v] = TensorLifetime{0, at, at};
    }
    out[v]->last_use = std::max(out[v]->last_use, at);
    return {};
  };
  for (uint32_t v : inputs) {
    if (v < num_values) out[v] = TensorLifetime{0, 0, 0};
  }
  for (size_t i = 0; i < instructions.size(); ++i) {
    for (uint32_t v : instructions[i]->inputs) PLANRT_RETURN_IF_ERROR(touch(v, static_cast<int64_t>(i), false));
    for (uint32_t v : instructions[i]->outputs) PLANRT_RETURN_IF_ERROR(touch(v, static_cast<int64_t>(i), true));
  }
  for (uint32_t v : outputs) {
    if (v < num_values && out[v]) out[v]->last_use = last;
  }
  return out;
}

}  // namespace

uint64_t plan_alignment(Device device) { return device.is_cpu() ? 64 : 256; }

Result<std::vector<BufferTensors>> collect_buffer_tensors(const fb::MethodT& method) {
  std::vector<BufferTensors> out(method.planned_buffers.size());
  for (size_t b = 0; b < out.size(); ++b) {
    out[b].buffer = static_cast<uint32_t>(b);
    out[b].device = format::to_device(method.planned_buffers[b]->device.get()).value_or(Device::cpu());
  }
  PLANRT_ASSIGN_OR_RETURN(auto lives, lifetimes(method.values, method.instructions, method.inputs,
                                                method.outputs));
  for (size_t v = 0; v < method.values.size(); ++v) {
    const fb::ValueT& value = *method.values[v];
    if (value.kind != fb::ValueKind::Planned) continue;
    if (value.buffer >= out.size()) {
      return make_error(ErrorCode::Internal, "method '{}': value '{}' names buffer {} of {}", method.name,
                        value.name, value.buffer, out.size());
    }
    PLANRT_ASSIGN_OR_RETURN(uint64_t bytes, value_bytes(value, method.dims));
    // A value nothing touches still gets a place (its own lifetime at instruction 0).
    TensorLifetime life = lives[v].value_or(TensorLifetime{0, 0, 0});
    life.size_bytes = bytes;
    out[value.buffer].values.push_back(static_cast<uint32_t>(v));
    out[value.buffer].lifetimes.push_back(life);
  }
  return out;
}

Status plan_method(fb::MethodT& method, const PlanOptions& options) {
  PLANRT_ASSIGN_OR_RETURN(auto buffers, collect_buffer_tensors(method));
  method.plan.clear();
  for (BufferTensors& b : buffers) {
    uint64_t alignment = plan_alignment(b.device);
    auto plan = plan_memory(b.lifetimes, alignment, options.kind);
    if (!plan.ok()) {
      return plan.status().with_context(
          fmt::format("method '{}', planned buffer {} ({})", method.name, b.buffer, to_string(b.device)));
    }
    std::string planner(planner_name(options.kind));
    if (options.kind == PlannerKind::GreedyBySize && options.search_budget_ms > 0 &&
        plan->arena_bytes > plan->lower_bound_bytes) {
      const SearchReport search = improve_plan(b.lifetimes, alignment, options.search_budget_ms, *plan);
      planner += fmt::format("+search({})", search_stop_name(search.stop));
    }
    for (size_t i = 0; i < b.values.size(); ++i) method.values[b.values[i]]->offset = plan->offsets[i];
    method.planned_buffers[b.buffer]->size_bytes = plan->arena_bytes;
    auto stat = std::make_unique<fb::PlanStatT>();
    stat->device = std::make_unique<fb::DeviceRef>(format::to_fb_device(b.device));
    stat->planner = planner;
    stat->lower_bound_bytes = plan->lower_bound_bytes;
    stat->planned_bytes = plan->arena_bytes;
    stat->num_tensors = static_cast<uint32_t>(b.values.size());
    method.plan.push_back(std::move(stat));
  }
  return {};
}

Status verify_method_plan(const fb::MethodT& method) {
  PLANRT_ASSIGN_OR_RETURN(auto buffers, collect_buffer_tensors(method));
  for (const BufferTensors& b : buffers) {
    MemoryPlan plan;
    plan.arena_bytes = method.planned_buffers[b.buffer]->size_bytes;
    for (uint32_t v : b.values) plan.offsets.push_back(method.values[v]->offset);
    Status s = verify_plan(b.lifetimes, plan, plan_alignment(b.device));
    if (!s.ok()) {
      return s.with_context(fmt::format("method '{}', planned buffer {} ({})", method.name, b.buffer,
                                        to_string(b.device)));
    }
  }
  return {};
}

Status plan_engine_graph(fb::GraphT& graph, const DimSpecs& dims, Device device, double search_budget_ms) {
  std::vector<bool> used(dims.size(), false);
  for (const auto& v : graph.values) {
    for (const fb::DimRef& d : v->shape) {
      if (d.dim() < 0) continue;
      if (static_cast<size_t>(d.dim()) >= dims.size()) {
        return make_error(ErrorCode::Internal, "engine value '{}' names dim {} of {}", v->name, d.dim(),
                          dims.size());
      }
      used[static_cast<size_t>(d.dim())] = true;
    }
  }
  graph.profile.clear();
  for (size_t d = 0; d < dims.size(); ++d) {
    if (used[d]) graph.profile.emplace_back(static_cast<uint32_t>(d), dims[d]->min, dims[d]->max);
  }
  // plan_engine_scratch reads the flat form, as the backend does: plan what it will read.
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fb::Graph::Pack(fbb, &graph));
  const fb::Graph& flat = *flatbuffers::GetRoot<fb::Graph>(fbb.GetBufferPointer());
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> max_dims, profile_max_dims(flat, dims.size()));
  PLANRT_ASSIGN_OR_RETURN(EngineScratchPlan plan,
                          plan_engine_scratch_to_store(flat, max_dims, /*cuda_workspace=*/!device.is_cpu(),
                                                       search_budget_ms));
  for (size_t v = 0; v < graph.values.size(); ++v) {
    if (graph.values[v]->kind != fb::ValueKind::Planned) continue;
    graph.values[v]->buffer = 0;
    graph.values[v]->offset = plan.value_offsets[v];
  }
  graph.scratch_bytes = plan.scratch_bytes;
  graph.scratch_lower_bound_bytes = plan.lower_bound_bytes;
  graph.scratch_workspace_offsets = plan.workspace_offsets;
  graph.scratch_plan_stored = true;
  return {};
}

}  // namespace planrt::planning
