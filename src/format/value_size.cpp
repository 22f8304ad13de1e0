// value_max_nbytes (declared in program_file.h): the planned size of a value.
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
    if (!next) {
      return make_error(ErrorCode::InvalidProgram, "size overflows 64 bits at shape entry {}", i);
    }
    size = *next;
  }
  return size;
}

}  // namespace planrt::format
