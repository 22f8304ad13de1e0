#include "importers/onnx/importer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include "builder/check.h"
#include "builder/shape_inference.h"
#include "format/mapped_file.h"
#include "format/npy.h"

namespace planrt::importers::onnx {
namespace {

// Opsets before 7 are read too: what an op meant there that it no longer means came with
// attributes it later lost (broadcast, consumed_inputs, is_test), which every handler's
// attribute list refuses by name.
constexpr int64_t kMinOpset = 1;
// 19–21 changed none of the supported ops' meaning for what planrt reads (new element types;
// Pad's 'wrap' mode and AveragePool's dilations, which the handlers refuse by name); 20 added
// Gelu. torch 2.9+'s default (dynamo) exporter writes opset 20.
constexpr int64_t kMaxOpset = 21;

Status invalid(std::string message) { return Status(ErrorCode::InvalidArgument, std::move(message)); }

std::string node_label(const ::onnx::NodeProto& node, size_t index) {
  const std::string& name = !node.name().empty() || node.output_size() == 0 ? node.name() : node.output(0);
  return fmt::format("node {} '{}' ({})", index, name, node.op_type());
}

// A ModuleList item's scope: a name ending in ".N" or "_N" after at least one character.
bool is_block_scope(std::string_view scope) {
  size_t digits = scope.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(scope[digits - 1]))) --digits;
  return digits < scope.size() && digits > 1 && (scope[digits - 1] == '.' || scope[digits - 1] == '_');
}

// "/layers.3/self_attn/MatMul" -> "/layers.3": the exporter's module path up to the first
// component that ends in ".N" or "_N" (a block of a ModuleList); "" when there is none.
std::string block_of(const std::string& node_name) {
  size_t pos = 0;
  while (pos < node_name.size()) {
    size_t next = node_name.find('/', pos + 1);
    if (next == std::string::npos) next = node_name.size();
    const std::string part = node_name.substr(pos, next - pos);
    if (next < node_name.size() && is_block_scope(part)) return node_name.substr(0, next);
    pos = next;
  }
  return "";
}

// The node's metadata_props (NodeProto field 9, ONNX 1.16+) as key/value pairs: read through
// reflection where the protobuf definitions know the field, else from its unknown fields
// (Debian's ONNX 1.12 definitions predate it, and protobuf keeps what it does not know).
std::vector<std::pair<std::string, std::string>> node_metadata(const ::onnx::NodeProto& node) {
  constexpr int kMetadataProps = 9;
  std::vector<std::pair<std::string, std::string>> out;
  const google::protobuf::Reflection* reflection = node.GetReflection();
  const google::protobuf::FieldDescriptor* field = node.GetDescriptor()->FindFieldByNumber(kMetadataProps);
  auto add = [&](const ::onnx::StringStringEntryProto& e) { out.emplace_back(e.key(), e.value()); };
  if (field != nullptr) {
    if (!field->is_repeated() || field->type() != google::protobuf::FieldDescriptor::TYPE_MESSAGE) return out;
    for (int i = 0; i < reflection->FieldSize(node, field); ++i) {
      ::onnx::StringStringEntryProto e;
      if (e.ParseFromString(reflection->GetRepeatedMessage(node, field, i).SerializeAsString())) add(e);
    }
    return out;
  }
  const google::protobuf::UnknownFieldSet& unknown = reflection->GetUnknownFields(node);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField& f = unknown.field(i);
    if (f.number() != kMetadataProps || f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) continue;
    ::onnx::StringStringEntryProto e;
    if (e.ParseFromString(f.length_delimited())) add(e);
  }
  return out;
}

// The block of a node from torch 2's dynamo exporter, whose node names carry no module path:
// its metadata "pkg.torch.onnx.name_scopes" lists the module scopes it was made in
// ("['', 'enc', 'enc.layers.0', 'enc.layers.0.self_attn', 'linear']", the last entry the
// node's own name, e.g. 'add_9'); the first ModuleList item's scope before it is the block.
// "" when the node has none.
std::string block_of_scopes(const ::onnx::NodeProto& node) {
  for (const auto& [key, value] : node_metadata(node)) {
    if (key != "pkg.torch.onnx.name_scopes") continue;
    std::vector<std::string_view> scopes;  // the quoted strings of a Python list
    for (size_t open = value.find('\''); open != std::string::npos; open = value.find('\'', open + 1)) {
      const size_t close = value.find('\'', open + 1);
      if (close == std::string::npos) break;
      scopes.emplace_back(value.data() + open + 1, close - open - 1);
      open = close;
    }
    for (size_t i = 0; i + 1 < scopes.size(); ++i) {
      if (is_block_scope(scopes[i])) return "/" + std::string(scopes[i]);
    }
  }
  return "";
}

Result<Tensor> read_input_value(const std::string& path) {
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0) {
    PLANRT_ASSIGN_OR_RETURN(format::HostTensor h, format::read_npy(path));
    std::vector<int64_t> shape;
    for (int i = 0; i < h.shape.rank(); ++i) shape.push_back(h.shape[i]);
    return Tensor::owning(from_dtype(h.dtype), std::move(shape), std::move(h.data));
  }
  return read_tensor_file(path);
}

}  // namespace

