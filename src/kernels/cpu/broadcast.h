// The index walk that the CPU's elementwise ops and batched matmul share over a broadcast
// shape (kernels/operands.h has the broadcasting rules themselves). Thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#include "kernels/operands.h"
#include "planrt/core/tensor_view.h"

namespace planrt::kernels::cpu {

// Calls fn(offsets) once per index of `shape` in row-major order, from linear index `begin`
// up to `end`, where offsets[k] is the index dotted with strides[k]. The start is found by
// one division per dim; after that the k-th operand's walk costs one add per step. Ranges
// that split [0, numel) between threads give each its own walk.
template <size_t K, typename Fn>
void for_each_index_in(const Shape& shape, const std::array<Shape, K>& strides, int64_t begin, int64_t end,
                       Fn&& fn) {
  const int rank = shape.rank();
  std::array<int64_t, kMaxRank> index{};
  std::array<int64_t, K> offsets{};
  int64_t rest = begin;
  for (int d = rank - 1; d >= 0; --d) {
    index[d] = shape[d] > 0 ? rest % shape[d] : 0;
    rest = shape[d] > 0 ? rest / shape[d] : 0;
    for (size_t k = 0; k < K; ++k) offsets[k] += index[d] * strides[k][d];
  }
  for (int64_t i = begin; i < end; ++i) {
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

// The whole of `shape`, in order.
template <size_t K, typename Fn>
void for_each_index(const Shape& shape, const std::array<Shape, K>& strides, Fn&& fn) {
  for_each_index_in(shape, strides, 0, shape.numel(), std::forward<Fn>(fn));
}

}  // namespace planrt::kernels::cpu
