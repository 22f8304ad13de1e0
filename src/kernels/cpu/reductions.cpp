// The reductions (reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod), argmax and
// argmin over f32, and cumsum over f32, i32 and i64 (kernels/op_plans.h has their meaning).
// Sums and products accumulate in double, so the mean of a long line keeps f32 precision.
// Lines are split over threads; each task reduces up to kBlock adjacent outputs of one
// outer index, reading the n rows contiguously (the channels-last global pool reduces
// [H*W] rows of C).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/threading.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cpu {
namespace {

constexpr int64_t kBlock = 256;

double identity_of(ReduceFn fn) {
  switch (fn) {
    case ReduceFn::Prod:
      return 1.0;
    case ReduceFn::Max:
      return -std::numeric_limits<double>::infinity();
    case ReduceFn::Min:
      return std::numeric_limits<double>::infinity();
    default:
      return 0.0;
  }
}

// acc[i] = acc[i] (op) rows[j * stride + i] for j < n, i < width: rows in order, lanes side
// by side, vectorized per instruction set. max and min keep a NaN once seen.
PLANRT_SIMD_CLONES
void sum_rows(const float* __restrict rows, int64_t n, int64_t stride, int64_t width,
              double* __restrict acc) {
  for (int64_t j = 0; j < n; ++j) {
    const float* __restrict row = rows + j * stride;
#pragma omp simd
    for (int64_t i = 0; i < width; ++i) acc[i] += row[i];
  }
}

PLANRT_SIMD_CLONES
void prod_rows(const float* __restrict rows, int64_t n, int64_t stride, int64_t width,
               double* __restrict acc) {
  for (int64_t j = 0; j < n; ++j) {
    const float* __restrict row = rows + j * stride;
#pragma omp simd
    for (int64_t i = 0; i < width; ++i) acc[i] *= row[i];
  }
}

template <bool kMax>
void extreme_rows(const float* rows, int64_t n, int64_t stride, int64_t width, double* acc) {
  for (int64_t j = 0; j < n; ++j) {
    const float* row = rows + j * stride;
    for (int64_t i = 0; i < width; ++i) {
      const double v = row[i];
      const bool better = kMax ? v > acc[i] : v < acc[i];
      if ((better || std::isnan(v)) && !std::isnan(acc[i])) acc[i] = v;
    }
  }
}

template <ReduceFn F>
void reduce_rows(const float* rows, int64_t n, int64_t stride, int64_t width, double* acc) {
  if constexpr (F == ReduceFn::Sum || F == ReduceFn::Mean) {
    sum_rows(rows, n, stride, width, acc);
  } else if constexpr (F == ReduceFn::Prod) {
    prod_rows(rows, n, stride, width, acc);
  } else {
    extreme_rows<F == ReduceFn::Max>(rows, n, stride, width, acc);
  }
}

template <ReduceFn F>
Status reduce_f32(const ReducePlan& plan, const float* x, float* y) {
  const int64_t outer = plan.outer, n = plan.n, inner = plan.inner;  // the lambda captures these
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  // Each thread reduces at least kElementsPerThread elements (threading.h).
  const int64_t task_elements = std::max<int64_t>(1, n * std::min(kBlock, inner));
  const int64_t grain = std::max<int64_t>(1, kElementsPerThread / task_elements);
  return parallel_for(outer * blocks, grain, [&](int64_t begin, int64_t end) {
    double acc[kBlock];
    for (int64_t task = begin; task < end; ++task) {
      const int64_t o = task / blocks, i0 = task % blocks * kBlock;
      const int64_t width = std::min(kBlock, inner - i0);
      std::fill(acc, acc + width, identity_of(F));
      reduce_rows<F>(x + o * n * inner + i0, n, inner, width, acc);
      // n == 0: the mean of nothing is NaN, as torch.mean and ONNX ReduceMean give.
      const double scale = F == ReduceFn::Mean ? 1.0 / static_cast<double>(n) : 1.0;
      for (int64_t i = 0; i < width; ++i) y[o * inner + i0 + i] = static_cast<float>(acc[i] * scale);
    }
  });
}

Status reduce(std::string_view op, const OpAttrs& attrs, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(ReducePlan plan, plan_reduce(op, attrs, inputs, outputs));
  const float* x = inputs[0].data_as<const float>();
  float* y = outputs[0].data_as<float>();
  switch (plan.fn) {
    case ReduceFn::Sum:
      return reduce_f32<ReduceFn::Sum>(plan, x, y);
    case ReduceFn::Mean:
      return reduce_f32<ReduceFn::Mean>(plan, x, y);
    case ReduceFn::Max:
      return reduce_f32<ReduceFn::Max>(plan, x, y);
    case ReduceFn::Min:
      return reduce_f32<ReduceFn::Min>(plan, x, y);
    case ReduceFn::Prod:
      return reduce_f32<ReduceFn::Prod>(plan, x, y);
  }
  return make_error(ErrorCode::Internal, "{}: unknown reduction", op);
}

// The index argmax (argmin) picks on one line of n values `stride` apart: the first of the
// best, or the last with select_last; a NaN beats every number.
int64_t arg_best(const float* x, int64_t n, int64_t stride, bool max, bool select_last) {
  int64_t best = 0;
  float best_v = x[0];
  for (int64_t i = 1; i < n; ++i) {
    const float v = x[i * stride];
    if (std::isnan(best_v)) {
      if (select_last && std::isnan(v)) best = i;
      continue;
    }
    const bool better = std::isnan(v) || (max ? v > best_v : v < best_v);
    if (better || (select_last && v == best_v)) {
      best = i;
      best_v = v;
    }
  }
  return best;
}

template <typename T, bool = std::is_floating_point_v<T>>
struct AccumulatorOf {
  using type = double;
};
template <typename T>
struct AccumulatorOf<T, false> {
  using type = std::make_unsigned_t<T>;
};

template <typename T>
Status cumsum_lines(const CumsumPlan& plan, const T* x, T* y) {
  // Floats sum in double; integers in their own type, wrapping as two's complement (through
  // the unsigned type: signed overflow would be undefined).
  using Acc = typename AccumulatorOf<T>::type;
  const int64_t n = plan.n, inner = plan.inner;
  const int64_t grain = std::max<int64_t>(1, kElementsPerThread / std::max<int64_t>(1, n));
  return parallel_for(plan.outer * inner, grain, [&](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line) {
      const int64_t base = (line / inner) * n * inner + line % inner;
      Acc acc = 0;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t i = base + (plan.reverse ? n - 1 - k : k) * inner;
        const Acc v = static_cast<Acc>(x[i]);
        if (!plan.exclusive) acc += v;
        y[i] = static_cast<T>(acc);
        if (plan.exclusive) acc += v;
      }
    }
  });
}

}  // namespace

