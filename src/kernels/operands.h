// The words and shape arithmetic every back end's kernels share, so that one bad call reads
// the same whichever back end runs it: "<op>: <what is wrong> (<operand shapes>)".
//
// Nothing here knows about devices or about which dtypes a back end implements; those
// checks stay with each back end (cpu/checks.h, cuda/checks.h). Error codes: a shape, rank,
// count or attribute value that cannot work is InvalidArgument. All functions are pure and
// thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "kernels/kernel.h"

namespace planrt::kernels {

// The name error messages use for input `index` of `op` ("x", "weight", "xs[2]").
std::string input_role(std::string_view op, size_t index);

// "x [2, 3], weight [4, 3]": every present input with its role and shape.
std::string describe_inputs(std::string_view op, std::span<const TensorView> inputs);

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

// Broadcasting follows PyTorch: shapes align on the right; each pair of dims is equal or one
// of them is 1.
//
// The broadcast shape of `a` and `b`; InvalidArgument naming both when they do not broadcast.
Result<Shape> broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);

// Strides, in elements, that read a contiguous tensor of shape `in` at each index of `out`:
// 0 along the dims `in` broadcasts (size 1 or missing). `in` must broadcast to `out`.
Shape broadcast_strides(const Shape& in, const Shape& out);

// `shape` without its last `count` dims (count <= rank).
Shape drop_last(const Shape& shape, int count);

}  // namespace planrt::kernels
