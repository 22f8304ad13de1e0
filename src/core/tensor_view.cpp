#include "planrt/core/tensor_view.h"

#include <fmt/ranges.h>

namespace planrt {

Shape::Shape(std::initializer_list<int64_t> dims) {
  // More than kMaxRank dims is a programming error in a literal; keep the first kMaxRank.
  for (int64_t d : dims) {
    if (rank_ == kMaxRank) break;
    dims_[rank_++] = d;
  }
}

Result<Shape> Shape::from(std::span<const int64_t> dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return make_error(ErrorCode::OutOfRange, "rank {} exceeds the maximum rank {}", dims.size(),
                      kMaxRank);
  }
  Shape s;
  for (int64_t d : dims) s.dims_[s.rank_++] = d;
  return s;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

Status Shape::push_back(int64_t d) {
  if (rank_ == kMaxRank) {
    return make_error(ErrorCode::OutOfRange, "rank exceeds the maximum rank {}", kMaxRank);
  }
  dims_[rank_++] = d;
  return {};
}

std::string Shape::to_string() const { return fmt::format("[{}]", fmt::join(dims(), ", ")); }

bool operator==(const Shape& a, const Shape& b) {
  if (a.rank_ != b.rank_) return false;
  for (int i = 0; i < a.rank_; ++i) {
    if (a.dims_[i] != b.dims_[i]) return false;
  }
  return true;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides = shape;
  int64_t s = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

TensorView TensorView::contiguous(void* data, DType dtype, const Shape& sizes, Device device) {
  TensorView v;
  v.dtype = dtype;
  v.sizes = sizes;
  v.strides = contiguous_strides(sizes);
  v.data = data;
  v.device = device;
  return v;
}

bool TensorView::is_contiguous() const { return strides == contiguous_strides(sizes); }

}  // namespace planrt
