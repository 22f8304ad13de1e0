#include "planning/engine_scratch.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planning/op_attrs.h"
#include "planning/planner.h"
#include "format/fb_types.h"
#include "format/program_file.h"
#include "kernels/workspace.h"

namespace planrt::planning {
namespace {

using format::kNoValue;

Status bad(std::string message) { return Status(ErrorCode::InvalidProgram, std::move(message)); }

// The concrete shape of `v` at `dim_values`. Its strides, and its byte size at the widest
// dtype, must fit in 64 bits as well as each dim: the plan takes strides and byte sizes of
// these shapes, and a graph read from a file may name any dim values (a program's engine
// profile far above its method's bounds overflowed the strides; tests/fuzz/regressions/
// program). A zero dim counts as one: it empties the tensor, not the other dims' strides.
Result<Shape> shape_at(const fb::Value& v, std::span<const int64_t> dim_values) {
  constexpr int64_t kMaxElementBytes = 8;
  std::vector<int64_t> dims;
  int64_t stride_span = 1;
  if (v.shape() != nullptr) {
    for (const fb::DimRef* d : *v.shape()) {
      int64_t size = d->value();
      if (d->dim() >= 0) {
        if (static_cast<size_t>(d->dim()) >= dim_values.size() ||
            __builtin_mul_overflow(d->value(), dim_values[static_cast<size_t>(d->dim())], &size)) {
          return bad(fmt::format("engine value '{}': its shape names dim {} of {} or overflows",
                                 v.name() ? v.name()->str() : "", d->dim(), dim_values.size()));
        }
      }
      if (__builtin_mul_overflow(stride_span, std::max<int64_t>(size, 1), &stride_span) ||
          stride_span > INT64_MAX / kMaxElementBytes) {
        return bad(fmt::format("engine value '{}': its shape at dims [{}] overflows 64-bit sizes",
                               v.name() ? v.name()->str() : "", fmt::join(dim_values, ", ")));
      }
      dims.push_back(size);
    }
  }
  return Shape::from(dims);
}

}  // namespace

Result<std::vector<int64_t>> profile_max_dims(const fb::Graph& graph, size_t num_dims) {
  std::vector<int64_t> out(num_dims, 0);
  if (graph.profile() == nullptr) return out;
  for (const fb::DimBound* b : *graph.profile()) {
    if (b->dim() >= num_dims || b->min() > b->max() || b->min() < 0) {
      return bad(fmt::format("engine profile entry for dim {} [{}, {}] is invalid ({} dims)", b->dim(),
                             b->min(), b->max(), num_dims));
    }
    out[b->dim()] = b->max();
  }
  return out;
}

namespace {

// What an engine graph's scratch holds at given dims: the tensors (Planned values with a
// lifetime, then step workspaces), whose each is (`owner`: value id, or n_values + step).
// A value that is a view of another (Graph.scratch_plan_views) is no tensor of its own:
// `root[v]` is the value whose place it takes (v itself for every other value).
struct ScratchTensors {
  std::vector<TensorLifetime> tensors;
  std::vector<size_t> owner;
  std::vector<uint64_t> workspace_bytes;  // per step
  std::vector<size_t> root;               // per value
  size_t n_values = 0;
};

bool planned(const fb::Graph& graph, uint32_t id) {
  return graph.values()->Get(id)->kind() == fb::ValueKind::Planned;
}

// Graph.scratch_plan_views: a reshape step from one Planned value to another, each written
// by one step only, puts its output where its input is: reshape keeps the bytes and their
// order, and neither is written again, so the two hold the same bytes for as long as either
// lives. (A value written twice, in place, as hand-built programs may, keeps its own place.)
// Chains follow to the first value. Steps are in order, so an input's root is final when its
// reshape is reached.
std::vector<size_t> view_roots(const fb::Graph& graph, size_t n_values) {
  std::vector<size_t> root(n_values);
  for (size_t v = 0; v < n_values; ++v) root[v] = v;
  const auto* steps = graph.instructions();
  if (!graph.scratch_plan_views() || steps == nullptr) return root;
  std::vector<int> writers(n_values, 0);
  for (const fb::Instruction* ins : *steps) {
    if (ins->outputs() == nullptr) continue;
    for (uint32_t id : *ins->outputs()) {
      if (id < n_values) ++writers[id];
    }
  }
  // Written by an earlier step: a (malformed) graph may read a value before its writer, and
  // a view of it then would share bytes the later write changes, or name a root not yet final.
  std::vector<bool> written(n_values, false);
  for (const fb::Instruction* ins : *steps) {
    const bool reshape = ins->op() != nullptr && ins->op()->string_view() == "reshape" &&
                         ins->inputs() != nullptr && ins->outputs() != nullptr &&
                         ins->inputs()->size() == 1 && ins->outputs()->size() == 1;
    if (reshape) {
      const uint32_t in = ins->inputs()->Get(0), out = ins->outputs()->Get(0);
      if (in < n_values && out < n_values && in != out && written[in] && writers[in] == 1 &&
          writers[out] == 1 && planned(graph, in) && planned(graph, out)) {
        root[out] = root[in];
      }
    }
    if (ins->outputs() == nullptr) continue;
    for (uint32_t id : *ins->outputs()) {
      if (id < n_values) written[id] = true;
    }
  }
  return root;
}

// Graph.scratch_plan_fusion_safe: a layer_norm reading the output of the add just before it
// may run with that add as one kernel, which reads the add's inputs while it writes the
// norm's outputs; so those outputs live from the add on. (Any such pair: the backend's own
// conditions for fusing are narrower, and a wider rule only costs bytes.)
void extend_for_add_layer_norm(const fb::Graph& graph, std::vector<int64_t>& first) {
  const auto* steps = graph.instructions();
  for (uint32_t k = 0; steps != nullptr && k + 1 < steps->size(); ++k) {
    const fb::Instruction* add = steps->Get(k);
    const fb::Instruction* norm = steps->Get(k + 1);
    if (add->op() == nullptr || norm->op() == nullptr || add->op()->string_view() != "add" ||
        norm->op()->string_view() != "layer_norm" || add->outputs() == nullptr ||
        add->outputs()->size() == 0 || norm->inputs() == nullptr || norm->inputs()->size() == 0 ||
        norm->inputs()->Get(0) != add->outputs()->Get(0) || norm->outputs() == nullptr) {
      continue;
    }
    for (uint32_t id : *norm->outputs()) {
      if (id < first.size() && first[id] > static_cast<int64_t>(k)) first[id] = k;
    }
  }
}

Result<ScratchTensors> scratch_tensors(const fb::Graph& graph, std::span<const int64_t> dim_values,
                                       bool cuda_workspace) {
  const size_t n_values = graph.values() ? graph.values()->size() : 0;
  const size_t n_steps = graph.instructions() ? graph.instructions()->size() : 0;
  ScratchTensors out;
  out.n_values = n_values;
  out.workspace_bytes.assign(n_steps, 0);

  std::vector<Shape> shapes(n_values);
  std::vector<DType> dtypes(n_values, DType::F32);
  for (size_t v = 0; v < n_values; ++v) {
    const fb::Value* value = graph.values()->Get(static_cast<uint32_t>(v));
    PLANRT_ASSIGN_OR_RETURN(shapes[v], shape_at(*value, dim_values));
    auto dtype = format::to_dtype(value->dtype());
    if (!dtype) return bad(fmt::format("engine value {} has an unknown dtype", v));
    dtypes[v] = *dtype;
  }
  // Lifetimes of the Planned values over the steps; workspace per step.
  std::vector<int64_t> first(n_values, -1), last(n_values, -1);
  for (size_t k = 0; k < n_steps; ++k) {
    const fb::Instruction* ins = graph.instructions()->Get(static_cast<uint32_t>(k));
    std::vector<TensorView> in, outs;
    for (const auto* ids : {ins->inputs(), ins->outputs()}) {
      if (ids == nullptr) continue;
      for (uint32_t id : *ids) {
        if (id == kNoValue && ids == ins->inputs()) {
          in.push_back(TensorView::none());
          continue;
        }
        if (id >= n_values) return bad(fmt::format("engine step {} names value {} of {}", k, id, n_values));
        if (first[id] < 0) first[id] = static_cast<int64_t>(k);
        last[id] = static_cast<int64_t>(k);
        TensorView view = TensorView::contiguous(nullptr, dtypes[id], shapes[id]);
        (ids == ins->inputs() ? in : outs).push_back(view);
      }
    }
    if (cuda_workspace && ins->op() != nullptr) {
      // The step's own attributes, as the kernel will see them: the attention's `fused`
      // decides whether it keeps its scores (issue 13: the defaults stood in here, and an
      // engine with unfused attention at head dim 64 planned no workspace for them).
      auto context = [&] { return fmt::format("engine step {} ('{}')", k, ins->op()->str()); };
      Result<kernels::OpAttrs> attrs = parse_op_attrs(*ins);
      if (!attrs.ok()) return attrs.status().with_context(context());
      Result<uint64_t> ws = kernels::cuda_workspace_bytes(ins->op()->string_view(), *attrs, in, outs);
      if (!ws.ok()) return ws.status().with_context(context());
      out.workspace_bytes[k] = *ws;
    }
  }
  if (graph.scratch_plan_fusion_safe()) extend_for_add_layer_norm(graph, first);
  // A view's place is its root's: the root's tensor spans every member's lifetime and holds
  // the largest of them (equal for a well-formed reshape; a malformed one fails in its kernel).
  out.root = view_roots(graph, n_values);
  std::vector<uint64_t> bytes(n_values, 0);
  for (size_t v = 0; v < n_values; ++v) {
    bytes[v] = static_cast<uint64_t>(shapes[v].numel()) * element_size(dtypes[v]);
  }
  for (size_t v = 0; v < n_values; ++v) {
    const size_t r = out.root[v];
    if (r == v || first[v] < 0) continue;
    first[r] = std::min(first[r], first[v]);
    last[r] = std::max(last[r], last[v]);
    bytes[r] = std::max(bytes[r], bytes[v]);
  }
  for (size_t v = 0; v < n_values; ++v) {
    if (!planned(graph, static_cast<uint32_t>(v)) || first[v] < 0 || out.root[v] != v) continue;
    out.tensors.push_back({bytes[v], first[v], last[v]});
    out.owner.push_back(v);
  }
  for (size_t k = 0; k < n_steps; ++k) {
    if (out.workspace_bytes[k] == 0) continue;
    out.tensors.push_back({out.workspace_bytes[k], static_cast<int64_t>(k), static_cast<int64_t>(k)});
    out.owner.push_back(n_values + k);
  }
  return out;
}

EngineScratchPlan to_scratch_plan(const ScratchTensors& t, const MemoryPlan& plan, size_t n_steps) {
  EngineScratchPlan out;
  out.value_offsets.assign(t.n_values, 0);
  out.workspace_offsets.assign(n_steps, 0);
  out.workspace_bytes = t.workspace_bytes;
  for (size_t i = 0; i < t.tensors.size(); ++i) {
    const size_t o = t.owner[i];
    if (o < t.n_values) out.value_offsets[o] = plan.offsets[i];
    else out.workspace_offsets[o - t.n_values] = plan.offsets[i];
  }
  for (size_t v = 0; v < t.n_values; ++v) out.value_offsets[v] = out.value_offsets[t.root[v]];
  out.scratch_bytes = plan.arena_bytes;
  out.lower_bound_bytes = plan.lower_bound_bytes;
  return out;
}

// The plan the program stores (scratch_plan_stored), checked against the sizes and
// lifetimes computed here: every tensor inside the recorded scratch, none overlapping one
// it lives beside.
Result<MemoryPlan> stored_plan(const fb::Graph& graph, const ScratchTensors& t, size_t n_steps) {
  const auto* ws = graph.scratch_workspace_offsets();
  if (ws == nullptr || ws->size() != n_steps) {
    return bad(fmt::format("engine graph's stored scratch plan has {} workspace offsets for {} steps",
                           ws == nullptr ? 0 : ws->size(), n_steps));
  }
  MemoryPlan plan;
  plan.arena_bytes = graph.scratch_bytes();
  plan.lower_bound_bytes = lower_bound_bytes(t.tensors, kEngineScratchAlignment);
  for (size_t i = 0; i < t.tensors.size(); ++i) {
    const size_t o = t.owner[i];
    plan.offsets.push_back(o < t.n_values ? graph.values()->Get(static_cast<uint32_t>(o))->offset()
                                          : ws->Get(static_cast<uint32_t>(o - t.n_values)));
  }
  Status s = verify_plan(t.tensors, plan, kEngineScratchAlignment);
  for (size_t v = 0; s.ok() && v < t.n_values; ++v) {
    const size_t r = t.root[v];
    const auto* values = graph.values();
    if (r != v && values->Get(static_cast<uint32_t>(v))->offset() != values->Get(static_cast<uint32_t>(r))->offset()) {
      s = Status(ErrorCode::InvalidProgram,
                 fmt::format("value {} is a view of value {} but is stored at offset {}, not {}", v, r,
                             values->Get(static_cast<uint32_t>(v))->offset(),
                             values->Get(static_cast<uint32_t>(r))->offset()));
    }
  }
  if (!s.ok()) {
    return bad(fmt::format("engine graph's stored scratch plan does not hold at the profile max "
                           "(built for another device, or by a planrt whose kernels took other workspace: CUDA "
                           "linears take a cuBLASLt workspace since 2026-12; or damaged?): rebuild the program: {}",
                           s.message()));
  }
  return plan;
}

}  // namespace

Result<EngineScratchPlan> plan_engine_scratch(const fb::Graph& graph,
                                              std::span<const int64_t> dim_values,
                                              bool cuda_workspace,
                                              const EngineScratchPlan* max_plan) {
  const size_t n_values = graph.values() ? graph.values()->size() : 0;
  const size_t n_steps = graph.instructions() ? graph.instructions()->size() : 0;
  PLANRT_ASSIGN_OR_RETURN(ScratchTensors t, scratch_tensors(graph, dim_values, cuda_workspace));
  if (max_plan == nullptr && graph.scratch_plan_stored()) {
    PLANRT_ASSIGN_OR_RETURN(MemoryPlan plan, stored_plan(graph, t, n_steps));
    return to_scratch_plan(t, plan, n_steps);
  }
  PLANRT_ASSIGN_OR_RETURN(MemoryPlan plan, plan_memory(t.tensors, kEngineScratchAlignment));
  if (max_plan != nullptr) {
    // The max plan's offsets hold at smaller sizes (every tensor there is at least as large
    // as here); take them when they need less. A workspace the max plan did not size as
    // large (a kernel may switch paths with the shapes) rules them out.
    uint64_t extent = 0;
    bool usable = max_plan->value_offsets.size() == n_values &&
                  max_plan->workspace_offsets.size() == n_steps;
    std::vector<uint64_t> max_offsets(t.tensors.size());
    for (size_t i = 0; usable && i < t.tensors.size(); ++i) {
      const size_t o = t.owner[i];
      if (o >= n_values && max_plan->workspace_bytes[o - n_values] < t.tensors[i].size_bytes) {
        usable = false;
        break;
      }
      max_offsets[i] = o < n_values ? max_plan->value_offsets[o] : max_plan->workspace_offsets[o - n_values];
      if (t.tensors[i].size_bytes != 0) extent = std::max(extent, max_offsets[i] + t.tensors[i].size_bytes);
    }
    if (usable) extent = (extent + kEngineScratchAlignment - 1) / kEngineScratchAlignment * kEngineScratchAlignment;
    if (usable && extent < plan.arena_bytes) {
      plan.arena_bytes = extent;
      plan.offsets = std::move(max_offsets);
    }
  }
  return to_scratch_plan(t, plan, n_steps);
}

Result<EngineScratchPlan> plan_engine_scratch_to_store(const fb::Graph& graph,
                                                       std::span<const int64_t> dim_values,
                                                       bool cuda_workspace, double search_budget_ms) {
  const size_t n_steps = graph.instructions() ? graph.instructions()->size() : 0;
  PLANRT_ASSIGN_OR_RETURN(ScratchTensors t, scratch_tensors(graph, dim_values, cuda_workspace));
  PLANRT_ASSIGN_OR_RETURN(MemoryPlan plan, plan_memory(t.tensors, kEngineScratchAlignment));
  if (search_budget_ms > 0 && plan.arena_bytes > plan.lower_bound_bytes) {
    improve_plan(t.tensors, kEngineScratchAlignment, search_budget_ms, plan);
  }
  return to_scratch_plan(t, plan, n_steps);
}

}  // namespace planrt::planning
