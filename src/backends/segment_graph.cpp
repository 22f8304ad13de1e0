#include "backends/segment_graph.h"

#include <flatbuffers/flatbuffers.h>

#include "runtime/fb_convert.h"
#include "planning/op_attrs.h"

namespace planrt {

using runtime_detail::str;

std::string SegmentGraph::step_name(size_t k) const {
  const SegmentStep& s = steps[k];
  return fmt::format("segment '{}' step {} (op '{}', node '{}')", name, k, s.op, s.node);
}

Result<SegmentGraph> parse_segment_graph(std::span<const uint8_t> blob,
                                         const BackendInitContext& ctx) {
  SegmentGraph seg;
  seg.name = std::string(ctx.segment_name);
  seg.dims.assign(ctx.dims.begin(), ctx.dims.end());
  flatbuffers::Verifier verifier(blob.data(), blob.size());
  if (blob.empty() || !verifier.VerifyBuffer<fb::Graph>(nullptr)) {
    return make_error(ErrorCode::InvalidProgram, "segment '{}': the blob is not a Graph", seg.name);
  }
  const fb::Graph* graph = flatbuffers::GetRoot<fb::Graph>(blob.data());
  seg.graph = graph;
  seg.scratch_bytes = graph->scratch_bytes();
  seg.scratch_operand = graph->scratch_operand();
  seg.scratch_plan_fusion_safe = graph->scratch_plan_fusion_safe();
  size_t n = runtime_detail::size_of(graph->values());
  auto check_id = [&](uint32_t id, std::string_view what, bool optional) -> Status {
    if (optional && id == format::kNoValue) return {};
    if (id >= n) {
      return make_error(ErrorCode::InvalidProgram, "segment '{}': {} is value {}, but the graph has {}",
                        seg.name, what, id, n);
    }
    return {};
  };
  if (graph->values() != nullptr) {
    for (const fb::Value* v : *graph->values()) {
      SegmentValue sv;
      sv.name = std::string(str(v->name()));
      sv.kind = v->kind();
      sv.dtype = runtime_detail::to_dtype(v->dtype());
      sv.shape = runtime_detail::to_dim_refs(v->shape());
      sv.offset = v->offset();
      sv.constant = v->constant();
      for (const DimRef& r : sv.shape) {
        if (!r.is_static() && static_cast<size_t>(r.dim) >= seg.dims.size()) {
          return make_error(ErrorCode::InvalidProgram,
                            "segment '{}': value '{}' refers to dim {}, but the method has {}",
                            seg.name, sv.name, r.dim, seg.dims.size());
        }
      }
      if (sv.kind == fb::ValueKind::Constant && v->constant() >= ctx.num_constants) {
        return make_error(ErrorCode::InvalidProgram,
                          "segment '{}': value '{}' is constant {}, but the program has {}",
                          seg.name, sv.name, v->constant(), ctx.num_constants);
      }
      seg.values.push_back(std::move(sv));
    }
  }
  if (graph->inputs() != nullptr) seg.inputs.assign(graph->inputs()->begin(), graph->inputs()->end());
  if (graph->outputs() != nullptr) seg.outputs.assign(graph->outputs()->begin(), graph->outputs()->end());
  for (uint32_t id : seg.inputs) PLANRT_RETURN_IF_ERROR(check_id(id, "a graph input", false));
  for (uint32_t id : seg.outputs) PLANRT_RETURN_IF_ERROR(check_id(id, "a graph output", false));
  for (uint32_t id : seg.inputs) seg.values[id].operand = true;
  for (uint32_t id : seg.outputs) seg.values[id].operand = true;
  if (graph->instructions() != nullptr) {
    size_t k = 0;
    for (const fb::Instruction* ins : *graph->instructions()) {
      SegmentStep step;
      step.op = std::string(str(ins->op()));
      step.node = std::string(str(ins->node()));
      std::string where =
          fmt::format("segment '{}' step {} (op '{}', node '{}')", seg.name, k, step.op, step.node);
      if (ins->kind() != fb::InstructionKind::Kernel) {
        return make_error(ErrorCode::InvalidProgram,
                          "{}: only Kernel instructions may appear in a segment graph", where);
      }
      const kernels::OpInfo* info = kernels::find_op(step.op);
      if (info == nullptr) return make_error(ErrorCode::NotFound, "{}: unknown op '{}'", where, step.op);
      Result<kernels::OpAttrs> attrs = planning::parse_op_attrs(*ins);
      if (!attrs.ok()) return attrs.status().with_context(where);
      step.attrs = std::move(attrs).value();
      if (ins->inputs() != nullptr) step.inputs.assign(ins->inputs()->begin(), ins->inputs()->end());
      if (ins->outputs() != nullptr) step.outputs.assign(ins->outputs()->begin(), ins->outputs()->end());
      auto n_in = static_cast<int>(step.inputs.size());
      auto n_out = static_cast<int>(step.outputs.size());
      if (n_in < info->min_inputs || (info->max_inputs >= 0 && n_in > info->max_inputs) ||
          n_out < info->num_outputs || n_out > info->num_outputs + info->optional_outputs) {
        return make_error(ErrorCode::InvalidProgram,
                          "{}: {} inputs and {} outputs; op '{}' takes {}..{} inputs and {}..{} outputs",
                          where, n_in, n_out, step.op, info->min_inputs, info->max_inputs,
                          info->num_outputs, info->num_outputs + info->optional_outputs);
      }
      for (uint32_t id : step.inputs) PLANRT_RETURN_IF_ERROR(check_id(id, where + " input", true));
      for (uint32_t id : step.outputs) {
        PLANRT_RETURN_IF_ERROR(check_id(id, where + " output", false));
        if (seg.values[id].kind == fb::ValueKind::Constant) {
          return make_error(ErrorCode::InvalidProgram, "{} writes constant '{}'", where,
                            seg.values[id].name);
        }
      }
      seg.steps.push_back(std::move(step));
      ++k;
    }
  }
  if (graph->profile() != nullptr) {
    for (const fb::DimBound* b : *graph->profile()) {
      if (b->dim() >= seg.dims.size() || b->min() < 0 || b->min() > b->max()) {
        return make_error(ErrorCode::InvalidProgram,
                          "segment '{}': profile entry for dim {} [{}, {}] is invalid (the method has {} dims)",
                          seg.name, b->dim(), b->min(), b->max(), seg.dims.size());
      }
      // The method never binds a dim outside its own bounds, and the verifier sized every
      // value only up to them: a wider profile plans scratch for shapes that cannot occur.
      const DimSpec& dim = seg.dims[b->dim()];
      if (b->min() < dim.min || b->max() > dim.max) {
        return make_error(ErrorCode::InvalidProgram,
                          "segment '{}': profile entry for dim '{}' [{}, {}] is outside the "
                          "method's bounds [{}, {}]",
                          seg.name, dim.name, b->min(), b->max(), dim.min, dim.max);
      }
      seg.profile.push_back({b->dim(), b->min(), b->max()});
    }
  }
  return seg;
}

Result<ConstantRef> segment_constant(std::string_view segment, std::span<const DimSpec> dims,
                                     const SegmentValue& v, const BackendInitContext& ctx) {
  std::string where = fmt::format("segment '{}': value '{}'", segment, v.name);
  Result<ConstantRef> c = ctx.constant(v.constant);
  if (!c.ok()) return c.status().with_context(where);
  Result<Shape> shape = concrete_shape(v.shape, {}, dims);
  if (!shape.ok() || c->dtype != v.dtype || !(*shape == c->shape) ||
      c->data.size() != static_cast<size_t>(c->shape.numel()) * element_size(c->dtype)) {
    return make_error(ErrorCode::InvalidProgram,
                      "{} ({} {}) does not match constant {} '{}' ({} {}, {} bytes)", where,
                      dtype_name(v.dtype), shape_string(v.shape, dims), v.constant, c->name,
                      dtype_name(c->dtype), c->shape.to_string(), c->data.size());
  }
  return c;
}

}  // namespace planrt
