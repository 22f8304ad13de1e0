// Device code of the typed elementwise family (typed_elementwise_launch.h): one templated
// grid-stride kernel per arity, instantiated for every (function, element type) pair the
// *_implemented predicates admit, each in a same-shape form (index i everywhere) and a
// broadcast form (the OperandMap walk). Elements are read as a value type (float for F32,
// F16 and BF16; the integer itself; bool) and stored back through the same traits, so every
// function is written once over value types. Simple by design: one element a thread per
// step, no vector loads (not measured against a vectorized form).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cuda/typed_elementwise_launch.h"

namespace planrt::kernels::cuda::launch::typed {
namespace {

constexpr int kThreads = 256;            // a multiple of 32
constexpr int64_t kMaxBlocks = 1 << 20;  // grid-stride loops cover the rest

int grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

__device__ __forceinline__ int64_t first_index() {
  return blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() { return int64_t{gridDim.x} * blockDim.x; }

// ---- element traits: storage in memory, the value computed with ------------------------

template <ElementType E>
struct Elem;

template <>
struct Elem<ElementType::F32> {
  using Storage = float;
  using Value = float;
  static __device__ __forceinline__ Value load(const Storage* p, int64_t i) { return p[i]; }
  static __device__ __forceinline__ void store(Storage* p, int64_t i, Value v) { p[i] = v; }
};
template <>
struct Elem<ElementType::F16> {
  using Storage = __half;
  using Value = float;
  static __device__ __forceinline__ Value load(const Storage* p, int64_t i) {
    return __half2float(p[i]);
  }
  static __device__ __forceinline__ void store(Storage* p, int64_t i, Value v) {
    p[i] = __float2half_rn(v);
  }
};
template <>
struct Elem<ElementType::BF16> {
  using Storage = __nv_bfloat16;
  using Value = float;
  static __device__ __forceinline__ Value load(const Storage* p, int64_t i) {
    return __bfloat162float(p[i]);
  }
  static __device__ __forceinline__ void store(Storage* p, int64_t i, Value v) {
    p[i] = __float2bfloat16_rn(v);
  }
};

template <typename T>
struct IntegerElem {
  using Storage = T;
  using Value = T;
  static __device__ __forceinline__ Value load(const Storage* p, int64_t i) { return p[i]; }
  static __device__ __forceinline__ void store(Storage* p, int64_t i, Value v) { p[i] = v; }
};
template <>
struct Elem<ElementType::I32> : IntegerElem<int32_t> {};
template <>
struct Elem<ElementType::I64> : IntegerElem<int64_t> {};
template <>
struct Elem<ElementType::U8> : IntegerElem<uint8_t> {};

template <>
struct Elem<ElementType::Bool> {
  using Storage = uint8_t;
  using Value = bool;
  static __device__ __forceinline__ Value load(const Storage* p, int64_t i) { return p[i] != 0; }
  static __device__ __forceinline__ void store(Storage* p, int64_t i, Value v) {
    p[i] = v ? 1 : 0;
  }
};

template <ElementType E>
using StorageOf = typename Elem<E>::Storage;
template <ElementType E>
using ValueOf = typename Elem<E>::Value;
// is_floating() of the launch header, as a constant device code may read.
template <ElementType E>
constexpr bool kFloating =
    E == ElementType::F32 || E == ElementType::F16 || E == ElementType::BF16;

// The range of each integer type, and the floats just outside it (powers of two, exact),
// for the saturating float-to-integer cast.
template <typename T>
struct IntegerRange;
template <>
struct IntegerRange<int32_t> {
  static constexpr int32_t kMin = INT32_MIN;
  static constexpr int32_t kMax = INT32_MAX;
  static constexpr float kLowest = -2147483648.0f;  // == kMin
  static constexpr float kAbove = 2147483648.0f;    // kMax + 1
};
template <>
struct IntegerRange<int64_t> {
  static constexpr int64_t kMin = INT64_MIN;
  static constexpr int64_t kMax = INT64_MAX;
  static constexpr float kLowest = -9223372036854775808.0f;
  static constexpr float kAbove = 9223372036854775808.0f;
};
template <>
struct IntegerRange<uint8_t> {
  static constexpr uint8_t kMin = 0;
  static constexpr uint8_t kMax = 255;
  static constexpr float kLowest = 0.0f;
  static constexpr float kAbove = 256.0f;
};

// ---- the functions, over value types --------------------------------------------------

// Wrapping integer arithmetic goes through the unsigned type: signed overflow is undefined,
// unsigned arithmetic is modular, and the conversion back is two's complement.
template <typename T>
using Unsigned = std::make_unsigned_t<T>;

template <typename T>
__device__ __forceinline__ T wrapping_neg(T x) {
  return static_cast<T>(Unsigned<T>(0) - static_cast<Unsigned<T>>(x));
}

template <typename T>
__device__ __forceinline__ T wrapping_mul(T a, T b) {
  // u8 promotes to int through its unsigned type: 255 * 255 fits, and the cast keeps the low
  // bits.
  return static_cast<T>(static_cast<Unsigned<T>>(a) * static_cast<Unsigned<T>>(b));
}

template <typename T>
__device__ __forceinline__ T integer_div(T a, T b) {
  if (b == 0) return 0;  // x / 0 = 0: undefined in ONNX, a trap on the device
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return wrapping_neg(a);  // INT_MIN / -1 wraps to INT_MIN instead of trapping
  }
  return static_cast<T>(a / b);  // truncates toward zero
}

template <typename T>
__device__ __forceinline__ T integer_pow(T base, T exponent) {
  if constexpr (std::is_signed_v<T>) {
    if (exponent < 0) {  // 1 / base^-e truncates to 0 unless |base| is 1
      if (base == 1) return 1;
      if (base == -1) return (exponent & 1) != 0 ? T(-1) : T(1);
      return 0;
    }
  }
  // Square and multiply, wrapping: at most 64 rounds whatever the exponent.
  using U = Unsigned<T>;
  U result = 1;
  U square = static_cast<U>(base);
  for (U e = static_cast<U>(exponent); e != 0; e >>= 1) {
    if ((e & 1) != 0) result = static_cast<U>(result * square);
    square = static_cast<U>(square * square);
  }
  return static_cast<T>(result);
}

// The remainder of a / b (typed_elementwise_launch.h): the CPU kernel's mod_of, step for
// step, so that both back ends give the same bits (fmodf is exact, and the one addition
// rounds the same way on both).
template <bool FloorMod, typename V>
__device__ __forceinline__ V remainder_of(V a, V b) {
  V r;
  if constexpr (std::is_floating_point_v<V>) {
    r = fmodf(a, b);  // x mod 0 and inf mod x are NaN, x mod inf is x
  } else {
    if (b == 0) return 0;  // undefined in ONNX, a trap on the device
    if constexpr (std::is_signed_v<V>) {
      if (b == -1) return 0;  // INT_MIN % -1 would trap; every x % -1 is 0
    }
    r = static_cast<V>(a % b);  // the dividend's sign (C++ truncates toward zero)
  }
  if constexpr (FloorMod && std::is_signed_v<V>) {
    // |r| < |b| with the signs apart: r + b neither overflows nor leaves the range.
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<V>(r + b);
  }
  return r;
}

// std::max(a, b) and std::min(a, b) as the CPU kernel calls them: (a < b) ? b : a and
// (b < a) ? b : a. fmaxf / fminf would pick the number over a NaN where these keep a.
__device__ __forceinline__ float std_max(float a, float b) { return a < b ? b : a; }
__device__ __forceinline__ float std_min(float a, float b) { return b < a ? b : a; }

// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|), the CPU kernel's softplus.
__device__ __forceinline__ float softplus_of(float x) {
  return std_max(x, 0.0f) + log1pf(expf(-fabsf(x)));
}

template <UnaryFn Fn, typename V>
__device__ __forceinline__ auto apply_unary(V x, const UnaryParams& p) {
  if constexpr (Fn == UnaryFn::Cos) {
    return cosf(x);
  } else if constexpr (Fn == UnaryFn::Sin) {
    return sinf(x);
  } else if constexpr (Fn == UnaryFn::Log) {
    return logf(x);  // log(0) = -inf, log(x < 0) = NaN
  } else if constexpr (Fn == UnaryFn::Floor) {
    return floorf(x);
  } else if constexpr (Fn == UnaryFn::Ceil) {
    return ceilf(x);
  } else if constexpr (Fn == UnaryFn::Round) {
    return rintf(x);  // the device rounds to nearest even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2
  } else if constexpr (Fn == UnaryFn::Reciprocal) {
    return 1.0f / x;  // IEEE division: 1 / +-0 = +-inf
  } else if constexpr (Fn == UnaryFn::Tan) {
    return tanf(x);
  } else if constexpr (Fn == UnaryFn::Acos) {
    return acosf(x);  // NaN outside [-1, 1], as the trigonometric inverses and atanh below
  } else if constexpr (Fn == UnaryFn::Asin) {
    return asinf(x);
  } else if constexpr (Fn == UnaryFn::Atan) {
    return atanf(x);
  } else if constexpr (Fn == UnaryFn::Sinh) {
    return sinhf(x);
  } else if constexpr (Fn == UnaryFn::Cosh) {
    return coshf(x);
  } else if constexpr (Fn == UnaryFn::Asinh) {
    return asinhf(x);
  } else if constexpr (Fn == UnaryFn::Acosh) {
    return acoshf(x);  // NaN below 1
  } else if constexpr (Fn == UnaryFn::Atanh) {
    return atanhf(x);  // +-inf at +-1
  } else if constexpr (Fn == UnaryFn::Softplus) {
    return softplus_of(x);
  } else if constexpr (Fn == UnaryFn::Softsign) {
    return x / (1.0f + fabsf(x));
  } else if constexpr (Fn == UnaryFn::Mish) {
    return x * tanhf(softplus_of(x));
  } else if constexpr (Fn == UnaryFn::LeakyRelu) {
    return x < 0.0f ? p.alpha * x : x;
  } else if constexpr (Fn == UnaryFn::Elu) {
    return x < 0.0f ? p.alpha * expm1f(x) : x;
  } else if constexpr (Fn == UnaryFn::Celu) {
    return std_max(0.0f, x) + std_min(0.0f, p.alpha * expm1f(x / p.alpha));
  } else if constexpr (Fn == UnaryFn::Selu) {
    return p.beta * (x <= 0.0f ? p.alpha * expm1f(x) : x);  // beta: gamma
  } else if constexpr (Fn == UnaryFn::ThresholdedRelu) {
    return x > p.alpha ? x : 0.0f;
  } else if constexpr (Fn == UnaryFn::Shrink) {
    return x < -p.alpha ? x + p.beta : (x > p.alpha ? x - p.beta : 0.0f);  // lambd, bias
  } else if constexpr (Fn == UnaryFn::Abs) {
    if constexpr (std::is_floating_point_v<V>) {
      return fabsf(x);
    } else if constexpr (std::is_signed_v<V>) {
      return x < 0 ? wrapping_neg(x) : x;  // abs(INT_MIN) wraps to INT_MIN
    } else {
      return x;
    }
  } else if constexpr (Fn == UnaryFn::Sign) {
    if constexpr (std::is_floating_point_v<V>) {
      if (x != x) return x;  // NaN stays NaN
      return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);  // +-0 -> +0
    } else if constexpr (std::is_signed_v<V>) {
      return static_cast<V>(x > 0 ? 1 : (x < 0 ? -1 : 0));
    } else {
      return static_cast<V>(x != 0 ? 1 : 0);
    }
  } else if constexpr (Fn == UnaryFn::Neg) {
    return wrapping_neg(x);
  } else if constexpr (Fn == UnaryFn::IsNan) {
    return x != x;
  } else if constexpr (Fn == UnaryFn::IsInf) {
    return ((p.flags & kIsInfPositive) != 0 && x == INFINITY) ||
           ((p.flags & kIsInfNegative) != 0 && x == -INFINITY);
  } else {
    static_assert(Fn == UnaryFn::LogicalNot);
    return !x;
  }
}

template <BinaryFn Fn, typename V>
__device__ __forceinline__ auto apply_binary(V a, V b) {
  if constexpr (Fn == BinaryFn::Equal) {
    return a == b;  // NaN equals nothing
  } else if constexpr (Fn == BinaryFn::Less) {
    return a < b;
  } else if constexpr (Fn == BinaryFn::LessEqual) {
    return a <= b;
  } else if constexpr (Fn == BinaryFn::Greater) {
    return a > b;
  } else if constexpr (Fn == BinaryFn::GreaterEqual) {
    return a >= b;
  } else if constexpr (Fn == BinaryFn::LogicalAnd) {
    return a && b;
  } else if constexpr (Fn == BinaryFn::LogicalOr) {
    return a || b;
  } else if constexpr (Fn == BinaryFn::LogicalXor) {
    return a != b;
  } else if constexpr (Fn == BinaryFn::Minimum || Fn == BinaryFn::Maximum) {
    if constexpr (std::is_floating_point_v<V>) {
      // NaN wins, as torch.minimum / torch.maximum (fminf and fmaxf would drop it).
      if (a != a) return a;
      if (b != b) return b;
    }
    if constexpr (Fn == BinaryFn::Minimum) {
      return b < a ? b : a;
    } else {
      return b > a ? b : a;
    }
  } else if constexpr (Fn == BinaryFn::Mod) {
    return remainder_of<true>(a, b);
  } else if constexpr (Fn == BinaryFn::FMod) {
    return remainder_of<false>(a, b);
  } else if constexpr (Fn == BinaryFn::Add) {
    return static_cast<V>(static_cast<Unsigned<V>>(a) + static_cast<Unsigned<V>>(b));
  } else if constexpr (Fn == BinaryFn::Sub) {
    return static_cast<V>(static_cast<Unsigned<V>>(a) - static_cast<Unsigned<V>>(b));
  } else if constexpr (Fn == BinaryFn::Mul) {
    return wrapping_mul(a, b);
  } else if constexpr (Fn == BinaryFn::Div) {
    return integer_div(a, b);
  } else if constexpr (Fn == BinaryFn::PRelu) {
    // a: x, b: the slope. Floats multiply in f32 (16-bit types widened), integers wrap.
    if constexpr (std::is_floating_point_v<V>) {
      return a < 0.0f ? b * a : a;
    } else if constexpr (std::is_signed_v<V>) {
      return a < 0 ? wrapping_mul(a, b) : a;
    } else {
      return a;  // u8 is never negative
    }
  } else {
    static_assert(Fn == BinaryFn::Pow);
    return integer_pow(a, b);
  }
}

// An integer's value rounded once to bf16's 8 significant bits, to nearest even, as a float
// that holds it exactly (so the bf16 store is exact). Through f32 it would round twice:
// 2^24 + 2^16 + 1 would go to 2^24 + 2^16 (f32) and then to 2^24 (a tie, to even), not to
// 2^24 + 2^17.
__device__ __forceinline__ float integer_as_bf16_value(int64_t v) {
  const bool negative = v < 0;
  const uint64_t magnitude =
      negative ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  const int top = 63 - __clzll(static_cast<long long>(magnitude));  // -1 for 0
  float value;
  if (top < 8) {
    value = static_cast<float>(magnitude);  // at most 8 bits: exact
  } else {
    const int shift = top - 7;  // the bits below bf16's last kept one
    const uint64_t kept = magnitude >> shift;
    const uint64_t rest = magnitude & ((uint64_t{1} << shift) - 1);
    const uint64_t half = uint64_t{1} << (shift - 1);
    const uint64_t rounded = kept + ((rest > half || (rest == half && (kept & 1) != 0)) ? 1 : 0);
    value = ldexpf(static_cast<float>(rounded), shift);  // rounded <= 256: exact
  }
  return negative ? -value : value;
}

template <typename T>
__device__ __forceinline__ T float_to_integer(float x) {
  using Range = IntegerRange<T>;
  if (x != x) return 0;
  if (x <= Range::kLowest) return Range::kMin;
  if (x >= Range::kAbove) return Range::kMax;
  return static_cast<T>(x);  // inside the range: truncates toward zero
}

template <ElementType In, ElementType Out>
__device__ __forceinline__ ValueOf<Out> cast_value(ValueOf<In> x) {
  if constexpr (Out == ElementType::Bool) {
    return x != ValueOf<In>(0);  // NaN is true
  } else if constexpr (In == ElementType::Bool) {
    return static_cast<ValueOf<Out>>(x ? 1 : 0);
  } else if constexpr (kFloating<In> && kFloating<Out>) {
    return x;  // the store rounds to Out
  } else if constexpr (kFloating<In>) {
    return float_to_integer<ValueOf<Out>>(x);
  } else if constexpr (Out == ElementType::BF16) {
    return integer_as_bf16_value(static_cast<int64_t>(x));
  } else {
    // Integer to f32 rounds once (cvt.rn). Integer to f16 through f32 is exact too: below
    // 2^24 the f32 holds the integer, and from there up both ways overflow to inf.
    // Integer to integer wraps.
    return static_cast<ValueOf<Out>>(x);
  }
}

// ---- the broadcast walk -----------------------------------------------------------------

template <int Operands>
__device__ __forceinline__ void operand_offsets(int64_t i, const OperandMap& map,
                                                int64_t (&offsets)[Operands]) {
#pragma unroll
  for (int k = 0; k < Operands; ++k) offsets[k] = 0;
  for (int d = map.rank - 1; d >= 0; --d) {
    const int64_t index = i % map.size[d];
    i /= map.size[d];
#pragma unroll
    for (int k = 0; k < Operands; ++k) offsets[k] += index * map.stride[k][d];
  }
}

// ---- kernels ----------------------------------------------------------------------------

template <UnaryFn Fn, ElementType In, ElementType Out>
__global__ void unary_kernel(const StorageOf<In>* x, StorageOf<Out>* y, int64_t n,
                             UnaryParams params) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    Elem<Out>::store(y, i, apply_unary<Fn>(Elem<In>::load(x, i), params));
  }
}

