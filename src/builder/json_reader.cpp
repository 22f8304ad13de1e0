// The JSON model reader (docs/model-format.md, docs/design.md §9): JSON -> ir::Model, checked.
//
// nlohmann::json throws; every call into it here is either guarded by a type check or
// inside the try block of parse_model_json, so no exception leaves this file. Structural
// errors (a missing key, a wrong JSON type) are reported here with their place in the
// document; semantic ones (ops, shapes, names) by check_model.
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "builder/check.h"
#include "builder/graph.h"
#include "builder/weights.h"
#include "planrt/builder/builder.h"

namespace planrt::builder {
namespace {

using json = nlohmann::ordered_json;
using ir::Dim;

constexpr std::string_view kFormat = "planrt-model/1";

Status invalid(std::string message) { return Status(ErrorCode::InvalidProgram, std::move(message)); }

std::string type_name(const json& j) { return j.type_name(); }

Status check_keys(const json& obj, std::initializer_list<std::string_view> allowed, std::string_view where) {
  for (const auto& item : obj.items()) {
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || item.key() == a;
    if (!ok) {
      std::string list;
      for (std::string_view a : allowed) list += list.empty() ? std::string(a) : ", " + std::string(a);
      return invalid(fmt::format("{}: unknown key \"{}\" (accepted: {})", where, item.key(), list));
    }
  }
  return {};
}

Result<const json*> member(const json& obj, std::string_view key, json::value_t type,
                           std::string_view where, bool required) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) return invalid(fmt::format("{}: missing \"{}\"", where, key));
    return static_cast<const json*>(nullptr);
  }
  bool ok = it->type() == type ||
            (type == json::value_t::number_integer && it->is_number_unsigned()) ||
            (type == json::value_t::number_float && it->is_number());
  if (!ok) {
    json sample(type);
    return invalid(fmt::format("{}: \"{}\" must be a {}, got {}", where, key, sample.type_name(),
                               type_name(*it)));
  }
  return &*it;
}

Result<int64_t> to_int(const json& j, std::string_view what) {
  if (j.is_number_unsigned()) {
    auto u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return invalid(fmt::format("{}: {} is too large", what, u));
    }
    return static_cast<int64_t>(u);
  }
  if (j.is_number_integer()) return j.get<int64_t>();
  return invalid(fmt::format("{}: expected an integer, got {}", what, type_name(j)));
}

Result<std::string> get_string(const json& obj, std::string_view key, std::string_view where,
                               bool required, std::string fallback = "") {
  PLANRT_ASSIGN_OR_RETURN(const json* j, member(obj, key, json::value_t::string, where, required));
  return j == nullptr ? fallback : j->get<std::string>();
}

Result<DType> get_dtype(const json& obj, std::string_view where) {
  PLANRT_ASSIGN_OR_RETURN(std::string name, get_string(obj, "dtype", where, true));
  auto d = parse_dtype(name);
  if (!d.ok()) return invalid(fmt::format("{}: {}", where, d.status().message()));
  return *d;
}

// A shape of integers and, when `dims` is given, dim names.
Result<ir::SymShape> get_shape(const json& obj, std::string_view where, const std::vector<ir::DimDecl>* dims) {
  PLANRT_ASSIGN_OR_RETURN(const json* arr, member(obj, "shape", json::value_t::array, where, true));
  ir::SymShape shape;
  for (size_t i = 0; i < arr->size(); ++i) {
    const json& e = (*arr)[i];
    std::string what = fmt::format("{}: shape entry {}", where, i);
    if (e.is_string() && dims != nullptr) {
      auto name = e.get<std::string>();
      auto it = std::find_if(dims->begin(), dims->end(), [&](const ir::DimDecl& d) { return d.name == name; });
      if (it == dims->end()) {
        return invalid(fmt::format("{} names dim '{}', which the method does not declare in \"dims\"", what, name));
      }
      shape.push_back(Dim::named(static_cast<int32_t>(it - dims->begin())));
      continue;
    }
    if (!e.is_number_integer()) {
      return invalid(fmt::format("{} must be an integer{}, got {}", what, dims ? " or a dim name" : "", type_name(e)));
    }
    PLANRT_ASSIGN_OR_RETURN(int64_t v, to_int(e, what));
    if (v < 1) return invalid(fmt::format("{} is {} (sizes are >= 1)", what, v));
    shape.push_back(Dim::fixed(v));
  }
  return shape;
}

