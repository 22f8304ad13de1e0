// The activation scratch of an engine (docs/design.md §6): the engine graph's intermediate values
// (its Planned values) and each step's kernel workspace (kernels/workspace.h, CUDA engines
// only), planned into one buffer with the §4 planner at given dim values.
//
// Both sides compute the sizes and lifetimes the same way (one shared collection), so they
// cannot disagree: the builder plans at the profile's max with plan_engine_scratch_to_store
// (the greedy plan, searched where above its bound) and records Graph.scratch_bytes, the
// value offsets and the workspace offsets; the engine backend calls plan_engine_scratch at
// the profile max (taking the stored plan after checking that it holds for the sizes it
// computes; programs that store none are re-planned and must match scratch_bytes) and at the
// shapes each call binds.
//
// Exactness: the plan at the bound dims is the greedy plan of exactly the bytes those dims
// need. The greedy planner is not monotone in the sizes, so the result is the smaller of
// that plan and the profile-max plan's offsets evaluated at the bound sizes (always valid:
// sizes only shrink below the max). So the requirement never exceeds scratch_bytes().
//
// Lifetimes: an intermediate lives from the first step that writes or reads it to the last
// that reads it (with Graph.scratch_plan_fusion_safe, a layer_norm's outputs from the add
// feeding it, so the pair may run as one kernel); a step's workspace lives for that step
// only. With Graph.scratch_plan_views, a reshape from one Planned value to another (each
// written once, the input before the reshape) is a view: the output takes the input's
// offset, and the two are one tensor living from the first's definition to the last read of
// either (chains follow to the first value); a stored view elsewhere is refused. Alignment 256 bytes (CUDA
// buffers), also used for CPU engines so a plan does not depend on the device.
// Errors: InvalidProgram for a graph that names a value, dim or op it lacks, a shape that
// overflows, dim values outside the profile; the op's own error for operands its kernel
// would refuse. Pure and thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "planrt/core/result.h"
#include "planning/packing_search.h"
#include "planrt/format/program_generated.h"

namespace planrt::planning {

inline constexpr uint64_t kEngineScratchAlignment = 256;

struct EngineScratchPlan {
  std::vector<uint64_t> value_offsets;      // per graph value (meaningful for Planned ones)
  std::vector<uint64_t> workspace_offsets;  // per step
  std::vector<uint64_t> workspace_bytes;    // per step (0: none)
  uint64_t scratch_bytes = 0;               // 0 when nothing needs scratch at these dims
  uint64_t lower_bound_bytes = 0;           // the largest live set at these dims (aligned)
};

// `dim_values[d]` is the value of method dim d (size = the method's dim count); dims the
// graph does not use may hold anything. `cuda_workspace`: plan the CUDA kernels' workspace.
// `max_plan`: the plan at the profile max (nullptr when computing that one).
// With `max_plan` null on a graph whose plan is stored (Graph.scratch_plan_stored), the
// result is that plan, after verify_plan over the sizes and lifetimes computed here: an
// InvalidProgram error if a tensor leaves the recorded scratch or overlaps one alive with it.
Result<EngineScratchPlan> plan_engine_scratch(const fb::Graph& graph,
                                              std::span<const int64_t> dim_values,
                                              bool cuda_workspace,
                                              const EngineScratchPlan* max_plan = nullptr);

// The builder's plan to store at the profile max: the greedy plan of `graph` at
// `dim_values`, then, where it is above its lower bound, the search after it
// (planning/packing_search.h) within `search_budget_ms` (0: none). Never larger than the
// greedy plan; ignores any plan the graph already stores.
Result<EngineScratchPlan> plan_engine_scratch_to_store(const fb::Graph& graph,
                                                       std::span<const int64_t> dim_values,
                                                       bool cuda_workspace, double search_budget_ms);

// The profile's max for every method dim (`num_dims` entries; dims outside the profile 0).
// InvalidProgram for a profile entry naming a dim >= num_dims or with min > max.
Result<std::vector<int64_t>> profile_max_dims(const fb::Graph& graph, size_t num_dims);

}  // namespace planrt::planning
