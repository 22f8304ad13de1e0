// The typed elementwise family on the CPU (kernels/elementwise_ops.h): every dtype, f16 and
// bf16 computed in f32. One broadcast walk serves every op: the output's rows (its innermost
// dim) are split between threads, and each operand reads a row with stride 1, or 0 where it
// broadcasts. These ops carry masks, positions and rotary tables, not the model's products,
// so the loops are plain and portable rather than hand-vectorized.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/threading.h"
#include "kernels/elementwise_ops.h"

namespace planrt::kernels::cpu {
namespace {

using Fn = ElementwiseFn;

// ---- how each dtype's bytes read and write as values --------------------------------------

struct BoolByte {};  // bool: a byte, any non-zero read as true, 1 written
struct Half {};      // f16 bits, computed as f32
struct BHalf {};     // bf16 bits, computed as f32

template <typename Tag>
struct Lane {
  using Storage = Tag;
  using Value = Tag;
  static Value load(Storage s) { return s; }
  static Storage store(Value v) { return v; }
};
template <>
struct Lane<BoolByte> {
  using Storage = uint8_t;
  using Value = bool;
  static Value load(Storage s) { return s != 0; }
  static Storage store(Value v) { return v ? 1 : 0; }
};
template <>
struct Lane<Half> {
  using Storage = uint16_t;
  using Value = float;
  static Value load(Storage s) { return f16_bits_to_f32(s); }
  static Storage store(Value v) { return f32_to_f16_bits(v); }
};
template <>
struct Lane<BHalf> {
  using Storage = uint16_t;
  using Value = float;
  static Value load(Storage s) { return bf16_bits_to_f32(s); }
  static Storage store(Value v) { return f32_to_bf16_bits(v); }
};

// Calls fn(Tag{}) for the tag of `dtype`.
template <typename F>
Status visit_dtype(DType dtype, F&& fn) {
  switch (dtype) {
    case DType::F32: return fn(float{});
    case DType::F16: return fn(Half{});
    case DType::BF16: return fn(BHalf{});
    case DType::I32: return fn(int32_t{});
    case DType::I64: return fn(int64_t{});
    case DType::U8: return fn(uint8_t{});
    case DType::Bool: return fn(BoolByte{});
  }
  return make_error(ErrorCode::Internal, "unknown dtype {}", static_cast<int>(dtype));
}

// ---- the broadcast walk -----------------------------------------------------------------------

constexpr int64_t kGrain = kElementsPerThread;

// Calls row(in_offsets, in_strides, out_offset, n) for runs of n output elements in order;
// operand k reads element i of the run at in_offsets[k] + i * in_strides[k] (stride 0 or 1).
template <size_t K, typename Row>
Status for_each_run(const Shape& shape, std::span<const TensorView> inputs, Row&& row) {
  const int64_t total = shape.numel();
  if (total == 0) return {};
  bool all_full = true;
  for (size_t k = 0; k < K; ++k) all_full = all_full && inputs[k].sizes == shape;
  if (all_full || shape.rank() == 0) {
    // One run; a rank-0 output has rank-0 (or empty-shaped) operands of one element each.
    std::array<int64_t, K> strides;
    strides.fill(shape.rank() == 0 ? 0 : 1);
    return parallel_for(total, kGrain, [&](int64_t begin, int64_t end) {
      std::array<int64_t, K> off;
      for (size_t k = 0; k < K; ++k) off[k] = begin * strides[k];
      row(off, strides, begin, end - begin);
    });
  }
  std::array<Shape, K> strides_full;
  for (size_t k = 0; k < K; ++k) strides_full[k] = broadcast_strides(inputs[k].sizes, shape);
  const int last = shape.rank() - 1;
  const int64_t n = shape[last];
  std::array<int64_t, K> inner;
  std::array<Shape, K> outer;
  for (size_t k = 0; k < K; ++k) {
    inner[k] = strides_full[k][last];
    outer[k] = drop_last(strides_full[k], 1);
  }
  const Shape rows = drop_last(shape, 1);
  return parallel_for(total / n, std::max<int64_t>(1, kGrain / n), [&](int64_t begin, int64_t end) {
    int64_t out = begin * n;
    for_each_index_in<K>(rows, outer, begin, end, [&](const std::array<int64_t, K>& off) {
      row(off, inner, out, n);
      out += n;
    });
  });
}

// y = f(x) elementwise, x read as In, y written as Out.
template <typename In, typename Out, typename F>
Status map1(const ElementwisePlan& plan, std::span<const TensorView> inputs, const TensorView& out, F f) {
  using I = Lane<In>;
  using O = Lane<Out>;
  const auto* x = static_cast<const typename I::Storage*>(inputs[0].data);
  auto* y = static_cast<typename O::Storage*>(out.data);
  return for_each_run<1>(plan.shape, inputs, [&](const std::array<int64_t, 1>& off, const std::array<int64_t, 1>& st,
                                                 int64_t o, int64_t n) {
    const auto* xr = x + off[0];
    auto* yr = y + o;
    for (int64_t i = 0; i < n; ++i) yr[i] = O::store(f(I::load(xr[i * st[0]])));
  });
}

// y = f(a, b) with a and b read as In.
template <typename In, typename Out, typename F>
Status map2(const ElementwisePlan& plan, std::span<const TensorView> inputs, const TensorView& out, F f) {
  using I = Lane<In>;
  using O = Lane<Out>;
  const auto* a = static_cast<const typename I::Storage*>(inputs[0].data);
  const auto* b = static_cast<const typename I::Storage*>(inputs[1].data);
  auto* y = static_cast<typename O::Storage*>(out.data);
  return for_each_run<2>(plan.shape, inputs, [&](const std::array<int64_t, 2>& off, const std::array<int64_t, 2>& st,
                                                 int64_t o, int64_t n) {
    const auto* ar = a + off[0];
    const auto* br = b + off[1];
    auto* yr = y + o;
    for (int64_t i = 0; i < n; ++i) yr[i] = O::store(f(I::load(ar[i * st[0]]), I::load(br[i * st[1]])));
  });
}

// y = cond ? a : b, copying elements of `Word` (the dtype's size: no conversion).
template <typename Word>
Status select(const ElementwisePlan& plan, std::span<const TensorView> inputs, const TensorView& out) {
  const auto* c = static_cast<const uint8_t*>(inputs[0].data);
  const auto* a = static_cast<const Word*>(inputs[1].data);
  const auto* b = static_cast<const Word*>(inputs[2].data);
  auto* y = static_cast<Word*>(out.data);
  return for_each_run<3>(plan.shape, inputs, [&](const std::array<int64_t, 3>& off, const std::array<int64_t, 3>& st,
                                                 int64_t o, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      y[o + i] = c[off[0] + i * st[0]] != 0 ? a[off[1] + i * st[1]] : b[off[2] + i * st[2]];
    }
  });
}

// ---- the functions ----------------------------------------------------------------------------

template <typename T>
constexpr bool is_signed_int = std::is_integral_v<T> && std::is_signed_v<T>;

// Integer arithmetic that wraps (two's complement) instead of overflowing.
template <typename T>
T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename T>
T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <typename T>
T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  // uint8 promotes to int: multiply in a type wide enough, then keep the low bits.
  using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
  return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
}
template <typename T>
T int_div(T a, T b) {
  if (b == 0) return 0;
  if constexpr (is_signed_int<T>) {
    if (a == std::numeric_limits<T>::min() && b == -1) return a;  // -min wraps to min
  }
  return static_cast<T>(a / b);
}
template <typename T>
T int_pow(T base, T exponent) {
  if constexpr (is_signed_int<T>) {
    if (exponent < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exponent & 1) != 0 ? T(-1) : T(1);
      return 0;
    }
  }
  T result = 1;
  auto e = static_cast<std::make_unsigned_t<T>>(exponent);
  while (e != 0) {
    if ((e & 1) != 0) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    e >>= 1;
  }
  return result;
}