// An optional "device" of a method or node: "cpu", "cuda" or "cuda:N".
Result<std::optional<Device>> get_device(const json& obj, std::string_view where) {
  PLANRT_ASSIGN_OR_RETURN(const json* device, member(obj, "device", json::value_t::string, where, false));
  if (device == nullptr) return std::optional<Device>();
  auto d = parse_device(device->get<std::string>());
  if (!d.ok()) return invalid(fmt::format("{}: {}", where, d.status().message()));
  return std::optional<Device>(*d);
}

Result<ir::AttrValue> to_attr(const json& j, std::string_view what) {
  if (j.is_boolean()) return ir::AttrValue(j.get<bool>());
  if (j.is_number_integer()) {
    PLANRT_ASSIGN_OR_RETURN(int64_t v, to_int(j, what));
    return ir::AttrValue(v);
  }
  if (j.is_number_float()) return ir::AttrValue(j.get<double>());
  if (j.is_string()) return ir::AttrValue(j.get<std::string>());
  if (j.is_array()) {
    bool any_name = false;
    for (const json& e : j) {
      if (e.is_string()) {
        any_name = true;
      } else if (!e.is_number_integer()) {
        return invalid(fmt::format("{}: list entries must be integers or dim names, got {}", what, type_name(e)));
      }
    }
    if (!any_name) {
      std::vector<int64_t> ints;
      for (const json& e : j) {
        PLANRT_ASSIGN_OR_RETURN(int64_t v, to_int(e, what));
        ints.push_back(v);
      }
      return ir::AttrValue(std::move(ints));
    }
    ir::ShapeSpec spec;
    for (const json& e : j) {
      if (e.is_string()) {
        spec.push_back({0, e.get<std::string>()});
      } else {
        PLANRT_ASSIGN_OR_RETURN(int64_t v, to_int(e, what));
        spec.push_back({v, ""});
      }
    }
    return ir::AttrValue(std::move(spec));
  }
  return invalid(fmt::format("{}: unsupported attribute value of type {}", what, type_name(j)));
}

Result<ir::Node> read_node(const json& j, std::string_view where) {
  if (!j.is_object()) return invalid(fmt::format("{}: must be an object, got {}", where, type_name(j)));
  PLANRT_RETURN_IF_ERROR(check_keys(j, {"op", "inputs", "outputs", "attrs", "backend", "segment", "device"}, where));
  ir::Node node;
  PLANRT_ASSIGN_OR_RETURN(node.op, get_string(j, "op", where, true));
  PLANRT_ASSIGN_OR_RETURN(const json* inputs, member(j, "inputs", json::value_t::array, where, true));
  for (size_t i = 0; i < inputs->size(); ++i) {
    const json& e = (*inputs)[i];
    if (e.is_null()) {
      node.inputs.emplace_back();
    } else if (e.is_string()) {
      node.inputs.push_back(e.get<std::string>());
    } else {
      return invalid(fmt::format("{}: input {} must be a value name or null, got {}", where, i, type_name(e)));
    }
  }
  PLANRT_ASSIGN_OR_RETURN(const json* outputs, member(j, "outputs", json::value_t::array, where, true));
  for (size_t i = 0; i < outputs->size(); ++i) {
    const json& e = (*outputs)[i];
    if (!e.is_string()) {
      return invalid(fmt::format("{}: output {} must be a value name, got {}", where, i, type_name(e)));
    }
    node.outputs.push_back(e.get<std::string>());
  }
  PLANRT_ASSIGN_OR_RETURN(const json* attrs, member(j, "attrs", json::value_t::object, where, false));
  if (attrs != nullptr) {
    for (const auto& item : attrs->items()) {
      PLANRT_ASSIGN_OR_RETURN(ir::AttrValue v,
                              to_attr(item.value(), fmt::format("{}: attribute '{}'", where, item.key())));
      node.attrs.emplace(item.key(), std::move(v));
    }
  }
  PLANRT_ASSIGN_OR_RETURN(const json* backend, member(j, "backend", json::value_t::string, where, false));
  if (backend != nullptr) {
    auto b = ir::parse_backend(backend->get<std::string>());
    if (!b.ok()) return invalid(fmt::format("{}: {}", where, b.status().message()));
    node.backend = *b;
  }
  PLANRT_ASSIGN_OR_RETURN(node.segment, get_string(j, "segment", where, false));
  PLANRT_ASSIGN_OR_RETURN(node.device, get_device(j, where));
  return node;
}

