// model_to_json (builder.h): the IR written back as docs/model-format.md describes it, so
// that json_reader.cpp reads the same model (a test holds the round trip).
#include <nlohmann/json.hpp>

#include "builder/graph.h"
#include "planrt/builder/builder.h"

namespace planrt::builder {
namespace {

using nlohmann::json;

json shape_json(const ir::SymShape& shape, const std::vector<ir::DimDecl>& dims) {
  json out = json::array();
  for (const ir::Dim& d : shape) {
    if (d.is_static()) {
      out.push_back(d.value);
    } else {
      out.push_back(dims[static_cast<size_t>(d.dim)].name);  // multipliers are 1 in inputs
    }
  }
  return out;
}

json attr_json(const ir::AttrValue& v) {
  return std::visit(
      [](const auto& x) -> json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, ir::ShapeSpec>) {
          json arr = json::array();
          for (const ir::ShapeItem& item : x) {
            if (item.name.empty()) arr.push_back(item.value);
            else arr.push_back(item.name);
          }
          return arr;
        } else {
          return json(x);
        }
      },
      v);
}

}  // namespace

Result<std::string> model_to_json(const Model& model, std::string_view weights_file) {
  const ir::Model& m = model.graph();
  json j;
  j["format"] = "planrt-model/1";
  if (!m.constants.empty()) j["weights"] = {{"file", std::string(weights_file)}};
  json methods = json::array();
  for (const ir::Method& method : m.methods) {
    json jm;
    jm["name"] = method.name;
    jm["backend"] = std::string(ir::backend_name(method.backend));
    if (method.device) jm["device"] = to_string(*method.device);
    json dims = json::object();
    for (const ir::DimDecl& d : method.dims) dims[d.name] = {{"min", d.min}, {"max", d.max}};
    jm["dims"] = dims;
    json inputs = json::array();
    for (const ir::ValueDecl& v : method.inputs) {
      for (const ir::Dim& d : v.type.shape) {
        if (!d.is_static() && d.value != 1) {
          return make_error(ErrorCode::NotSupported,
                            "method '{}' input '{}': a shape entry {} x dim cannot be written in "
                            "the model format (it names dims, not multiples of them)",
                            method.name, v.name, d.value);
        }
      }
      inputs.push_back({{"name", v.name},
                        {"dtype", std::string(dtype_name(v.type.dtype))},
                        {"shape", shape_json(v.type.shape, method.dims)}});
    }
    jm["inputs"] = inputs;
    jm["outputs"] = method.outputs;
    json nodes = json::array();
    for (const ir::Node& n : method.nodes) {
      json jn;
      jn["op"] = n.op;
      json ins = json::array();
      for (const std::string& in : n.inputs) ins.push_back(in.empty() ? json(nullptr) : json(in));
      jn["inputs"] = ins;
      jn["outputs"] = n.outputs;
      if (!n.attrs.empty()) {
        json attrs = json::object();
        for (const auto& [name, value] : n.attrs) attrs[name] = attr_json(value);
        jn["attrs"] = attrs;
      }
      if (n.backend) jn["backend"] = std::string(ir::backend_name(*n.backend));
      if (!n.segment.empty()) jn["segment"] = n.segment;
      if (n.device) jn["device"] = to_string(*n.device);
      nodes.push_back(std::move(jn));
    }
    jm["nodes"] = nodes;
    methods.push_back(std::move(jm));
  }
  j["methods"] = methods;
  if (!m.compile_specs.empty()) {
    json specs = json::object();
    for (const auto& [backend, kvs] : m.compile_specs) {
      json kv = json::object();
      for (const auto& [k, v] : kvs) kv[k] = v;
      specs[backend] = kv;
    }
    j["compile_specs"] = specs;
  }
  return j.dump(1);
}

}  // namespace planrt::builder
