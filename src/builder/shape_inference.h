// Shape and dtype inference for one node, with PyTorch's semantics (docs/design.md §9).
//
// The op table (kernels/kernel.h find_op) is the one list of ops and their operand counts;
// this file holds, per op, the attributes it accepts and how its output types follow from
// its operands. An op in the table without a rule here is reported as such, never guessed.
//
// infer_node also returns the attributes as the program carries them: dims normalized to
// non-negative, slice bounds clamped, reshape's target resolved (docs/model-format.md).
// Errors say what is wrong with the operands or attributes, naming them; the caller
// prefixes the method and node. Pure function, thread-safe.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "builder/graph.h"
#include "planrt/core/result.h"

namespace planrt::builder::ir {

struct Operand {
  std::string_view name;            // the value or constant name, for errors
  const TensorType* type = nullptr; // nullptr: an absent optional operand
};

struct InferredNode {
  std::vector<TensorType> outputs;
  Attrs attrs;  // as emitted into the program
};

// `operands` already has the op's arity (the caller checked it against the op table).
Result<InferredNode> infer_node(std::string_view op, std::span<const Operand> operands,
                                const Attrs& attrs, std::span<const DimDecl> dims);

bool has_shape_rule(std::string_view op);

}  // namespace planrt::builder::ir
