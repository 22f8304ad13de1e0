// Broadcasting binary arithmetic (add, sub, mul, div, pow) and the pointwise functions, f32.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/threading.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cpu {
namespace {

// Pieces of at least this many elements per thread: below it the threads cost more than
// they save.
constexpr int64_t kPointwiseGrain = kElementsPerThread;

// One row of the innermost dim. Operand strides are 0 (broadcast) or 1; spelling out the
// four cases lets the compiler vectorize each.
// (omp simd: at -O2 GCC vectorizes no loop of unknown length on its own; y may be a or b,
// element for element, which the simd loops allow.)
template <typename F>
void binary_row(F f, const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
  if (sa == 1 && sb == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
  } else if (sa == 1) {
    const float bv = b[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], bv);
  } else if (sb == 1) {
    const float av = a[0];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = f(av, b[i]);
  } else {
    const float v = f(a[0], b[0]);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = v;
  }
}

template <typename F>
Status binary(std::string_view op, F f, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  if (inputs[0].dtype != DType::F32) return integer_arithmetic(op, inputs, outputs);
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  const TensorView& out = outputs[0];
  PLANRT_ASSIGN_OR_RETURN(Shape shape, plan_binary(op, inputs, outputs));

  const float* pa = a.data_as<const float>();
  const float* pb = b.data_as<const float>();
  float* py = out.data_as<float>();
  if (out.numel() == 0) return {};
  if (a.sizes == shape && b.sizes == shape) {
    return parallel_for(out.numel(), kPointwiseGrain, [&](int64_t begin, int64_t end) {
      binary_row(f, pa + begin, 1, pb + begin, 1, py + begin, end - begin);
    });
  }
  if (shape.rank() == 0) {
    py[0] = f(pa[0], pb[0]);
    return {};
  }
  const Shape sa = broadcast_strides(a.sizes, shape);
  const Shape sb = broadcast_strides(b.sizes, shape);
  const int last = shape.rank() - 1;
  const int64_t row = shape[last];
  if (row == 0) return {};
  // Rows split between threads (a squeeze-excitation's scale: thousands of rows of C), each
  // range walking its own operand offsets.
  const Shape rows_shape = drop_last(shape, 1);
  const std::array<Shape, 2> row_strides{drop_last(sa, 1), drop_last(sb, 1)};
  return parallel_for(out.numel() / row, std::max<int64_t>(1, kPointwiseGrain / row), [&](int64_t begin, int64_t end) {
    int64_t y_offset = begin * row;
    for_each_index_in<2>(rows_shape, row_strides, begin, end, [&](const std::array<int64_t, 2>& off) {
      binary_row(f, pa + off[0], sa[last], pb + off[1], sb[last], py + y_offset, row);
      y_offset += row;
    });
  });
}

// The pointwise functions, each a vectorized loop (kernels/cpu/vector_math.h), compiled
// per instruction set and chosen at run time.
enum class Pointwise { Sqrt, Neg, Exp, Erf, Tanh, Sigmoid, Relu, Silu, Gelu, GeluTanh };

PLANRT_SIMD_CLONES
void map_pointwise(Pointwise fn, const float* x, float* y, int64_t n) {
  switch (fn) {
    case Pointwise::Sqrt:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]);
      break;
    case Pointwise::Neg:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = -x[i];
      break;
    case Pointwise::Exp:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = vmath::exp(x[i]);
      break;
    case Pointwise::Erf:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = vmath::erf(x[i]);
      break;
    case Pointwise::Tanh:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = vmath::tanh(x[i]);
      break;
    case Pointwise::Sigmoid:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = vmath::sigmoid(x[i]);
      break;
    case Pointwise::Relu:
      // Written so that NaN propagates, as torch.relu does (max(0, NaN) would not).
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
      break;
    case Pointwise::Silu:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * vmath::sigmoid(x[i]);
      break;
    case Pointwise::Gelu:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = vmath::gelu(x[i]);
      break;
    case Pointwise::GeluTanh:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = vmath::gelu_tanh(x[i]);
      break;
  }
}

Status unary(std::string_view op, Pointwise fn, std::span<const TensorView> inputs,
             std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_RETURN_IF_ERROR(plan_unary(op, inputs, outputs));
  const float* x = inputs[0].data_as<const float>();
  float* y = outputs[0].data_as<float>();
  return parallel_for(inputs[0].numel(), kPointwiseGrain,
               [&](int64_t begin, int64_t end) { map_pointwise(fn, x + begin, y + begin, end - begin); });
}

// clip, hard_sigmoid, hard_swish: y = (times_x ? x : 1) * clamp(scale x + shift, lo, hi).
PLANRT_SIMD_CLONES

Status clamp(std::string_view op, const OpAttrs& attrs, std::span<const TensorView> inputs,
             std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(ClampPlan plan, plan_clamp(op, attrs, inputs, outputs));
  const float* x = inputs[0].data_as<const float>();
  float* y = outputs[0].data_as<float>();
  return parallel_for(inputs[0].numel(), kPointwiseGrain,
                      [&](int64_t begin, int64_t end) { map_clamp(plan, x + begin, y + begin, end - begin); });
}

}  // namespace

