// Validation of a Model: names, op arities (kernels/kernel.h op table), shapes and dtypes.
//
// check_method walks a method's nodes in order and infers every value's type, so a value
// is known before it is read; what it returns is what partitioning and lowering build on.
// Errors name the method, the node (index, op, first output) and what is wrong: an unknown
// op, a wrong operand count, a value used before it is defined, a missing constant, a
// duplicate name, a shape or dtype mismatch, a bad dim declaration, a backend/device that
// does not fit. Pure functions, thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "builder/graph.h"
#include "builder/shape_inference.h"
#include "planrt/core/result.h"

namespace planrt::builder::ir {

struct CheckedNode {
  std::vector<TensorType> outputs;
  Attrs attrs;  // as emitted (shape_inference.h)
  Backend backend = Backend::Cpu;
  Device device;
};

struct CheckedMethod {
  std::map<std::string, TensorType, std::less<>> values;  // inputs and node outputs
  std::vector<CheckedNode> nodes;                         // one per node
};

Result<CheckedMethod> check_method(const Model& model, const Method& method);
// Constants and every method; method names unique, at least one method.
Status check_model(const Model& model);

}  // namespace planrt::builder::ir
