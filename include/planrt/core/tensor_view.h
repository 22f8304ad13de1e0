// TensorView: a non-owning description of a tensor in memory.
//
// It owns nothing: whoever hands one out keeps the memory alive for as long as the view
// is used. Sizes and strides are in elements. A "none" view (data == nullptr and
// dtype/rank unset) stands for an absent optional operand (a linear without bias).
//
// Thread safety: Shape and TensorView are plain values; copy and share them freely. A view
// does nothing to synchronize the memory it points to: whoever writes that memory orders the
// threads that read it (for the views a Method hands out, see method.h).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "planrt/core/device.h"
#include "planrt/core/dtype.h"

namespace planrt {

inline constexpr int kMaxRank = 8;

// A fixed-capacity shape: no allocation, cheap to copy into kernels.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  static Result<Shape> from(std::span<const int64_t> dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  // Negative index counts from the end, as PyTorch does: size(-1) is the last dim.
  int64_t size(int i) const { return dims_[i < 0 ? i + rank_ : i]; }
  int64_t numel() const;
  std::span<const int64_t> dims() const { return {dims_.data(), static_cast<size_t>(rank_)}; }
  // Fails past kMaxRank.
  Status push_back(int64_t d);
  std::string to_string() const;  // "[1, 2048, 512]"

  friend bool operator==(const Shape& a, const Shape& b);

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// Row-major strides for `shape`.
Shape contiguous_strides(const Shape& shape);

struct TensorView {
  DType dtype = DType::F32;
  Shape sizes;
  Shape strides;  // elements; contiguous_strides(sizes) for every tensor the runtime hands out
  void* data = nullptr;
  Device device = Device::cpu();

  static TensorView none() { return TensorView{}; }
  static TensorView contiguous(void* data, DType dtype, const Shape& sizes,
                               Device device = Device::cpu());

  bool is_none() const { return data == nullptr && sizes.rank() == 0; }
  int rank() const { return sizes.rank(); }
  int64_t numel() const { return sizes.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype); }
  bool is_contiguous() const;

  template <typename T>
  T* data_as() const { return static_cast<T*>(data); }
};

}  // namespace planrt
