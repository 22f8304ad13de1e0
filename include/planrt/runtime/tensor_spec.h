// Symbolic tensor shapes as a program states them: each dim is a constant or a multiple of
// a named dynamic dim with bounds (docs/program-format.md, "Values and shapes").
//
// Thread safety: plain value types, safe to copy and to share between threads; the functions
// are pure and may be called from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "planrt/core/dtype.h"
#include "planrt/core/result.h"
#include "planrt/core/tensor_view.h"

namespace planrt {

// A named dynamic dimension of a method and its inclusive bounds.
struct DimSpec {
  std::string name;
  int64_t min = 0;
  int64_t max = 0;
};

// dim < 0: the constant `value`; otherwise value * dims[dim] at run time.
struct DimRef {
  int64_t value = 0;
  int32_t dim = -1;
  bool is_static() const { return dim < 0; }
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  std::vector<DimRef> shape;
};

// "[1, S, 512]", "[2*S]" with the dim names of `dims` (an index out of range prints "?").
std::string shape_string(std::span<const DimRef> shape, std::span<const DimSpec> dims);

// Binds the named dims `shape` refers to from the concrete sizes `actual` (what execute
// does with each input, and what a backend does with its segment's operands). `bound` has
// one entry per entry of `dims`, -1 while unbound; this fills the ones `shape` determines.
// `what` names the tensor in errors ("input 'x'"). Errors: InvalidArgument for a rank or
// static-dim mismatch, a size that is not a multiple of its multiplier, or a dim that
// disagrees with an earlier binding; OutOfRange for a dim outside its bounds (naming
// the tensor, dim, value and bounds); InvalidProgram for a malformed DimRef.
Status bind_dims(std::span<const DimRef> shape, const Shape& actual, std::span<const DimSpec> dims,
                 std::string_view what, std::span<int64_t> bound);

// The concrete shape of `shape` under `bound`. InvalidArgument naming the dim when `shape`
// refers to one still unbound; InvalidProgram for a malformed DimRef or rank over kMaxRank.
Result<Shape> concrete_shape(std::span<const DimRef> shape, std::span<const int64_t> bound,
                             std::span<const DimSpec> dims);

}  // namespace planrt