template <BinaryFn Fn, ElementType In, ElementType Out, bool Broadcast>
__global__ void binary_kernel(const StorageOf<In>* a, const StorageOf<In>* b, StorageOf<Out>* y,
                              int64_t n, OperandMap map) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    int64_t at[2] = {i, i};
    if constexpr (Broadcast) operand_offsets(i, map, at);
    Elem<Out>::store(y, i, apply_binary<Fn>(Elem<In>::load(a, at[0]), Elem<In>::load(b, at[1])));
  }
}

template <ElementType T, bool Broadcast>
__global__ void where_kernel(const uint8_t* cond, const StorageOf<T>* a, const StorageOf<T>* b,
                             StorageOf<T>* y, int64_t n, OperandMap map) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    int64_t at[3] = {i, i, i};
    if constexpr (Broadcast) operand_offsets(i, map, at);
    const bool pick_a = cond[at[0]] != 0;
    if constexpr (T == ElementType::Bool) {
      Elem<T>::store(y, i, pick_a ? Elem<T>::load(a, at[1]) : Elem<T>::load(b, at[2]));
    } else {
      y[i] = pick_a ? a[at[1]] : b[at[2]];  // the bits as they are
    }
  }
}

template <ElementType In, ElementType Out>
__global__ void cast_kernel(const StorageOf<In>* x, StorageOf<Out>* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    if constexpr (In == Out && In != ElementType::Bool) {
      y[i] = x[i];
    } else {
      Elem<Out>::store(y, i, cast_value<In, Out>(Elem<In>::load(x, i)));
    }
  }
}

