#include "backends/engine/engine.h"

namespace planrt::engine {
namespace {

constexpr size_t kPlanCacheEntries = 16;

}  // namespace

Result<Engine> Engine::create(SegmentGraph graph, bool cuda_workspace) {
  for (const SegmentValue& v : graph.values) {
    if (!v.operand && v.kind == fb::ValueKind::Temporary) {
      return make_error(ErrorCode::InvalidProgram,
                        "engine '{}': value '{}' is a Temporary; an engine plans every "
                        "intermediate into its scratch (Planned)", graph.name, v.name);
    }
  }
  Engine e(std::move(graph), cuda_workspace);
  const SegmentGraph& g = e.graph_;
  PLANRT_ASSIGN_OR_RETURN(e.max_dims_, planning::profile_max_dims(*g.graph, g.dims.size()));
  // Every dim a shape uses is in the profile: the plan at its max covers every call.
  e.in_profile_.assign(g.dims.size(), false);
  for (const ProfileDim& p : g.profile) e.in_profile_[p.dim] = true;
  for (const SegmentValue& v : g.values) {
    for (const DimRef& r : v.shape) {
      if (!r.is_static() && !e.in_profile_[static_cast<size_t>(r.dim)]) {
        return make_error(ErrorCode::InvalidProgram,
                          "engine '{}': value '{}' uses dim '{}', which its profile leaves out",
                          g.name, v.name, g.dims[static_cast<size_t>(r.dim)].name);
      }
    }
  }
  Result<planning::EngineScratchPlan> plan =
      planning::plan_engine_scratch(*g.graph, e.max_dims_, cuda_workspace);
  if (!plan.ok()) return plan.status().with_context(fmt::format("engine '{}'", g.name));
  e.max_plan_ = std::move(plan).value();
  if (e.max_plan_.scratch_bytes != g.scratch_bytes) {
    return make_error(ErrorCode::InvalidProgram,
                      "engine '{}': the program records {} bytes of activation scratch, but its "
                      "plan at the profile max needs {} (built for another device, or by an older "
                      "planrt whose CUDA engines planned no workspace for unfused attention at "
                      "head dim 64? rebuild the program)",
                      g.name, g.scratch_bytes, e.max_plan_.scratch_bytes);
  }
  return e;
}

Status Engine::bind(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
                    std::vector<int64_t>& bound) const {
  const SegmentGraph& g = graph_;
  if (inputs.size() != g.inputs.size() || outputs.size() != g.outputs.size()) {
    return make_error(ErrorCode::InvalidArgument,
                      "engine '{}' takes {} inputs and {} outputs, got {} and {}", g.name,
                      g.inputs.size(), g.outputs.size(), inputs.size(), outputs.size());
  }
  bound.assign(g.dims.size(), -1);
  for (const auto& [views, ids, what] :
       {std::tuple{inputs, &g.inputs, "input"}, std::tuple{outputs, &g.outputs, "output"}}) {
    for (size_t i = 0; i < views.size(); ++i) {
      const SegmentValue& v = g.values[(*ids)[i]];
      std::string name = fmt::format("engine '{}' {} {} '{}'", g.name, what, i, v.name);
      if (views[i].dtype != v.dtype) {
        return make_error(ErrorCode::InvalidArgument, "{} is {}, expected {}", name,
                          dtype_name(views[i].dtype), dtype_name(v.dtype));
      }
      PLANRT_RETURN_IF_ERROR(bind_dims(v.shape, views[i].sizes, g.dims, name, bound));
    }
  }
  for (const ProfileDim& p : g.profile) {
    int64_t value = bound[p.dim];
    if (value >= 0 && (value < p.min || value > p.max)) {
      return make_error(ErrorCode::OutOfRange,
                        "engine '{}': dim '{}' = {} is outside its profile [{}, {}]", g.name,
                        g.dims[p.dim].name, value, p.min, p.max);
    }
  }
  return {};
}

Result<const planning::EngineScratchPlan*> Engine::plan_for(std::span<const int64_t> bound) {
  std::vector<int64_t> key(bound.begin(), bound.end());
  for (size_t d = 0; d < key.size(); ++d) {
    if (d >= in_profile_.size() || !in_profile_[d]) {
      key[d] = 0;  // unused: as profile_max_dims
    } else if (key[d] < 0) {
      return make_error(ErrorCode::InvalidProgram, "engine '{}': no operand binds dim '{}'",
                        graph_.name, graph_.dims[d].name);
    }
  }
  if (key == max_dims_) return &max_plan_;
  if (auto it = cache_.find(key); it != cache_.end()) return &it->second;
  Result<planning::EngineScratchPlan> plan =
      planning::plan_engine_scratch(*graph_.graph, key, cuda_, &max_plan_);
  if (!plan.ok()) return plan.status().with_context(fmt::format("engine '{}'", graph_.name));
  if (cache_.size() >= kPlanCacheEntries) cache_.clear();  // a bounded cache, not an LRU
  return &cache_.emplace(std::move(key), std::move(plan).value()).first->second;
}

Result<uint64_t> Engine::scratch_bytes_for(std::span<const int64_t> bound) {
  PLANRT_ASSIGN_OR_RETURN(const planning::EngineScratchPlan* plan, plan_for(bound));
  return plan->scratch_bytes;
}

}  // namespace planrt::engine
