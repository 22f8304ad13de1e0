// value_max_nbytes (declared in program_file.h): the planned size of a value.
#include <algorithm>
#include <cstdint>

#include "format/checked_math.h"
#include "format/fb_types.h"
#include "format/program_file.h"

namespace planrt::format {

Result<uint64_t> value_max_nbytes(const fb::Value& value,
                                  const flatbuffers::Vector<flatbuffers::Offset<fb::DimSpec>>* dims) {
  auto dtype = to_dtype(value.dtype());
  if (!dtype) {
    return make_error(ErrorCode::InvalidProgram, "unknown dtype {}", static_cast<int>(value.dtype()));
  }
  uint64_t size = element_size(*dtype);
  // The product of the dims with a zero counted as one: the byte stride of the outermost
  // dim. A zero dim makes the size 0 but not the strides of the others: [0, 2^60, 16]
  // overflowed contiguous_strides (tests/fuzz/regressions/program).
  uint64_t stride_span = size;
  const auto* shape = value.shape();
  if (shape == nullptr) return size;  // a scalar
  const uint32_t num_dims = dims ? dims->size() : 0;
  for (uint32_t i = 0; i < shape->size(); ++i) {
    const fb::DimRef* ref = shape->Get(i);
    int64_t extent = 0;
    if (ref->dim() < 0) {
      extent = ref->value();
    } else {
      if (static_cast<uint32_t>(ref->dim()) >= num_dims) {
        return make_error(ErrorCode::InvalidProgram,
                          "shape entry {} refers to dim {} but the method has {} dims", i,
                          ref->dim(), num_dims);
      }
      const fb::DimSpec* spec = dims->Get(static_cast<uint32_t>(ref->dim()));
      if (ref->value() < 0 || spec->max() < 0 ||
          __builtin_mul_overflow(ref->value(), spec->max(), &extent)) {
        return make_error(ErrorCode::InvalidProgram,
                          "shape entry {} ({} x dim '{}' at max {}) is negative or overflows", i,
                          ref->value(), spec->name()->string_view(), spec->max());
      }
    }
    if (extent < 0) {
      return make_error(ErrorCode::InvalidProgram, "shape entry {} is negative ({})", i, extent);
    }
    auto next = checked_mul(size, static_cast<uint64_t>(extent));
    auto span = checked_mul(stride_span, static_cast<uint64_t>(std::max<int64_t>(extent, 1)));
    if (!next || !span || *span > static_cast<uint64_t>(INT64_MAX)) {
      return make_error(ErrorCode::InvalidProgram,
                        "size (or, with a zero dim, a stride) overflows 64 bits at shape entry {}", i);
    }
    size = *next;
    stride_span = *span;
  }
  return size;
}

}  // namespace planrt::format
