// The operand checks of the CPU back end: what it can run (CPU memory, contiguous views, f32
// arithmetic). What an op's shapes and attributes must be is the same on every back end and
// lives in kernels/op_plans.h; the shared wording in kernels/operands.h.
//
// Error codes: a count or an operand the kernel cannot read is InvalidArgument; an input
// dtype the CPU kernel has no implementation for is NotSupported. All functions are pure and
// thread-safe.
#pragma once

#include <span>
#include <string_view>

#include "kernels/kernel.h"
#include "kernels/operands.h"

namespace planrt::kernels::cpu {

// The first check of every kernel: operand counts as the op table says, required operands
// present, and every present operand a contiguous CPU tensor with non-negative sizes whose
// data pointer is set when it holds bytes.
Status check_operands(std::string_view op, std::span<const TensorView> inputs,
                      std::span<const TensorView> outputs);

// NotSupported unless `view` is f32 (the arithmetic kernels are f32 only).
Status require_f32(std::string_view op, std::string_view role, const TensorView& view);

// Every f32-only op: each present input must be f32 (NotSupported otherwise).
Status require_f32_inputs(std::string_view op, std::span<const TensorView> inputs);

// BLAS takes int dims; NotSupported when one does not fit.
Status check_blas_dim(std::string_view op, std::string_view what, int64_t value);

}  // namespace planrt::kernels::cpu
