// What the two halves of build-time folding share (fold_known.cpp: known tensors; fold.cpp:
// symbolic vectors, ranges and windows, and the dispatch). Internal to the importer.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "importers/onnx/importer.h"

namespace planrt::importers::onnx::fold {

// Elementwise folding converts to 64-bit values; larger constants are not folded that way.
inline constexpr int64_t kMaxFoldElements = int64_t{1} << 24;

// A known or symbolic integer vector's entries as dim expressions.
std::vector<SymInt> sym_of(const Value& v);
Value make_known(Tensor t);
// A symbolic vector, or a known one when every entry is a constant.
Value make_sym(Elem elem, std::vector<SymInt> entries, bool scalar);

// The element count, or INT64_MAX when it overflows.
int64_t numel_of(const std::vector<int64_t>& shape);
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape);
// NumPy broadcasting of static shapes.
Result<std::vector<int64_t>> broadcast(const std::vector<std::vector<int64_t>>& shapes);
// The offset into a tensor of `shape` broadcast to `out` for the flat output index i.
int64_t broadcast_offset(int64_t i, const std::vector<int64_t>& out, const std::vector<int64_t>& shape);
// A tensor of `out_shape` whose element i is x's element source_of(i), bytes moved as they are.
Tensor gather_bytes(const Tensor& x, std::vector<int64_t> out_shape,
                    const std::function<int64_t(int64_t)>& source_of);

bool all_known(const OpContext& c);
bool all_build_time(const OpContext& c);
Result<int64_t> norm_axis(const OpContext& c, int64_t axis, int64_t rank);
Status too_large(const OpContext& c, int64_t n);

Result<Value> fold_constant(const OpContext& c);
// The node over known inputs; false when the op has no rule here.
Result<bool> fold_known(OpContext& c);

}  // namespace planrt::importers::onnx::fold
