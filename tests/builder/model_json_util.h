// Building small one-method model descriptions in tests.
#pragma once

#include <string>

#include <fmt/format.h>

#include "builder/graph.h"
#include "planrt/format/program_generated.h"

namespace planrt::builder::btest {

struct OneMethod {
  std::string inputs = R"([{"name": "x", "dtype": "f32", "shape": ["S", 8]}])";
  std::string nodes;
  std::string outputs = R"(["y"])";
  std::string constants;  // the body of "constants", empty: none
  std::string dims = R"({"S": {"min": 1, "max": 16}})";
  std::string backend = "cpu";
  std::string extra;  // more keys of the method, each followed by a comma: R"("device": "cpu",)"

  std::string json() const {
    std::string weights = constants.empty()
                              ? ""
                              : fmt::format(R"("weights": {{"random": {{"seed": 3}}}}, "constants": {{{}}},)", constants);
    return fmt::format(R"({{"format": "planrt-model/1", {}
      "methods": [{{"name": "forward", "backend": "{}", {} "dims": {}, "inputs": {}, "outputs": {},
                    "nodes": [{}]}}]}})",
                       weights, backend, extra, dims, inputs, outputs, nodes);
  }
};

// "[1, S, 2*S]" from a lowered value's DimRefs.
inline std::string shape_of(const fb::MethodT& m, const fb::ValueT& v) {
  std::vector<ir::DimDecl> dims;
  for (const auto& d : m.dims) dims.push_back({d->name, d->min, d->max});
  ir::SymShape s;
  for (const fb::DimRef& d : v.shape) s.push_back(ir::Dim{d.value(), d.dim()});
  return ir::shape_to_string(s, dims);
}

}  // namespace planrt::builder::btest
