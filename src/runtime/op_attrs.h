// Parses an instruction's attributes (program.fbs Attr) into kernels::OpAttrs, once at load
// time. Shared by load_method and by backends that run segment graphs with the CPU kernels.
#pragma once

#include "kernels/kernel.h"
#include "planrt/format/program_generated.h"

namespace planrt::runtime_detail {

// InvalidProgram naming the attribute for an unknown attribute type.
Result<kernels::OpAttrs> parse_op_attrs(const fb::Instruction& instruction);

}  // namespace planrt::runtime_detail