template <typename T>
T abs_value(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fabs(x);
  } else if constexpr (is_signed_int<T>) {
    return x < 0 ? wrap_sub(T(0), x) : x;
  } else {
    return x;
  }
}

template <typename T>
T sign_of(T x) {
  if (x > T(0)) return T(1);
  if constexpr (std::is_signed_v<T>) {
    if (x < T(0)) return T(-1);
  }
  return x;  // 0 (or -0), and NaN stays NaN
}

template <typename T>
T neg_of(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return -x;
  } else {
    return wrap_sub(T(0), x);
  }
}

template <typename T>
bool is_nan(T x) {
  return x != x;
}

// NaN wins, as torch.minimum / torch.maximum.
template <typename T>
T min_of(T a, T b) {
  if (is_nan(a)) return a;
  if (is_nan(b)) return b;
  return b < a ? b : a;
}
template <typename T>
T max_of(T a, T b) {
  if (is_nan(a)) return a;
  if (is_nan(b)) return b;
  return a < b ? b : a;
}

// The remainder with the divisor's sign (floor) or the dividend's (fmod); x mod 0 is 0 for
// integers (no trap), NaN for floats.
template <typename T>
T mod_of(T a, T b, bool fmod) {
  T r;
  if constexpr (std::is_floating_point_v<T>) {
    r = std::fmod(a, b);
  } else {
    if (b == 0) return 0;
    if constexpr (is_signed_int<T>) {
      if (b == -1) return 0;  // also min % -1, which traps
    }
    r = static_cast<T>(a % b);
  }
  if constexpr (std::is_signed_v<T>) {
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
  }
  return r;
}