#define PLANRT_REDUCTION(name)                                                         \
  Status name(const OpAttrs& attrs, std::span<const TensorView> inputs,                 \
              std::span<const TensorView> outputs) {                                    \
    return reduce(#name, attrs, inputs, outputs);                                       \
  }
PLANRT_REDUCTION(reduce_sum)
PLANRT_REDUCTION(reduce_mean)
PLANRT_REDUCTION(reduce_max)
PLANRT_REDUCTION(reduce_min)
PLANRT_REDUCTION(reduce_prod)
#undef PLANRT_REDUCTION

namespace {

Status arg_reduce(std::string_view op, const OpAttrs& attrs, std::span<const TensorView> inputs,
                  std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(ArgReducePlan plan, plan_arg_reduce(op, attrs, inputs, outputs));
  const float* x = inputs[0].data_as<const float>();
  auto* y = outputs[0].data_as<int64_t>();
  const int64_t n = plan.n, inner = plan.inner;
  const int64_t grain = std::max<int64_t>(1, kElementsPerThread / n);
  return parallel_for(plan.outer * inner, grain, [&](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line) {
      const int64_t base = (line / inner) * n * inner + line % inner;
      y[line] = arg_best(x + base, n, inner, plan.max, plan.select_last);
    }
  });
}

}  // namespace

Status argmax(const OpAttrs& attrs, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  return arg_reduce("argmax", attrs, inputs, outputs);
}

Status argmin(const OpAttrs& attrs, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  return arg_reduce("argmin", attrs, inputs, outputs);
}

Status cumsum(const OpAttrs& attrs, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "cumsum";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(CumsumPlan plan, plan_cumsum(attrs, inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& y = outputs[0];
  switch (x.dtype) {
    case DType::F32:
      return cumsum_lines(plan, x.data_as<const float>(), y.data_as<float>());
    case DType::I32:
      return cumsum_lines(plan, x.data_as<const int32_t>(), y.data_as<int32_t>());
    case DType::I64:
      return cumsum_lines(plan, x.data_as<const int64_t>(), y.data_as<int64_t>());
    default:
      return make_error(ErrorCode::NotSupported,
                        "{}: x has dtype {}; the CPU kernel supports f32, i32 and i64", op,
                        dtype_name(x.dtype));
  }
}

}  // namespace planrt::kernels::cpu