Result<ir::Method> read_method(const json& j, size_t index) {
  std::string where = fmt::format("method {}", index);
  if (!j.is_object()) return invalid(fmt::format("{}: must be an object, got {}", where, type_name(j)));
  ir::Method m;
  PLANRT_ASSIGN_OR_RETURN(m.name, get_string(j, "name", where, true));
  where = fmt::format("method '{}'", m.name);
  PLANRT_RETURN_IF_ERROR(check_keys(j, {"name", "backend", "device", "dims", "inputs", "outputs", "nodes"}, where));
  PLANRT_ASSIGN_OR_RETURN(std::string backend, get_string(j, "backend", where, false, "cpu"));
  auto b = ir::parse_backend(backend);
  if (!b.ok()) return invalid(fmt::format("{}: {}", where, b.status().message()));
  m.backend = *b;
  PLANRT_ASSIGN_OR_RETURN(m.device, get_device(j, where));

  PLANRT_ASSIGN_OR_RETURN(const json* dims, member(j, "dims", json::value_t::object, where, false));
  if (dims != nullptr) {
    for (const auto& item : dims->items()) {
      std::string dw = fmt::format("{}: dim '{}'", where, item.key());
      if (!item.value().is_object()) return invalid(fmt::format("{}: must be an object {{\"min\", \"max\"}}", dw));
      PLANRT_RETURN_IF_ERROR(check_keys(item.value(), {"min", "max"}, dw));
      ir::DimDecl d{item.key(), 0, 0};
      PLANRT_ASSIGN_OR_RETURN(const json* min, member(item.value(), "min", json::value_t::number_integer, dw, true));
      PLANRT_ASSIGN_OR_RETURN(const json* max, member(item.value(), "max", json::value_t::number_integer, dw, true));
      PLANRT_ASSIGN_OR_RETURN(d.min, to_int(*min, dw + ": min"));
      PLANRT_ASSIGN_OR_RETURN(d.max, to_int(*max, dw + ": max"));
      m.dims.push_back(std::move(d));
    }
  }
  PLANRT_ASSIGN_OR_RETURN(const json* inputs, member(j, "inputs", json::value_t::array, where, true));
  for (size_t i = 0; i < inputs->size(); ++i) {
    const json& e = (*inputs)[i];
    std::string iw = fmt::format("{}: input {}", where, i);
    if (!e.is_object()) return invalid(fmt::format("{}: must be an object {{\"name\", \"dtype\", \"shape\"}}", iw));
    PLANRT_RETURN_IF_ERROR(check_keys(e, {"name", "dtype", "shape"}, iw));
    ir::ValueDecl v;
    PLANRT_ASSIGN_OR_RETURN(v.name, get_string(e, "name", iw, true));
    iw = fmt::format("{}: input '{}'", where, v.name);
    PLANRT_ASSIGN_OR_RETURN(v.type.dtype, get_dtype(e, iw));
    PLANRT_ASSIGN_OR_RETURN(v.type.shape, get_shape(e, iw, &m.dims));
    m.inputs.push_back(std::move(v));
  }
  PLANRT_ASSIGN_OR_RETURN(const json* outputs, member(j, "outputs", json::value_t::array, where, true));
  for (size_t i = 0; i < outputs->size(); ++i) {
    if (!(*outputs)[i].is_string()) {
      return invalid(fmt::format("{}: output {} must be a value name, got {}", where, i, type_name((*outputs)[i])));
    }
    m.outputs.push_back((*outputs)[i].get<std::string>());
  }
  PLANRT_ASSIGN_OR_RETURN(const json* nodes, member(j, "nodes", json::value_t::array, where, true));
  for (size_t i = 0; i < nodes->size(); ++i) {
    PLANRT_ASSIGN_OR_RETURN(ir::Node node, read_node((*nodes)[i], fmt::format("{}, node {}", where, i)));
    m.nodes.push_back(std::move(node));
  }
  return m;
}

