#include "builder/check.h"

#include <deque>
#include <set>

#include <fmt/format.h>

#include "kernels/kernel.h"
#include "planrt/core/tensor_view.h"

namespace planrt::builder::ir {
namespace {

Status invalid(std::string message) { return Status(ErrorCode::InvalidProgram, std::move(message)); }

Status check_type(const TensorType& type, std::span<const DimDecl> dims, std::string_view what) {
  if (type.shape.size() > static_cast<size_t>(kMaxRank)) {
    return invalid(fmt::format("{} has rank {} (at most {})", what, type.shape.size(), kMaxRank));
  }
  for (const Dim& d : type.shape) {
    if (d.value < 1) {
      return invalid(fmt::format("{} has shape {}: sizes must be >= 1", what,
                                 shape_to_string(type.shape, dims)));
    }
    if (!d.is_static() && static_cast<size_t>(d.dim) >= dims.size()) {
      return invalid(fmt::format("{} refers to dim #{} but the method declares {} dims", what,
                                 d.dim, dims.size()));
    }
  }
  auto bytes = max_nbytes(type, dims);
  if (!bytes.ok()) return bytes.status().with_context(what);
  return {};
}

Status check_value_name(const std::string& name, std::string_view what) {
  if (name.empty()) return invalid(fmt::format("{} has an empty name", what));
  // Copies across devices are named "<value>@<device>" in the program.
  if (name.find('@') != std::string::npos) {
    return invalid(fmt::format("{} '{}': '@' is reserved in value names", what, name));
  }
  return {};
}

Status check_dims(const Method& method) {
  std::set<std::string, std::less<>> names;
  for (const DimDecl& d : method.dims) {
    if (d.name.empty()) return invalid("a dim has an empty name");
    if (!names.insert(d.name).second) return invalid(fmt::format("dim '{}' is declared twice", d.name));
    if (d.min < 1) return invalid(fmt::format("dim '{}' has min {} (must be >= 1)", d.name, d.min));
    if (d.min > d.max) {
      return invalid(fmt::format("dim '{}' has min {} > max {}", d.name, d.min, d.max));
    }
  }
  return {};
}

Result<CheckedNode> check_node(const Model& model, const Method& method, size_t index,
                               const CheckedMethod& so_far,
                               const std::map<std::string, size_t, std::less<>>& defined_at) {
  const Node& node = method.nodes[index];
  const kernels::OpInfo* info = kernels::find_op(node.op);
  if (info == nullptr) {
    std::string known;
    for (const kernels::OpInfo& op : kernels::all_ops()) {
      known += known.empty() ? std::string(op.name) : ", " + std::string(op.name);
    }
    return invalid(fmt::format("unknown op '{}' (known ops: {})", node.op, known));
  }
  auto n = static_cast<int>(node.inputs.size());
  if (n < info->min_inputs || (info->max_inputs >= 0 && n > info->max_inputs)) {
    std::string expected =
        info->max_inputs < 0 ? fmt::format("at least {}", info->min_inputs)
        : info->min_inputs == info->max_inputs ? std::to_string(info->min_inputs)
                                               : fmt::format("{} to {}", info->min_inputs, info->max_inputs);
    return invalid(fmt::format("wrong operand count: {} takes {} inputs, got {}", node.op,
                               expected, n));
  }
  if (static_cast<int>(node.outputs.size()) != info->num_outputs) {
    return invalid(fmt::format("wrong output count: {} has {} outputs, got {}", node.op,
                               info->num_outputs, node.outputs.size()));
  }
  std::vector<Operand> operands(node.inputs.size());
  std::deque<TensorType> constant_types;  // stable addresses for the operands' pointers
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const std::string& name = node.inputs[i];
    operands[i].name = name;
    if (name.empty()) {
      if (static_cast<int>(i) < info->min_inputs || info->max_inputs < 0) {
        return invalid(fmt::format("input {} is required but absent", i));
      }
      continue;
    }
    if (auto it = so_far.values.find(name); it != so_far.values.end()) {
      operands[i].type = &it->second;
      continue;
    }
    if (auto it = defined_at.find(name); it != defined_at.end()) {
      return invalid(fmt::format("input {} '{}' is used before it is defined (by node {})", i,
                                 name, it->second));
    }
    const Constant* c = model.find_constant(name);
    if (c == nullptr) {
      return Status(ErrorCode::NotFound,
                    fmt::format("input {} '{}' is missing: neither a value of the method nor a "
                                "constant of the model", i, name));
    }
    TensorType& type = constant_types.emplace_back(TensorType{c->dtype, {}});
    for (int64_t d : c->shape) type.shape.push_back(Dim::fixed(d));
    operands[i].type = &type;
  }

