// Broadcasting (PyTorch rules: shapes align on the right; each pair of dims is equal or one
// of them is 1) and the index walk that elementwise ops and batched matmul share.
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "planrt/core/result.h"
#include "planrt/core/tensor_view.h"

namespace planrt::kernels::cpu {

// The broadcast shape of `a` and `b`; InvalidArgument naming both when they do not broadcast.
Result<Shape> broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);

// Strides, in elements, that read a contiguous tensor of shape `in` at each index of `out`:
// 0 along the dims `in` broadcasts (size 1 or missing). `in` must broadcast to `out`.
Shape broadcast_strides(const Shape& in, const Shape& out);

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

// `shape` without its last `count` dims (count <= rank).
Shape drop_last(const Shape& shape, int count);

}  // namespace planrt::kernels::cpu
