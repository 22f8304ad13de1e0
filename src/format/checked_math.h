// Overflow-checked unsigned arithmetic for sizes and offsets read from untrusted files.
//
// Every size or offset a file supplies goes through these before it is compared or used:
// a wrapped sum would turn an out-of-range read into one that passes its bounds check.
// Header-only, no state, thread-safe.
#pragma once

#include <cstdint>
#include <optional>

namespace planrt::format {

inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// True when [offset, offset + size) lies inside [0, limit), without overflowing.
inline bool range_within(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

// `value` rounded up to a multiple of `alignment` (a power of two); nullopt on overflow.
inline std::optional<uint64_t> align_up(uint64_t value, uint64_t alignment) {
  auto bumped = checked_add(value, alignment - 1);
  if (!bumped) return std::nullopt;
  return *bumped & ~(alignment - 1);
}

}  // namespace planrt::format
