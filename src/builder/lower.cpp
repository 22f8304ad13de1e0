#include "builder/lower.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>
#include <flatbuffers/flatbuffers.h>

#include "builder/check.h"
#include "builder/layout.h"
#include "planning/engine_scratch.h"
#include "planning/method_plan.h"
#include "builder/partition.h"
#include "builder/rewrite.h"
#include "builder/workspace.h"
#include "format/fb_types.h"
#include "format/program_file.h"
#include "kernels/dtype_support.h"

namespace planrt::builder {
namespace {

using format::kNoValue;

// The program's constant table, shared by all methods. Constants of equal dtype, shape and
// bytes become one entry (unless the weights go to a file beside the program, RewriteOptions): tied weights (an exporter's shared initializer, read through
// Identity or transposed once per reader; the layers of a stack cloned from one module) are
// stored, uploaded and packed once, as the model holds them, not once per reader.
class ConstantTable {
 public:
  ConstantTable(LoweredProgram& out, bool merge_equal) : out_(out), merge_equal_(merge_equal) {}
  uint32_t index_of(const ir::Constant& c) {
    if (auto it = index_.find(c.name); it != index_.end()) return it->second;
    const bool hashed = merge_equal_ && !c.bytes.empty();
    const size_t hash = hashed ? content_hash(c) : 0;
    const uint32_t index =
        (hashed ? same_content(c, hash) : std::nullopt).value_or(static_cast<uint32_t>(out_.constants.size()));
    index_.emplace(c.name, index);
    if (index == out_.constants.size()) {
      out_.constants.push_back(&c);
      auto t = std::make_unique<fb::ConstantT>();
      t->name = c.name;
      t->dtype = format::to_fb_dtype(c.dtype);
      t->shape = c.shape;
      t->size_bytes = c.nbytes();
      out_.program.constants.push_back(std::move(t));
      if (hashed) by_content_.emplace(hash, index);
    }
    return index;
  }

 private:
  static size_t content_hash(const ir::Constant& c) {
    size_t h = std::hash<std::string_view>{}(
        std::string_view(reinterpret_cast<const char*>(c.bytes.data()), c.bytes.size()));
    h ^= static_cast<size_t>(c.dtype) * 0x9e3779b97f4a7c15ULL;
    for (int64_t d : c.shape) h = h * 31 + static_cast<size_t>(d);
    return h;
  }

  // An entry already in the table holding exactly c's dtype, shape and bytes.
  std::optional<uint32_t> same_content(const ir::Constant& c, size_t hash) const {
    auto [first, last] = by_content_.equal_range(hash);
    for (auto it = first; it != last; ++it) {
      const ir::Constant& other = *out_.constants[it->second];
      if (other.dtype == c.dtype && other.shape == c.shape && other.bytes.size() == c.bytes.size() &&
          std::equal(other.bytes.begin(), other.bytes.end(), c.bytes.begin())) {
        return it->second;
      }
    }
    return std::nullopt;
  }

  LoweredProgram& out_;
  bool merge_equal_;
  std::map<std::string, uint32_t, std::less<>> index_;
  std::unordered_multimap<size_t, uint32_t> by_content_;  // content hash -> entry
};

std::vector<fb::DimRef> to_dimrefs(const ir::SymShape& shape) {
  std::vector<fb::DimRef> out;
  for (const ir::Dim& d : shape) out.emplace_back(d.value, d.dim);
  return out;
}

std::unique_ptr<fb::ValueT> make_value(std::string name, fb::ValueKind kind, const ir::TensorType& type) {
  auto v = std::make_unique<fb::ValueT>();
  v->name = std::move(name);
  v->kind = kind;
  v->dtype = format::to_fb_dtype(type.dtype);
  v->shape = to_dimrefs(type.shape);
  return v;
}

ir::TensorType constant_type(const ir::Constant& c) {
  ir::TensorType t{c.dtype, {}};
  for (int64_t d : c.shape) t.shape.push_back(ir::Dim::fixed(d));
  return t;
}

std::vector<std::unique_ptr<fb::AttrT>> to_attrs(const ir::Attrs& attrs) {
  std::vector<std::unique_ptr<fb::AttrT>> out;
  for (const auto& [name, value] : attrs) {
    auto a = std::make_unique<fb::AttrT>();
    a->name = name;
    if (const auto* i = std::get_if<int64_t>(&value)) {
      a->type = fb::AttrType::Int;
      a->i = *i;
    } else if (const auto* f = std::get_if<double>(&value)) {
      a->type = fb::AttrType::Float;
      a->f = *f;
    } else if (const auto* b = std::get_if<bool>(&value)) {
      a->type = fb::AttrType::Bool;
      a->i = *b ? 1 : 0;
    } else if (const auto* s = std::get_if<std::string>(&value)) {
      a->type = fb::AttrType::String;
      a->s = *s;
    } else if (const auto* ints = std::get_if<std::vector<int64_t>>(&value)) {
      a->type = fb::AttrType::Ints;
      a->ints = *ints;
    } else {
      continue;  // shape inference resolves every ShapeSpec into Ints (or drops it)
    }
    out.push_back(std::move(a));
  }
  return out;
}

class MethodLowering {
 public:
  MethodLowering(const ir::Model& model, const ir::Method& method, const ir::CheckedMethod& checked,
                 const std::vector<SegmentSpan>& segments, ConstantTable& constants, const planning::PlanOptions& planner,
                 const ScratchPlacement& scratch)
      : model_(model), method_(method), checked_(checked), segments_(segments), constants_(constants),
        planner_(planner),
        scratch_(scratch) {}

