// Engine (docs/design.md §6): a compiled segment — a graph of ops with an optimization profile
// (min/max of each dynamic dim) and an activation-scratch plan made with the §4 planner
// (planning/engine_scratch.h). Device-neutral: an EngineRunner runs its steps.
//
// - scratch_bytes(): the requirement over the whole profile (the plan at its max). It is
//   recomputed at creation and must equal what the builder recorded in the blob.
// - scratch_bytes_for(bound dims): the exact requirement for those dims (the plan at them,
//   never above scratch_bytes()). Plans are cached per bound-dims tuple (a few entries).
//
// Thread safety: an Engine belongs to one execution context, which the runtime never
// calls from two threads at once; nothing here is synchronized.
#pragma once

#include <map>
#include <span>
#include <vector>

#include "backends/segment_graph.h"
#include "planning/engine_scratch.h"

namespace planrt::engine {

class Engine {
 public:
  // `cuda_workspace`: the steps run with the CUDA kernels, whose workspace is planned too.
  static Result<Engine> create(SegmentGraph graph, bool cuda_workspace);

  const SegmentGraph& graph() const { return graph_; }
  const std::string& name() const { return graph_.name; }
  uint64_t scratch_bytes() const { return max_plan_.scratch_bytes; }

  // Binds the method dims from the operands' shapes (InvalidArgument for a wrong count,
  // dtype or static dim; OutOfRange for a dim outside the profile).
  Status bind(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
              std::vector<int64_t>& bound) const;
  // The plan for bound dims (from bind); valid until the next call.
  Result<const planning::EngineScratchPlan*> plan_for(std::span<const int64_t> bound);
  Result<uint64_t> scratch_bytes_for(std::span<const int64_t> bound);

 private:
  Engine(SegmentGraph graph, bool cuda_workspace) : graph_(std::move(graph)), cuda_(cuda_workspace) {}

  SegmentGraph graph_;
  bool cuda_ = false;
  planning::EngineScratchPlan max_plan_;
  std::vector<int64_t> max_dims_;
  std::vector<bool> in_profile_;  // per method dim
  std::map<std::vector<int64_t>, planning::EngineScratchPlan> cache_;
};

}  // namespace planrt::engine
