// Helpers for the CPU kernel tests: an owning host tensor, running an op by name, the
// relative-error measure every numeric test uses, and error-status assertions.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "kernels/kernel.h"
#include "support/status_matchers.h"

namespace planrt::kernels::testing {

// Owns zero-initialised, 8-byte aligned storage for a contiguous host tensor.
class HostTensor {
 public:
  HostTensor(DType dtype, Shape shape);

  // Uniform in [lo, hi), deterministic for a seed.
  static HostTensor random(Shape shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f);
  static HostTensor f32(Shape shape, std::initializer_list<float> values);
  static HostTensor i64(Shape shape, std::initializer_list<int64_t> values);
  static HostTensor i32(Shape shape, std::initializer_list<int32_t> values);

  TensorView view() const;
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return shape_.numel(); }
  float* f() { return reinterpret_cast<float*>(storage_.data()); }
  const float* f() const { return reinterpret_cast<const float*>(storage_.data()); }
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(storage_.data());
  }
  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(storage_.data());
  }
  double at(int64_t i) const { return f()[i]; }  // f32 only
  std::vector<double> doubles() const;           // f32 only

 private:
  DType dtype_;
  Shape shape_;
  std::vector<uint64_t> storage_;
};

Status run_op(std::string_view op, const OpAttrs& attrs, std::vector<TensorView> inputs,
              std::vector<TensorView> outputs);

// A 4-d f32 tensor [b, x, y, d] as [b, y, x, d]: attention's head split (bshd -> bhsd) and
// the merge back.
HostTensor swap_middle(const HostTensor& t);

// ||out - ref|| / ||ref|| (the plain ||out - ref|| when ref is all zeros); +inf when any
// value is NaN or the sizes differ, so NaN never passes a bound.
double relative_error(const HostTensor& out, const std::vector<double>& ref);

inline constexpr double kTolerance = 1e-5;

// Error-status assertions: support/status_matchers.h (shared with the CUDA kernel tests).
using ::planrt::testing::IsError;

// Row-major multi-index helpers for references: the flat index into a contiguous tensor
// of shape `in` that broadcasting reads for the output multi-index `index` (of `out`).
std::vector<int64_t> unravel(int64_t flat, const Shape& shape);
int64_t broadcast_source(const std::vector<int64_t>& index, const Shape& out, const Shape& in);

}  // namespace planrt::kernels::testing