SymInt sym_const(int64_t v) { return SymInt{v, {}}; }
bool sym_is_const(const SymInt& s) { return s.dims.empty(); }
std::string sym_to_string(const SymInt& s, const std::vector<ir::DimDecl>& dims) {
  if (s.dims.empty()) return std::to_string(s.coeff);
  std::string out = s.coeff == 1 ? "" : std::to_string(s.coeff) + "*";
  for (size_t i = 0; i < s.dims.size(); ++i) {
    if (i > 0) out += "*";
    out += dims[s.dims[i]].name;
  }
  return out;
}

// ---- OpContext ------------------------------------------------------------------------

const ::onnx::AttributeProto* OpContext::attr(std::string_view name) const {
  for (const auto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

Status OpContext::error(std::string message) const { return invalid(std::move(message)); }

Result<int64_t> OpContext::attr_int(std::string_view name, std::optional<int64_t> fallback) const {
  const auto* a = attr(name);
  if (a == nullptr) {
    if (fallback) return *fallback;
    return error(fmt::format("attribute '{}' (an integer) is missing", name));
  }
  if (a->type() != ::onnx::AttributeProto::INT) {
    return error(fmt::format("attribute '{}' must be an integer", name));
  }
  return a->i();
}

Result<double> OpContext::attr_float(std::string_view name, std::optional<double> fallback) const {
  const auto* a = attr(name);
  if (a == nullptr) {
    if (fallback) return *fallback;
    return error(fmt::format("attribute '{}' (a float) is missing", name));
  }
  if (a->type() == ::onnx::AttributeProto::FLOAT) return static_cast<double>(a->f());
  if (a->type() == ::onnx::AttributeProto::INT) return static_cast<double>(a->i());
  return error(fmt::format("attribute '{}' must be a float", name));
}

Result<std::string> OpContext::attr_string(std::string_view name,
                                           std::optional<std::string> fallback) const {
  const auto* a = attr(name);
  if (a == nullptr) {
    if (fallback) return *fallback;
    return error(fmt::format("attribute '{}' (a string) is missing", name));
  }
  if (a->type() != ::onnx::AttributeProto::STRING) {
    return error(fmt::format("attribute '{}' must be a string", name));
  }
  return a->s();
}

Result<std::optional<std::vector<int64_t>>> OpContext::attr_ints(std::string_view name) const {
  const auto* a = attr(name);
  if (a == nullptr) return std::optional<std::vector<int64_t>>{};
  if (a->type() != ::onnx::AttributeProto::INTS) {
    return error(fmt::format("attribute '{}' must be a list of integers", name));
  }
  return std::optional<std::vector<int64_t>>(std::vector<int64_t>(a->ints().begin(), a->ints().end()));
}

Result<std::vector<SymInt>> OpContext::sym_ints(size_t i, std::string_view role) const {
  if (!has(i)) return error(fmt::format("input {} ({}) is missing", i, role));
  const Value& v = input(i);
  if (v.is_runtime()) {
    return error(fmt::format(
        "input {} ({}, '{}') is computed at run time, but planrt needs its value when the "
        "program is built: it decides a shape. If it is a graph input, fix it with {}",
        i, role, node.input(static_cast<int>(i)), im.input_value_setting()));
  }
  if (v.rank() > 1 || !elem_is_integer(v.elem)) {
    return error(fmt::format("input {} ({}) must be a 0-d or 1-d integer tensor", i, role));
  }
  if (v.sym) return *v.sym;
  std::vector<SymInt> out;
  for (int64_t x : v.known->to_i64()) out.push_back(sym_const(x));
  return out;
}

Result<std::vector<int64_t>> OpContext::known_ints(size_t i, std::string_view role) const {
  PLANRT_ASSIGN_OR_RETURN(std::vector<SymInt> s, sym_ints(i, role));
  std::vector<int64_t> out;
  for (const SymInt& x : s) {
    if (!sym_is_const(x)) {
      return error(fmt::format("input {} ({}) depends on the dims ({}); planrt needs it constant",
                               i, role, sym_to_string(x, im.dims())));
    }
    out.push_back(x.coeff);
  }
  return out;
}

Result<OpContext::SliceArgs> OpContext::slice_args() const {
  SliceArgs a;
  PLANRT_ASSIGN_OR_RETURN(auto a_starts, attr_ints("starts"));
  if (a_starts) {
    PLANRT_ASSIGN_OR_RETURN(auto a_ends, attr_ints("ends"));
    PLANRT_ASSIGN_OR_RETURN(auto a_axes, attr_ints("axes"));
    if (!a_ends) return error("attribute 'ends' is missing");
    for (int64_t v : *a_starts) a.starts.push_back(sym_const(v));
    for (int64_t v : *a_ends) a.ends.push_back(sym_const(v));
    if (a_axes) a.axes = *a_axes;
  } else {
    PLANRT_ASSIGN_OR_RETURN(a.starts, sym_ints(1, "starts"));
    PLANRT_ASSIGN_OR_RETURN(a.ends, sym_ints(2, "ends"));
    if (has(3)) {
      PLANRT_ASSIGN_OR_RETURN(a.axes, known_ints(3, "axes"));
    }
    if (has(4)) {
      PLANRT_ASSIGN_OR_RETURN(a.steps, known_ints(4, "steps"));
    }
  }
  if (a.axes.empty()) {
    for (size_t i = 0; i < a.starts.size(); ++i) a.axes.push_back(static_cast<int64_t>(i));
  }
  if (a.steps.empty()) a.steps.assign(a.starts.size(), 1);
  if (a.ends.size() != a.starts.size() || a.axes.size() != a.starts.size() ||
      a.steps.size() != a.starts.size()) {
    return error("starts, ends, axes and steps differ in length");
  }
  return a;
}

// ---- Importer -------------------------------------------------------------------------

Result<ir::ShapeSpec> Importer::reshape_spec(const ir::SymShape& target) const {
  ir::ShapeSpec spec;
  int inferred = 0;
  for (const ir::Dim& d : target) {
    if (d.is_static()) {
      spec.push_back({d.value, ""});
    } else if (d.value == 1) {
      spec.push_back({0, method_.dims[d.dim].name});
    } else {
      spec.push_back({-1, ""});
      ++inferred;
    }
  }
  if (inferred > 1) {
    return Status(ErrorCode::NotSupported,
                  fmt::format("a reshape to {} (two dims that are multiples of named dims)",
                              shape_str(from_ir_shape(target))));
  }
  return spec;
}

Importer::Importer(std::shared_ptr<const ::onnx::ModelProto> model, std::string model_dir,
                   const OnnxImportOptions& options)
    : model_(std::move(model)), model_dir_(std::move(model_dir)), options_(options) {}

// An ONNX name is taken only by the value it names (reserved_ keeps made-up names off them).
std::string Importer::unique_name(const std::string& hint) {
  const std::string base = hint.empty() ? "v" : hint;
  std::string name = base;
  for (int n = 1; used_names_.contains(name) || (n > 1 && reserved_.contains(name)); ++n) {
    name = fmt::format("{}.{}", base, n);
  }
  used_names_.insert(name);
  return name;
}

const ir::TensorType* Importer::ir_type(const std::string& ir_name) const {
  auto it = ir_types_.find(ir_name);
  return it == ir_types_.end() ? nullptr : &it->second;
}

Result<ir::SymShape> Importer::to_ir_shape(const std::vector<SymInt>& shape) const {
  ir::SymShape out;
  for (const SymInt& s : shape) {
    if (s.dims.empty()) {
      out.push_back(ir::Dim::fixed(s.coeff));
    } else if (s.dims.size() == 1) {
      out.push_back(ir::Dim::named(s.dims[0], s.coeff));
    } else {
      return invalid(fmt::format("shape {} has the entry {}, a product of dims, which a planrt "
                                 "program cannot express",
                                 shape_str(shape), sym_to_string(s, dims())));
    }
  }
  return out;
}

std::vector<SymInt> Importer::from_ir_shape(const ir::SymShape& shape) {
  std::vector<SymInt> out;
  for (const ir::Dim& d : shape) {
    out.push_back(d.is_static() ? sym_const(d.value) : SymInt{d.value, {d.dim}});
  }
  return out;
}

std::string Importer::shape_str(const std::vector<SymInt>& shape) const {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += sym_to_string(shape[i], dims());
  }
  return out + "]";
}

Result<std::string> Importer::constant(const Tensor& t, const std::string& name_hint) {
  auto cached = constant_names_.find(t.bytes.data());
  if (cached != constant_names_.end() && !t.bytes.empty()) {
    const ir::TensorType* type = ir_type(cached->second);
    if (type != nullptr && from_dtype(type->dtype) == t.elem &&
        from_ir_shape(type->shape).size() == t.shape.size()) {
      bool same = true;
      for (size_t i = 0; i < t.shape.size(); ++i) same = same && type->shape[i].value == t.shape[i];
      if (same) return cached->second;
    }
  }
  Result<DType> dtype = to_dtype(t.elem);
  if (!dtype.ok()) {
    return invalid(fmt::format("constant '{}' is needed at run time, but {}", name_hint,
                               dtype.status().message()));
  }
  ir::Constant c;
  // A graph output is a value of that name; a constant cannot take it.
  c.name = unique_name(graph_outputs_.contains(name_hint) ? name_hint + ".const" : name_hint);
  c.dtype = *dtype;
  c.shape = t.shape;
  c.bytes = t.bytes;
  c.owner = t.owner;
  ir::TensorType type{*dtype, {}};
  for (int64_t d : t.shape) type.shape.push_back(ir::Dim::fixed(d));
  ir_types_[c.name] = type;
  if (!t.bytes.empty()) constant_names_[t.bytes.data()] = c.name;
  std::string name = c.name;
  ir_model_.constants.push_back(std::move(c));
  return name;
}

Result<std::string> Importer::ir_of(const Value& v, bool unfold) {
  if (v.known) return constant(*v.known, v.ir.empty() ? "const" : v.ir);
  if (v.sym) return sym_at_run_time(v);
  if (v.causal) {
    return invalid("causally masked attention scores are read by something other than a Softmax "
                   "(planrt applies causal masks inside its attention)");
  }
  if (v.window_base) {
    // The window at run time: the base as a constant, sliced to the dims' sizes.
    Value base;
    base.elem = v.elem;
    for (int64_t d : v.window_base->shape) base.shape.push_back(sym_const(d));
    PLANRT_ASSIGN_OR_RETURN(std::string name, constant(*v.window_base, v.ir.empty() ? "window" : v.ir));
    for (size_t d = 0; d < v.shape.size(); ++d) {
      if (sym_is_const(v.shape[d])) continue;
      const SymInt& n = v.shape[d];
      if (n.coeff != 1 || n.dims.size() != 1) {
        return invalid(fmt::format("a window of size {} is not expressible", sym_to_string(n, dims())));
      }
      PLANRT_ASSIGN_OR_RETURN(Value sliced, emit("slice", {name},
                                                 {{"dim", static_cast<int64_t>(d)}, {"start", int64_t{0}},
                                                  {"end", method_.dims[n.dims[0]].name}},
                                                 (v.ir.empty() ? "window" : v.ir) + ".window"));
      name = sliced.ir;
    }
    return name;
  }
  if (v.iota) {
    // 0..n-1 at run time (position ids compared with a mask, cast to float for a rotary
    // table): 0..max-1 as a constant, seen through a window of the dim's size.
    const SymInt& n = *v.iota;
    if (n.coeff != 1 || n.dims.size() != 1) {
      return invalid(fmt::format("a range 0..{} over the dims is used as data at run time, and only "
                                 "a range over one dim can be", sym_to_string(n, dims())));
    }
    const int64_t max = method_.dims[n.dims[0]].max;
    std::vector<int64_t> base_shape;
    for (const SymInt& d : v.shape) base_shape.push_back(d == n ? max : sym_is_const(d) ? d.coeff : -1);
    if (std::count(base_shape.begin(), base_shape.end(), max) != 1 ||
        std::count(base_shape.begin(), base_shape.end(), -1) != 0) {
      return invalid(fmt::format("a range 0..{} laid out as {} is used as data at run time", sym_to_string(n, dims()),
                                 shape_str(v.shape)));
    }
    std::vector<int64_t> values(static_cast<size_t>(max));
    for (int64_t i = 0; i < max; ++i) values[static_cast<size_t>(i)] = i;
    Value window;
    window.elem = v.elem;
    window.shape = v.shape;
    window.window_base = Tensor::from_i64(v.elem, base_shape, values);
    window.ir = v.ir.empty() ? "range" : v.ir;
    return ir_of(window, unfold);
  }
  if (!unfold || v.folded == 0) return v.ir;
  // Merge the folded dims: expressible only when the product is.
  PLANRT_ASSIGN_OR_RETURN(ir::SymShape target, to_ir_shape(v.shape));
  PLANRT_ASSIGN_OR_RETURN(ir::ShapeSpec spec, reshape_spec(target));
  PLANRT_ASSIGN_OR_RETURN(Value merged, emit("reshape", {v.ir}, {{"shape", spec}}, v.ir + ".merged"));
  return merged.ir;
}

// A shape computation used as data (transformers' mask index arithmetic: batch_idx * seq +
// kv_idx): each entry coeff * product of dims computed as the program runs, a dim's value
// read by `size` from a method input that has it.
Result<std::string> Importer::sym_at_run_time(const Value& v) {
  Result<DType> dtype = to_dtype(v.elem);
  if (!dtype.ok() || !is_integer(*dtype)) {
    return invalid(fmt::format("a shape computation of type {} is used as data at run time", elem_name(v.elem)));
  }
  const std::string hint = v.ir.empty() ? "shape" : v.ir;
  auto dim_value = [&](int32_t dim) -> Result<std::string> {
    for (const ir::ValueDecl& in : method_.inputs) {
      for (size_t axis = 0; axis < in.type.shape.size(); ++axis) {
        if (in.type.shape[axis] == ir::Dim::named(dim)) {
          PLANRT_ASSIGN_OR_RETURN(Value n, emit("size", {in.name}, {{"dim", static_cast<int64_t>(axis)}},
                                                hint + "." + method_.dims[dim].name));
          return n.ir;
        }
      }
    }
    return invalid(fmt::format("dim '{}' is used as data at run time, but no input has it as a dim of its own",
                               method_.dims[dim].name));
  };
  std::vector<std::string> entries;
  for (const SymInt& e : *v.sym) {
    std::string acc;
    if (e.coeff != 1 || e.dims.empty()) {
      PLANRT_ASSIGN_OR_RETURN(acc, constant(Tensor::from_i64(Elem::Int64, {}, {e.coeff}), hint + ".coeff"));
    }
    for (int32_t d : e.dims) {
      PLANRT_ASSIGN_OR_RETURN(std::string n, dim_value(d));
      if (acc.empty()) {
        acc = n;
      } else {
        PLANRT_ASSIGN_OR_RETURN(Value p, emit("mul", {acc, n}, {}, hint + ".product"));
        acc = p.ir;
      }
    }
    entries.push_back(acc);
  }
  std::string out;
  if (v.shape.empty()) {
    out = entries.at(0);
  } else {
    std::vector<std::string> parts;
    for (const std::string& e : entries) {
      PLANRT_ASSIGN_OR_RETURN(Value one, emit("reshape", {e}, {{"shape", ir::ShapeSpec{{1, ""}}}}, hint + ".entry"));
      parts.push_back(one.ir);
    }
    PLANRT_ASSIGN_OR_RETURN(Value cat, emit("concat", parts, {{"dim", int64_t{0}}}, hint));
    out = cat.ir;
  }
  if (*dtype != DType::I64) {
    PLANRT_ASSIGN_OR_RETURN(Value cast, emit("cast", {out}, {{"dtype", std::string(dtype_name(*dtype))}}, hint + ".cast"));
    out = cast.ir;
  }
  return out;
}

Result<Value> Importer::emit(std::string op, std::vector<std::string> inputs, ir::Attrs attrs,
                             const std::string& name_hint) {
  std::vector<ir::Operand> operands;
  for (const std::string& name : inputs) {
    if (name.empty()) {
      operands.push_back({name, nullptr});
      continue;
    }
    const ir::TensorType* type = ir_type(name);
    if (type == nullptr) {
      return Status(ErrorCode::Internal, fmt::format("IR value '{}' has no type", name));
    }
    operands.push_back({name, type});
  }
  Result<ir::InferredNode> inferred = ir::infer_node(op, operands, attrs, method_.dims);
  if (!inferred.ok()) return inferred.status().with_context(fmt::format("planrt op {}", op));
  ir::Node node;
  node.op = std::move(op);
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  const std::string out = unique_name(name_hint);
  node.outputs.push_back(out);
  method_.nodes.push_back(std::move(node));
  node_blocks_.push_back(current_block_);
  const ir::TensorType& type = inferred->outputs.at(0);
  ir_types_[out] = type;
  Value v;
  v.elem = from_dtype(type.dtype);
  v.shape = from_ir_shape(type.shape);
  v.ir = out;
  v.ir_shape = type.shape;
  return v;
}

Status Importer::read_dims_and_inputs() {
  const ::onnx::GraphProto& g = model_->graph();
  std::set<std::string> initializer_names;
  for (const auto& t : g.initializer()) initializer_names.insert(t.name());
  std::vector<std::string> missing_bounds;
  for (const auto& input : g.input()) {
    if (initializer_names.contains(input.name())) continue;  // IR < 4 lists initializers too
    auto given = options_.input_values.find(input.name());
    if (given != options_.input_values.end()) {
      Result<Tensor> t = read_input_value(given->second);
      if (!t.ok()) return t.status().with_context(input_value_setting(input.name()));
      Value v;
      v.elem = t->elem;
      for (int64_t d : t->shape) v.shape.push_back(sym_const(d));
      v.known = std::move(*t);
      v.ir = input.name();
      values_[input.name()] = std::move(v);
      continue;
    }
    if (!input.type().has_tensor_type()) {
      return Status(ErrorCode::NotSupported,
                    fmt::format("graph input '{}' is not a tensor (sequences, maps and optionals "
                                "are not supported)", input.name()));
    }
    const auto& tt = input.type().tensor_type();
    const Elem elem = static_cast<Elem>(tt.elem_type());
    Result<DType> dtype = to_dtype(elem);
    if (!dtype.ok()) return dtype.status().with_context(fmt::format("graph input '{}'", input.name()));
    if (!tt.has_shape()) {
      return invalid(fmt::format("graph input '{}' has no shape; planrt needs its rank and dims",
                                 input.name()));
    }
    ir::ValueDecl decl;
    decl.name = input.name();
    decl.type.dtype = *dtype;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value()) {
        if (d.dim_value() < 1) {
          return invalid(fmt::format("graph input '{}' dim {} is {} (sizes are >= 1)", input.name(),
                                     i, d.dim_value()));
        }
        decl.type.shape.push_back(ir::Dim::fixed(d.dim_value()));
        continue;
      }
      if (!d.has_dim_param() || d.dim_param().empty()) {
        return invalid(fmt::format("graph input '{}' dim {} has neither a size nor a name; export "
                                   "with a named dynamic axis, or a fixed size", input.name(), i));
      }
      const std::string& name = d.dim_param();
      // --dim NAME=N (MIN == MAX): the dim is that fixed size, as if the model said so. An
      // exporter that specialised shapes to its example (torch 2.x tracing
      // nn.MultiheadAttention) gives a graph that is only consistent at that size.
      if (auto fixed = options_.dims.find(name);
          fixed != options_.dims.end() && fixed->second.min == fixed->second.max && fixed->second.min >= 1) {
        decl.type.shape.push_back(ir::Dim::fixed(fixed->second.min));
        fixed_dims_.insert(name);
        continue;
      }
      auto it = std::find_if(method_.dims.begin(), method_.dims.end(),
                             [&](const ir::DimDecl& x) { return x.name == name; });
      int32_t index = static_cast<int32_t>(it - method_.dims.begin());
      if (it == method_.dims.end()) {
        auto bound = options_.dims.find(name);
        if (bound == options_.dims.end()) {
          missing_bounds.push_back(fmt::format("'{}' (graph input '{}' dim {})", name, input.name(), i));
          method_.dims.push_back({name, 1, 1});
        } else {
          if (bound->second.min < 1 || bound->second.max < bound->second.min) {
            return invalid(fmt::format("{}: bounds must satisfy 1 <= MIN <= MAX",
                                       dim_setting(name, options_.spelling == OnnxImportOptions::Spelling::Cli
                                                             ? fmt::format("{}..{}", bound->second.min, bound->second.max)
                                                             : fmt::format("({}, {})", bound->second.min, bound->second.max))));
          }
          method_.dims.push_back({name, bound->second.min, bound->second.max});
        }
      }
      decl.type.shape.push_back(ir::Dim::named(index));
    }
    Value v;
    v.elem = elem;
    v.shape = from_ir_shape(decl.type.shape);
    v.ir = unique_name(decl.name);
    if (v.ir != decl.name) return invalid(fmt::format("graph input '{}' is declared twice", decl.name));
    v.ir_shape = decl.type.shape;
    ir_types_[v.ir] = decl.type;
    values_[decl.name] = v;
    method_.inputs.push_back(std::move(decl));
  }
  if (!missing_bounds.empty()) {
    std::vector<std::string> unbound;
    for (const ir::DimDecl& d : method_.dims) {
      if (!options_.dims.contains(d.name)) unbound.push_back(d.name);
    }
    std::string pass;
    if (options_.spelling == OnnxImportOptions::Spelling::Cli) {
      for (const std::string& n : unbound) pass += " " + dim_setting(n);
    } else {
      std::vector<std::string> entries;
      for (const std::string& n : unbound) entries.push_back(fmt::format("'{}': (MIN, MAX)", n));
      pass = fmt::format(" dims={{{}}}", fmt::join(entries, ", "));
    }
    return invalid(fmt::format("the model's dims {} have no bounds; planrt plans memory for the "
                               "largest size: pass{}",
                               fmt::join(missing_bounds, ", "), pass));
  }
  for (const auto& given : options_.input_values) {
    const std::string& name = given.first;
    if (!values_.contains(name)) {
      return invalid(fmt::format("{} names '{}', which is not a graph input",
                                 options_.spelling == OnnxImportOptions::Spelling::Cli ? "--input-value" : "input_values",
                                 name));
    }
  }
  for (const auto& bound : options_.dims) {
    const std::string& name = bound.first;  // not a structured binding: clang 14 cannot capture one
    if (!fixed_dims_.contains(name) &&
        std::none_of(method_.dims.begin(), method_.dims.end(),
                     [&](const ir::DimDecl& d) { return d.name == name; })) {
      std::vector<std::string> names;
      for (const ir::DimDecl& d : method_.dims) names.push_back(d.name);
      return invalid(fmt::format("{} names '{}', which is not a dim of the model's inputs "
                                 "(they have: {})",
                                 options_.spelling == OnnxImportOptions::Spelling::Cli ? "--dim" : "dims", name,
                                 names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
    }
  }
  return {};
}

Status Importer::read_initializers() {
  const ::onnx::GraphProto& g = model_->graph();
  ExternalDataContext context{model_dir_, {}};
  for (const auto& proto : g.initializer()) {
    if (values_.contains(proto.name()) && !values_[proto.name()].known) continue;
    Result<Tensor> t = read_tensor(proto, context, model_);
    if (!t.ok()) return t.status().with_context("initializer");
    Value v;
    v.elem = t->elem;
    for (int64_t d : t->shape) v.shape.push_back(sym_const(d));
    v.known = std::move(*t);
    v.ir = proto.name();
    values_[proto.name()] = std::move(v);
  }
  if (g.sparse_initializer_size() > 0) {
    return Status(ErrorCode::NotSupported, "sparse initializers are not supported");
  }
  return {};
}

Status Importer::check_ops_supported() const {
  std::vector<std::string> unsupported;
  for (int i = 0; i < model_->graph().node_size(); ++i) {
    const ::onnx::NodeProto& node = model_->graph().node(i);
    const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
    if (default_domain && find_op_spec(node.op_type()) != nullptr) continue;
    unsupported.push_back(fmt::format("{} (op {}, domain '{}', opset {})", node_label(node, i),
                                      node.op_type(), node.domain().empty() ? "ai.onnx" : node.domain(),
                                      default_domain ? opset_ : int64_t{-1}));
  }
  if (unsupported.empty()) return {};
  return Status(ErrorCode::NotSupported,
                fmt::format("{} node{} use{} ops planrt does not import: {}", unsupported.size(),
                            unsupported.size() == 1 ? "" : "s", unsupported.size() == 1 ? "s" : "",
                            fmt::join(unsupported, "; ")));
}

Status Importer::import_node(const ::onnx::NodeProto& node, size_t index) {
  const OpSpec* spec = find_op_spec(node.op_type());
  for (const auto& a : node.attribute()) {
    if (std::find(spec->attrs.begin(), spec->attrs.end(), a.name()) == spec->attrs.end()) {
      return Status(ErrorCode::NotSupported,
                    fmt::format("{}: attribute '{}' is not supported (supported: {})",
                                node_label(node, index), a.name(),
                                spec->attrs.size() == 0 ? "none" : fmt::format("{}", fmt::join(spec->attrs, ", "))));
    }
  }
  const int n_in = node.input_size(), n_out = node.output_size();
  if (n_in < spec->min_inputs || (spec->max_inputs >= 0 && n_in > spec->max_inputs)) {
    return invalid(fmt::format("{}: has {} inputs; {} takes {}", node_label(node, index), n_in,
                               node.op_type(),
                               spec->max_inputs < 0 ? fmt::format("at least {}", spec->min_inputs)
                               : spec->min_inputs == spec->max_inputs ? fmt::format("{}", spec->min_inputs)
                                                                      : fmt::format("{} to {}", spec->min_inputs, spec->max_inputs)));
  }
  for (int i = 0; i < spec->min_inputs; ++i) {
    if (node.input(i).empty()) {
      return invalid(fmt::format("{}: required input {} is absent", node_label(node, index), i));
    }
  }
  if (n_out < 1 || node.output(0).empty() || (spec->max_outputs >= 0 && n_out > spec->max_outputs)) {
    return invalid(fmt::format("{}: has {} outputs (the first named); {} makes {}", node_label(node, index),
                               n_out, node.op_type(),
                               spec->max_outputs < 0 ? std::string("one or more")
                                                     : fmt::format("at most {}", spec->max_outputs)));
  }
  OpContext c{*this, node, {}, {}};
  for (const std::string& name : node.input()) {
    if (name.empty()) {
      c.in.push_back(nullptr);
      continue;
    }
    auto it = values_.find(name);
    if (it == values_.end()) {
      return invalid(fmt::format("{}: input '{}' is not defined before it is used (the graph must "
                                 "be topologically sorted)", node_label(node, index), name));
    }
    c.in.push_back(&it->second);
  }
  current_block_ = block_of(node.name());
  if (current_block_.empty()) current_block_ = block_of_scopes(node);
  Status s;
  Result<bool> folded = try_fold(c);
  if (!folded.ok()) {
    s = folded.status();
  } else if (!*folded) {
    c.out.clear();
    s = spec->handler(c);
  }
  if (!s.ok()) return s.with_context(node_label(node, index));
  if (c.out.size() < static_cast<size_t>(node.output_size())) {
    // Optional outputs a handler does not make (Dropout's mask, LayerNorm's statistics)
    // may be absent or unused; a used one is reported where it is read.
    for (int i = static_cast<int>(c.out.size()); i < node.output_size(); ++i) {
      if (!node.output(i).empty()) {
        if (read_names_.contains(node.output(i))) {
          return Status(ErrorCode::NotSupported,
                        fmt::format("{}: output {} '{}' is used, but planrt does not compute it",
                                    node_label(node, index), i, node.output(i)));
        }
        if (graph_outputs_.contains(node.output(i))) {
          return Status(ErrorCode::NotSupported,
                        fmt::format("{}: output {} '{}' is a graph output, but planrt does not "
                                    "compute it", node_label(node, index), i, node.output(i)));
        }
      }
    }
  }
  for (int i = 0; i < node.output_size() && i < static_cast<int>(c.out.size()); ++i) {
    if (node.output(i).empty()) continue;
    Value& v = c.out[i];
    if (v.known || v.sym) v.ir = node.output(i);  // the constant's name, if it is ever needed
    values_[node.output(i)] = std::move(v);
  }
  return {};
}

Status Importer::import_nodes() {
  const ::onnx::GraphProto& g = model_->graph();
  for (int i = 0; i < g.node_size(); ++i) {
    PLANRT_RETURN_IF_ERROR(import_node(g.node(i), static_cast<size_t>(i)));
  }
  return {};
}

// A graph output's declared element type and fixed dims must be what the graph computes
// (ONNX Runtime refuses a model where they are not): planrt does not convert to them.
Status Importer::check_declared_output(const ::onnx::ValueInfoProto& out, const Value& v) const {
  if (!out.has_type() || !out.type().has_tensor_type()) return {};
  const ::onnx::TypeProto::Tensor& t = out.type().tensor_type();
  if (t.elem_type() != 0 && static_cast<Elem>(t.elem_type()) != v.elem) {
    return invalid(fmt::format("graph output '{}' is declared {} but the graph computes {}", out.name(),
                               elem_name(static_cast<Elem>(t.elem_type())), elem_name(v.elem)));
  }
  if (!t.has_shape()) return {};
  auto mismatch = [&](std::string what) {
    return invalid(fmt::format("graph output '{}' is declared with {} but the graph computes {}", out.name(), what,
                               shape_str(v.shape)));
  };
  if (t.shape().dim_size() != v.rank()) return mismatch(fmt::format("rank {}", t.shape().dim_size()));
  for (int i = 0; i < t.shape().dim_size(); ++i) {
    const auto& d = t.shape().dim(i);
    const SymInt& got = v.shape[static_cast<size_t>(i)];
    if (d.has_dim_value() && d.dim_value() > 0 && sym_is_const(got) && got.coeff != d.dim_value()) {
      return mismatch(fmt::format("dim {} of size {}", i, d.dim_value()));
    }
  }
  return {};
}

std::string Importer::dim_setting(std::string_view name, std::string_view bound) const {
  if (options_.spelling == OnnxImportOptions::Spelling::Cli) {
    return fmt::format("--dim {}={}", name, bound.empty() ? "MIN..MAX" : bound);
  }
  return fmt::format("dims={{'{}': {}}}", name, bound.empty() ? "(MIN, MAX)" : bound);
}

std::string Importer::input_value_setting(std::string_view name) const {
  if (options_.spelling == OnnxImportOptions::Spelling::Cli) {
    return fmt::format("--input-value {}=FILE", name.empty() ? "NAME" : name);
  }
  return fmt::format("input_values={{'{}': FILE}}", name.empty() ? "NAME" : name);
}

Status Importer::import_outputs() {
  const ::onnx::GraphProto& g = model_->graph();
  if (g.output_size() == 0) return invalid("the graph has no outputs");
  std::set<std::string> taken;
  for (const auto& out : g.output()) {
    auto it = values_.find(out.name());
    if (it == values_.end()) {
      return invalid(fmt::format("graph output '{}' is not computed by any node", out.name()));
    }
    current_block_.clear();
    const Value& v = it->second;
    PLANRT_RETURN_IF_ERROR(check_declared_output(out, v));
    PLANRT_ASSIGN_OR_RETURN(std::string ir_name, ir_of(v));
    const bool is_input = std::any_of(method_.inputs.begin(), method_.inputs.end(),
                                      [&](const ir::ValueDecl& d) { return d.name == ir_name; });
    // An output is a value of its own name: alias, constant or input outputs get a copy.
    if (ir_name != out.name() || is_input || !taken.insert(ir_name).second ||
        ir_model_.find_constant(ir_name) != nullptr) {
      PLANRT_ASSIGN_OR_RETURN(ir::ShapeSpec spec, reshape_spec(ir_type(ir_name)->shape));
      PLANRT_ASSIGN_OR_RETURN(Value copy, emit("reshape", {ir_name}, {{"shape", spec}}, out.name()));
      if (copy.ir != out.name()) {
        return invalid(fmt::format("graph output '{}' cannot keep its name", out.name()));
      }
      ir_name = copy.ir;
      taken.insert(ir_name);
    }
    method_.outputs.push_back(ir_name);
  }
  return {};
}

Result<builder::Model> Importer::run() {
  const ::onnx::GraphProto& g = model_->graph();
  for (const auto& op : model_->opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
  }
  if (opset_ == 0 && model_->opset_import_size() == 0) opset_ = 1;
  if (opset_ < kMinOpset || opset_ > kMaxOpset) {
    return Status(ErrorCode::NotSupported,
                  fmt::format("the model imports the default ONNX domain at opset {}; planrt reads "
                              "opsets {} to {} (re-export with opset_version in that range)",
                              opset_, kMinOpset, kMaxOpset));
  }
  method_.name = options_.method;
  PLANRT_RETURN_IF_ERROR(check_ops_supported());
  // Every ONNX name is reserved, so that IR values named after them never collide.
  for (const auto& t : g.initializer()) reserved_.insert(t.name());
  for (const auto& t : g.input()) reserved_.insert(t.name());
  for (const auto& n : g.node()) {
    for (const std::string& o : n.output()) reserved_.insert(o);
  }
  for (const auto& o : g.output()) graph_outputs_.insert(o.name());
  for (const auto& n : g.node()) read_names_.insert(n.input().begin(), n.input().end());
  PLANRT_RETURN_IF_ERROR(read_dims_and_inputs());
  PLANRT_RETURN_IF_ERROR(read_initializers());
  PLANRT_RETURN_IF_ERROR(import_nodes());
  PLANRT_RETURN_IF_ERROR(import_outputs());
  PLANRT_RETURN_IF_ERROR(fuse_patterns(ir_model_, method_, node_blocks_, options_.fused_attention,
                                       causal_softmax_));
  PLANRT_RETURN_IF_ERROR(apply_partition(method_, node_blocks_, options_));
  ir_model_.methods.push_back(std::move(method_));
  PLANRT_RETURN_IF_ERROR(ir::check_model(ir_model_).with_context("the imported model"));
  return builder::Model(std::make_unique<ir::Model>(std::move(ir_model_)));
}

}  // namespace planrt::importers::onnx

