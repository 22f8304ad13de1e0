#include "kernel_test_util.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace planrt::kernels::testing {

HostTensor::HostTensor(DType dtype, Shape shape)
    : dtype_(dtype),
      shape_(shape),
      storage_((static_cast<size_t>(shape.numel()) * element_size(dtype) + 7) / 8 + 1, 0) {}

HostTensor HostTensor::random(Shape shape, uint32_t seed, float lo, float hi) {
  HostTensor t(DType::F32, shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.f()[i] = dist(gen);
  return t;
}

HostTensor HostTensor::f32(Shape shape, std::initializer_list<float> values) {
  HostTensor t(DType::F32, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  std::memcpy(t.f(), values.begin(), std::min<size_t>(values.size(), t.numel()) * 4);
  return t;
}

HostTensor HostTensor::i64(Shape shape, std::initializer_list<int64_t> values) {
  HostTensor t(DType::I64, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  std::memcpy(t.as<int64_t>(), values.begin(), std::min<size_t>(values.size(), t.numel()) * 8);
  return t;
}

HostTensor HostTensor::i32(Shape shape, std::initializer_list<int32_t> values) {
  HostTensor t(DType::I32, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  std::memcpy(t.as<int32_t>(), values.begin(), std::min<size_t>(values.size(), t.numel()) * 4);
  return t;
}

TensorView HostTensor::view() const {
  return TensorView::contiguous(const_cast<uint64_t*>(storage_.data()), dtype_, shape_);
}

std::vector<double> HostTensor::doubles() const {
  EXPECT_EQ(dtype_, DType::F32);
  return std::vector<double>(f(), f() + numel());
}

Status run_op(std::string_view op, const OpAttrs& attrs, std::vector<TensorView> inputs,
              std::vector<TensorView> outputs) {
  Result<KernelFn> fn = find_cpu_kernel(op);
  if (!fn.ok()) return fn.status();
  return (*fn)(attrs, inputs, outputs);
}

HostTensor swap_middle(const HostTensor& t) {
  const Shape& s = t.shape();
  HostTensor out(DType::F32, {s[0], s[2], s[1], s[3]});
  for (int64_t b = 0; b < s[0]; ++b)
    for (int64_t x = 0; x < s[1]; ++x)
      for (int64_t y = 0; y < s[2]; ++y)
        for (int64_t d = 0; d < s[3]; ++d)
          out.f()[((b * s[2] + y) * s[1] + x) * s[3] + d] = t.f()[((b * s[1] + x) * s[2] + y) * s[3] + d];
  return out;
}

double relative_error(const HostTensor& out, const std::vector<double>& ref) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (out.dtype() != DType::F32 || static_cast<size_t>(out.numel()) != ref.size()) return kInf;
  double diff = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double o = out.f()[i];
    if (std::isnan(o) || std::isnan(ref[i])) return kInf;
    diff += (o - ref[i]) * (o - ref[i]);
    norm += ref[i] * ref[i];
  }
  if (std::isnan(diff)) return kInf;  // inf - inf
  return norm == 0.0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(static_cast<size_t>(shape.rank()));
  for (int d = shape.rank() - 1; d >= 0; --d) {
    index[static_cast<size_t>(d)] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

int64_t broadcast_source(const std::vector<int64_t>& index, const Shape& out, const Shape& in) {
  int64_t flat = 0;
  const int shift = out.rank() - in.rank();
  for (int d = 0; d < in.rank(); ++d) {
    const int64_t i = in[d] == 1 ? 0 : index[static_cast<size_t>(d + shift)];
    flat = flat * in[d] + i;
  }
  return flat;
}

}  // namespace planrt::kernels::testing