  Result<std::unique_ptr<fb::MethodT>> run() {
    out_ = std::make_unique<fb::MethodT>();
    out_->name = method_.name;
    for (const ir::DimDecl& d : method_.dims) {
      auto spec = std::make_unique<fb::DimSpecT>();
      spec->name = d.name;
      spec->min = d.min;
      spec->max = d.max;
      out_->dims.push_back(std::move(spec));
    }
    outputs_.insert(method_.outputs.begin(), method_.outputs.end());
    for (const ir::ValueDecl& in : method_.inputs) {
      out_->inputs.push_back(add_planned(in.name, in.type, Device::cpu()));
      placed_[in.name][Device::cpu()] = out_->inputs.back();
    }
    for (size_t s = 0; s < segments_.size(); ++s) {
      if (segments_[s].backend == ir::Backend::Cpu) {
        PLANRT_RETURN_IF_ERROR(lower_cpu_segment(s));
      } else {
        PLANRT_RETURN_IF_ERROR(lower_delegate_segment(s));
      }
    }
    for (const std::string& name : method_.outputs) {
      PLANRT_ASSIGN_OR_RETURN(uint32_t id, place_on(name, Device::cpu()));
      out_->outputs.push_back(id);
    }
    make_buffers();
    PLANRT_RETURN_IF_ERROR(planning::plan_method(*out_, planner_));
    return std::move(out_);
  }

 private:
  uint32_t add_value(std::unique_ptr<fb::ValueT> v, Device device) {
    out_->values.push_back(std::move(v));
    value_device_.push_back(device);
    return static_cast<uint32_t>(out_->values.size() - 1);
  }

  uint32_t add_planned(const std::string& name, const ir::TensorType& type, Device device) {
    return add_value(make_value(name, fb::ValueKind::Planned, type), device);
  }

  uint32_t constant_value(const ir::Constant& c) {
    auto [it, inserted] = constant_values_.emplace(c.name, 0);
    if (inserted) {
      auto v = make_value(c.name, fb::ValueKind::Constant, constant_type(c));
      v->constant = constants_.index_of(c);
      it->second = add_value(std::move(v), Device::cpu());
    }
    return it->second;
  }

  Result<std::optional<ir::TensorType>> workspace_of(size_t n, Device device) const {
    auto type = kernel_workspace_type(model_, method_, checked_, n, device);
    if (!type.ok()) return type.status().with_context(fmt::format("method '{}': {}", method_.name, ir::node_label(method_.nodes[n], n)));
    return type;
  }

  const ir::TensorType& type_of(const std::string& name) const { return checked_.values.find(name)->second; }

  // The id of `name` on `device`, copying it there (through the host between two devices).
  Result<uint32_t> place_on(const std::string& name, Device device) {
    auto& where = placed_[name];
    if (auto it = where.find(device); it != where.end()) return it->second;
    if (where.empty()) {
      return make_error(ErrorCode::Internal, "method '{}': value '{}' is read before it is placed",
                        method_.name, name);
    }
    uint32_t source = 0;
    if (!device.is_cpu() && !where.contains(Device::cpu())) {
      PLANRT_ASSIGN_OR_RETURN(source, place_on(name, Device::cpu()));
    } else {
      source = where.contains(Device::cpu()) ? where.at(Device::cpu()) : where.begin()->second;
    }
    // A method output keeps its own name on the host, where the caller reads it.
    std::string copy_name = device.is_cpu() && outputs_.contains(name)
                                ? name
                                : fmt::format("{}@{}", name, to_string(device));
    uint32_t id = add_planned(copy_name, type_of(name), device);
    auto copy = std::make_unique<fb::InstructionT>();
    copy->kind = fb::InstructionKind::Copy;
    copy->op = "copy";
    copy->inputs = {source};
    copy->outputs = {id};
    copy->node = name;
    out_->instructions.push_back(std::move(copy));
    placed_[name][device] = id;
    return id;
  }

