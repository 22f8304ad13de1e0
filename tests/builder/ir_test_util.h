// Building IR methods node by node in the rewrite tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "builder/graph.h"

namespace planrt::builder::btest {

inline ir::Node node(std::string op, std::vector<std::string> inputs, std::string output, ir::Attrs attrs = {}) {
  ir::Node n;
  n.op = std::move(op);
  n.inputs = std::move(inputs);
  n.outputs = {std::move(output)};
  n.attrs = std::move(attrs);
  return n;
}

inline std::vector<std::string> ops(const ir::Method& m) {
  std::vector<std::string> out;
  for (const ir::Node& n : m.nodes) out.push_back(n.op);
  return out;
}

}  // namespace planrt::builder::btest
