// layer_norm and rms_norm over the last dim, softmax and log_softmax over any dim; f32 data with double
// accumulators, so that long rows keep the 1e-5 relative accuracy the tests ask for. The
// loops are vectorized (sums reassociated across lanes: `omp simd reduction`) and compiled
// per instruction set (PLANRT_SIMD_CLONES); rows are split over threads.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/softmax_row.h"
#include "kernels/cpu/threading.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cpu {
namespace {

const float* optional_data(std::span<const TensorView> inputs, size_t i) {
  return i < inputs.size() && !inputs[i].is_none() ? inputs[i].data_as<const float>() : nullptr;
}

}  // namespace

namespace {

// The largest of a line's n > 0 values (inlined into each caller's instruction-set clone).
PLANRT_VMATH_INLINE float line_max(const float* x, int64_t n, int64_t stride) {
  float max = x[0];
#pragma omp simd reduction(max : max)
  for (int64_t i = 1; i < n; ++i) max = x[i * stride] > max ? x[i * stride] : max;
  return max;
}

}  // namespace

PLANRT_SIMD_CLONES
void softmax_line(const float* x, float* y, int64_t n, int64_t stride) {
  if (n == 0) return;
  const float max = line_max(x, n, stride);
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    const float e = vmath::exp_nonpositive(x[i * stride] - max);
    y[i * stride] = e;
    sum += e;
  }
  const auto inv = static_cast<float>(1.0 / sum);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i * stride] *= inv;
}

namespace {

// Rows per thread at least: a row of a few hundred values is microseconds of work.
constexpr int64_t kRowGrain = 8;

PLANRT_SIMD_CLONES
void layer_norm_row(const float* xr, float* yr, int64_t n, double eps, const float* w,
                    const float* b) {
  // Two passes (mean, then the centred sum of squares) rather than E[x^2] - E[x]^2,
  // which cancels catastrophically when the mean is large against the spread.
  double mean = 0.0;
#pragma omp simd reduction(+ : mean)
  for (int64_t i = 0; i < n; ++i) mean += xr[i];
  mean /= static_cast<double>(n);
  double var = 0.0;
#pragma omp simd reduction(+ : var)
  for (int64_t i = 0; i < n; ++i) {
    const double d = xr[i] - mean;
    var += d * d;
  }
  var /= static_cast<double>(n);  // biased, as PyTorch
  // Centred in double too: a mean rounded to f32 would shift every value by its rounding.
  const double inv_std = 1.0 / std::sqrt(var + eps);
  if (w != nullptr && b != nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) yr[i] = static_cast<float>((xr[i] - mean) * inv_std) * w[i] + b[i];
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      auto v = static_cast<float>((xr[i] - mean) * inv_std);
      if (w != nullptr) v *= w[i];
      if (b != nullptr) v += b[i];
      yr[i] = v;
    }
  }
}

PLANRT_SIMD_CLONES
void rms_norm_row(const float* xr, float* yr, int64_t n, double eps, const float* w) {
  double sum_sq = 0.0;
#pragma omp simd reduction(+ : sum_sq)
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
  const auto inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) yr[i] = w != nullptr ? xr[i] * inv_rms * w[i] : xr[i] * inv_rms;
}

}  // namespace

Status layer_norm(const OpAttrs& attrs, std::span<const TensorView> inputs,
                  std::span<const TensorView> outputs) {
  constexpr std::string_view op = "layer_norm";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(NormPlan plan, plan_layer_norm(attrs, inputs, outputs));
  const TensorView& x = inputs[0];
  const auto [rows, n, eps] = plan;
  const float* w = optional_data(inputs, 1);
  const float* b = optional_data(inputs, 2);
  const float* px = x.data_as<const float>();
  float* py = outputs[0].data_as<float>();
  return parallel_for(rows, kRowGrain, [&, n = n, eps = eps](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) layer_norm_row(px + r * n, py + r * n, n, eps, w, b);
  });
}

Status rms_norm(const OpAttrs& attrs, std::span<const TensorView> inputs,
                std::span<const TensorView> outputs) {
  constexpr std::string_view op = "rms_norm";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(NormPlan plan, plan_rms_norm(attrs, inputs, outputs));
  const TensorView& x = inputs[0];
  const auto [rows, n, eps] = plan;
  const float* w = optional_data(inputs, 1);
  const float* px = x.data_as<const float>();
  float* py = outputs[0].data_as<float>();
  return parallel_for(rows, kRowGrain, [&, n = n, eps = eps](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) rms_norm_row(px + r * n, py + r * n, n, eps, w);
  });
}

Status softmax(const OpAttrs& attrs, std::span<const TensorView> inputs,
               std::span<const TensorView> outputs) {
  constexpr std::string_view op = "softmax";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(SoftmaxPlan plan, plan_softmax(op, attrs, inputs, outputs));
  const TensorView& x = inputs[0];
  const auto [outer, n, inner] = plan;
  const float* px = x.data_as<const float>();
  float* py = outputs[0].data_as<float>();
  return parallel_for(outer * inner, kRowGrain, [&, n = n, inner = inner](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line) {
      const int64_t base = (line / inner) * n * inner + line % inner;
      softmax_line(px + base, py + base, n, inner);
    }
  });
}

// log_softmax: x - max - log(sum(exp(x - max))), the sum in double; a line that is all
// -inf gives NaN, as in PyTorch.
PLANRT_SIMD_CLONES
void log_softmax_line(const float* x, float* y, int64_t n, int64_t stride) {
  if (n == 0) return;
  const float max = line_max(x, n, stride);
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += vmath::exp_nonpositive(x[i * stride] - max);
  const auto shift = static_cast<float>(static_cast<double>(max) + std::log(sum));
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i * stride] = x[i * stride] - shift;
}

Status log_softmax(const OpAttrs& attrs, std::span<const TensorView> inputs,
                   std::span<const TensorView> outputs) {
  constexpr std::string_view op = "log_softmax";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(SoftmaxPlan plan, plan_softmax(op, attrs, inputs, outputs));
  const auto [outer, n, inner] = plan;
  const float* px = inputs[0].data_as<const float>();
  float* py = outputs[0].data_as<float>();
  return parallel_for(outer * inner, kRowGrain, [&, n = n, inner = inner](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line) {
      const int64_t base = (line / inner) * n * inner + line % inner;
      log_softmax_line(px + base, py + base, n, inner);
    }
  });
}

}  // namespace planrt::kernels::cpu
