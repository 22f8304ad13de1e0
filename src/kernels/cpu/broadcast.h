// The index walk that the CPU's elementwise ops and batched matmul share over a broadcast
// shape (kernels/operands.h has the broadcasting rules themselves). Thread-safe.
#pragma once

#include <array>
#include <cstddef>

#include "kernels/operands.h"
#include "planrt/core/tensor_view.h"

namespace planrt::kernels::cpu {

// Calls fn(offsets) once per index of `shape` in row-major order, where offsets[k] is the
// index dotted with strides[k]. The k-th operand's walk therefore costs one add per step,
// not a division per dim.
template <size_t K, typename Fn>
void for_each_index(const Shape& shape, const std::array<Shape, K>& strides, Fn&& fn) {
  const int64_t n = shape.numel();
  const int rank = shape.rank();
  std::array<int64_t, kMaxRank> index{};
  std::array<int64_t, K> offsets{};
  for (int64_t i = 0; i < n; ++i) {
    fn(static_cast<const std::array<int64_t, K>&>(offsets));
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < shape[d]) {
        for (size_t k = 0; k < K; ++k) offsets[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < K; ++k) offsets[k] -= strides[k][d] * (shape[d] - 1);
      index[d] = 0;
    }
  }
}

}  // namespace planrt::kernels::cpu