  std::unique_ptr<fb::SegmentT> segment_entry(size_t s) {
    const SegmentSpan& span = segments_[s];
    auto seg = std::make_unique<fb::SegmentT>();
    seg->name = span.name;
    seg->backend = std::string(ir::backend_name(span.backend));
    seg->device = std::make_unique<fb::DeviceRef>(format::to_fb_device(span.device));
    seg->num_nodes = static_cast<uint32_t>(span.end - span.begin);
    if (auto it = model_.compile_specs.find(seg->backend); it != model_.compile_specs.end()) {
      for (const auto& [key, value] : it->second) {
        auto kv = std::make_unique<fb::KeyValueT>();
        kv->key = key;
        kv->value = value;
        seg->compile_specs.push_back(std::move(kv));
      }
    }
    return seg;
  }

  std::unique_ptr<fb::InstructionT> kernel(size_t n) {
    const ir::Node& node = method_.nodes[n];
    auto k = std::make_unique<fb::InstructionT>();
    k->kind = fb::InstructionKind::Kernel;
    k->op = node.op;
    k->attrs = to_attrs(checked_.nodes[n].attrs);
    k->node = node.outputs.front();
    return k;
  }

  Status lower_cpu_segment(size_t s) {
    const SegmentSpan& span = segments_[s];
    for (size_t n = span.begin; n < span.end; ++n) {
      const ir::Node& node = method_.nodes[n];
      auto k = kernel(n);
      k->segment = static_cast<int32_t>(s);
      for (const std::string& in : node.inputs) {
        if (in.empty()) {
          k->inputs.push_back(kNoValue);
        } else if (const ir::Constant* c = constant_operand(in)) {
          k->inputs.push_back(constant_value(*c));
        } else {
          PLANRT_ASSIGN_OR_RETURN(uint32_t id, place_on(in, Device::cpu()));
          k->inputs.push_back(id);
        }
      }
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        uint32_t id = add_planned(node.outputs[o], checked_.nodes[n].outputs[o], Device::cpu());
        placed_[node.outputs[o]][Device::cpu()] = id;
        k->outputs.push_back(id);
      }
      PLANRT_ASSIGN_OR_RETURN(std::optional<ir::TensorType> workspace, workspace_of(n, Device::cpu()));
      if (workspace) {
        k->outputs.push_back(add_planned(workspace_value_name(node.outputs.front()), *workspace, Device::cpu()));
      }
      out_->instructions.push_back(std::move(k));
    }
    out_->segments.push_back(segment_entry(s));
    return {};
  }

  const ir::Constant* constant_operand(const std::string& name) const {
    return checked_.values.contains(name) ? nullptr : model_.find_constant(name);
  }

  // Whether a value produced in segment `s` is needed after it.
  bool escapes(const std::string& name, size_t s) const {
    if (outputs_.contains(name)) return true;
    for (size_t n = segments_[s].end; n < method_.nodes.size(); ++n) {
      const auto& ins = method_.nodes[n].inputs;
      if (std::find(ins.begin(), ins.end(), name) != ins.end()) return true;
    }
    return false;
  }