// One value converted as cast defines (elementwise_ops.h).
template <typename To, typename From>
To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (v != v) return 0;
    constexpr double hi = static_cast<double>(std::numeric_limits<To>::max()) + 1.0;
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::min()) - 1.0;
    const double d = static_cast<double>(v);
    if (d >= hi) return std::numeric_limits<To>::max();
    if (d <= lo) return std::numeric_limits<To>::min();
    return static_cast<To>(d);  // truncates toward zero, in range
  } else {
    return static_cast<To>(v);
  }
}

// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|).
inline float softplus(float x) { return std::max(x, 0.0f) + std::log1p(std::exp(-std::fabs(x))); }

// ---- dispatch by rule ------------------------------------------------------------------------

template <typename Tag>
constexpr bool is_float_tag = std::is_same_v<Tag, float> || std::is_same_v<Tag, Half> || std::is_same_v<Tag, BHalf>;

Status run_floating(const ElementwisePlan& plan, Fn fn, std::span<const TensorView> in, const TensorView& out) {
  return visit_dtype(plan.input_dtype, [&](auto tag) -> Status {
    using Tag = decltype(tag);
    if constexpr (!is_float_tag<Tag>) {
      return make_error(ErrorCode::Internal, "a floating rule reached dtype {}", dtype_name(plan.input_dtype));
    } else {
      switch (fn) {
        case Fn::Cos: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::cos(x); });
        case Fn::Sin: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::sin(x); });
        case Fn::Log: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::log(x); });
        case Fn::Floor: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::floor(x); });
        case Fn::Ceil: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::ceil(x); });
        // nearbyint in the default rounding mode: half to even.
        case Fn::Round: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::nearbyint(x); });
        case Fn::Reciprocal: return map1<Tag, Tag>(plan, in, out, [](float x) { return 1.0f / x; });
        case Fn::Tan: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::tan(x); });
        case Fn::Acos: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::acos(x); });
        case Fn::Asin: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::asin(x); });
        case Fn::Atan: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::atan(x); });
        case Fn::Sinh: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::sinh(x); });
        case Fn::Cosh: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::cosh(x); });
        case Fn::Asinh: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::asinh(x); });
        case Fn::Acosh: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::acosh(x); });
        case Fn::Atanh: return map1<Tag, Tag>(plan, in, out, [](float x) { return std::atanh(x); });
        case Fn::Softplus: return map1<Tag, Tag>(plan, in, out, [](float x) { return softplus(x); });
        case Fn::Softsign: return map1<Tag, Tag>(plan, in, out, [](float x) { return x / (1.0f + std::fabs(x)); });
        case Fn::Mish: return map1<Tag, Tag>(plan, in, out, [](float x) { return x * std::tanh(softplus(x)); });
        case Fn::LeakyRelu: {
          const float alpha = plan.alpha;
          return map1<Tag, Tag>(plan, in, out, [alpha](float x) { return x < 0.0f ? alpha * x : x; });
        }
        case Fn::Elu: {
          const float alpha = plan.alpha;
          return map1<Tag, Tag>(plan, in, out, [alpha](float x) { return x < 0.0f ? alpha * std::expm1(x) : x; });
        }
        case Fn::Celu: {
          const float alpha = plan.alpha;
          return map1<Tag, Tag>(plan, in, out, [alpha](float x) {
            return std::max(0.0f, x) + std::min(0.0f, alpha * std::expm1(x / alpha));
          });
        }
        case Fn::Selu: {
          const float alpha = plan.alpha, gamma = plan.beta;
          return map1<Tag, Tag>(plan, in, out, [alpha, gamma](float x) {
            return gamma * (x <= 0.0f ? alpha * std::expm1(x) : x);
          });
        }
        case Fn::ThresholdedRelu: {
          const float alpha = plan.alpha;
          return map1<Tag, Tag>(plan, in, out, [alpha](float x) { return x > alpha ? x : 0.0f; });
        }
        case Fn::Shrink: {
          const float lambd = plan.alpha, bias = plan.beta;
          return map1<Tag, Tag>(plan, in, out, [lambd, bias](float x) {
            return x < -lambd ? x + bias : (x > lambd ? x - bias : 0.0f);
          });
        }
        case Fn::IsNan: return map1<Tag, BoolByte>(plan, in, out, [](float x) { return x != x; });
        case Fn::IsInf: {
          const InfPlan inf = plan.inf;
          return map1<Tag, BoolByte>(plan, in, out, [inf](float x) {
            return std::isinf(x) && (x > 0 ? inf.positive : inf.negative);
          });
        }
        default: return make_error(ErrorCode::Internal, "not a floating function");
      }
    }
  });
}