// ---- run-time values to template arguments ----------------------------------------------

template <typename E, E V>
using Tag = std::integral_constant<E, V>;

template <typename Body>
cudaError_t with_element_type(ElementType t, Body&& body) {
  switch (t) {
    case ElementType::F32: return body(Tag<ElementType, ElementType::F32>{});
    case ElementType::F16: return body(Tag<ElementType, ElementType::F16>{});
    case ElementType::BF16: return body(Tag<ElementType, ElementType::BF16>{});
    case ElementType::I32: return body(Tag<ElementType, ElementType::I32>{});
    case ElementType::I64: return body(Tag<ElementType, ElementType::I64>{});
    case ElementType::U8: return body(Tag<ElementType, ElementType::U8>{});
    case ElementType::Bool: return body(Tag<ElementType, ElementType::Bool>{});
  }
  return cudaErrorInvalidValue;
}

template <typename Body>
cudaError_t with_unary_fn(UnaryFn fn, Body&& body) {
  switch (fn) {
    case UnaryFn::Cos: return body(Tag<UnaryFn, UnaryFn::Cos>{});
    case UnaryFn::Sin: return body(Tag<UnaryFn, UnaryFn::Sin>{});
    case UnaryFn::Log: return body(Tag<UnaryFn, UnaryFn::Log>{});
    case UnaryFn::Floor: return body(Tag<UnaryFn, UnaryFn::Floor>{});
    case UnaryFn::Ceil: return body(Tag<UnaryFn, UnaryFn::Ceil>{});
    case UnaryFn::Round: return body(Tag<UnaryFn, UnaryFn::Round>{});
    case UnaryFn::Reciprocal: return body(Tag<UnaryFn, UnaryFn::Reciprocal>{});
    case UnaryFn::Tan: return body(Tag<UnaryFn, UnaryFn::Tan>{});
    case UnaryFn::Acos: return body(Tag<UnaryFn, UnaryFn::Acos>{});
    case UnaryFn::Asin: return body(Tag<UnaryFn, UnaryFn::Asin>{});
    case UnaryFn::Atan: return body(Tag<UnaryFn, UnaryFn::Atan>{});
    case UnaryFn::Sinh: return body(Tag<UnaryFn, UnaryFn::Sinh>{});
    case UnaryFn::Cosh: return body(Tag<UnaryFn, UnaryFn::Cosh>{});
    case UnaryFn::Asinh: return body(Tag<UnaryFn, UnaryFn::Asinh>{});
    case UnaryFn::Acosh: return body(Tag<UnaryFn, UnaryFn::Acosh>{});
    case UnaryFn::Atanh: return body(Tag<UnaryFn, UnaryFn::Atanh>{});
    case UnaryFn::Softplus: return body(Tag<UnaryFn, UnaryFn::Softplus>{});
    case UnaryFn::Softsign: return body(Tag<UnaryFn, UnaryFn::Softsign>{});
    case UnaryFn::Mish: return body(Tag<UnaryFn, UnaryFn::Mish>{});
    case UnaryFn::LeakyRelu: return body(Tag<UnaryFn, UnaryFn::LeakyRelu>{});
    case UnaryFn::Elu: return body(Tag<UnaryFn, UnaryFn::Elu>{});
    case UnaryFn::Celu: return body(Tag<UnaryFn, UnaryFn::Celu>{});
    case UnaryFn::Selu: return body(Tag<UnaryFn, UnaryFn::Selu>{});
    case UnaryFn::ThresholdedRelu: return body(Tag<UnaryFn, UnaryFn::ThresholdedRelu>{});
    case UnaryFn::Shrink: return body(Tag<UnaryFn, UnaryFn::Shrink>{});
    case UnaryFn::Abs: return body(Tag<UnaryFn, UnaryFn::Abs>{});
    case UnaryFn::Sign: return body(Tag<UnaryFn, UnaryFn::Sign>{});
    case UnaryFn::Neg: return body(Tag<UnaryFn, UnaryFn::Neg>{});
    case UnaryFn::IsNan: return body(Tag<UnaryFn, UnaryFn::IsNan>{});
    case UnaryFn::IsInf: return body(Tag<UnaryFn, UnaryFn::IsInf>{});
    case UnaryFn::LogicalNot: return body(Tag<UnaryFn, UnaryFn::LogicalNot>{});
  }
  return cudaErrorInvalidValue;
}

