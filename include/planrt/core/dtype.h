// DType: the element types a tensor can hold.
//
// Thread safety: plain values and pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "planrt/core/result.h"

namespace planrt {

enum class DType : uint8_t { F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I64 = 4 };
inline constexpr int kNumDTypes = 5;

size_t element_size(DType dtype);
// "f32", "f16", "bf16", "i32", "i64": the names the model format and the CLI use.
std::string_view dtype_name(DType dtype);
Result<DType> parse_dtype(std::string_view name);
bool is_floating(DType dtype);

}  // namespace planrt