  Status lower_delegate_segment(size_t s) {
    const SegmentSpan& span = segments_[s];
    fb::GraphT graph;
    std::map<std::string, uint32_t, std::less<>> local;  // name -> graph value id
    auto delegate = std::make_unique<fb::InstructionT>();
    delegate->kind = fb::InstructionKind::Delegate;
    delegate->op = std::string(ir::backend_name(span.backend));
    delegate->segment = static_cast<int32_t>(s);
    delegate->node = span.name;
    // Intermediates of an engine are planned into its scratch (docs/design.md §6); a cuda
    // segment's too when its scratch is planned, else they come from the backend's pool.
    const bool engine = span.backend == ir::Backend::Engine;
    const bool planned_scratch = engine ? scratch_.engine_planned : scratch_.cuda_planned;
    const fb::ValueKind intermediate =
        engine || planned_scratch ? fb::ValueKind::Planned : fb::ValueKind::Temporary;
    auto add_local = [&](std::unique_ptr<fb::ValueT> v) {
      graph.values.push_back(std::move(v));
      return static_cast<uint32_t>(graph.values.size() - 1);
    };
    for (size_t n = span.begin; n < span.end; ++n) {
      const ir::Node& node = method_.nodes[n];
      auto k = kernel(n);
      for (const std::string& in : node.inputs) {
        if (in.empty()) {
          k->inputs.push_back(kNoValue);
          continue;
        }
        if (auto it = local.find(in); it != local.end()) {
          k->inputs.push_back(it->second);
          continue;
        }
        uint32_t id = 0;
        if (const ir::Constant* c = constant_operand(in)) {
          auto v = make_value(c->name, fb::ValueKind::Constant, constant_type(*c));
          v->constant = constants_.index_of(*c);
          id = add_local(std::move(v));
        } else {
          // Defined before this segment: an operand of the Delegate instruction.
          PLANRT_ASSIGN_OR_RETURN(uint32_t outer, place_on(in, span.device));
          delegate->inputs.push_back(outer);
          id = add_local(make_value(in, fb::ValueKind::Temporary, type_of(in)));
          graph.inputs.push_back(id);
        }
        local.emplace(in, id);
        k->inputs.push_back(id);
      }
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        const std::string& name = node.outputs[o];
        bool escaping = escapes(name, s);
        uint32_t id = add_local(make_value(name, escaping ? fb::ValueKind::Temporary : intermediate,
                                           checked_.nodes[n].outputs[o]));
        local.emplace(name, id);
        k->outputs.push_back(id);
        if (escaping) {
          graph.outputs.push_back(id);
          // A method output made on a device is copied to the host under its own name; made
          // on the host (an engine run there), it is that value.
          std::string outer_name = outputs_.contains(name) && !span.device.is_cpu()
                                       ? fmt::format("{}@{}", name, to_string(span.device))
                                       : name;
          uint32_t outer = add_planned(outer_name, checked_.nodes[n].outputs[o], span.device);
          placed_[name][span.device] = outer;
          delegate->outputs.push_back(outer);
        }
      }
      PLANRT_ASSIGN_OR_RETURN(std::optional<ir::TensorType> workspace, workspace_of(n, span.device));
      if (workspace) {
        k->outputs.push_back(add_local(make_value(workspace_value_name(node.outputs.front()), intermediate, *workspace)));
      }
      graph.instructions.push_back(std::move(k));
    }
    if (engine || planned_scratch) {
      // The cuda backend runs an add and the layer_norm after it as one kernel.
      graph.scratch_plan_fusion_safe = !engine;
      // A reshape between two intermediates takes its input's place and copies nothing.
      graph.scratch_plan_views = true;
      PLANRT_RETURN_IF_ERROR(planning::plan_engine_graph(graph, out_->dims, span.device, planner_.search_budget_ms)
                                 .with_context(fmt::format("method '{}', segment '{}' scratch", method_.name, span.name)));
    }
    if (planned_scratch && graph.scratch_bytes > 0) {
      // One more output: the scratch, a method value of its own live only at this instruction.
      const uint64_t words = (graph.scratch_bytes + planning::kEngineScratchAlignment - 1) /
                             planning::kEngineScratchAlignment * (planning::kEngineScratchAlignment / 4);
      ir::TensorType type{DType::F32, {ir::Dim::fixed(static_cast<int64_t>(words))}};
      delegate->outputs.push_back(add_planned(span.name + "#scratch", type, span.device));
      graph.scratch_operand = true;
    }
    std::vector<std::string> copied_back;
    for (uint32_t id : graph.outputs) {
      if (outputs_.contains(graph.values[id]->name)) copied_back.push_back(graph.values[id]->name);
    }
    auto seg = segment_entry(s);
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(fb::Graph::Pack(fbb, &graph));
    seg->blob.assign(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
    out_->segments.push_back(std::move(seg));
    out_->instructions.push_back(std::move(delegate));
    // Method outputs go back to the host at once, so their device memory can be reused.
    for (const std::string& name : copied_back) {
      PLANRT_ASSIGN_OR_RETURN(uint32_t ignored, place_on(name, Device::cpu()));
      (void)ignored;
    }
    return {};
  }

