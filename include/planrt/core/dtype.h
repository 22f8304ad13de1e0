// DType: the element types a tensor can hold.
//
// Thread safety: plain values and pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "planrt/core/result.h"

namespace planrt {

// U8 and Bool are one byte each; a Bool element is 0 or 1 (kernels write nothing else and read
// any non-zero byte as true), as NumPy's and PyTorch's bool.
enum class DType : uint8_t { F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I64 = 4, U8 = 5, Bool = 6 };
inline constexpr int kNumDTypes = 7;

size_t element_size(DType dtype);
// "f32", "f16", "bf16", "i32", "i64", "u8", "bool": the names the model format and the CLI use.
std::string_view dtype_name(DType dtype);
Result<DType> parse_dtype(std::string_view name);
bool is_floating(DType dtype);
bool is_integer(DType dtype);  // i32, i64, u8 (not bool)

// Conversions for the 16-bit float types, rounding to nearest even (NaN stays NaN), for
// callers that hold f32 data and feed f16 or bf16 tensors (and back: bf16 widens exactly).
uint16_t f32_to_f16_bits(float value);
uint16_t f32_to_bf16_bits(float value);
float bf16_bits_to_f32(uint16_t bits);
float f16_bits_to_f32(uint16_t bits);  // exact

}  // namespace planrt
