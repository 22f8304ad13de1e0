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

// Conversions for the 16-bit float types, rounding to nearest even (NaN stays NaN), for
// callers that hold f32 data and feed f16 or bf16 tensors (and back: bf16 widens exactly).
uint16_t f32_to_f16_bits(float value);
uint16_t f32_to_bf16_bits(float value);
float bf16_bits_to_f32(uint16_t bits);

}  // namespace planrt
