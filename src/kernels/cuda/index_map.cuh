// Device-side walk of a launch::IndexMap, shared by the .cu files: element i of the
// row-major output maps to an offset in each operand. Kept out of launch.h so that the
// host-only translation units never see device code.
#pragma once

#include <cstdint>

#include "kernels/cuda/launch.h"

namespace planrt::kernels::cuda::launch {

// Offsets of output element i in operands a and b.
__device__ __forceinline__ void map_offsets(int64_t i, const IndexMap& map, int64_t* oa,
                                            int64_t* ob) {
  int64_t a = 0;
  int64_t b = 0;
  for (int d = map.rank - 1; d >= 0; --d) {
    const int64_t idx = i % map.size[d];
    i /= map.size[d];
    a += idx * map.stride_a[d];
    b += idx * map.stride_b[d];
  }
  *oa = a;
  *ob = b;
}

// Offset of output element i in operand a alone (stride_b unused).
__device__ __forceinline__ int64_t map_offset(int64_t i, const IndexMap& map) {
  int64_t offset = 0;
  for (int d = map.rank - 1; d >= 0; --d) {
    offset += (i % map.size[d]) * map.stride_a[d];
    i /= map.size[d];
  }
  return offset;
}

}  // namespace planrt::kernels::cuda::launch