template <typename Body>
cudaError_t with_binary_fn(BinaryFn fn, Body&& body) {
  switch (fn) {
    case BinaryFn::Equal: return body(Tag<BinaryFn, BinaryFn::Equal>{});
    case BinaryFn::Less: return body(Tag<BinaryFn, BinaryFn::Less>{});
    case BinaryFn::LessEqual: return body(Tag<BinaryFn, BinaryFn::LessEqual>{});
    case BinaryFn::Greater: return body(Tag<BinaryFn, BinaryFn::Greater>{});
    case BinaryFn::GreaterEqual: return body(Tag<BinaryFn, BinaryFn::GreaterEqual>{});
    case BinaryFn::LogicalAnd: return body(Tag<BinaryFn, BinaryFn::LogicalAnd>{});
    case BinaryFn::LogicalOr: return body(Tag<BinaryFn, BinaryFn::LogicalOr>{});
    case BinaryFn::LogicalXor: return body(Tag<BinaryFn, BinaryFn::LogicalXor>{});
    case BinaryFn::Minimum: return body(Tag<BinaryFn, BinaryFn::Minimum>{});
    case BinaryFn::Maximum: return body(Tag<BinaryFn, BinaryFn::Maximum>{});
    case BinaryFn::Mod: return body(Tag<BinaryFn, BinaryFn::Mod>{});
    case BinaryFn::FMod: return body(Tag<BinaryFn, BinaryFn::FMod>{});
    case BinaryFn::Add: return body(Tag<BinaryFn, BinaryFn::Add>{});
    case BinaryFn::Sub: return body(Tag<BinaryFn, BinaryFn::Sub>{});
    case BinaryFn::Mul: return body(Tag<BinaryFn, BinaryFn::Mul>{});
    case BinaryFn::Div: return body(Tag<BinaryFn, BinaryFn::Div>{});
    case BinaryFn::Pow: return body(Tag<BinaryFn, BinaryFn::Pow>{});
    case BinaryFn::PRelu: return body(Tag<BinaryFn, BinaryFn::PRelu>{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t unary(UnaryFn fn, ElementType in, ElementType out, const void* x, void* y, int64_t n,
                  const UnaryParams& params, cudaStream_t stream) {
  if (!unary_implemented(fn, in) || out != unary_output(fn, in)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return with_unary_fn(fn, [&](auto fn_tag) {
    return with_element_type(in, [&](auto in_tag) -> cudaError_t {
      constexpr UnaryFn Fn = decltype(fn_tag)::value;
      constexpr ElementType In = decltype(in_tag)::value;
      if constexpr (unary_implemented(Fn, In)) {
        constexpr ElementType Out = unary_output(Fn, In);
        unary_kernel<Fn, In, Out><<<grid_for(n), kThreads, 0, stream>>>(
            static_cast<const StorageOf<In>*>(x), static_cast<StorageOf<Out>*>(y), n, params);
        return cudaGetLastError();
      } else {
        return cudaErrorInvalidValue;
      }
    });
  });
}

cudaError_t binary(BinaryFn fn, ElementType in, ElementType out, const void* a, const void* b,
                   void* y, int64_t n, const OperandMap* map, cudaStream_t stream) {
  if (!binary_implemented(fn, in) || out != binary_output(fn, in)) return cudaErrorInvalidValue;
  if (map != nullptr && (map->rank < 0 || map->rank > kMaxDims)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return with_binary_fn(fn, [&](auto fn_tag) {
    return with_element_type(in, [&](auto in_tag) -> cudaError_t {
      constexpr BinaryFn Fn = decltype(fn_tag)::value;
      constexpr ElementType In = decltype(in_tag)::value;
      if constexpr (binary_implemented(Fn, In)) {
        constexpr ElementType Out = binary_output(Fn, In);
        const auto* pa = static_cast<const StorageOf<In>*>(a);
        const auto* pb = static_cast<const StorageOf<In>*>(b);
        auto* py = static_cast<StorageOf<Out>*>(y);
        if (map == nullptr) {
          binary_kernel<Fn, In, Out, false>
              <<<grid_for(n), kThreads, 0, stream>>>(pa, pb, py, n, OperandMap{});
        } else {
          binary_kernel<Fn, In, Out, true>
              <<<grid_for(n), kThreads, 0, stream>>>(pa, pb, py, n, *map);
        }
        return cudaGetLastError();
      } else {
        return cudaErrorInvalidValue;
      }
    });
  });
}

cudaError_t where(ElementType type, const void* cond, const void* a, const void* b, void* y,
                  int64_t n, const OperandMap* map, cudaStream_t stream) {
  if (map != nullptr && (map->rank < 0 || map->rank > kMaxDims)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return with_element_type(type, [&](auto tag) -> cudaError_t {
    constexpr ElementType T = decltype(tag)::value;
    const auto* pc = static_cast<const uint8_t*>(cond);
    const auto* pa = static_cast<const StorageOf<T>*>(a);
    const auto* pb = static_cast<const StorageOf<T>*>(b);
    auto* py = static_cast<StorageOf<T>*>(y);
    if (map == nullptr) {
      where_kernel<T, false><<<grid_for(n), kThreads, 0, stream>>>(pc, pa, pb, py, n, OperandMap{});
    } else {
      where_kernel<T, true><<<grid_for(n), kThreads, 0, stream>>>(pc, pa, pb, py, n, *map);
    }
    return cudaGetLastError();
  });
}

cudaError_t cast(ElementType in, ElementType out, const void* x, void* y, int64_t n,
                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return with_element_type(in, [&](auto in_tag) {
    return with_element_type(out, [&](auto out_tag) -> cudaError_t {
      constexpr ElementType In = decltype(in_tag)::value;
      constexpr ElementType Out = decltype(out_tag)::value;
      cast_kernel<In, Out><<<grid_for(n), kThreads, 0, stream>>>(
          static_cast<const StorageOf<In>*>(x), static_cast<StorageOf<Out>*>(y), n);
      return cudaGetLastError();
    });
  });
}

}  // namespace planrt::kernels::cuda::launch::typed
