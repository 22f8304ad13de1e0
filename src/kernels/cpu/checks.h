// Operand checks shared by every CPU kernel, so that each op reports a bad call in the same
// words: "<op>: <what is wrong> (<operand shapes>)".
//
// Error codes: a shape, rank, count or attribute value that cannot work is InvalidArgument;
// an input dtype the CPU kernel has no implementation for is NotSupported. All functions
// are pure and thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "kernels/kernel.h"

namespace planrt::kernels::cpu {

// The name error messages use for input `index` of `op` ("x", "weight", "xs[2]").
std::string input_role(std::string_view op, size_t index);

// "x [2, 3], weight [4, 3]": every present input with its role and shape.
std::string describe_inputs(std::string_view op, std::span<const TensorView> inputs);

// The first check of every kernel: operand counts as the op table says, required operands
// present, and every present operand a contiguous CPU tensor with non-negative sizes whose
// data pointer is set when it holds bytes.
Status check_operands(std::string_view op, std::span<const TensorView> inputs,
                      std::span<const TensorView> outputs);

// NotSupported unless `view` is f32 (the arithmetic kernels are f32 only).
Status require_f32(std::string_view op, std::string_view role, const TensorView& view);

// Every f32-only op: each present input must be f32 (NotSupported otherwise).
Status require_f32_inputs(std::string_view op, std::span<const TensorView> inputs);

// InvalidArgument unless the output has `dtype` and `shape`; the message lists the inputs.
Status check_output(std::string_view op, std::span<const TensorView> inputs, const TensorView& out,
                    DType dtype, const Shape& shape);

// A dim attribute in [-rank, rank) mapped to [0, rank). A scalar (rank 0) accepts -1 and 0
// as PyTorch does, mapped to 0.
Result<int> normalize_dim(std::string_view op, std::string_view attr, int64_t dim, int rank);

// Attribute results with the op named in the error.
template <typename T>
Result<T> with_op(std::string_view op, Result<T> result) {
  if (result.ok()) return result;
  return result.status().with_context(op);
}

// BLAS takes int dims; NotSupported when one does not fit.
Status check_blas_dim(std::string_view op, std::string_view what, int64_t value);

}  // namespace planrt::kernels::cpu