  auto inferred = infer_node(node.op, operands, node.attrs, method.dims);
  if (!inferred.ok()) return inferred.status();
  CheckedNode out;
  out.outputs = std::move(inferred->outputs);
  out.attrs = std::move(inferred->attrs);
  out.backend = node.backend.value_or(method.backend);
  // The method's device is where its delegate segments run; cpu nodes stay on the host.
  std::string_view device_from = "the node's \"device\"";
  if (node.device) {
    out.device = *node.device;
  } else if (method.device && out.backend != Backend::Cpu) {
    out.device = *method.device;
    device_from = "the method's \"device\"";
  } else {
    out.device = default_device(out.backend);
  }
  if (out.backend == Backend::Cpu && !out.device.is_cpu()) {
    return invalid(fmt::format("backend cpu cannot run on device {}", to_string(out.device)));
  }
  // Engines run on either (the CPU kernels on the host); cuda segments only on a GPU.
  if (out.backend == Backend::Cuda && out.device.is_cpu()) {
    return invalid(fmt::format("backend cuda needs a cuda device, got cpu (from {}); use "
                               "backend engine or cpu to run on the host", device_from));
  }
  for (size_t i = 0; i < out.outputs.size(); ++i) {
    PLANRT_RETURN_IF_ERROR(check_type(out.outputs[i], method.dims,
                                      fmt::format("output '{}'", node.outputs[i])));
  }
  return out;
}

}  // namespace

Result<CheckedMethod> check_method(const Model& model, const Method& method) {
  auto where = [&](std::string_view rest) { return fmt::format("method '{}': {}", method.name, rest); };
  PLANRT_RETURN_IF_ERROR(check_dims(method).with_context(where("dims")));
  CheckedMethod out;
  auto define = [&](const std::string& name, const TensorType& type, std::string_view what) -> Status {
    PLANRT_RETURN_IF_ERROR(check_value_name(name, what));
    if (out.values.contains(name)) {
      return invalid(fmt::format("{} '{}' is a duplicate value name", what, name));
    }
    if (model.find_constant(name) != nullptr) {
      return invalid(fmt::format("{} '{}' has the name of a constant", what, name));
    }
    out.values.emplace(name, type);
    return {};
  };
  for (size_t i = 0; i < method.inputs.size(); ++i) {
    const ValueDecl& in = method.inputs[i];
    std::string what = fmt::format("input {}", i);
    PLANRT_RETURN_IF_ERROR(check_type(in.type, method.dims, fmt::format("{} '{}'", what, in.name))
                               .with_context(fmt::format("method '{}'", method.name)));
    PLANRT_RETURN_IF_ERROR(define(in.name, in.type, what).with_context(fmt::format("method '{}'", method.name)));
  }
  // Where each value is defined, to tell "used before defined" from "missing".
  std::map<std::string, size_t, std::less<>> defined_at;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    for (const std::string& o : method.nodes[i].outputs) defined_at.emplace(o, i);
  }
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    const Node& node = method.nodes[i];
    auto context = fmt::format("method '{}', {}", method.name, node_label(node, i));
    auto checked = check_node(model, method, i, out, defined_at);
    if (!checked.ok()) return checked.status().with_context(context);
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      PLANRT_RETURN_IF_ERROR(
          define(node.outputs[k], checked->outputs[k], fmt::format("output {}", k)).with_context(context));
    }
    out.nodes.push_back(std::move(checked).value());
  }
  if (method.outputs.empty()) return invalid(where("has no outputs"));
  std::set<std::string, std::less<>> seen;
  for (size_t i = 0; i < method.outputs.size(); ++i) {
    const std::string& name = method.outputs[i];
    if (!seen.insert(name).second) {
      return invalid(where(fmt::format("output {} '{}' is listed twice", i, name)));
    }
    if (!out.values.contains(name)) {
      return Status(model.find_constant(name) != nullptr ? ErrorCode::InvalidProgram : ErrorCode::NotFound,
                    where(model.find_constant(name) != nullptr
                              ? fmt::format("output {} '{}' is a constant (outputs are values "
                                            "computed by the method)", i, name)
                              : fmt::format("output {} '{}' is not a value of the method", i, name)));
    }
  }
  return out;
}

Status check_model(const Model& model) {
  if (model.methods.empty()) return invalid("the model has no methods");
  std::set<std::string, std::less<>> names;
  for (const Constant& c : model.constants) {
    if (c.name.empty()) return invalid("a constant has an empty name");
    if (!names.insert(c.name).second) return invalid(fmt::format("constant '{}' is declared twice", c.name));
    TensorType t{c.dtype, {}};
    for (int64_t d : c.shape) t.shape.push_back(Dim::fixed(d));
    PLANRT_RETURN_IF_ERROR(check_type(t, {}, fmt::format("constant '{}'", c.name)));
  }
  names.clear();
  for (const Method& m : model.methods) {
    if (m.name.empty()) return invalid("a method has an empty name");
    if (!names.insert(m.name).second) return invalid(fmt::format("method '{}' is declared twice", m.name));
    auto checked = check_method(model, m);
    if (!checked.ok()) return checked.status();
  }
  return {};
}

}  // namespace planrt::builder::ir
