// How a CUDA device places allocations, as measured (bench/results/malloc_granularity.jsonl,
// H200, CUDA 13): cudaMalloc rounds an allocation above kPackedAtOrBelow up to whole
// kDevicePageBytes pages and packs smaller ones into shared pages. One place for the figures
// that the weight cache packs by (backends/cuda/weight_cache.h) and the memory estimate
// predicts with (MemoryEstimate::page_rounding_bytes), so the two cannot drift apart.
// Private to src/; no CUDA header.
#pragma once

#include <cstdint>

namespace planrt::device_pages {

inline constexpr uint64_t kDevicePageBytes = uint64_t{2} << 20;
inline constexpr uint64_t kPackedAtOrBelow = uint64_t{1} << 20;
// Alignment of constants packed into one allocation (any kernel's vector loads).
inline constexpr uint64_t kPackedAlignment = 256;

inline constexpr uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// What one allocation of `n` bytes takes beyond `n`.
inline constexpr uint64_t page_rounding(uint64_t n) {
  return n > kPackedAtOrBelow ? round_up(n, kDevicePageBytes) - n : 0;
}

}  // namespace planrt::device_pages
