// The segment model: options, the graph with its kernels, add + layer_norm fusion, the
// Temporaries' lifetimes, and the device resources of one segment.
#include "backends/cuda/segment.h"

#include <algorithm>

#include "backends/option_values.h"
#include "format/program_file.h"
#include "kernels/workspace.h"
#include "planning/engine_scratch.h"
#include "planrt/core/log.h"
#include "platform/cuda/device_guard.h"

namespace planrt::cuda_backend {
namespace {

using format::kNoValue;

bool same_static_or_symbolic_shape(const GraphValue& a, const GraphValue& b) {
  if (a.dtype != b.dtype || a.shape.size() != b.shape.size()) return false;
  for (size_t d = 0; d < a.shape.size(); ++d) {
    if (a.shape[d].dim != b.shape[d].dim || a.shape[d].value != b.shape[d].value) return false;
  }
  return true;
}

// An add whose result a layer_norm reads next becomes one kernel (kernels::cuda::
// add_layer_norm: a transformer's residual add and the norm after it), saving a pass over
// the rows. Only when the add does not broadcast and the norm's output cannot share memory
// with the add's inputs, which the fused kernel reads while it writes that output: a
// temporary of this segment (allocated before the fused step), or a value of a scratch
// planned with that pair's lifetimes joined (Graph.scratch_plan_fusion_safe).
void fuse_add_layer_norm(Segment& seg) {
  std::vector<GraphStep> steps;
  for (size_t k = 0; k < seg.steps.size(); ++k) {
    GraphStep& add = seg.steps[k];
    if (k + 1 < seg.steps.size() && add.op == "add" && seg.steps[k + 1].op == "layer_norm") {
      GraphStep& norm = seg.steps[k + 1];
      const uint32_t sum = add.outputs[0];
      const uint32_t normed = norm.outputs[0];
      const GraphValue& out = seg.values[normed];
      const bool fits =
          norm.inputs[0] == sum && add.inputs[0] != kNoValue && add.inputs[1] != kNoValue &&
          (seg.values[sum].dtype == DType::F32 || seg.values[sum].dtype == DType::BF16 ||
           seg.values[sum].dtype == DType::F16) &&
          same_static_or_symbolic_shape(seg.values[add.inputs[0]], seg.values[sum]) &&
          same_static_or_symbolic_shape(seg.values[add.inputs[1]], seg.values[sum]) &&
          !out.operand &&
          (out.kind == fb::ValueKind::Temporary || (out.kind == fb::ValueKind::Planned && seg.fusion_safe));
      if (fits) {
        GraphStep fused;
        fused.op = "add_layer_norm";
        fused.node = add.node + " + " + norm.node;
        fused.fn = &kernels::cuda::add_layer_norm;
        fused.attrs = std::move(norm.attrs);
        fused.inputs = {add.inputs[0], add.inputs[1]};
        fused.inputs.insert(fused.inputs.end(), norm.inputs.begin() + 1, norm.inputs.end());
        fused.outputs = {sum, normed};
        steps.push_back(std::move(fused));
        ++k;
        continue;
      }
    }
    steps.push_back(std::move(add));
  }
  seg.steps = std::move(steps);
}

// Temporaries are allocated before the first step touching them and freed after the last
// (stream-ordered, so the pool reuses the block for later ones).
void place_temporaries(Segment& seg) {
  const size_t n = seg.values.size();
  std::vector<int64_t> first(n, -1), last(n, -1);
  for (size_t k = 0; k < seg.steps.size(); ++k) {
    for (const auto* ids : {&seg.steps[k].inputs, &seg.steps[k].outputs}) {
      for (uint32_t id : *ids) {
        if (id == kNoValue) continue;
        if (first[id] < 0) first[id] = static_cast<int64_t>(k);
        last[id] = static_cast<int64_t>(k);
      }
    }
  }
  for (size_t id = 0; id < n; ++id) {
    const GraphValue& v = seg.values[id];
    if (v.operand || v.kind != fb::ValueKind::Temporary || first[id] < 0) continue;
    seg.steps[static_cast<size_t>(first[id])].allocate_before.push_back(static_cast<uint32_t>(id));
    seg.steps[static_cast<size_t>(last[id])].free_after.push_back(static_cast<uint32_t>(id));
  }
}

// A planned scratch's stored plan, verified against the sizes and lifetimes computed here
// at the dims' max (the largest any call can bind, so its offsets hold for every call), and
// each instruction's workspace in it.
Status load_scratch_plan(Segment& seg, const SegmentGraph& g) {
  auto where = [&] { return fmt::format("segment '{}': planned scratch", seg.name); };
  if (!g.graph->scratch_plan_stored()) {
    return make_error(ErrorCode::InvalidProgram, "{}: the graph takes a planned scratch but stores no "
                      "plan for it", where());
  }
  Result<std::vector<int64_t>> max_dims = planning::profile_max_dims(*g.graph, g.dims.size());
  if (!max_dims.ok()) return max_dims.status().with_context(where());
  for (const ProfileDim& p : g.profile) {
    if (p.min != g.dims[p.dim].min || p.max != g.dims[p.dim].max) {
      return make_error(ErrorCode::InvalidProgram, "{}: planned for dim '{}' in [{}, {}], but the "
                        "method's bounds are [{}, {}]", where(), g.dims[p.dim].name, p.min, p.max,
                        g.dims[p.dim].min, g.dims[p.dim].max);
    }
  }
  Result<planning::EngineScratchPlan> plan =
      planning::plan_engine_scratch(*g.graph, *max_dims, /*cuda_workspace=*/true);
  if (!plan.ok()) return plan.status().with_context(where());
  seg.workspace_offsets = std::move(plan->workspace_offsets);
  seg.workspace_bytes = std::move(plan->workspace_bytes);
  return {};
}

}  // namespace

Result<SegmentOptions> parse_options(std::span<const BackendOption> compile_specs,
                                     std::span<const BackendOption> load_options) {
  using backends::parse_bool_option;
  using backends::parse_bytes_option;
  SegmentOptions out;
  for (const auto& list : {compile_specs, load_options}) {
    for (const BackendOption& o : list) {
      if (o.key == "allow_tf32") {
        PLANRT_ASSIGN_OR_RETURN(out.allow_tf32, parse_bool_option(o.key, o.value));
      } else if (o.key == "fuse_kernels") {
        PLANRT_ASSIGN_OR_RETURN(out.fuse_kernels, parse_bool_option(o.key, o.value));
      } else if (o.key == "use_cuda_graphs") {
        PLANRT_ASSIGN_OR_RETURN(out.use_cuda_graphs, parse_bool_option(o.key, o.value));
      } else if (o.key == "use_planned_scratch") {
        PLANRT_ASSIGN_OR_RETURN(out.use_planned_scratch, parse_bool_option(o.key, o.value));
      } else if (o.key == "gemm_algorithm") {
        PLANRT_ASSIGN_OR_RETURN(bool timed, backends::parse_gemm_algorithm_option(o.key, o.value));
        out.gemm_algorithm = timed ? kernels::cuda::GemmAlgorithm::Timed : kernels::cuda::GemmAlgorithm::Heuristic;
      } else if (o.key == "attention") {
        PLANRT_ASSIGN_OR_RETURN(out.cudnn_attention, backends::parse_attention_option(o.key, o.value));
      } else if (o.key == "use_private_pool") {
        PLANRT_ASSIGN_OR_RETURN(out.pool.use_private_pool, parse_bool_option(o.key, o.value));
      } else if (o.key == "pool_release_threshold") {
        PLANRT_ASSIGN_OR_RETURN(out.pool.release_threshold, parse_bytes_option(o.key, o.value));
      }
    }
  }
  return out;
}

std::string Segment::step_name(size_t k) const {
  const GraphStep& s = steps[k];
  return fmt::format("segment '{}' step {} (op '{}', node '{}')", name, k, s.op, s.node);
}

Segment::~Segment() {
  if (!stream.empty()) {
    Status s = stream.synchronize();
    if (!s.ok()) PLANRT_LOG_ERROR("segment '{}': {}", name, s.to_string());
  }
  // The captured graphs before the pool: releasing the device's last pool handle trims the
  // device's graph memory, which idle graphs' allocations are part of.
  graphs.captured.clear();
  for (const GraphValue& v : values) {
    if (v.weight != nullptr) backends::weight_cache().release(device, v.weight_host, v.weight_bytes);
  }
  // The error record, the stream and the pool go with their owners.
}

Status parse_graph(Segment& seg, std::span<const uint8_t> blob, const BackendInitContext& ctx) {
  PLANRT_ASSIGN_OR_RETURN(SegmentGraph g, parse_segment_graph(blob, ctx));
  seg.scratch_bytes = g.scratch_bytes;
  seg.scratch_operand = g.scratch_operand;
  seg.planned_scratch = seg.planned_scratch && g.scratch_operand;
  seg.fusion_safe = g.scratch_plan_fusion_safe;
  if (g.scratch_operand) PLANRT_RETURN_IF_ERROR(load_scratch_plan(seg, g));
  seg.inputs = g.inputs;
  seg.outputs = g.outputs;
  for (SegmentValue& v : g.values) {
    GraphValue gv;
    static_cast<SegmentValue&>(gv) = std::move(v);
    if (gv.kind == fb::ValueKind::Planned) seg.has_planned = true;
    seg.values.push_back(std::move(gv));
  }
  for (size_t k = 0; k < g.steps.size(); ++k) {
    SegmentStep& st = g.steps[k];
    Result<kernels::cuda::CudaKernelFn> fn = kernels::cuda::find_cuda_kernel(st.op);
    if (!fn.ok()) {
      return make_error(ErrorCode::NotFound, "{}: unknown op '{}' (no CUDA kernel)", g.step_name(k), st.op);
    }
    GraphStep step;
    step.op = std::move(st.op);
    step.node = std::move(st.node);
    step.fn = *fn;
    step.attrs = std::move(st.attrs);
    step.inputs = std::move(st.inputs);
    step.outputs = std::move(st.outputs);
    step.plan_step = k;
    seg.steps.push_back(std::move(step));
  }
  if (seg.fuse) fuse_add_layer_norm(seg);
  place_temporaries(seg);
  return {};
}

Status init_device(Segment& seg, const BackendInitContext& ctx, bool allow_tf32,
                   const cuda::PoolOptions& pool_options) {
  std::string where = fmt::format("segment '{}' on cuda:{}", seg.name, seg.device);
  PLANRT_ASSIGN_OR_RETURN(seg.pool, cuda::PoolHandle::acquire(seg.device, pool_options));
  seg.temp = std::make_unique<PoolTempMemory>(&seg.pool);
  Result<std::shared_ptr<backends::SharedCublas>> cublas = backends::shared_cublas(seg.device, allow_tf32);
  if (!cublas.ok()) return cublas.status().with_context(where);
  seg.cublas = std::move(cublas).value();
  backends::CudnnUse cudnn_use;
  for (const GraphStep& st : seg.steps) {
    cudnn_use.convolution |= st.op == "conv2d";
    cudnn_use.bf16_attention |= seg.cudnn_attention && !st.inputs.empty() &&
                                kernels::attention_may_run_on_cudnn(st.op, st.attrs, seg.values[st.inputs[0]].dtype);
  }
  if (Status opened = backends::open_cudnn_for(*seg.cublas, cudnn_use); !opened.ok()) {
    return opened.with_context(where);
  }
  PLANRT_ASSIGN_OR_RETURN(seg.legacy_done, cuda::Event::create(seg.device));
  PLANRT_ASSIGN_OR_RETURN(seg.errors, backends::DeviceErrorRecord::create(seg.device, where));
  // Weights this graph reads: once per device and program constant (the cache), the large
  // ones packed into one allocation.
  std::vector<backends::WeightRequest> requests;
  std::vector<GraphValue*> readers;
  for (GraphValue& v : seg.values) {
    if (v.kind != fb::ValueKind::Constant) continue;
    Result<ConstantRef> c = segment_constant(seg.name, seg.dims, v, ctx);
    if (!c.ok()) return c.status().with_context(where);
    if (c->data.empty()) continue;
    requests.push_back({c->data, c->name});
    readers.push_back(&v);
  }
  Result<std::vector<void*>> device_copies = backends::weight_cache().acquire_all(seg.device, requests);
  if (!device_copies.ok()) return device_copies.status().with_context(where);
  for (size_t k = 0; k < readers.size(); ++k) {
    readers[k]->weight = (*device_copies)[k];
    readers[k]->weight_host = requests[k].host.data();
    readers[k]->weight_bytes = requests[k].host.size();
  }
  return {};
}

}  // namespace planrt::cuda_backend