Result<ir::Constant> read_constant(const std::string& name, const json& j) {
  std::string where = fmt::format("constant '{}'", name);
  if (!j.is_object()) return invalid(fmt::format("{}: must be an object {{\"dtype\", \"shape\"}}", where));
  PLANRT_RETURN_IF_ERROR(check_keys(j, {"dtype", "shape", "init"}, where));
  ir::Constant c;
  c.name = name;
  PLANRT_ASSIGN_OR_RETURN(c.dtype, get_dtype(j, where));
  PLANRT_ASSIGN_OR_RETURN(ir::SymShape shape, get_shape(j, where, nullptr));
  for (const Dim& d : shape) c.shape.push_back(d.value);
  PLANRT_ASSIGN_OR_RETURN(std::string init, get_string(j, "init", where, false, "normal"));
  if (init == "normal") {
    c.init = ir::Init::Normal;
  } else if (init == "zeros") {
    c.init = ir::Init::Zeros;
  } else if (init == "ones") {
    c.init = ir::Init::Ones;
  } else {
    return invalid(fmt::format("{}: unknown init \"{}\" (accepted: normal, zeros, ones)", where, init));
  }
  return c;
}

Status read_compile_specs(const json& j, ir::Model& model) {
  for (const auto& backend : j.items()) {
    std::string where = fmt::format("compile_specs '{}'", backend.key());
    auto b = ir::parse_backend(backend.key());
    if (!b.ok()) return invalid(fmt::format("{}: {}", where, b.status().message()));
    if (!backend.value().is_object()) return invalid(fmt::format("{}: must be an object of key/value pairs", where));
    auto& specs = model.compile_specs[backend.key()];
    for (const auto& kv : backend.value().items()) {
      const json& v = kv.value();
      std::string text;
      if (v.is_string()) {
        text = v.get<std::string>();
      } else if (v.is_boolean() || v.is_number()) {
        text = v.dump();
      } else {
        return invalid(fmt::format("{}: value of \"{}\" must be a string, number or boolean", where, kv.key()));
      }
      specs.emplace_back(kv.key(), std::move(text));
    }
  }
  return {};
}

// Names read by nodes that no method defines: the constants a weights file must provide.
std::vector<std::string> referenced_constants(const ir::Model& model) {
  std::vector<std::string> out;
  std::set<std::string, std::less<>> seen;
  for (const ir::Method& m : model.methods) {
    std::set<std::string, std::less<>> values;
    for (const ir::ValueDecl& v : m.inputs) values.insert(v.name);
    for (const ir::Node& n : m.nodes) values.insert(n.outputs.begin(), n.outputs.end());
    for (const ir::Node& n : m.nodes) {
      for (const std::string& in : n.inputs) {
        if (!in.empty() && !values.contains(in) && seen.insert(in).second) out.push_back(in);
      }
    }
  }
  return out;
}

std::string join_path(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path.front() == '/' || base_dir.empty()) return path;
  return base_dir.back() == '/' ? base_dir + path : base_dir + "/" + path;
}

