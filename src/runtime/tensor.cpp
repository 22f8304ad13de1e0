#include "planrt/runtime/tensor.h"

#include <limits>

namespace planrt {

Result<Tensor> Tensor::zeros(DType dtype, const Shape& shape) {
  size_t nbytes = element_size(dtype);
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] < 0) {
      return make_error(ErrorCode::InvalidArgument, "shape {} has a negative dim",
                        shape.to_string());
    }
    auto d = static_cast<uint64_t>(shape[i]);
    if (d != 0 && nbytes > std::numeric_limits<size_t>::max() / d) {
      return make_error(ErrorCode::InvalidArgument, "a {} tensor of shape {} overflows size_t",
                        dtype_name(dtype), shape.to_string());
    }
    nbytes *= d;
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.nbytes_ = nbytes;
  Result<DeviceBuffer> buffer = DeviceBuffer::allocate(host_allocator(), nbytes, Device::cpu());
  if (!buffer.ok()) {
    return buffer.status().with_context(
        fmt::format("tensor {} {}", dtype_name(dtype), shape.to_string()));
  }
  t.buffer_ = std::move(buffer).value();
  if (nbytes != 0) std::memset(t.buffer_.data(), 0, nbytes);
  return t;
}

Result<Tensor> Tensor::from_view(const TensorView& view) {
  if (!view.device.is_cpu()) {
    return make_error(ErrorCode::InvalidArgument, "cannot copy a tensor on {} as a host tensor",
                      to_string(view.device));
  }
  if (!view.is_contiguous()) {
    return make_error(ErrorCode::InvalidArgument, "cannot copy a non-contiguous tensor {}",
                      view.sizes.to_string());
  }
  PLANRT_ASSIGN_OR_RETURN(Tensor t, zeros(view.dtype, view.sizes));
  if (t.nbytes_ != 0) {
    if (view.data == nullptr) {
      return make_error(ErrorCode::InvalidArgument, "tensor {} of {} bytes has no data",
                        view.sizes.to_string(), t.nbytes_);
    }
    std::memcpy(t.data(), view.data, t.nbytes_);
  }
  return t;
}

TensorView Tensor::view() const {
  return TensorView::contiguous(buffer_.data(), dtype_, shape_, Device::cpu());
}

Status Tensor::copy_to(const TensorView& dst) const {
  if (!dst.device.is_cpu() || !dst.is_contiguous()) {
    return make_error(ErrorCode::InvalidArgument,
                      "copy destination must be a contiguous host tensor (got {} on {})",
                      dst.sizes.to_string(), to_string(dst.device));
  }
  if (dst.dtype != dtype_ || !(dst.sizes == shape_)) {
    return make_error(ErrorCode::InvalidArgument,
                      "copy destination is {} {}, the tensor is {} {}", dtype_name(dst.dtype),
                      dst.sizes.to_string(), dtype_name(dtype_), shape_.to_string());
  }
  if (nbytes_ == 0) return {};
  if (dst.data == nullptr) {
    return make_error(ErrorCode::InvalidArgument, "copy destination {} of {} bytes has no data",
                      dst.sizes.to_string(), nbytes_);
  }
  std::memcpy(dst.data, buffer_.data(), nbytes_);
  return {};
}

}  // namespace planrt