namespace planrt::importers {

namespace {

// The import of `bytes`; `path`: the file they came from (null: bytes given directly), which
// the errors about the bytes themselves name ("'m.onnx' is not an ONNX model") and the rest
// take as their context ("importing 'm.onnx': node 3 ...").
Result<builder::Model> import_bytes(std::span<const uint8_t> bytes, const std::string& base_dir,
                                    const OnnxImportOptions& options, const std::string* path) {
  const std::string subject = path != nullptr ? fmt::format("'{}' is", *path) : std::string("the model is");
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) {
    return make_error(ErrorCode::NotSupported,
                      "{} {} bytes; protobuf reads at most 2 GiB: store the weights as "
                      "external data (onnx.save_model(..., save_as_external_data=True))",
                      subject, bytes.size());
  }
  // Bytes given directly keep the message that reads on its own: "not an ONNX model: ...".
  const std::string not_a_model = path != nullptr ? subject + " not an ONNX model" : "not an ONNX model";
  auto model = std::make_shared<::onnx::ModelProto>();
  if (!model->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return make_error(ErrorCode::InvalidArgument, "{}: protobuf cannot parse it (truncated or another format)",
                      not_a_model);
  }
  if (!model->has_graph() || model->ir_version() <= 0) {
    return make_error(ErrorCode::InvalidArgument, "{}: it has no {}", not_a_model,
                      model->has_graph() ? "IR version" : "graph");
  }
  onnx::Importer importer(std::move(model), base_dir.empty() ? "." : base_dir, options);
  Result<builder::Model> out = importer.run();
  if (!out.ok() && path != nullptr) return out.status().with_context(fmt::format("importing '{}'", *path));
  return out;
}

}  // namespace

Result<builder::Model> parse_model_onnx(std::span<const uint8_t> bytes, const std::string& base_dir,
                                        const OnnxImportOptions& options) {
  return import_bytes(bytes, base_dir, options, nullptr);
}

Result<builder::Model> read_model_onnx(const std::string& path, const OnnxImportOptions& options) {
  PLANRT_ASSIGN_OR_RETURN(format::MappedFile file, format::MappedFile::open(path));
  return import_bytes(file.bytes(), std::filesystem::path(path).parent_path().string(), options, &path);
}

Result<OnnxTensorFile> read_onnx_tensor(const std::string& path) {
  PLANRT_ASSIGN_OR_RETURN(onnx::Tensor t, onnx::read_tensor_file(path));
  Result<DType> dtype = onnx::to_dtype(t.elem);
  if (!dtype.ok()) return dtype.status().with_context(fmt::format("'{}'", path));
  return OnnxTensorFile{*dtype, t.shape, std::vector<uint8_t>(t.bytes.begin(), t.bytes.end())};
}

}  // namespace planrt::importers