Status read_weights(const json& top, ir::Model& model, const std::string& base_dir,
                    const ReadOptions& options, bool declared_constants) {
  PLANRT_ASSIGN_OR_RETURN(const json* weights, member(top, "weights", json::value_t::object, "model", false));
  if (weights == nullptr) {
    if (declared_constants) return invalid("model: \"constants\" are declared but \"weights\" is missing");
    return ir::check_model(model);  // a node reading a constant is reported as missing
  }
  PLANRT_RETURN_IF_ERROR(check_keys(*weights, {"file", "random"}, "weights"));
  if (weights->contains("file") == weights->contains("random")) {
    return invalid("weights: give exactly one of \"file\" or \"random\"");
  }
  PLANRT_ASSIGN_OR_RETURN(const json* file, member(*weights, "file", json::value_t::string, "weights", false));
  if (file != nullptr) {
    std::vector<std::string> names = referenced_constants(model);
    PLANRT_RETURN_IF_ERROR(load_safetensors_weights(model, join_path(base_dir, file->get<std::string>()),
                                                    names, options.progress));
    return ir::check_model(model);
  }
  PLANRT_ASSIGN_OR_RETURN(const json* random, member(*weights, "random", json::value_t::object, "weights", true));
  PLANRT_RETURN_IF_ERROR(check_keys(*random, {"seed", "std"}, "weights.random"));
  RandomWeights spec;
  spec.max_bytes = options.max_random_weight_bytes;
  PLANRT_ASSIGN_OR_RETURN(const json* seed, member(*random, "seed", json::value_t::number_integer, "weights.random", false));
  if (seed != nullptr) {
    if (!seed->is_number_unsigned()) return invalid("weights.random: \"seed\" must be a non-negative integer");
    spec.seed = seed->get<uint64_t>();
  }
  PLANRT_ASSIGN_OR_RETURN(const json* std_dev, member(*random, "std", json::value_t::number_float, "weights.random", false));
  if (std_dev != nullptr) spec.std = std_dev->get<double>();
  if (!(spec.std >= 0)) return invalid(fmt::format("weights.random: \"std\" must be >= 0, got {}", spec.std));
  // Check before generating: a mistake in a large model is reported without the wait.
  PLANRT_RETURN_IF_ERROR(ir::check_model(model));
  return generate_random_weights(model, spec, options.progress);
}

Result<std::unique_ptr<ir::Model>> parse(std::string_view text, const std::string& base_dir,
                                         const ReadOptions& options) {
  json top;
  try {
    top = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    return make_error(ErrorCode::InvalidProgram, "invalid JSON (byte {}): {}", e.byte, e.what());
  }
  if (!top.is_object()) return invalid(fmt::format("model: the document must be an object, got {}", type_name(top)));
  PLANRT_RETURN_IF_ERROR(check_keys(top, {"format", "description", "weights", "constants", "methods", "compile_specs"}, "model"));
  PLANRT_ASSIGN_OR_RETURN(std::string format, get_string(top, "format", "model", true));
  if (format != kFormat) {
    return invalid(fmt::format("model: \"format\" is \"{}\", expected \"{}\"", format, kFormat));
  }
  auto model = std::make_unique<ir::Model>();
  PLANRT_ASSIGN_OR_RETURN(const json* constants, member(top, "constants", json::value_t::object, "model", false));
  if (constants != nullptr) {
    for (const auto& item : constants->items()) {
      PLANRT_ASSIGN_OR_RETURN(ir::Constant c, read_constant(item.key(), item.value()));
      model->constants.push_back(std::move(c));
    }
  }
  PLANRT_ASSIGN_OR_RETURN(const json* methods, member(top, "methods", json::value_t::array, "model", true));
  for (size_t i = 0; i < methods->size(); ++i) {
    PLANRT_ASSIGN_OR_RETURN(ir::Method m, read_method((*methods)[i], i));
    model->methods.push_back(std::move(m));
  }
  PLANRT_ASSIGN_OR_RETURN(const json* specs, member(top, "compile_specs", json::value_t::object, "model", false));
  if (specs != nullptr) PLANRT_RETURN_IF_ERROR(read_compile_specs(*specs, *model));
  PLANRT_RETURN_IF_ERROR(read_weights(top, *model, base_dir, options, constants != nullptr && !constants->empty()));
  return model;
}

}  // namespace

Result<Model> parse_model_json(std::string_view text, const std::string& base_dir, const ReadOptions& options) {
  try {
    PLANRT_ASSIGN_OR_RETURN(auto model, parse(text, base_dir, options));
    return Model(std::move(model));
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::OutOfMemory, "out of memory while reading the model description");
  } catch (const std::exception& e) {
    // Not expected (accesses are type-checked); kept so a JSON library surprise is an error.
    return make_error(ErrorCode::InvalidProgram, "model description: {}", e.what());
  }
}

Result<Model> read_model_json(const std::string& path, const ReadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::IoError, "cannot open model description '{}'", path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::IoError, "cannot read model description '{}'", path);
  std::string base_dir = ".";
  if (auto slash = path.rfind('/'); slash != std::string::npos) base_dir = path.substr(0, slash == 0 ? 1 : slash);
  auto model = parse_model_json(text.str(), base_dir, options);
  if (!model.ok()) return model.status().with_context(path);
  return model;
}

}  // namespace planrt::builder