Status activate_in_place(LinearActivation a, float* y, int64_t n) {
  if (a == LinearActivation::None || n == 0) return {};
  const Pointwise fn = a == LinearActivation::Relu ? Pointwise::Relu
                       : a == LinearActivation::Gelu ? Pointwise::Gelu : Pointwise::GeluTanh;
  return parallel_for(n, kPointwiseGrain, [&](int64_t begin, int64_t end) {
    map_pointwise(fn, y + begin, y + begin, end - begin);
  });
}

void map_clamp(const ClampPlan& p, const float* x, float* y, int64_t n) {
  if (p.times_x) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * std::min(std::max(p.scale * x[i] + p.shift, p.lo), p.hi);
  } else {
    // NaN stays NaN, as torch.clamp gives (std::max(NaN, lo) would not).
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const float v = p.scale * x[i] + p.shift;
      y[i] = v < p.lo ? p.lo : (v > p.hi ? p.hi : v);
    }
  }
}

Status clip(const OpAttrs& attrs, std::span<const TensorView> in, std::span<const TensorView> out) {
  return clamp("clip", attrs, in, out);
}
Status hard_sigmoid(const OpAttrs& attrs, std::span<const TensorView> in, std::span<const TensorView> out) {
  return clamp("hard_sigmoid", attrs, in, out);
}
Status hard_swish(const OpAttrs& attrs, std::span<const TensorView> in, std::span<const TensorView> out) {
  return clamp("hard_swish", attrs, in, out);
}

Status add(const OpAttrs&, std::span<const TensorView> in, std::span<const TensorView> out) {
  return binary(
      "add", [](float a, float b) { return a + b; }, in, out);
}
Status sub(const OpAttrs&, std::span<const TensorView> in, std::span<const TensorView> out) {
  return binary(
      "sub", [](float a, float b) { return a - b; }, in, out);
}
Status mul(const OpAttrs&, std::span<const TensorView> in, std::span<const TensorView> out) {
  return binary(
      "mul", [](float a, float b) { return a * b; }, in, out);
}
Status div(const OpAttrs&, std::span<const TensorView> in, std::span<const TensorView> out) {
  // IEEE division, as PyTorch: x / 0 is +-inf, 0 / 0 is NaN.
  return binary(
      "div", [](float a, float b) { return a / b; }, in, out);
}

Status power(const OpAttrs&, std::span<const TensorView> in, std::span<const TensorView> out) {
  // std::pow's special cases are C's and IEEE's, as torch.pow and ONNX Pow follow.
  return binary(
      "pow", [](float a, float b) { return b == 2.0f ? a * a : std::pow(a, b); }, in, out);
}

Status unary_sqrt(const OpAttrs&, std::span<const TensorView> in, std::span<const TensorView> out) {
  return unary(
      "sqrt", Pointwise::Sqrt, in, out);
}
Status unary_neg(const OpAttrs&, std::span<const TensorView> in, std::span<const TensorView> out) {
  if (!in.empty() && in[0].dtype != DType::F32) {
    PLANRT_RETURN_IF_ERROR(check_operands("neg", in, out));
    return integer_arithmetic("neg", in, out);
  }
  return unary(
      "neg", Pointwise::Neg, in, out);
}
Status unary_exp(const OpAttrs&, std::span<const TensorView> in, std::span<const TensorView> out) {
  return unary(
      "exp", Pointwise::Exp, in, out);
}
Status unary_erf(const OpAttrs&, std::span<const TensorView> in, std::span<const TensorView> out) {
  return unary(
      "erf", Pointwise::Erf, in, out);
}
Status unary_tanh(const OpAttrs&, std::span<const TensorView> in, std::span<const TensorView> out) {
  return unary(
      "tanh", Pointwise::Tanh, in, out);
}
Status unary_sigmoid(const OpAttrs&, std::span<const TensorView> in, std::span<const TensorView> out) {
  return unary(
      "sigmoid", Pointwise::Sigmoid, in, out);
}

Status relu(const OpAttrs&, std::span<const TensorView> in, std::span<const TensorView> out) {
  return unary("relu", Pointwise::Relu, in, out);
}

Status silu(const OpAttrs&, std::span<const TensorView> in, std::span<const TensorView> out) {
  return unary(
      "silu", Pointwise::Silu, in, out);
}

Status gelu(const OpAttrs& attrs, std::span<const TensorView> in, std::span<const TensorView> out) {
  PLANRT_ASSIGN_OR_RETURN(GeluApproximation mode, plan_gelu(attrs));
  return unary("gelu", mode == GeluApproximation::None ? Pointwise::Gelu : Pointwise::GeluTanh, in,
               out);
}

}  // namespace planrt::kernels::cpu