  // One planned buffer per device in use, host first; every Planned value names its own.
  void make_buffers() {
    std::set<Device> devices(value_device_.begin(), value_device_.end());
    devices.insert(Device::cpu());
    std::map<Device, uint32_t> index;
    for (Device d : devices) {
      bool used = false;
      for (size_t v = 0; v < out_->values.size(); ++v) {
        used = used || (value_device_[v] == d && out_->values[v]->kind == fb::ValueKind::Planned);
      }
      if (!used) continue;
      index[d] = static_cast<uint32_t>(out_->planned_buffers.size());
      auto b = std::make_unique<fb::PlannedBufferT>();
      b->device = std::make_unique<fb::DeviceRef>(format::to_fb_device(d));
      out_->planned_buffers.push_back(std::move(b));
    }
    for (size_t v = 0; v < out_->values.size(); ++v) {
      if (out_->values[v]->kind == fb::ValueKind::Planned) out_->values[v]->buffer = index[value_device_[v]];
    }
  }

  const ir::Model& model_;
  const ir::Method& method_;
  const ir::CheckedMethod& checked_;
  const std::vector<SegmentSpan>& segments_;
  ConstantTable& constants_;
  planning::PlanOptions planner_;
  ScratchPlacement scratch_;

  std::unique_ptr<fb::MethodT> out_;
  std::vector<Device> value_device_;  // per value of out_
  std::set<std::string, std::less<>> outputs_;
  std::map<std::string, std::map<Device, uint32_t>, std::less<>> placed_;
  std::map<std::string, uint32_t, std::less<>> constant_values_;
};

}  // namespace

// Every node's input dtypes against what the kernels of the back end that runs it implement
// (kernels/dtype_support.h): what a back end would refuse when the program runs is refused
// when it is built, naming the method, the node and the segment.
static Status check_segment_dtypes(const ir::Model& model, const ir::Method& method, const ir::CheckedMethod& checked,
                            const std::vector<SegmentSpan>& segments) {
  for (const SegmentSpan& span : segments) {
    const kernels::KernelBackend backend =
        span.backend == ir::Backend::Cpu || span.device.is_cpu() ? kernels::KernelBackend::Cpu
                                                                  : kernels::KernelBackend::Cuda;
    for (size_t n = span.begin; n < span.end; ++n) {
      const ir::Node& node = method.nodes[n];
      std::vector<DType> dtypes;
      for (const std::string& in : node.inputs) {
        if (in.empty()) continue;
        auto v = checked.values.find(in);
        if (v != checked.values.end()) {
          dtypes.push_back(v->second.dtype);
        } else if (const ir::Constant* c = model.find_constant(in)) {
          dtypes.push_back(c->dtype);
        }
      }
      Status s = kernels::check_kernel_dtypes(backend, node.op, dtypes);
      if (!s.ok()) {
        return s.with_context(fmt::format("method '{}': {} in segment '{}' ({} on {})", method.name,
                                          ir::node_label(node, n), span.name, ir::backend_name(span.backend),
                                          planrt::to_string(span.device)));
      }
    }
  }
  return {};
}

Result<LoweredProgram> lower_model(const ir::Model& model, const planning::PlanOptions& planner,
                                   const ScratchPlacement& scratch, const RewriteOptions& rewrites) {
  LoweredProgram out;
  PLANRT_RETURN_IF_ERROR(ir::check_model(model));
  // The methods as they run: the graph rewrites every front end gets (rewrite.h, layout.h).
  // The channels-last rewrite and the projection packing derive constants (permuted or
  // stacked weights), so the program refers to a copy of the model that holds them; every method is rewritten before any is
  // lowered, so that the copy's constants no longer move.
  auto rewritten = std::make_unique<ir::Model>(model);
  std::vector<ir::Method> methods;
  ChannelsLastNames names;
  RewriteState state;
  for (const ir::Method& written : model.methods) {
    ir::Method method = written;
    if (rewrites.channels_last) PLANRT_RETURN_IF_ERROR(rewrite_channels_last(*rewritten, method, names).status());
    rewrite_method(*rewritten, method, state);
    methods.push_back(std::move(method));
  }
  ConstantTable constants(out, rewrites.merge_equal_constants);
  for (const ir::Method& method : methods) {
    PLANRT_ASSIGN_OR_RETURN(ir::CheckedMethod checked, ir::check_method(*rewritten, method));
    PLANRT_ASSIGN_OR_RETURN(std::vector<SegmentSpan> segments, partition_method(method, checked));
    PLANRT_RETURN_IF_ERROR(check_segment_dtypes(*rewritten, method, checked, segments));
    MethodLowering lowering(*rewritten, method, checked, segments, constants, planner, scratch);
    PLANRT_ASSIGN_OR_RETURN(auto lowered, lowering.run());
    out.program.methods.push_back(std::move(lowered));
  }
  out.model = std::move(rewritten);
  return out;
}

}  // namespace planrt::builder
