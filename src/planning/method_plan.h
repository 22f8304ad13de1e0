// Memory planning of a lowered method (docs/design.md §4) and of an engine segment's scratch (§6).
//
// Lifetimes come from the instruction order: a method input lives from instruction 0, a
// method output to the last instruction, every other value from the instruction that
// writes it to the last one that reads it. Each planned buffer of the method (one per
// device, host first, set up by the lowering) is planned on its own with plan_memory
// (alignment 64 on the host, 256 on CUDA) at every dim's max; the result is written back
// into the values' offsets, the buffers' sizes and one PlanStat per buffer.
//
// verify_method_plan recomputes the lifetimes from the instructions and runs verify_plan
// on every buffer, so a test can check any lowered method independently of how it was
// planned. Errors name the method and the value.
#pragma once

#include <cstdint>
#include <vector>

#include "planning/planner.h"
#include "planrt/core/device.h"
#include "planrt/core/result.h"
#include "planrt/format/program_generated.h"

namespace planrt::planning {

uint64_t plan_alignment(Device device);

// The Planned values of one planned buffer with their lifetimes and max-shape sizes.
struct BufferTensors {
  uint32_t buffer = 0;
  Device device;
  std::vector<uint32_t> values;
  std::vector<TensorLifetime> lifetimes;
};

Result<std::vector<BufferTensors>> collect_buffer_tensors(const fb::MethodT& method);
// How plan_method plans: the planner, and the search after the greedy
// (planning/packing_search.h): up to `search_budget_ms` of wall time per planned buffer whose
// greedy plan is above its lower bound (0: no search). The plan stat's planner name says
// what ran and why it stopped ("greedy-by-size+search(lower-bound)").
struct PlanOptions {
  PlannerKind kind = PlannerKind::GreedyBySize;
  double search_budget_ms = 0;
};
Status plan_method(fb::MethodT& method, const PlanOptions& options);
Status verify_method_plan(const fb::MethodT& method);

// Completes an engine segment's graph, or a cuda segment's whose intermediates are planned
// (docs/design.md §6): `profile` gets one entry per method dim
// that any of the graph's value shapes uses, with that dim's [min, max]; the Planned values
// get buffer 0 and their offsets, and `scratch_bytes` the requirement, both from
// plan_engine_scratch (engine_scratch.h) at the profile max, kernel workspace included
// when `device` is CUDA; where that greedy plan is above its lower bound, the search after
// it (plan_engine_scratch_to_store) within `search_budget_ms` (0: none). The plan is stored
// (scratch_plan_stored, the workspace offsets) and the backend verifies it at load rather
// than planning again. (The method's PlannerKind does not apply here: engines are always
// planned.) `dims` are the method's. A graph with scratch_plan_fusion_safe set is planned
// with the lifetimes that flag implies (engine_scratch.h).
Status plan_engine_graph(fb::GraphT& graph, const std::vector<std::unique_ptr<fb::DimSpecT>>& dims,
                         Device device, double search_budget_ms = 0);

}  // namespace planrt::planning