Status run_numeric(const ElementwisePlan& plan, Fn fn, std::span<const TensorView> in, const TensorView& out) {
  return visit_dtype(plan.input_dtype, [&](auto tag) -> Status {
    using Tag = decltype(tag);
    if constexpr (std::is_same_v<Tag, BoolByte>) {
      return make_error(ErrorCode::Internal, "a numeric rule reached bool");
    } else {
      using V = typename Lane<Tag>::Value;
      switch (fn) {
        case Fn::Abs: return map1<Tag, Tag>(plan, in, out, [](V x) { return abs_value(x); });
        case Fn::Sign: return map1<Tag, Tag>(plan, in, out, [](V x) { return sign_of(x); });
        case Fn::Neg: return map1<Tag, Tag>(plan, in, out, [](V x) { return neg_of(x); });
        case Fn::Minimum: return map2<Tag, Tag>(plan, in, out, [](V a, V b) { return min_of(a, b); });
        case Fn::Maximum: return map2<Tag, Tag>(plan, in, out, [](V a, V b) { return max_of(a, b); });
        case Fn::Mod: {
          const bool fmod = plan.fmod;
          return map2<Tag, Tag>(plan, in, out, [fmod](V a, V b) { return mod_of(a, b, fmod); });
        }
        case Fn::PRelu:
          if constexpr (std::is_integral_v<V>) {
            return map2<Tag, Tag>(plan, in, out, [](V x, V slope) { return x < 0 ? wrap_mul(x, slope) : x; });
          } else {
            return map2<Tag, Tag>(plan, in, out, [](V x, V slope) { return x < 0 ? slope * x : x; });
          }
        default: break;
      }
      if constexpr (std::is_integral_v<V>) {
        switch (fn) {
          case Fn::Add: return map2<Tag, Tag>(plan, in, out, [](V a, V b) { return wrap_add(a, b); });
          case Fn::Sub: return map2<Tag, Tag>(plan, in, out, [](V a, V b) { return wrap_sub(a, b); });
          case Fn::Mul: return map2<Tag, Tag>(plan, in, out, [](V a, V b) { return wrap_mul(a, b); });
          case Fn::Div: return map2<Tag, Tag>(plan, in, out, [](V a, V b) { return int_div(a, b); });
          case Fn::Pow: return map2<Tag, Tag>(plan, in, out, [](V a, V b) { return int_pow(a, b); });
          default: break;
        }
      } else {
        // The float forms of the arithmetic ops reach here only for f16 and bf16.
        switch (fn) {
          case Fn::Add: return map2<Tag, Tag>(plan, in, out, [](V a, V b) { return a + b; });
          case Fn::Sub: return map2<Tag, Tag>(plan, in, out, [](V a, V b) { return a - b; });
          case Fn::Mul: return map2<Tag, Tag>(plan, in, out, [](V a, V b) { return a * b; });
          case Fn::Div: return map2<Tag, Tag>(plan, in, out, [](V a, V b) { return a / b; });
          case Fn::Pow: return map2<Tag, Tag>(plan, in, out, [](V a, V b) { return std::pow(a, b); });
          default: break;
        }
      }
      return make_error(ErrorCode::Internal, "not a numeric function");
    }
  });
}

Status run_compare(const ElementwisePlan& plan, Fn fn, std::span<const TensorView> in, const TensorView& out) {
  return visit_dtype(plan.input_dtype, [&](auto tag) -> Status {
    using Tag = decltype(tag);
    using V = typename Lane<Tag>::Value;
    switch (fn) {
      case Fn::Equal: return map2<Tag, BoolByte>(plan, in, out, [](V a, V b) { return a == b; });
      case Fn::Less: return map2<Tag, BoolByte>(plan, in, out, [](V a, V b) { return a < b; });
      case Fn::LessEqual: return map2<Tag, BoolByte>(plan, in, out, [](V a, V b) { return a <= b; });
      case Fn::Greater: return map2<Tag, BoolByte>(plan, in, out, [](V a, V b) { return a > b; });
      case Fn::GreaterEqual: return map2<Tag, BoolByte>(plan, in, out, [](V a, V b) { return a >= b; });
      default: return make_error(ErrorCode::Internal, "not a comparison");
    }
  });
}

