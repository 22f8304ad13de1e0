// layer_norm and rms_norm over the last dim, softmax over any dim; f32 data with double
// accumulators, so that long rows keep the 1e-5 relative accuracy the tests ask for.
#include <cmath>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/softmax_row.h"

namespace planrt::kernels::cpu {
namespace {

// x [..., N] with optional per-feature vectors [N] at inputs[1..]; the output matches x.
Status check_norm(std::string_view op, std::span<const TensorView> inputs,
                  std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  const TensorView& x = inputs[0];
  if (x.rank() < 1) {
    return make_error(ErrorCode::InvalidArgument, "{}: x needs rank >= 1; got {}", op,
                      describe_inputs(op, inputs));
  }
  for (size_t i = 1; i < inputs.size(); ++i) {
    const TensorView& v = inputs[i];
    if (v.is_none()) continue;
    if (v.rank() != 1 || v.sizes[0] != x.sizes.size(-1)) {
      return make_error(ErrorCode::InvalidArgument,
                        "{}: {} must be [{}] to match the last dim of x; got {}", op,
                        input_role(op, i), x.sizes.size(-1), describe_inputs(op, inputs));
    }
  }
  return check_output(op, inputs, outputs[0], DType::F32, x.sizes);
}

const float* optional_data(std::span<const TensorView> inputs, size_t i) {
  return i < inputs.size() && !inputs[i].is_none() ? inputs[i].data_as<const float>() : nullptr;
}

}  // namespace

void softmax_line(const float* x, float* y, int64_t n, int64_t stride) {
  if (n == 0) return;
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = std::fmax(max, x[i * stride]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::exp(x[i * stride] - max);
    y[i * stride] = e;
    sum += e;
  }
  const auto inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) y[i * stride] *= inv;
}

Status layer_norm(const OpAttrs& attrs, std::span<const TensorView> inputs,
                  std::span<const TensorView> outputs) {
  constexpr std::string_view op = "layer_norm";
  PLANRT_RETURN_IF_ERROR(check_norm(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(double eps, with_op(op, attrs.get_float("eps", 1e-5)));
  const TensorView& x = inputs[0];
  const int64_t n = x.sizes.size(-1);
  if (n == 0) return {};
  const int64_t rows = x.numel() / n;
  const float* w = optional_data(inputs, 1);
  const float* b = optional_data(inputs, 2);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data_as<const float>() + r * n;
    float* yr = outputs[0].data_as<float>() + r * n;
    // Two passes (mean, then the centred sum of squares) rather than E[x^2] - E[x]^2,
    // which cancels catastrophically when the mean is large against the spread.
    double mean = 0.0;
    for (int64_t i = 0; i < n; ++i) mean += xr[i];
    mean /= static_cast<double>(n);
    double var = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = xr[i] - mean;
      var += d * d;
    }
    var /= static_cast<double>(n);  // biased, as PyTorch
    const double inv_std = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < n; ++i) {
      double v = (xr[i] - mean) * inv_std;
      if (w != nullptr) v *= w[i];
      if (b != nullptr) v += b[i];
      yr[i] = static_cast<float>(v);
    }
  }
  return {};
}

// eps defaults to 1e-6. PyTorch's rms_norm with eps=None uses finfo(dtype).eps (1.19e-7
// for f32); models (LLaMA and kin) pass their own, usually 1e-5 or 1e-6.
Status rms_norm(const OpAttrs& attrs, std::span<const TensorView> inputs,
                std::span<const TensorView> outputs) {
  constexpr std::string_view op = "rms_norm";
  PLANRT_RETURN_IF_ERROR(check_norm(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(double eps, with_op(op, attrs.get_float("eps", 1e-6)));
  const TensorView& x = inputs[0];
  const int64_t n = x.sizes.size(-1);
  if (n == 0) return {};
  const int64_t rows = x.numel() / n;
  const float* w = optional_data(inputs, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data_as<const float>() + r * n;
    float* yr = outputs[0].data_as<float>() + r * n;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      double v = xr[i] * inv_rms;
      if (w != nullptr) v *= w[i];
      yr[i] = static_cast<float>(v);
    }
  }
  return {};
}

// dim defaults to -1 (the last), the usual choice; torch.softmax itself requires it.
Status softmax(const OpAttrs& attrs, std::span<const TensorView> inputs,
               std::span<const TensorView> outputs) {
  constexpr std::string_view op = "softmax";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  const TensorView& x = inputs[0];
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], DType::F32, x.sizes));
  PLANRT_ASSIGN_OR_RETURN(int64_t dim_attr, with_op(op, attrs.get_int("dim", -1)));
  PLANRT_ASSIGN_OR_RETURN(int dim, normalize_dim(op, "dim", dim_attr, x.rank()));
  if (x.numel() == 0) return {};
  const int64_t n = x.rank() == 0 ? 1 : x.sizes[dim];
  const int64_t inner = x.rank() == 0 ? 1 : contiguous_strides(x.sizes)[dim];
  const int64_t outer = x.numel() / (n * inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      softmax_line(x.data_as<const float>() + base, outputs[0].data_as<float>() + base, n, inner);
    }
  }
  return {};
}

}  // namespace planrt::kernels::cpu
