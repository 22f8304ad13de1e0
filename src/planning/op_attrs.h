// Parses an instruction's attributes (program.fbs Attr) into kernels::OpAttrs. One parse
// for every reader of a program's instructions: load_method (once per kernel instruction,
// at load), the backends that run segment graphs, and the engine scratch planner, which
// must see the attributes the kernels will see (the attention's `fused` decides its
// workspace, kernels/workspace.h). Pure and thread-safe.
#pragma once

#include "kernels/kernel.h"
#include "planrt/format/program_generated.h"

namespace planrt::planning {

// InvalidProgram naming the attribute for an unknown attribute type.
Result<kernels::OpAttrs> parse_op_attrs(const fb::Instruction& instruction);

}  // namespace planrt::planning