Status run_logical(const ElementwisePlan& plan, Fn fn, std::span<const TensorView> in, const TensorView& out) {
  switch (fn) {
    case Fn::LogicalNot: return map1<BoolByte, BoolByte>(plan, in, out, [](bool x) { return !x; });
    case Fn::LogicalAnd: return map2<BoolByte, BoolByte>(plan, in, out, [](bool a, bool b) { return a && b; });
    case Fn::LogicalOr: return map2<BoolByte, BoolByte>(plan, in, out, [](bool a, bool b) { return a || b; });
    case Fn::LogicalXor: return map2<BoolByte, BoolByte>(plan, in, out, [](bool a, bool b) { return a != b; });
    default: return make_error(ErrorCode::Internal, "not a logical function");
  }
}

Status run_where(const ElementwisePlan& plan, std::span<const TensorView> in, const TensorView& out) {
  switch (element_size(plan.input_dtype)) {
    case 1: return select<uint8_t>(plan, in, out);
    case 2: return select<uint16_t>(plan, in, out);
    case 4: return select<uint32_t>(plan, in, out);
    case 8: return select<uint64_t>(plan, in, out);
    default: return make_error(ErrorCode::Internal, "where: element size {}", element_size(plan.input_dtype));
  }
}

Status run_cast(const ElementwisePlan& plan, std::span<const TensorView> in, const TensorView& out) {
  if (plan.input_dtype == plan.cast_to) {
    if (out.nbytes() > 0 && out.data != in[0].data) std::memcpy(out.data, in[0].data, out.nbytes());
    return {};
  }
  return visit_dtype(plan.input_dtype, [&](auto from_tag) -> Status {
    using From = decltype(from_tag);
    return visit_dtype(plan.cast_to, [&](auto to_tag) -> Status {
      using To = decltype(to_tag);
      using FromV = typename Lane<From>::Value;
      using ToV = typename Lane<To>::Value;
      return map1<From, To>(plan, in, out, [](FromV v) { return convert<ToV>(v); });
    });
  });
}

Status run(const ElementwiseOp& op, const OpAttrs& attrs, std::span<const TensorView> inputs,
           std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op.name, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(ElementwisePlan plan, plan_elementwise(op, attrs, inputs, outputs));
  const TensorView& out = outputs[0];
  switch (op.rule) {
    case ElementwiseRule::Floating:
    case ElementwiseRule::FloatingToBool: return run_floating(plan, op.fn, inputs, out);
    case ElementwiseRule::Numeric:
    case ElementwiseRule::NumericBinary: return run_numeric(plan, op.fn, inputs, out);
    case ElementwiseRule::Compare: return run_compare(plan, op.fn, inputs, out);
    case ElementwiseRule::Logical: return run_logical(plan, op.fn, inputs, out);
    case ElementwiseRule::Where: return run_where(plan, inputs, out);
    case ElementwiseRule::Cast: return run_cast(plan, inputs, out);
  }
  return make_error(ErrorCode::Internal, "{}: unknown rule", op.name);
}

// The table entry of `name`, found once per kernel function.
const ElementwiseOp& entry(std::string_view name) {
  const ElementwiseOp* op = find_elementwise_op(name);
  return op != nullptr ? *op : *integer_arithmetic_op(name);
}

}  // namespace

Status integer_arithmetic(std::string_view name, std::span<const TensorView> inputs,
                          std::span<const TensorView> outputs) {
  const ElementwiseOp* op = integer_arithmetic_op(name);
  if (op == nullptr) return make_error(ErrorCode::Internal, "'{}' has no integer form", name);
  return run(*op, OpAttrs{}, inputs, outputs);
}

#define PLANRT_TYPED_ELEMENTWISE(fn)                                                            \
  Status fn(const OpAttrs& attrs, std::span<const TensorView> in, std::span<const TensorView> out) { \
    static const ElementwiseOp& op = entry(#fn);                                                \
    return run(op, attrs, in, out);                                                             \
  }
PLANRT_ELEMENTWISE_OPS(PLANRT_TYPED_ELEMENTWISE)
#undef PLANRT_TYPED_ELEMENTWISE

}  // namespace planrt::kernels::cpu
