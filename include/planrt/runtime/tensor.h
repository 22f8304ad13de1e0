// Tensor: an owned, contiguous host tensor. execute() returns its outputs as Tensors, and
// callers may build inputs with one (view() gives the TensorView execute takes).
//
// Ownership: move-only; the bytes come from the built-in host allocator (64-byte aligned)
// and are released with the Tensor. view() is valid while the Tensor lives.
// Thread safety: that of a plain owner: several threads may call the const members and read
// the bytes at once; writing the bytes (through data() or values()), moving or destroying a
// Tensor must not race with any other use of it.
// Errors: allocation failure (OutOfMemory with the byte count), a negative dim or a size
// overflow (InvalidArgument), and from_view/copy_to on a non-host or non-contiguous view.
#pragma once

#include <cstring>
#include <span>
#include <vector>

#include "planrt/core/result.h"
#include "planrt/core/tensor_view.h"
#include "planrt/platform/device_buffer.h"

namespace planrt {

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled.
  static Result<Tensor> zeros(DType dtype, const Shape& shape);
  // A copy of `view`, which must be a contiguous host tensor.
  static Result<Tensor> from_view(const TensorView& view);
  // A copy of `values`, which must hold shape.numel() elements of T matching `dtype`'s size.
  template <typename T>
  static Result<Tensor> from_values(DType dtype, const Shape& shape, std::span<const T> values) {
    if (sizeof(T) != element_size(dtype)) {
      return make_error(ErrorCode::InvalidArgument, "{}-byte values cannot fill a {} tensor",
                        sizeof(T), dtype_name(dtype));
    }
    PLANRT_ASSIGN_OR_RETURN(Tensor t, zeros(dtype, shape));
    if (values.size() != static_cast<size_t>(shape.numel())) {
      return make_error(ErrorCode::InvalidArgument, "{} values cannot fill shape {} ({} elements)",
                        values.size(), shape.to_string(), shape.numel());
    }
    if (!values.empty()) std::memcpy(t.data(), values.data(), t.nbytes());
    return t;
  }

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return nbytes_; }
  void* data() const { return buffer_.data(); }
  TensorView view() const;

  template <typename T>
  std::span<T> values() const {
    return {static_cast<T*>(buffer_.data()), nbytes_ / sizeof(T)};
  }

  // Copies into `dst`, a contiguous host view of the same dtype and shape.
  Status copy_to(const TensorView& dst) const;

 private:
  DType dtype_ = DType::F32;
  Shape shape_;
  size_t nbytes_ = 0;
  DeviceBuffer buffer_;
};

}  // namespace planrt
