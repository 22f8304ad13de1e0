#include "planrt/runtime/tensor_spec.h"

#include <fmt/format.h>

namespace planrt {
namespace {

std::string_view dim_name(std::span<const DimSpec> dims, int32_t dim) {
  if (dim < 0 || static_cast<size_t>(dim) >= dims.size()) return "?";
  return dims[static_cast<size_t>(dim)].name;
}

// A DimRef the arithmetic below can trust: a dim index in range and a positive multiplier.
Status check_ref(const DimRef& r, std::span<const DimSpec> dims, size_t position) {
  if (r.is_static()) {
    if (r.value < 0) {
      return make_error(ErrorCode::InvalidProgram, "dim {} is the negative constant {}", position,
                        r.value);
    }
    return {};
  }
  if (static_cast<size_t>(r.dim) >= dims.size()) {
    return make_error(ErrorCode::InvalidProgram,
                      "dim {} refers to named dim {}, but the method has {} named dims", position,
                      r.dim, dims.size());
  }
  if (r.value <= 0) {
    return make_error(ErrorCode::InvalidProgram, "dim {} has the non-positive multiplier {}",
                      position, r.value);
  }
  return {};
}

}  // namespace

std::string shape_string(std::span<const DimRef> shape, std::span<const DimSpec> dims) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) out += ", ";
    const DimRef& r = shape[i];
    if (r.is_static()) {
      out += std::to_string(r.value);
    } else if (r.value == 1) {
      out += dim_name(dims, r.dim);
    } else {
      out += fmt::format("{}*{}", r.value, dim_name(dims, r.dim));
    }
  }
  return out + "]";
}

Status bind_dims(std::span<const DimRef> shape, const Shape& actual, std::span<const DimSpec> dims,
                 std::string_view what, std::span<int64_t> bound) {
  if (bound.size() != dims.size()) {
    return make_error(ErrorCode::Internal, "{}: {} bound slots for {} named dims", what,
                      bound.size(), dims.size());
  }
  if (static_cast<size_t>(actual.rank()) != shape.size()) {
    return make_error(ErrorCode::InvalidArgument, "{} has rank {}, expected rank {} {}", what,
                      actual.rank(), shape.size(), shape_string(shape, dims));
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    const DimRef& r = shape[i];
    PLANRT_RETURN_IF_ERROR(check_ref(r, dims, i).with_context(what));
    int64_t size = actual[static_cast<int>(i)];
    if (r.is_static()) {
      if (size != r.value) {
        return make_error(ErrorCode::InvalidArgument, "{} has size {} at dim {}, expected {} {}",
                          what, size, i, r.value, shape_string(shape, dims));
      }
      continue;
    }
    const DimSpec& spec = dims[static_cast<size_t>(r.dim)];
    if (size < 0 || size % r.value != 0) {
      return make_error(ErrorCode::InvalidArgument,
                        "{} has size {} at dim {}, which is not a multiple of {} ({} {})", what,
                        size, i, r.value, spec.name, shape_string(shape, dims));
    }
    int64_t value = size / r.value;
    if (value < spec.min || value > spec.max) {
      return make_error(ErrorCode::OutOfRange,
                        "{} dim {}: {} = {} is outside its bounds [{}, {}]", what, i, spec.name,
                        value, spec.min, spec.max);
    }
    int64_t& slot = bound[static_cast<size_t>(r.dim)];
    if (slot >= 0 && slot != value) {
      return make_error(ErrorCode::InvalidArgument,
                        "{} dim {} gives {} = {}, but an earlier tensor gave {} = {}", what, i,
                        spec.name, value, spec.name, slot);
    }
    slot = value;
  }
  return {};
}

Result<Shape> concrete_shape(std::span<const DimRef> shape, std::span<const int64_t> bound,
                             std::span<const DimSpec> dims) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    return make_error(ErrorCode::InvalidProgram, "rank {} exceeds the maximum rank {}",
                      shape.size(), kMaxRank);
  }
  Shape out;
  for (size_t i = 0; i < shape.size(); ++i) {
    const DimRef& r = shape[i];
    PLANRT_RETURN_IF_ERROR(check_ref(r, dims, i));
    int64_t size = r.value;
    if (!r.is_static()) {
      auto d = static_cast<size_t>(r.dim);
      if (d >= bound.size() || bound[d] < 0) {
        return make_error(ErrorCode::InvalidArgument, "named dim {} is not bound",
                          dim_name(dims, r.dim));
      }
      if (__builtin_mul_overflow(r.value, bound[d], &size)) {
        return make_error(ErrorCode::InvalidProgram, "dim {} ({} * {}) overflows", i, r.value,
                          dim_name(dims, r.dim));
      }
    }
    PLANRT_RETURN_IF_ERROR(out.push_back(size));
  }
  return out;
}

}  // namespace planrt
