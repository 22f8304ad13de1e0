// The typed elementwise family's CUDA kernels (kernels/elementwise_ops.h) and the integer
// forms of add, sub, mul, div, pow and neg, element for element against the CPU kernel
// (every op of the family, EveryOpOfTheFamilyAgreesWithTheCpuKernel, the parametric ones with
// their defaults and other attributes) and against a small host reference written here (no
// CPU kernel involved): every op in every dtype its rule admits,
// on same-shape, broadcast (rank 0, size-1 dims, many blocks) and empty operands, over value
// lists holding the edge cases (NaN, +-inf, +-0, halfway points, the integers' ends); then
// the semantics that matter most against values written out by hand (round half to even,
// INT_MIN / -1, x / 0, negative powers, mod's sign with and without fmod, x mod 0 and
// INT_MIN mod -1, saturating and correctly rounded casts); then the errors. GPU tests skip without a visible GPU and fail instead with PLANRT_REQUIRE_GPU=1;
// the registry and dtype-coverage tests need no GPU.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/cuda/typed_elementwise_launch.h"
#include "kernels/elementwise_ops.h"
#include "kernels/operands.h"
#include "support/gpu.h"

namespace planrt::kernels::cuda {
namespace {

using testing::attrs_of;
using testing::CudaRunner;
using testing::HostTensor;
using testing::IsError;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr DType kAllDtypes[] = {DType::F32, DType::F16, DType::BF16, DType::I32,
                                DType::I64, DType::U8,  DType::Bool};

// ---- host elements ------------------------------------------------------------------------
// The reference computes with value types: float for f32, f16 and bf16 (the 16-bit types
// widened exactly, results rounded to nearest even on store by planrt's conversions),
// int32_t, int64_t, uint8_t, and bool (a byte read as != 0, written 0 or 1).

template <typename T>
T load_raw(const HostTensor& t, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(t.data()) + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
void store_raw(HostTensor& t, int64_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(t.data()) + i * sizeof(T), &v, sizeof(T));
}

template <typename V>
V get(const HostTensor& t, int64_t i) {
  if constexpr (std::is_same_v<V, float>) {
    if (t.dtype() == DType::F16) return f16_bits_to_f32(load_raw<uint16_t>(t, i));
    if (t.dtype() == DType::BF16) return bf16_bits_to_f32(load_raw<uint16_t>(t, i));
    return load_raw<float>(t, i);
  } else if constexpr (std::is_same_v<V, bool>) {
    return load_raw<uint8_t>(t, i) != 0;
  } else {
    return load_raw<V>(t, i);
  }
}

template <typename V>
void put(HostTensor& t, int64_t i, V v) {
  if constexpr (std::is_same_v<V, float>) {
    if (t.dtype() == DType::F16) return store_raw(t, i, f32_to_f16_bits(v));
    if (t.dtype() == DType::BF16) return store_raw(t, i, f32_to_bf16_bits(v));
    store_raw(t, i, v);
  } else if constexpr (std::is_same_v<V, bool>) {
    store_raw<uint8_t>(t, i, v ? 1 : 0);
  } else {
    store_raw(t, i, v);
  }
}

template <typename V>
bool holds(DType d) {
  if constexpr (std::is_same_v<V, float>) return is_floating(d);
  if constexpr (std::is_same_v<V, int32_t>) return d == DType::I32;
  if constexpr (std::is_same_v<V, int64_t>) return d == DType::I64;
  if constexpr (std::is_same_v<V, uint8_t>) return d == DType::U8;
  if constexpr (std::is_same_v<V, bool>) return d == DType::Bool;
  return false;
}

// body(V{}) for the value type of `d` among Vs: the reference of each op lists the value
// types it is written for, and a dtype outside them fails the test (a coverage gap).
template <typename... Vs, typename Body>
void with_value_type(DType d, Body&& body) {
  bool ran = false;
  (
      [&] {
        if (!ran && holds<Vs>(d)) {
          ran = true;
          body(Vs{});
        }
      }(),
      ...);
  if (!ran) ADD_FAILURE() << "the test has no reference for dtype " << dtype_name(d);
}

std::string show(const HostTensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::I32: return fmt::format("{}", get<int32_t>(t, i));
    case DType::I64: return fmt::format("{}", get<int64_t>(t, i));
    case DType::U8: return fmt::format("{}", get<uint8_t>(t, i));
    case DType::Bool: return fmt::format("byte {}", load_raw<uint8_t>(t, i));
    default: return fmt::format("{}", get<float>(t, i));
  }
}

// Position of a float on the output dtype's grid (-0 and +0 both 0), for ulp distances.
int64_t grid_position(float v, DType d) {
  uint32_t bits = std::bit_cast<uint32_t>(v);
  int width = 32;
  if (d == DType::F16 || d == DType::BF16) {
    bits = d == DType::F16 ? f32_to_f16_bits(v) : f32_to_bf16_bits(v);  // exact: v came from d
    width = 16;
  }
  const uint32_t sign = 1u << (width - 1);
  return (bits & sign) != 0 ? -static_cast<int64_t>(bits & ~sign) : static_cast<int64_t>(bits);
}

// Element-for-element agreement. Integers and bools byte for byte (a bool must be written 0
// or 1). Floats: NaN matches NaN, infinities exactly, finite values within max_ulps of the
// output dtype or within abs_tol of each other (for results below f32's normal range, whose
// few significant bits make ulps meaningless); the sign of a zero only when zero_sign is set.
::testing::AssertionResult same_elements(const HostTensor& got, const HostTensor& want,
                                         int max_ulps, bool zero_sign, float abs_tol = 0.0f) {
  if (got.dtype() != want.dtype() || !(got.shape() == want.shape())) {
    return ::testing::AssertionFailure() << "got " << dtype_name(got.dtype()) << " "
                                         << got.shape().to_string() << ", want "
                                         << dtype_name(want.dtype()) << " " << want.shape().to_string();
  }
  std::string bad;
  int count = 0;
  for (int64_t i = 0; i < want.shape().numel(); ++i) {
    bool ok = true;
    if (is_floating(want.dtype())) {
      const float g = get<float>(got, i);
      const float w = get<float>(want, i);
      if (std::isnan(w) || std::isnan(g)) {
        ok = std::isnan(w) && std::isnan(g);
      } else if (!std::isfinite(w) || !std::isfinite(g)) {
        ok = g == w;
      } else {
        ok = std::abs(grid_position(g, want.dtype()) - grid_position(w, want.dtype())) <= max_ulps ||
             std::fabs(g - w) <= abs_tol;
        if (zero_sign && w == 0.0f) ok = ok && std::signbit(g) == std::signbit(w);
      }
    } else {
      const size_t size = element_size(want.dtype());
      ok = std::memcmp(static_cast<const char*>(got.data()) + i * size,
                       static_cast<const char*>(want.data()) + i * size, size) == 0;
    }
    if (!ok && ++count <= 8) {
      bad += fmt::format("\n  [{}] got {}, want {}", i, show(got, i), show(want, i));
    }
  }
  if (count == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << count << " of " << want.shape().numel()
                                       << " elements differ:" << bad;
}

// ---- the values every op meets -------------------------------------------------------------

const std::vector<float>& float_samples() {
  static const std::vector<float> v = {0.0f, -0.0f, 1.0f,   -1.0f,  0.5f,    -0.5f, 1.5f,
                                       -1.5f, 2.5f,  -2.5f, 3.7f,   -3.7f,   0.1f,  100.25f,
                                       1e20f, -7e-3f, kInf, -kInf,  kNan,    2.0f};
  return v;
}
const std::vector<int64_t>& integer_samples(DType d) {
  static const std::vector<int64_t> i32 = {0,      1,     -1,     2,  -2, 3, -3, 7, -7, 100, 46341,
                                           -46341, 65536, 31,     32, INT32_MAX, INT32_MIN,
                                           INT32_MIN + 1};
  static const std::vector<int64_t> i64 = {0,           1,           -1,         2,  -2, 3, -3, 7,
                                           -7,          100,         3037000500, -3037000500,
                                           4294967296,  63,          64,         INT64_MAX,
                                           INT64_MIN,   INT64_MIN + 1};
  static const std::vector<int64_t> u8 = {0, 1, 2, 3, 7, 8, 15, 16, 100, 127, 128, 200, 254, 255};
  static const std::vector<int64_t> bytes = {0, 1, 2, 255};  // bool: any non-zero byte is true
  return d == DType::I32 ? i32 : d == DType::I64 ? i64 : d == DType::U8 ? u8 : bytes;
}
int64_t sample_count(DType d) {
  return is_floating(d) ? static_cast<int64_t>(float_samples().size())
                        : static_cast<int64_t>(integer_samples(d).size());
}

// Element k is sample (k / div + offset) % count: div = count over [count * count] and 1
// over [count] pair every sample with every other.
HostTensor samples(DType d, const Shape& shape, int64_t div = 1, int64_t offset = 0) {
  HostTensor t(d, shape);
  const int64_t count = sample_count(d);
  for (int64_t k = 0; k < shape.numel(); ++k) {
    const auto j = static_cast<size_t>((k / div + offset) % count);
    if (is_floating(d)) {
      put(t, k, float_samples()[j]);
    } else {
      const int64_t v = integer_samples(d)[j];
      if (d == DType::I32) put(t, k, static_cast<int32_t>(v));
      if (d == DType::I64) put(t, k, v);
      if (d == DType::U8 || d == DType::Bool) store_raw(t, k, static_cast<uint8_t>(v));
    }
  }
  return t;
}

// Literal tensors for the hand-written cases.
HostTensor floats(DType d, const std::vector<float>& v) {
  HostTensor t(d, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) put(t, static_cast<int64_t>(i), v[i]);
  return t;
}
HostTensor ints(DType d, const std::vector<int64_t>& v) {
  HostTensor t(d, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) {
    const auto k = static_cast<int64_t>(i);
    if (d == DType::I32) put(t, k, static_cast<int32_t>(v[i]));
    if (d == DType::I64) put(t, k, v[i]);
    if (d == DType::U8 || d == DType::Bool) store_raw(t, k, static_cast<uint8_t>(v[i]));
  }
  return t;
}

// Offset in a contiguous tensor of shape `in` of element i of its broadcast to `out`
// (shapes right-aligned; a dim of 1 or a missing one repeats).
int64_t source_offset(const Shape& in, const Shape& out, int64_t i) {
  int64_t offset = 0;
  int64_t stride = 1;
  for (int d = out.rank() - 1, j = in.rank() - 1; d >= 0; --d, --j) {
    const int64_t index = i % out[d];
    i /= out[d];
    if (j >= 0) {
      if (in[j] != 1) offset += index * stride;
      stride *= in[j];
    }
  }
  return offset;
}

Shape broadcast(const Shape& a, const Shape& b) {
  Result<Shape> s = broadcast_shapes("test", a, b);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? *s : Shape{};
}

// ---- running the CUDA kernel ---------------------------------------------------------------

struct CudaRun {
  Status status;
  HostTensor out;
};

CudaRun run_cuda(CudaRunner& r, std::string_view op, const OpAttrs& attrs,
                 const std::vector<HostTensor>& inputs, DType out_dtype, const Shape& out_shape) {
  std::vector<TensorView> in;
  for (const HostTensor& t : inputs) in.push_back(r.upload(t));
  std::vector<TensorView> out{r.device_output(out_dtype, out_shape)};
  CudaRun run;
  Result<CudaKernelFn> fn = find_cuda_kernel(op);
  run.status = fn.ok() ? (*fn)(r.ctx(), attrs, in, out) : fn.status();
  const Status synced = r.synchronize();
  if (run.status.ok()) run.status = synced;
  run.out = r.download(out[0]);
  return run;
}

// The hand-written cases: exact, zero signs included.
void expect_exact(CudaRunner& r, std::string_view op, const OpAttrs& attrs,
                  const std::vector<HostTensor>& inputs, const HostTensor& want) {
  CudaRun run = run_cuda(r, op, attrs, inputs, want.dtype(), want.shape());
  ASSERT_TRUE(run.status.ok()) << run.status.to_string();
  EXPECT_TRUE(same_elements(run.out, want, 0, /*zero_sign=*/true));
}

// The dtypes `op`'s rule admits (elementwise_ops.h); the arithmetic ops' integer forms only.
std::vector<DType> admitted(std::string_view op) {
  const ElementwiseOp* entry = find_elementwise_op(op);
  if (entry == nullptr) return {DType::I32, DType::I64, DType::U8};
  std::vector<DType> out;
  for (DType d : kAllDtypes) {
    std::vector<DType> dtypes(static_cast<size_t>(entry->arity), d);
    if (entry->rule == ElementwiseRule::Where) dtypes[0] = DType::Bool;
    const std::optional<DType> to =
        entry->rule == ElementwiseRule::Cast ? std::optional<DType>(DType::F32) : std::nullopt;
    if (elementwise_output_dtype(*entry, dtypes, to).ok()) out.push_back(d);
  }
  return out;
}

// ---- the reference drivers -----------------------------------------------------------------

// Every admitted dtype of a unary op on [count], [3, 1000] (many blocks), rank 0 and an empty
// tensor. ref(V) gives the value; a bool result makes a bool output, anything else the
// input's dtype. max_ulps: 0 for exact ops.
template <typename... Vs, typename Ref>
void check_unary(CudaRunner& r, std::string_view op, const OpAttrs& attrs, Ref ref,
                 int max_ulps_f32 = 0, int max_ulps_16 = 0) {
  const std::vector<DType> dtypes = admitted(op);
  ASSERT_FALSE(dtypes.empty());
  for (DType d : dtypes) {
    with_value_type<Vs...>(d, [&](auto tag) {
      using V = decltype(tag);
      using R = decltype(ref(V{}));
      const DType out_dtype = std::is_same_v<R, bool> ? DType::Bool : d;
      for (const Shape& shape : {Shape{sample_count(d)}, Shape{3, 1000}, Shape{}, Shape{0, 3}}) {
        SCOPED_TRACE(fmt::format("{} {} {}", op, dtype_name(d), shape.to_string()));
        HostTensor x = samples(d, shape, 1, shape.rank() == 0 ? 4 : 0);
        HostTensor want(out_dtype, shape);
        for (int64_t i = 0; i < shape.numel(); ++i) put(want, i, ref(get<V>(x, i)));
        CudaRun run = run_cuda(r, op, attrs, {x}, out_dtype, shape);
        ASSERT_TRUE(run.status.ok()) << run.status.to_string();
        EXPECT_TRUE(same_elements(run.out, want, d == DType::F32 ? max_ulps_f32 : max_ulps_16,
                                  /*zero_sign=*/false));
      }
    });
  }
}

struct BinaryCase {
  Shape a, b;
  int64_t div_a, offset_a, offset_b;
};

// The shapes every binary op runs on, for samples of `count`: every pair same-shape and
// broadcast, rank 0 either side, size-1 dims on both sides, many blocks, empty.
std::vector<BinaryCase> binary_cases(int64_t count) {
  return {
      {{count * count}, {count * count}, count, 0, 0},  // same shape, every pair
      {{count, 1}, {count}, 1, 0, 0},                   // broadcast, every pair
      {{}, {3, count}, 1, 4, 0},                        // rank 0 on the left
      {{3, count}, {}, 1, 0, 5},                        // rank 0 on the right
      {{2, 1, count}, {3, 1}, 1, 1, 2},                 // size-1 dims on both sides
      {{1, 1000}, {3, 1}, 1, 3, 1},                     // many blocks
      {{1, count}, {count}, 1, 0, 2},                   // same elements, different ranks
      {{0, count}, {count}, 1, 0, 0},                   // empty
  };
}

template <typename... Vs, typename Ref>
void check_binary(CudaRunner& r, std::string_view op, Ref ref, const OpAttrs& attrs = {}) {
  const std::vector<DType> dtypes = admitted(op);
  ASSERT_FALSE(dtypes.empty());
  for (DType d : dtypes) {
    with_value_type<Vs...>(d, [&](auto tag) {
      using V = decltype(tag);
      using R = decltype(ref(V{}, V{}));
      const DType out_dtype = std::is_same_v<R, bool> ? DType::Bool : d;
      for (const BinaryCase& c : binary_cases(sample_count(d))) {
        SCOPED_TRACE(fmt::format("{} {} {} {}", op, dtype_name(d), c.a.to_string(), c.b.to_string()));
        const Shape shape = broadcast(c.a, c.b);
        HostTensor a = samples(d, c.a, c.div_a, c.offset_a);
        HostTensor b = samples(d, c.b, 1, c.offset_b);
        HostTensor want(out_dtype, shape);
        for (int64_t i = 0; i < shape.numel(); ++i) {
          put(want, i, ref(get<V>(a, source_offset(c.a, shape, i)),
                           get<V>(b, source_offset(c.b, shape, i))));
        }
        CudaRun run = run_cuda(r, op, attrs, {a, b}, out_dtype, shape);
        ASSERT_TRUE(run.status.ok()) << run.status.to_string();
        EXPECT_TRUE(same_elements(run.out, want, 0, /*zero_sign=*/false));
      }
    });
  }
}

// ---- the reference functions ---------------------------------------------------------------

template <typename V>
V wrapping_neg(V x) {
  using U = std::make_unsigned_t<V>;
  return static_cast<V>(static_cast<U>(U{0} - static_cast<U>(x)));
}

template <typename V>
V reference_abs(V x) {
  if constexpr (std::is_floating_point_v<V>) {
    return std::fabs(x);
  } else if constexpr (std::is_signed_v<V>) {
    return x < 0 ? wrapping_neg(x) : x;
  } else {
    return x;
  }
}

template <typename V>
V reference_sign(V x) {
  if constexpr (std::is_floating_point_v<V>) {
    if (std::isnan(x)) return x;
    return x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f;
  } else if constexpr (std::is_signed_v<V>) {
    return static_cast<V>(x > 0 ? 1 : x < 0 ? -1 : 0);
  } else {
    return static_cast<V>(x != 0 ? 1 : 0);
  }
}

template <typename V>
V nan_wins(V a, V b, bool minimum) {
  if constexpr (std::is_floating_point_v<V>) {
    if (std::isnan(a) || std::isnan(b)) return kNan;
  }
  return minimum ? std::min(a, b) : std::max(a, b);
}

template <typename V>
V wrapping(V a, V b, char op) {
  using U = std::make_unsigned_t<V>;
  const auto ua = static_cast<U>(a);
  const auto ub = static_cast<U>(b);
  if (op == '+') return static_cast<V>(static_cast<U>(ua + ub));
  if (op == '-') return static_cast<V>(static_cast<U>(ua - ub));
  return static_cast<V>(static_cast<U>(ua * ub));
}

template <typename V>
V reference_div(V a, V b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<V>) {
    if (a == std::numeric_limits<V>::min() && b == -1) return a;
  }
  return static_cast<V>(a / b);
}

template <typename V>
V reference_pow(V base, V exponent) {
  if constexpr (std::is_signed_v<V>) {
    if (exponent < 0) {
      if (base == 1) return 1;
      if (base == -1) return exponent % 2 == 0 ? 1 : -1;
      return 0;
    }
  }
  // Wrapping exponentiation, one bit of the exponent at a time from the top.
  using U = std::make_unsigned_t<V>;
  const auto e = static_cast<uint64_t>(exponent);
  U result = 1;
  for (int bit = 63; bit >= 0; --bit) {
    result = static_cast<U>(result * result);
    if (((e >> bit) & 1) != 0) result = static_cast<U>(result * static_cast<U>(base));
  }
  return static_cast<V>(result);
}

// The remainder with the divisor's sign (floor) or the dividend's (fmod): the C remainder
// (std::fmod, exact; % for integers), moved into the divisor's sign for floor; x mod 0 is
// NaN for floats and 0 for integers, x mod -1 is 0 (INT_MIN % -1 would trap).
template <typename V>
V reference_mod(V a, V b, bool fmod) {
  if constexpr (std::is_floating_point_v<V>) {
    const float r = std::fmod(a, b);
    if (fmod || std::isnan(r) || r == 0.0f || (r < 0.0f) == (b < 0.0f)) return r;
    return r + b;
  } else if constexpr (std::is_signed_v<V>) {
    if (b == 0 || b == -1) return 0;
    const auto r = static_cast<V>(a % b);
    if (fmod || r == 0 || (r < 0) == (b < 0)) return r;
    return static_cast<V>(r + b);
  } else {
    return b == 0 ? V{0} : static_cast<V>(a % b);
  }
}

// An integer rounded to `bits` significant bits, to nearest even, exactly (as a double:
// at most 24 bits of an int64 fit). The cast's reference for f32, f16 (11 bits) and bf16
// (8 bits), independent of any float conversion.
double round_integer(int64_t v, int bits) {
  const uint64_t m = v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  const uint64_t limit = uint64_t{1} << bits;
  uint64_t step = 1;
  while (m / step >= limit) step *= 2;
  const uint64_t below = m / step * step;
  const uint64_t over = m - below;
  const bool up = over * 2 > step || (over * 2 == step && (m / step) % 2 == 1);
  const double r = static_cast<double>(below) + (up ? static_cast<double>(step) : 0.0);
  return v < 0 ? -r : r;
}

template <typename I>
I saturating_integer(float x) {
  if (std::isnan(x)) return 0;
  const double t = std::trunc(static_cast<double>(x));
  if (t <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (t >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(t);
}

// Element i of x cast to y's dtype, into y.
void reference_cast(const HostTensor& x, HostTensor& y, int64_t i) {
  with_value_type<float, int32_t, int64_t, uint8_t, bool>(x.dtype(), [&](auto in_tag) {
    using In = decltype(in_tag);
    const In v = get<In>(x, i);
    with_value_type<float, int32_t, int64_t, uint8_t, bool>(y.dtype(), [&](auto out_tag) {
      using Out = decltype(out_tag);
      if constexpr (std::is_same_v<Out, bool>) {
        put(y, i, v != In{0});
      } else if constexpr (std::is_same_v<In, bool>) {
        put(y, i, static_cast<Out>(v ? 1 : 0));
      } else if constexpr (std::is_same_v<In, float> && std::is_same_v<Out, float>) {
        put(y, i, v);
      } else if constexpr (std::is_same_v<In, float>) {
        put(y, i, saturating_integer<Out>(v));
      } else if constexpr (std::is_same_v<Out, float>) {
        const auto n = static_cast<int64_t>(v);
        if (y.dtype() == DType::F16) {
          const double r = round_integer(n, 11);
          put(y, i, std::fabs(r) > 65504.0 ? std::copysign(kInf, static_cast<float>(r))
                                           : static_cast<float>(r));
        } else {
          put(y, i, static_cast<float>(round_integer(n, y.dtype() == DType::BF16 ? 8 : 24)));
        }
      } else {
        put(y, i, static_cast<Out>(v));
      }
    });
  });
}

// ---- no GPU needed -------------------------------------------------------------------------

TEST(TypedElementwiseCuda, EveryOpOfTheFamilyHasACudaKernel) {
  for (const ElementwiseOp& op : elementwise_ops()) {
    EXPECT_TRUE(find_cuda_kernel(op.name).ok()) << op.name;
  }
  for (std::string_view op : {"add", "sub", "mul", "div", "pow", "neg"}) {
    EXPECT_NE(integer_arithmetic_op(op), nullptr) << op;
    EXPECT_TRUE(find_cuda_kernel(op).ok()) << op;
  }
}

// The device code's predicates (typed_elementwise_launch.h) against the family's rules:
// every dtype a rule admits has device code, so no admitted call is ever NotSupported.
TEST(TypedElementwiseCuda, TheDeviceCodeCoversEveryDtypeTheRulesAdmit) {
  namespace typed = launch::typed;
  auto element = [](DType d) {
    switch (d) {
      case DType::F32: return typed::ElementType::F32;
      case DType::F16: return typed::ElementType::F16;
      case DType::BF16: return typed::ElementType::BF16;
      case DType::I32: return typed::ElementType::I32;
      case DType::I64: return typed::ElementType::I64;
      case DType::U8: return typed::ElementType::U8;
      case DType::Bool: break;
    }
    return typed::ElementType::Bool;
  };
  struct Launched {
    std::string_view op;
    std::optional<typed::UnaryFn> unary;
    std::optional<typed::BinaryFn> binary;
  };
  using U = typed::UnaryFn;
  using B = typed::BinaryFn;
  const Launched table[] = {
      {"cos", U::Cos, {}},          {"sin", U::Sin, {}},
      {"log", U::Log, {}},          {"floor", U::Floor, {}},
      {"ceil", U::Ceil, {}},        {"round", U::Round, {}},
      {"reciprocal", U::Reciprocal, {}}, {"tan", U::Tan, {}},
      {"acos", U::Acos, {}},        {"asin", U::Asin, {}},
      {"atan", U::Atan, {}},        {"sinh", U::Sinh, {}},
      {"cosh", U::Cosh, {}},        {"asinh", U::Asinh, {}},
      {"acosh", U::Acosh, {}},      {"atanh", U::Atanh, {}},
      {"softplus", U::Softplus, {}}, {"softsign", U::Softsign, {}},
      {"mish", U::Mish, {}},        {"leaky_relu", U::LeakyRelu, {}},
      {"elu", U::Elu, {}},          {"celu", U::Celu, {}},
      {"selu", U::Selu, {}},        {"thresholded_relu", U::ThresholdedRelu, {}},
      {"shrink", U::Shrink, {}},    {"abs", U::Abs, {}},
      {"sign", U::Sign, {}},        {"isnan", U::IsNan, {}},
      {"isinf", U::IsInf, {}},      {"logical_not", U::LogicalNot, {}},
      {"neg", U::Neg, {}},          {"equal", {}, B::Equal},
      {"less", {}, B::Less},        {"less_equal", {}, B::LessEqual},
      {"greater", {}, B::Greater},  {"greater_equal", {}, B::GreaterEqual},
      {"logical_and", {}, B::LogicalAnd}, {"logical_or", {}, B::LogicalOr},
      {"logical_xor", {}, B::LogicalXor}, {"minimum", {}, B::Minimum},
      {"maximum", {}, B::Maximum},  {"mod", {}, B::Mod},
      {"prelu", {}, B::PRelu},      {"add", {}, B::Add},
      {"sub", {}, B::Sub},          {"mul", {}, B::Mul},
      {"div", {}, B::Div},          {"pow", {}, B::Pow},
  };
  size_t family_ops_seen = 0;
  for (const Launched& l : table) {
    if (find_elementwise_op(l.op) != nullptr) ++family_ops_seen;
    for (DType d : admitted(l.op)) {
      const typed::ElementType e = element(d);
      if (l.unary) {
        EXPECT_TRUE(typed::unary_implemented(*l.unary, e)) << l.op << " " << dtype_name(d);
      } else {
        EXPECT_TRUE(typed::binary_implemented(*l.binary, e)) << l.op << " " << dtype_name(d);
      }
    }
  }
  // mod with fmod = true launches FMod.
  for (DType d : admitted("mod")) {
    EXPECT_TRUE(typed::binary_implemented(B::FMod, element(d))) << "mod (fmod) " << dtype_name(d);
  }
  // where and cast take every dtype and need no predicate.
  EXPECT_EQ(family_ops_seen + 2, elementwise_ops().size()) << "an op of the family is missing here";
}

// ---- the reference on every admitted dtype -------------------------------------------------

TEST(TypedElementwiseCuda, FloatingFunctionsMatchTheReference) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  // cosf and sinf are within 2 ulp on the device, logf within 1 (the CUDA math manual), the
  // host's within 1: 3 ulp in f32, and one step of the 16-bit grid once rounded.
  check_unary<float>(r, "cos", {}, [](float x) { return std::cos(x); }, 3, 1);
  check_unary<float>(r, "sin", {}, [](float x) { return std::sin(x); }, 3, 1);
  check_unary<float>(r, "log", {}, [](float x) { return std::log(x); }, 3, 1);
  check_unary<float>(r, "floor", {}, [](float x) { return std::floor(x); });
  check_unary<float>(r, "ceil", {}, [](float x) { return std::ceil(x); });
  check_unary<float>(r, "round", {}, [](float x) { return std::nearbyint(x); });
  check_unary<float>(r, "reciprocal", {}, [](float x) { return 1.0f / x; });
}

TEST(TypedElementwiseCuda, NumericUnaryOpsMatchTheReference) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  check_unary<float, int32_t, int64_t, uint8_t>(r, "abs", {}, [](auto x) { return reference_abs(x); });
  check_unary<float, int32_t, int64_t, uint8_t>(r, "sign", {}, [](auto x) { return reference_sign(x); });
  check_unary<int32_t, int64_t, uint8_t>(r, "neg", {}, [](auto x) { return wrapping_neg(x); });
}

TEST(TypedElementwiseCuda, ClassificationAndLogicalNotMatchTheReference) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  check_unary<float>(r, "isnan", {}, [](float x) { return std::isnan(x); });
  for (bool positive : {true, false}) {
    for (bool negative : {true, false}) {
      SCOPED_TRACE(fmt::format("positive {} negative {}", positive, negative));
      check_unary<float>(r, "isinf", attrs_of({{"positive", positive}, {"negative", negative}}),
                         [&](float x) { return (positive && x == kInf) || (negative && x == -kInf); });
    }
  }
  check_unary<bool>(r, "logical_not", {}, [](bool x) { return !x; });
}

TEST(TypedElementwiseCuda, ComparisonsMatchTheReference) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  check_binary<float, int32_t, int64_t, uint8_t, bool>(r, "equal", [](auto a, auto b) { return a == b; });
  check_binary<float, int32_t, int64_t, uint8_t, bool>(r, "less", [](auto a, auto b) { return a < b; });
  check_binary<float, int32_t, int64_t, uint8_t, bool>(r, "less_equal", [](auto a, auto b) { return a <= b; });
  check_binary<float, int32_t, int64_t, uint8_t, bool>(r, "greater", [](auto a, auto b) { return a > b; });
  check_binary<float, int32_t, int64_t, uint8_t, bool>(r, "greater_equal", [](auto a, auto b) { return a >= b; });
}

TEST(TypedElementwiseCuda, LogicalOpsMatchTheReference) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  check_binary<bool>(r, "logical_and", [](bool a, bool b) { return a && b; });
  check_binary<bool>(r, "logical_or", [](bool a, bool b) { return a || b; });
  check_binary<bool>(r, "logical_xor", [](bool a, bool b) { return a != b; });
}

TEST(TypedElementwiseCuda, MinimumAndMaximumMatchTheReference) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  check_binary<float, int32_t, int64_t, uint8_t>(r, "minimum", [](auto a, auto b) { return nan_wins(a, b, true); });
  check_binary<float, int32_t, int64_t, uint8_t>(r, "maximum", [](auto a, auto b) { return nan_wins(a, b, false); });
}

TEST(TypedElementwiseCuda, ModMatchesTheReference) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  for (bool fmod : {false, true}) {
    SCOPED_TRACE(fmt::format("fmod {}", fmod));
    check_binary<float, int32_t, int64_t, uint8_t>(
        r, "mod", [fmod](auto a, auto b) { return reference_mod(a, b, fmod); },
        attrs_of({{"fmod", fmod}}));
  }
}

TEST(TypedElementwiseCuda, IntegerArithmeticMatchesTheReference) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  check_binary<int32_t, int64_t, uint8_t>(r, "add", [](auto a, auto b) { return wrapping(a, b, '+'); });
  check_binary<int32_t, int64_t, uint8_t>(r, "sub", [](auto a, auto b) { return wrapping(a, b, '-'); });
  check_binary<int32_t, int64_t, uint8_t>(r, "mul", [](auto a, auto b) { return wrapping(a, b, '*'); });
  check_binary<int32_t, int64_t, uint8_t>(r, "div", [](auto a, auto b) { return reference_div(a, b); });
  check_binary<int32_t, int64_t, uint8_t>(r, "pow", [](auto a, auto b) { return reference_pow(a, b); });
}

TEST(TypedElementwiseCuda, WhereMatchesTheReferenceInEveryDtype) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  for (DType d : kAllDtypes) {
    const int64_t count = sample_count(d);
    struct Case {
      Shape cond, a, b;
    };
    const Case cases[] = {
        {{count}, {count}, {count}},           // same shape
        {{2, 1, 1}, {count, 1}, {count}},      // every pair under both conditions
        {{}, {count}, {}},                     // rank 0
        {{3, 1}, {1, 1000}, {1, 1}},           // many blocks, size-1 dims
        {{count, 0}, {1}, {count, 1}},         // empty
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("where {} {} {} {}", dtype_name(d), c.cond.to_string(),
                               c.a.to_string(), c.b.to_string()));
      const Shape shape = broadcast(broadcast(c.cond, c.a), c.b);
      HostTensor cond = samples(DType::Bool, c.cond, 1, 1);  // bytes 1, 2, 255, 0, ...
      HostTensor a = samples(d, c.a);
      HostTensor b = samples(d, c.b, 1, 3);
      HostTensor want(d, shape);
      const size_t size = element_size(d);
      for (int64_t i = 0; i < shape.numel(); ++i) {
        const bool pick_a = get<bool>(cond, source_offset(c.cond, shape, i));
        const HostTensor& from = pick_a ? a : b;
        const int64_t at = source_offset(pick_a ? c.a : c.b, shape, i);
        std::memcpy(static_cast<char*>(want.data()) + i * size,
                    static_cast<const char*>(from.data()) + at * size, size);
        if (d == DType::Bool) put(want, i, get<bool>(want, i));  // written 0 or 1
      }
      CudaRun run = run_cuda(r, "where", {}, {cond, a, b}, d, shape);
      ASSERT_TRUE(run.status.ok()) << run.status.to_string();
      EXPECT_TRUE(same_elements(run.out, want, 0, /*zero_sign=*/true));
    }
  }
}

TEST(TypedElementwiseCuda, CastMatchesTheReferenceBetweenEveryPairOfDtypes) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  for (DType from : kAllDtypes) {
    for (DType to : kAllDtypes) {
      const OpAttrs attrs = attrs_of({{"dtype", std::string(dtype_name(to))}});
      for (const Shape& shape : {Shape{sample_count(from)}, Shape{}, Shape{0}}) {
        SCOPED_TRACE(fmt::format("cast {} -> {} {}", dtype_name(from), dtype_name(to),
                                 shape.to_string()));
        HostTensor x = samples(from, shape, 1, shape.rank() == 0 ? 2 : 0);
        HostTensor want(to, shape);
        for (int64_t i = 0; i < shape.numel(); ++i) reference_cast(x, want, i);
        CudaRun run = run_cuda(r, "cast", attrs, {x}, to, shape);
        ASSERT_TRUE(run.status.ok()) << run.status.to_string();
        EXPECT_TRUE(same_elements(run.out, want, 0, /*zero_sign=*/true));
      }
    }
  }
}

// ---- against the CPU kernel ----------------------------------------------------------------
// Every op of the family (elementwise_ops(): an op added to the table is swept here without
// a change) on the same host operands through the CPU kernel (kernels/cpu) and the CUDA
// kernel, in every dtype its rule admits, same-shape, broadcast, rank 0, many blocks and
// empty; the parametric ops with their defaults and with other attributes.

// The floats of the sweep: float_samples() and the points where the new functions turn:
// the domain edges of acos, asin, atanh (+-1 and the floats just past them) and acosh (1),
// the parametric ops' thresholds for the attributes below (+-1.5, 2.5, 1.7), values where
// e^x is denormal or overflows (+-88, +-100) and near pi / 2 (tan).
const std::vector<float>& sweep_float_samples() {
  static const std::vector<float> v = {
      0.0f,     -0.0f,     1e-30f,    -1e-30f,  0.1f,      -7e-3f,   0.5f,    -0.5f,
      0.999f,   -0.999f,   1.0f,      -1.0f,    1.0000001f, -1.0000001f, 1.5f, -1.5f,
      1.7f,     -1.7f,     2.0f,      2.5f,     -2.5f,     3.7f,     -3.7f,   1.5707964f,
      10.0f,    -10.0f,    20.0f,     -20.0f,   88.0f,     -88.0f,   100.0f,  -100.0f,
      100.25f,  1e4f,      -1e4f,     1e20f,    -1e20f,    kInf,     -kInf,   kNan};
  return v;
}
int64_t sweep_count(DType d) {
  return is_floating(d) ? static_cast<int64_t>(sweep_float_samples().size()) : sample_count(d);
}
// samples() with sweep_float_samples() for the floats.
HostTensor sweep_samples(DType d, const Shape& shape, int64_t div = 1, int64_t offset = 0) {
  if (!is_floating(d)) return samples(d, shape, div, offset);
  HostTensor t(d, shape);
  const std::vector<float>& v = sweep_float_samples();
  for (int64_t k = 0; k < shape.numel(); ++k) {
    put(t, k, v[static_cast<size_t>((k / div + offset) % static_cast<int64_t>(v.size()))]);
  }
  return t;
}

// The attribute sets each op is swept with: the defaults ({}) and, for the ops with
// attributes, others (at the thresholds sweep_float_samples() holds).
std::vector<OpAttrs> sweep_attrs(const ElementwiseOp& op) {
  std::vector<OpAttrs> out{OpAttrs{}};
  switch (op.fn) {
    case ElementwiseFn::LeakyRelu:
      out.push_back(attrs_of({{"alpha", 0.2}}));
      out.push_back(attrs_of({{"alpha", -1.5}}));
      break;
    case ElementwiseFn::Elu: out.push_back(attrs_of({{"alpha", 0.7}})); break;
    case ElementwiseFn::Celu:
      out.push_back(attrs_of({{"alpha", 1.7}}));
      out.push_back(attrs_of({{"alpha", 0.3}}));
      break;
    case ElementwiseFn::Selu: out.push_back(attrs_of({{"alpha", 1.5}, {"gamma", 2.0}})); break;
    case ElementwiseFn::ThresholdedRelu:
      out.push_back(attrs_of({{"alpha", 2.5}}));
      out.push_back(attrs_of({{"alpha", -1.0}}));
      break;
    case ElementwiseFn::Shrink: out.push_back(attrs_of({{"lambd", 1.5}, {"bias", 0.25}})); break;
    case ElementwiseFn::Mod: out.push_back(attrs_of({{"fmod", true}})); break;
    case ElementwiseFn::IsInf:
      out.push_back(attrs_of({{"positive", false}}));
      out.push_back(attrs_of({{"negative", false}}));
      break;
    case ElementwiseFn::Cast:
      out.clear();
      for (DType to : kAllDtypes) out.push_back(attrs_of({{"dtype", std::string(dtype_name(to))}}));
      break;
    default: break;
  }
  return out;
}

// The ulps the two back ends may differ by in f32 and on the 16-bit grids: 0 for the ops
// built of IEEE operations (+ - * /, comparisons, selections, rounding), which give the same
// bits; the ops through C's math functions differ by the functions' errors (CUDA's: at most
// 4 ulp for tanf and acoshf, 3 for sinhf, asinhf, atanhf, 2 for cosf, sinf, expf, tanhf, the
// inverse trigonometric ones, coshf; 1 for logf, log1pf, expm1f; the host's within 1):
// 8 ulp in f32, 12 for mish (expf, log1pf and tanhf in a row), and one step of the 16-bit
// grid once rounded.
struct Ulps {
  int f32;
  int f16;
};
Ulps sweep_ulps(ElementwiseFn fn) {
  using F = ElementwiseFn;
  switch (fn) {
    case F::Cos: case F::Sin: case F::Log: case F::Tan: case F::Acos: case F::Asin:
    case F::Atan: case F::Sinh: case F::Cosh: case F::Asinh: case F::Acosh: case F::Atanh:
    case F::Softplus: case F::Elu: case F::Celu: case F::Selu:
      return {8, 1};
    case F::Mish: return {12, 1};
    default: return {0, 0};
  }
}

// The CPU kernel of `op` on host operands.
CudaRun run_cpu(std::string_view op, const OpAttrs& attrs, const std::vector<HostTensor>& inputs,
                DType out_dtype, const Shape& out_shape) {
  std::vector<TensorView> in;
  for (const HostTensor& t : inputs) in.push_back(t.view());
  CudaRun run;
  run.out = HostTensor(out_dtype, out_shape);
  std::vector<TensorView> out{run.out.view()};
  Result<KernelFn> fn = find_cpu_kernel(op);
  run.status = fn.ok() ? (*fn)(attrs, in, out) : fn.status();
  return run;
}

// The operand shapes of an op of `arity` (offsets and divisors as samples() takes them).
struct SweepCase {
  std::vector<Shape> shapes;
  std::vector<int64_t> div, offset;
};
std::vector<SweepCase> sweep_cases(int arity, int64_t count) {
  std::vector<SweepCase> out;
  if (arity == 1) {
    for (const Shape& s : {Shape{count}, Shape{3, 1000}, Shape{}, Shape{0, 3}}) {
      out.push_back({{s}, {1}, {s.rank() == 0 ? 4 : 0}});
    }
  } else if (arity == 2) {
    for (const BinaryCase& c : binary_cases(count)) {
      out.push_back({{c.a, c.b}, {c.div_a, 1}, {c.offset_a, c.offset_b}});
    }
  } else {
    out.push_back({{{count}, {count}, {count}}, {1, 1, 1}, {1, 0, 3}});
    out.push_back({{{2, 1, 1}, {count, 1}, {count}}, {1, 1, 1}, {1, 0, 3}});
    out.push_back({{{}, {count}, {}}, {1, 1, 1}, {1, 0, 3}});
    out.push_back({{{3, 1}, {1, 1000}, {1, 1}}, {1, 1, 1}, {1, 0, 3}});
    out.push_back({{{count, 0}, {1}, {count, 1}}, {1, 1, 1}, {1, 0, 3}});
  }
  return out;
}

TEST(TypedElementwiseCuda, EveryOpOfTheFamilyAgreesWithTheCpuKernel) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  for (const ElementwiseOp& op : elementwise_ops()) {
    const std::vector<DType> dtypes = admitted(op.name);
    ASSERT_FALSE(dtypes.empty()) << op.name;
    const Ulps ulps = sweep_ulps(op.fn);
    for (const OpAttrs& attrs : sweep_attrs(op)) {
      std::optional<DType> cast_to;
      if (op.rule == ElementwiseRule::Cast) {
        Result<DType> to = cast_target(op.name, attrs);
        ASSERT_TRUE(to.ok()) << to.status().to_string();
        cast_to = *to;
      }
      for (DType d : dtypes) {
        // The CPU kernel casts an integer to bf16 through f32, rounding twice (2^24 + 2^16 + 1
        // becomes 2^24, not 2^24 + 2^17); CastsToFloatRoundOnceToNearestEven holds the CUDA
        // kernel to the single rounding.
        if (cast_to == DType::BF16 && !is_floating(d) && d != DType::Bool) continue;
        std::vector<DType> in_dtypes(static_cast<size_t>(op.arity), d);
        if (op.rule == ElementwiseRule::Where) in_dtypes[0] = DType::Bool;
        Result<DType> out_dtype = elementwise_output_dtype(op, in_dtypes, cast_to);
        ASSERT_TRUE(out_dtype.ok()) << out_dtype.status().to_string();
        for (const SweepCase& c : sweep_cases(op.arity, sweep_count(d))) {
          Shape shape = c.shapes[0];
          for (size_t k = 1; k < c.shapes.size(); ++k) shape = broadcast(shape, c.shapes[k]);
          std::string label = fmt::format("{} {}", op.name, dtype_name(d));
          for (const Shape& s : c.shapes) label += " " + s.to_string();
          if (cast_to) label += fmt::format(" to {}", dtype_name(*cast_to));
          SCOPED_TRACE(label);
          std::vector<HostTensor> inputs;
          for (size_t k = 0; k < c.shapes.size(); ++k) {
            inputs.push_back(sweep_samples(in_dtypes[k], c.shapes[k], c.div[k], c.offset[k]));
          }
          CudaRun cpu = run_cpu(op.name, attrs, inputs, *out_dtype, shape);
          ASSERT_TRUE(cpu.status.ok()) << "CPU: " << cpu.status.to_string();
          // The CPU kernel's bool -> bool cast and its where over bools copy the bytes (2
          // stays 2); the CUDA kernel writes 0 or 1, as elementwise_ops.h says every kernel
          // does: the CPU's bools are read as bools, the CUDA kernel's bytes must be 0 or 1.
          if (*out_dtype == DType::Bool) {
            for (int64_t i = 0; i < shape.numel(); ++i) put(cpu.out, i, get<bool>(cpu.out, i));
          }
          CudaRun cuda = run_cuda(r, op.name, attrs, inputs, *out_dtype, shape);
          ASSERT_TRUE(cuda.status.ok()) << "CUDA: " << cuda.status.to_string();
          EXPECT_TRUE(same_elements(cuda.out, cpu.out, *out_dtype == DType::F32 ? ulps.f32 : ulps.f16,
                                    /*zero_sign=*/false, /*abs_tol=*/1e-30f));
        }
      }
    }
  }
}

// The new activations' attributes reach the device, against values written out by hand
// (exact in f32, f16 and bf16).
TEST(TypedElementwiseCuda, TheActivationsTakeTheirAttributes) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  for (DType d : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(d));
    expect_exact(r, "leaky_relu", attrs_of({{"alpha", 0.25}}), {floats(d, {-4.0f, -0.5f, 0.0f, 3.0f, -kInf, kNan})},
                 floats(d, {-1.0f, -0.125f, 0.0f, 3.0f, -kInf, kNan}));
    expect_exact(r, "elu", attrs_of({{"alpha", 0.5}}), {floats(d, {-kInf, 2.0f, 0.0f, kInf})},
                 floats(d, {-0.5f, 2.0f, 0.0f, kInf}));
    // max(0, x) + min(0, alpha * (e^(x / alpha) - 1)).
    expect_exact(r, "celu", attrs_of({{"alpha", 2.0}}), {floats(d, {-kInf, 3.0f, 0.0f})},
                 floats(d, {-2.0f, 3.0f, 0.0f}));
    // gamma * (x <= 0 ? alpha * (e^x - 1) : x).
    expect_exact(r, "selu", attrs_of({{"alpha", 2.0}, {"gamma", 0.5}}), {floats(d, {3.0f, 0.0f, -kInf, 1.0f})},
                 floats(d, {1.5f, 0.0f, -1.0f, 0.5f}));
    expect_exact(r, "thresholded_relu", attrs_of({{"alpha", 2.5}}), {floats(d, {2.5f, 2.75f, -3.0f, 10.0f, kInf})},
                 floats(d, {0.0f, 2.75f, 0.0f, 10.0f, kInf}));
    expect_exact(r, "shrink", attrs_of({{"lambd", 1.5}, {"bias", 0.25}}),
                 {floats(d, {-2.0f, -1.5f, 0.0f, 1.5f, 2.0f, 1.75f, -kInf})},
                 floats(d, {-1.75f, 0.0f, 0.0f, 0.0f, 1.75f, 1.5f, -kInf}));
    // shrink's defaults: lambd 0.5, bias 0.
    expect_exact(r, "shrink", {}, {floats(d, {-2.0f, -0.5f, 0.25f, 0.75f})}, floats(d, {-2.0f, 0.0f, 0.0f, 0.75f}));
    expect_exact(r, "softsign", {}, {floats(d, {-3.0f, 1.0f, 0.0f, kNan})}, floats(d, {-0.75f, 0.5f, 0.0f, kNan}));
    // The domain edges.
    expect_exact(r, "acos", {}, {floats(d, {1.0f, 2.0f, -1.5f, kNan})}, floats(d, {0.0f, kNan, kNan, kNan}));
    expect_exact(r, "asin", {}, {floats(d, {0.0f, 2.0f, -kInf})}, floats(d, {0.0f, kNan, kNan}));
    expect_exact(r, "atanh", {}, {floats(d, {1.0f, -1.0f, 2.0f, 0.0f})}, floats(d, {kInf, -kInf, kNan, 0.0f}));
    expect_exact(r, "acosh", {}, {floats(d, {1.0f, 0.5f, kInf})}, floats(d, {0.0f, kNan, kInf}));
    // softplus and mish do not overflow for large x, and vanish for large -x.
    expect_exact(r, "softplus", {}, {floats(d, {100.0f, kInf, -kInf, 1000.0f})}, floats(d, {100.0f, kInf, 0.0f, 1000.0f}));
    expect_exact(r, "mish", {}, {floats(d, {100.0f, kInf, 0.0f, -1000.0f})}, floats(d, {100.0f, kInf, 0.0f, -0.0f}));
    // prelu: x < 0 ? slope * x : x, the slope broadcast over x's rows.
    HostTensor x(d, {2, 3});
    const float xv[] = {-2.0f, 3.0f, -4.0f, -1.0f, 0.0f, kInf};
    for (int i = 0; i < 6; ++i) put(x, i, xv[i]);
    HostTensor want(d, {2, 3});
    const float wv[] = {-1.0f, 3.0f, 1.0f, -0.5f, 0.0f, kInf};
    for (int i = 0; i < 6; ++i) put(want, i, wv[i]);
    expect_exact(r, "prelu", {}, {x, floats(d, {0.5f, 7.0f, -0.25f})}, want);
  }
  // prelu over integers: the multiply wraps; u8 is never negative.
  expect_exact(r, "prelu", {}, {ints(DType::I32, {INT32_MIN, -3, 5, -1}), ints(DType::I32, {-1, 2, -9, INT32_MIN})},
               ints(DType::I32, {INT32_MIN, -6, 5, INT32_MIN}));
  expect_exact(r, "prelu", {}, {ints(DType::I64, {INT64_MIN, -3, 7}), ints(DType::I64, {2, -4, -1})},
               ints(DType::I64, {0, 12, 7}));
  expect_exact(r, "prelu", {}, {ints(DType::U8, {200, 0, 255}), ints(DType::U8, {3, 5, 2})},
               ints(DType::U8, {200, 0, 255}));
}

// ---- values written out by hand ------------------------------------------------------------

TEST(TypedElementwiseCuda, RoundingOpsFollowIeeeAndRoundHalfToEven) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  for (DType d : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(d));
    const HostTensor x = floats(d, {0.5f, 1.5f, 2.5f, -2.5f, -0.5f, 3.5f, -3.5f, 2.25f, 2.75f, -0.0f, kInf, kNan});
    expect_exact(r, "round", {}, {x},
                 floats(d, {0.0f, 2.0f, 2.0f, -2.0f, -0.0f, 4.0f, -4.0f, 2.0f, 3.0f, -0.0f, kInf, kNan}));
    expect_exact(r, "floor", {}, {x},
                 floats(d, {0.0f, 1.0f, 2.0f, -3.0f, -1.0f, 3.0f, -4.0f, 2.0f, 2.0f, -0.0f, kInf, kNan}));
    expect_exact(r, "ceil", {}, {x},
                 floats(d, {1.0f, 2.0f, 3.0f, -2.0f, -0.0f, 4.0f, -3.0f, 3.0f, 3.0f, -0.0f, kInf, kNan}));
  }
  // Just below one half: rounds down, not up.
  expect_exact(r, "round", {}, {floats(DType::F32, {0.49999997f, -0.49999997f})},
               floats(DType::F32, {0.0f, -0.0f}));
}

TEST(TypedElementwiseCuda, SpecialValuesOfTheFloatingFunctions) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  for (DType d : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(d));
    expect_exact(r, "log", {}, {floats(d, {0.0f, -0.0f, 1.0f, -1.0f, kInf, -kInf, kNan})},
                 floats(d, {-kInf, -kInf, 0.0f, kNan, kInf, kNan, kNan}));
    expect_exact(r, "reciprocal", {}, {floats(d, {0.0f, -0.0f, kInf, -kInf, 2.0f, -4.0f, kNan})},
                 floats(d, {kInf, -kInf, 0.0f, -0.0f, 0.5f, -0.25f, kNan}));
    expect_exact(r, "cos", {}, {floats(d, {0.0f, -0.0f, kInf, kNan})}, floats(d, {1.0f, 1.0f, kNan, kNan}));
    expect_exact(r, "sin", {}, {floats(d, {0.0f, -0.0f, -kInf, kNan})}, floats(d, {0.0f, -0.0f, kNan, kNan}));
    // sign(+-0) = +0, sign(NaN) = NaN; abs(-0) = +0.
    const HostTensor x = floats(d, {-0.0f, 0.0f, -3.0f, 0.25f, kInf, -kInf, kNan});
    expect_exact(r, "sign", {}, {x}, floats(d, {0.0f, 0.0f, -1.0f, 1.0f, 1.0f, -1.0f, kNan}));
    expect_exact(r, "abs", {}, {x}, floats(d, {0.0f, 0.0f, 3.0f, 0.25f, kInf, kInf, kNan}));
    expect_exact(r, "isnan", {}, {x}, ints(DType::Bool, {0, 0, 0, 0, 0, 0, 1}));
    expect_exact(r, "isinf", {}, {x}, ints(DType::Bool, {0, 0, 0, 0, 1, 1, 0}));
    expect_exact(r, "isinf", attrs_of({{"negative", false}}), {x}, ints(DType::Bool, {0, 0, 0, 0, 1, 0, 0}));
    expect_exact(r, "isinf", attrs_of({{"positive", false}}), {x}, ints(DType::Bool, {0, 0, 0, 0, 0, 1, 0}));
    // NaN wins either side; -inf and +inf are ordinary.
    const HostTensor a = floats(d, {kNan, 1.0f, -kInf, 2.0f, kNan});
    const HostTensor b = floats(d, {1.0f, kNan, 3.0f, kInf, kNan});
    expect_exact(r, "minimum", {}, {a, b}, floats(d, {kNan, kNan, -kInf, 2.0f, kNan}));
    expect_exact(r, "maximum", {}, {a, b}, floats(d, {kNan, kNan, 3.0f, kInf, kNan}));
    // NaN compares false, even to itself; -0 equals +0.
    const HostTensor p = floats(d, {kNan, kNan, -0.0f, 1.0f, -kInf});
    const HostTensor q = floats(d, {kNan, 1.0f, 0.0f, kNan, -kInf});
    expect_exact(r, "equal", {}, {p, q}, ints(DType::Bool, {0, 0, 1, 0, 1}));
    expect_exact(r, "less_equal", {}, {p, q}, ints(DType::Bool, {0, 0, 1, 0, 1}));
    expect_exact(r, "greater", {}, {p, q}, ints(DType::Bool, {0, 0, 0, 0, 0}));
  }
}

TEST(TypedElementwiseCuda, IntegerAbsSignAndNegWrapAtTheEnds) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  expect_exact(r, "abs", {}, {ints(DType::I32, {INT32_MIN, INT32_MIN + 1, -5, 0, INT32_MAX})},
               ints(DType::I32, {INT32_MIN, INT32_MAX, 5, 0, INT32_MAX}));
  expect_exact(r, "abs", {}, {ints(DType::I64, {INT64_MIN, INT64_MIN + 1, -5})},
               ints(DType::I64, {INT64_MIN, INT64_MAX, 5}));
  expect_exact(r, "abs", {}, {ints(DType::U8, {0, 200, 255})}, ints(DType::U8, {0, 200, 255}));
  expect_exact(r, "sign", {}, {ints(DType::I32, {INT32_MIN, -1, 0, 7, INT32_MAX})},
               ints(DType::I32, {-1, -1, 0, 1, 1}));
  expect_exact(r, "sign", {}, {ints(DType::I64, {INT64_MIN, 0, INT64_MAX})}, ints(DType::I64, {-1, 0, 1}));
  expect_exact(r, "sign", {}, {ints(DType::U8, {0, 1, 255})}, ints(DType::U8, {0, 1, 1}));
  expect_exact(r, "neg", {}, {ints(DType::I32, {INT32_MIN, INT32_MAX, 0, 5})},
               ints(DType::I32, {INT32_MIN, INT32_MIN + 1, 0, -5}));
  expect_exact(r, "neg", {}, {ints(DType::I64, {INT64_MIN, 5})}, ints(DType::I64, {INT64_MIN, -5}));
  expect_exact(r, "neg", {}, {ints(DType::U8, {0, 1, 255, 128})}, ints(DType::U8, {0, 255, 1, 128}));
}

TEST(TypedElementwiseCuda, IntegerDivisionTruncatesAndNeverTraps) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  expect_exact(r, "div", {},
               {ints(DType::I32, {7, -7, 7, -7, 5, 0, INT32_MIN, INT32_MIN, INT32_MAX, -1}),
                ints(DType::I32, {2, 2, -2, -2, 0, 0, -1, 1, -1, INT32_MIN})},
               ints(DType::I32, {3, -3, -3, 3, 0, 0, INT32_MIN, INT32_MIN, -INT32_MAX, 0}));
  expect_exact(r, "div", {},
               {ints(DType::I64, {INT64_MIN, INT64_MIN, -9, 9}), ints(DType::I64, {-1, 0, 4, -4})},
               ints(DType::I64, {INT64_MIN, 0, -2, -2}));
  expect_exact(r, "div", {}, {ints(DType::U8, {200, 255, 7, 0}), ints(DType::U8, {0, 2, 7, 0})},
               ints(DType::U8, {0, 127, 1, 0}));
}

TEST(TypedElementwiseCuda, IntegerPowWrapsAndNegativeExponentsGiveZeroUnlessTheBaseIsOne) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  expect_exact(r, "pow", {},
               {ints(DType::I32, {2, 2, 2, -2, 3, -1, -1, 1, 0, 0, 7, -3, 46341}),
                ints(DType::I32, {10, 31, 32, 3, -1, -3, -2, -7, 0, -1, 0, 3, 2})},
               ints(DType::I32, {1024, INT32_MIN, 0, -8, 0, -1, 1, 1, 1, 0, 1, -27, -2147479015}));
  expect_exact(r, "pow", {},
               {ints(DType::I64, {2, 2, 3, -1, 2}), ints(DType::I64, {62, 63, 40, INT64_MIN, -1})},
               ints(DType::I64, {int64_t{1} << 62, INT64_MIN, -6289078614652622815, 1, 0}));
  expect_exact(r, "pow", {}, {ints(DType::U8, {2, 3, 3, 0, 255}), ints(DType::U8, {8, 5, 6, 0, 2})},
               ints(DType::U8, {0, 243, 217, 1, 1}));
}

// mod: the divisor's sign by default (Python's %), the dividend's with fmod; zeros keep the
// sign fmod gives them; x mod 0 is NaN (floats) or 0 (integers); INT_MIN mod -1 is 0.
TEST(TypedElementwiseCuda, ModTakesTheDivisorsOrTheDividendsSignAndNeverTraps) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const OpAttrs floor_mod = attrs_of({{"fmod", false}});
  const OpAttrs c_fmod = attrs_of({{"fmod", true}});
  for (DType d : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(d));
    const HostTensor a = floats(d, {5.5f, -5.5f, 5.5f, -5.5f, 4.0f, -4.0f, 1.0f, -1.0f, 1.0f, kInf,
                                    3.0f, 0.0f, -0.0f, kNan, 7.0f});
    const HostTensor b = floats(d, {2.0f, 2.0f, -2.0f, -2.0f, -2.0f, 2.0f, 0.0f, kInf, -kInf, 2.0f,
                                    kNan, 5.0f, 3.0f, 1.0f, 0.75f});
    expect_exact(r, "mod", {}, {a, b},
                 floats(d, {1.5f, 0.5f, -0.5f, -1.5f, 0.0f, -0.0f, kNan, kInf, -kInf, kNan, kNan,
                            0.0f, -0.0f, kNan, 0.25f}));
    expect_exact(r, "mod", floor_mod, {a, b},
                 floats(d, {1.5f, 0.5f, -0.5f, -1.5f, 0.0f, -0.0f, kNan, kInf, -kInf, kNan, kNan,
                            0.0f, -0.0f, kNan, 0.25f}));
    expect_exact(r, "mod", c_fmod, {a, b},
                 floats(d, {1.5f, -1.5f, 1.5f, -1.5f, 0.0f, -0.0f, kNan, -1.0f, 1.0f, kNan, kNan,
                            0.0f, -0.0f, kNan, 0.25f}));
  }
  const HostTensor a32 = ints(DType::I32, {7, -7, 7, -7, 6, -6, 5, INT32_MIN, INT32_MIN, INT32_MAX,
                                           0, -1, INT32_MIN});
  const HostTensor b32 = ints(DType::I32, {3, 3, -3, -3, 3, -3, 0, -1, 1, INT32_MIN, -5, INT32_MAX,
                                           INT32_MAX});
  expect_exact(r, "mod", {}, {a32, b32},
               ints(DType::I32, {1, 2, -2, -1, 0, 0, 0, 0, 0, -1, 0, INT32_MAX - 1, INT32_MAX - 1}));
  expect_exact(r, "mod", c_fmod, {a32, b32},
               ints(DType::I32, {1, -1, 1, -1, 0, 0, 0, 0, 0, INT32_MAX, 0, -1, -1}));
  const HostTensor a64 = ints(DType::I64, {INT64_MIN, INT64_MIN, -9, 9, INT64_MAX, -3});
  const HostTensor b64 = ints(DType::I64, {-1, 0, 4, -4, INT64_MIN, INT64_MAX});
  expect_exact(r, "mod", {}, {a64, b64}, ints(DType::I64, {0, 0, 3, -3, -1, INT64_MAX - 3}));
  expect_exact(r, "mod", c_fmod, {a64, b64}, ints(DType::I64, {0, 0, -1, 1, INT64_MAX, -3}));
  const HostTensor a8 = ints(DType::U8, {200, 255, 7, 0, 5});
  const HostTensor b8 = ints(DType::U8, {7, 16, 0, 3, 255});
  expect_exact(r, "mod", {}, {a8, b8}, ints(DType::U8, {4, 15, 0, 0, 5}));
  expect_exact(r, "mod", c_fmod, {a8, b8}, ints(DType::U8, {4, 15, 0, 0, 5}));
  // Broadcast: a row of dividends [2] against a column of divisors [2, 1].
  HostTensor divisors(DType::I32, {2, 1});
  put<int32_t>(divisors, 0, 3);
  put<int32_t>(divisors, 1, -3);
  HostTensor want(DType::I32, {2, 2});
  const int32_t expected[] = {2, 1, -1, -2};  // -7 mod 3, 7 mod 3, -7 mod -3, 7 mod -3
  for (int i = 0; i < 4; ++i) put<int32_t>(want, i, expected[i]);
  expect_exact(r, "mod", {}, {ints(DType::I32, {-7, 7}), divisors}, want);
}

TEST(TypedElementwiseCuda, IntegerAddSubMulWrap) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const HostTensor a = ints(DType::I32, {INT32_MAX, INT32_MIN, 65536, 46341});
  const HostTensor b = ints(DType::I32, {1, 1, 65536, 46341});
  expect_exact(r, "add", {}, {a, b}, ints(DType::I32, {INT32_MIN, INT32_MIN + 1, 131072, 92682}));
  expect_exact(r, "sub", {}, {a, b}, ints(DType::I32, {INT32_MAX - 1, INT32_MAX, 0, 0}));
  expect_exact(r, "mul", {}, {a, b}, ints(DType::I32, {INT32_MAX, INT32_MIN, 0, -2147479015}));
  expect_exact(r, "add", {}, {ints(DType::I64, {INT64_MAX}), ints(DType::I64, {1})}, ints(DType::I64, {INT64_MIN}));
  expect_exact(r, "mul", {}, {ints(DType::I64, {int64_t{1} << 32}), ints(DType::I64, {int64_t{1} << 32})},
               ints(DType::I64, {0}));
  const HostTensor p = ints(DType::U8, {200, 3, 16});
  const HostTensor q = ints(DType::U8, {100, 5, 16});
  expect_exact(r, "add", {}, {p, q}, ints(DType::U8, {44, 8, 32}));
  expect_exact(r, "sub", {}, {p, q}, ints(DType::U8, {100, 254, 0}));
  expect_exact(r, "mul", {}, {p, q}, ints(DType::U8, {32, 15, 0}));
}

TEST(TypedElementwiseCuda, CastsFromFloatTruncateAndSaturate) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  auto to = [](const char* name) { return attrs_of({{"dtype", std::string(name)}}); };
  const HostTensor x = floats(DType::F32, {2.9f, -2.9f, 3e9f, -3e9f, kNan, kInf, -kInf, -0.5f,
                                           2147483520.0f, 2147483648.0f, -2147483648.0f});
  expect_exact(r, "cast", to("i32"), {x},
               ints(DType::I32, {2, -2, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 0,
                                 2147483520, INT32_MAX, INT32_MIN}));
  expect_exact(r, "cast", to("u8"), {floats(DType::F32, {-1.0f, 255.9f, 256.0f, 300.0f, kNan, 1.99f, -kInf})},
               ints(DType::U8, {0, 255, 255, 255, 0, 1, 0}));
  expect_exact(r, "cast", to("i64"),
               {floats(DType::F32, {1e19f, -1e19f, 9223371487098961920.0f, -9223372036854775808.0f, kNan, -7.5f})},
               ints(DType::I64, {INT64_MAX, INT64_MIN, 9223371487098961920, INT64_MIN, 0, -7}));
  // The 16-bit floats the same way, through their own values.
  expect_exact(r, "cast", to("i32"), {floats(DType::F16, {65504.0f, -2.5f, kInf, kNan})},
               ints(DType::I32, {65504, -2, INT32_MAX, 0}));
  expect_exact(r, "cast", to("u8"), {floats(DType::BF16, {1e10f, -3.0f, 254.0f})}, ints(DType::U8, {255, 0, 254}));
  // To bool: x != 0, NaN included; from bool: 0 or 1 whatever the byte.
  expect_exact(r, "cast", to("bool"), {floats(DType::F32, {kNan, -0.0f, 0.0f, 1e-30f, -kInf})},
               ints(DType::Bool, {1, 0, 0, 1, 1}));
  expect_exact(r, "cast", to("bool"), {ints(DType::I64, {0, INT64_MIN, 256})}, ints(DType::Bool, {0, 1, 1}));
  expect_exact(r, "cast", to("f32"), {ints(DType::Bool, {0, 1, 2, 255})}, floats(DType::F32, {0.0f, 1.0f, 1.0f, 1.0f}));
  expect_exact(r, "cast", to("i64"), {ints(DType::Bool, {0, 2})}, ints(DType::I64, {0, 1}));
  expect_exact(r, "cast", to("bool"), {ints(DType::Bool, {0, 2, 255})}, ints(DType::Bool, {0, 1, 1}));
}

TEST(TypedElementwiseCuda, CastsToFloatRoundOnceToNearestEven) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  auto to = [](const char* name) { return attrs_of({{"dtype", std::string(name)}}); };
  // bf16 keeps 8 significant bits. 2^24 + 2^16 + 1 is just above a halfway point: through
  // f32 it would become the halfway point 2^24 + 2^16 and then 2^24 (to even).
  expect_exact(r, "cast", to("bf16"),
               {ints(DType::I32, {16842753, 16842752, 16973824, 257, 259, -259, INT32_MAX, INT32_MIN})},
               floats(DType::BF16, {16908288.0f, 16777216.0f, 17039360.0f, 256.0f, 260.0f, -260.0f,
                                    2147483648.0f, -2147483648.0f}));
  expect_exact(r, "cast", to("bf16"),
               {ints(DType::I64, {INT64_MAX, (int64_t{1} << 62) + (int64_t{1} << 54) + 1,
                                  (int64_t{1} << 62) + (int64_t{1} << 54)})},
               floats(DType::BF16, {9223372036854775808.0f, 4647714815446351872.0f, 4611686018427387904.0f}));
  expect_exact(r, "cast", to("f32"), {ints(DType::I64, {(int64_t{1} << 53) + 1, 16777217, 16777219, INT64_MIN})},
               floats(DType::F32, {9007199254740992.0f, 16777216.0f, 16777220.0f, -9223372036854775808.0f}));
  expect_exact(r, "cast", to("f16"), {ints(DType::I64, {65519, 65520, -65520, 2049, 2051, 1000000000000})},
               floats(DType::F16, {65504.0f, kInf, -kInf, 2048.0f, 2052.0f, kInf}));
  expect_exact(r, "cast", to("f16"), {ints(DType::U8, {255})}, floats(DType::F16, {255.0f}));
  // Between the floats: f32 -> f16 and bf16 ties to even, NaN stays NaN, overflow to inf.
  expect_exact(r, "cast", to("f16"),
               {floats(DType::F32, {1.00048828125f, 1.00146484375f, 65520.0f, 65519.0f, kNan, -0.0f})},
               floats(DType::F16, {1.0f, 1.001953125f, kInf, 65504.0f, kNan, -0.0f}));
  expect_exact(r, "cast", to("bf16"), {floats(DType::F32, {1.00390625f, 1.01171875f, kNan, 3.4e38f})},
               floats(DType::BF16, {1.0f, 1.015625f, kNan, kInf}));
  expect_exact(r, "cast", to("bf16"), {floats(DType::F16, {1.0009765625f, 65504.0f})},
               floats(DType::BF16, {1.0f, 65536.0f}));
  expect_exact(r, "cast", to("f16"), {floats(DType::BF16, {99840.0f, 1.0078125f, -0.0f})},
               floats(DType::F16, {kInf, 1.0078125f, -0.0f}));
  // Integer to integer wraps.
  expect_exact(r, "cast", to("u8"), {ints(DType::I32, {257, -1, 255})}, ints(DType::U8, {1, 255, 255}));
  expect_exact(r, "cast", to("i32"), {ints(DType::I64, {(int64_t{1} << 32) + 5, -1, INT64_MIN})},
               ints(DType::I32, {5, -1, 0}));
}

TEST(TypedElementwiseCuda, LogicalOpsReadAnyNonZeroByteAsTrueAndWriteOne) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const HostTensor a = ints(DType::Bool, {0, 2, 255, 1, 0});
  const HostTensor b = ints(DType::Bool, {7, 128, 0, 1, 0});
  expect_exact(r, "logical_and", {}, {a, b}, ints(DType::Bool, {0, 1, 0, 1, 0}));
  expect_exact(r, "logical_or", {}, {a, b}, ints(DType::Bool, {1, 1, 1, 1, 0}));
  expect_exact(r, "logical_xor", {}, {a, b}, ints(DType::Bool, {1, 0, 1, 0, 0}));
  expect_exact(r, "logical_not", {}, {a}, ints(DType::Bool, {1, 0, 0, 0, 1}));
  expect_exact(r, "equal", {}, {a, b}, ints(DType::Bool, {0, 1, 0, 1, 1}));
  expect_exact(r, "less", {}, {a, b}, ints(DType::Bool, {1, 0, 0, 0, 0}));
  // where copies a bool as 0 or 1, and reads its condition the same way.
  expect_exact(r, "where", {},
               {ints(DType::Bool, {3, 0, 128}), ints(DType::Bool, {0, 2, 255}), ints(DType::Bool, {7, 128, 0})},
               ints(DType::Bool, {0, 1, 1}));
}

TEST(TypedElementwiseCuda, ElementwiseOpsMayWriteOverAnInputOfTheOutputsShape) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const HostTensor a = ints(DType::I32, {1, -5, 9, INT32_MIN});
  const HostTensor b = ints(DType::I32, {2, -7, 3, -1});
  TensorView da = r.upload(a);
  TensorView db = r.upload(b);
  TensorView cond = r.upload(ints(DType::Bool, {1, 0, 0, 1}));
  Result<CudaKernelFn> div = find_cuda_kernel("div");
  Result<CudaKernelFn> where = find_cuda_kernel("where");
  ASSERT_TRUE(div.ok() && where.ok());
  std::vector<TensorView> div_in{da, db};
  std::vector<TensorView> out{da};
  ASSERT_TRUE((*div)(r.ctx(), {}, div_in, out).ok());  // a = a / b
  std::vector<TensorView> where_in{cond, db, da};
  std::vector<TensorView> out_b{db};
  ASSERT_TRUE((*where)(r.ctx(), {}, where_in, out_b).ok());  // b = cond ? b : a
  ASSERT_TRUE(r.synchronize().ok());
  EXPECT_TRUE(same_elements(r.download(da), ints(DType::I32, {0, 0, 3, INT32_MIN}), 0, true));
  EXPECT_TRUE(same_elements(r.download(db), ints(DType::I32, {2, 0, 3, -1}), 0, true));
}

// ---- errors ----------------------------------------------------------------------------------

TEST(TypedElementwiseCuda, BadCallsAreRejectedBeforeAnythingRuns) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  TensorView f = r.upload(samples(DType::F32, {4}));
  TensorView i32 = r.upload(samples(DType::I32, {4}));
  TensorView i64 = r.upload(samples(DType::I64, {4}));
  TensorView cond = r.upload(samples(DType::Bool, {4}));
  TensorView f16 = r.upload(samples(DType::F16, {4}));
  TensorView boolean = r.upload(samples(DType::Bool, {4}));
  TensorView out_f = r.device_output(DType::F32, {4});
  TensorView out_i32 = r.device_output(DType::I32, {4});
  TensorView out_bool = r.device_output(DType::Bool, {4});
  const HostTensor before_f = r.download(out_f);
  const HostTensor before_i32 = r.download(out_i32);
  const HostTensor before_bool = r.download(out_bool);
  auto call = [&](std::string_view op, const OpAttrs& attrs, std::vector<TensorView> in,
                  TensorView out) {
    Result<CudaKernelFn> fn = find_cuda_kernel(op);
    if (!fn.ok()) return fn.status();
    std::vector<TensorView> outs{out};
    return (*fn)(r.ctx(), attrs, in, outs);
  };
  // The dtype rules (InvalidArgument: no back end takes these).
  EXPECT_TRUE(IsError(call("cos", {}, {i32}, out_i32), ErrorCode::InvalidArgument,
                      {"cos", "x has dtype i32", "floating"}));
  EXPECT_TRUE(IsError(call("isnan", {}, {i64}, out_bool), ErrorCode::InvalidArgument,
                      {"isnan", "x has dtype i64"}));
  EXPECT_TRUE(IsError(call("abs", {}, {boolean}, out_bool), ErrorCode::InvalidArgument,
                      {"abs", "x has dtype bool"}));
  EXPECT_TRUE(IsError(call("logical_and", {}, {f, boolean}, out_bool), ErrorCode::InvalidArgument,
                      {"logical_and", "a has dtype f32", "bool"}));
  EXPECT_TRUE(IsError(call("logical_not", {}, {i32}, out_bool), ErrorCode::InvalidArgument,
                      {"logical_not", "x has dtype i32", "bool"}));
  EXPECT_TRUE(IsError(call("equal", {}, {i32, i64}, out_bool), ErrorCode::InvalidArgument,
                      {"equal", "i32", "i64", "one dtype"}));
  EXPECT_TRUE(IsError(call("minimum", {}, {boolean, boolean}, out_bool), ErrorCode::InvalidArgument,
                      {"minimum", "bool"}));
  EXPECT_TRUE(IsError(call("where", {}, {f, f, f}, out_f), ErrorCode::InvalidArgument,
                      {"where", "cond has dtype f32", "bool"}));
  EXPECT_TRUE(IsError(call("where", {}, {cond, i32, i64}, out_i32), ErrorCode::InvalidArgument,
                      {"where", "a has dtype i32", "b has i64"}));
  EXPECT_TRUE(IsError(call("add", {}, {i32, f}, out_i32), ErrorCode::InvalidArgument,
                      {"add", "i32", "f32", "one dtype"}));
  EXPECT_TRUE(IsError(call("add", {}, {boolean, boolean}, out_bool), ErrorCode::NotSupported,
                      {"add", "bool"}));
  EXPECT_TRUE(IsError(call("sqrt", {}, {i32}, out_i32), ErrorCode::NotSupported, {"sqrt", "i32"}));
  EXPECT_TRUE(IsError(call("tan", {}, {i32}, out_i32), ErrorCode::InvalidArgument,
                      {"tan", "x has dtype i32", "floating"}));
  EXPECT_TRUE(IsError(call("mish", {}, {boolean}, out_bool), ErrorCode::InvalidArgument,
                      {"mish", "x has dtype bool"}));
  EXPECT_TRUE(IsError(call("prelu", {}, {boolean, boolean}, out_bool), ErrorCode::InvalidArgument,
                      {"prelu", "bool"}));
  EXPECT_TRUE(IsError(call("prelu", {}, {f, i32}, out_f), ErrorCode::InvalidArgument,
                      {"prelu", "f32", "i32", "one dtype"}));
  // f16 arithmetic runs on CUDA (as bf16); operands of two float dtypes do not.
  EXPECT_TRUE(IsError(call("add", {}, {f16, f}, r.device_output(DType::F16, {4})),
                      ErrorCode::NotSupported, {"add", "f32", "f16", "one dtype"}));
  // Attributes.
  EXPECT_TRUE(IsError(call("cast", {}, {f}, out_i32), ErrorCode::NotFound,
                      {"cast", "attribute 'dtype' is required"}));
  EXPECT_TRUE(IsError(call("cast", attrs_of({{"dtype", std::string("f64")}}), {f}, out_i32),
                      ErrorCode::InvalidArgument, {"cast", "f64"}));
  EXPECT_TRUE(IsError(call("isinf", attrs_of({{"positive", int64_t{3}}}), {f}, out_bool),
                      ErrorCode::InvalidArgument, {"isinf", "positive"}));
  EXPECT_TRUE(IsError(call("celu", attrs_of({{"alpha", 0.0}}), {f}, out_f), ErrorCode::InvalidArgument,
                      {"celu", "alpha is 0"}));
  EXPECT_TRUE(IsError(call("leaky_relu", attrs_of({{"alpha", std::string("big")}}), {f}, out_f),
                      ErrorCode::InvalidArgument, {"leaky_relu", "alpha"}));
  EXPECT_TRUE(IsError(call("mod", attrs_of({{"fmod", std::string("yes")}}), {f, f}, out_f),
                      ErrorCode::InvalidArgument, {"mod", "fmod"}));
  EXPECT_TRUE(IsError(call("mod", {}, {boolean, boolean}, out_bool), ErrorCode::InvalidArgument,
                      {"mod", "bool"}));
  EXPECT_TRUE(IsError(call("mod", {}, {i32, i64}, out_i32), ErrorCode::InvalidArgument,
                      {"mod", "i32", "i64", "one dtype"}));
  // Outputs, shapes, counts, placement.
  EXPECT_TRUE(IsError(call("equal", {}, {f, f}, out_f), ErrorCode::InvalidArgument,
                      {"equal", "output is f32 [4], expected bool [4]"}));
  EXPECT_TRUE(IsError(call("cast", attrs_of({{"dtype", std::string("bool")}}), {f}, out_i32),
                      ErrorCode::InvalidArgument, {"cast", "output is i32 [4], expected bool [4]"}));
  TensorView three = r.upload(samples(DType::F32, {3}));
  EXPECT_TRUE(IsError(call("maximum", {}, {f, three}, out_f), ErrorCode::InvalidArgument,
                      {"maximum", "do not broadcast"}));
  EXPECT_TRUE(IsError(call("where", {}, {cond, f}, out_f), ErrorCode::InvalidArgument,
                      {"where", "got 2 inputs"}));
  HostTensor host = samples(DType::F32, {4});
  EXPECT_TRUE(IsError(call("minimum", {}, {f, host.view()}, out_f), ErrorCode::InvalidArgument,
                      {"minimum", "is on cpu", "CUDA kernel"}));
  ASSERT_TRUE(r.synchronize().ok());
  EXPECT_TRUE(testing::same_bytes(r.download(out_f), before_f)) << "a rejected call wrote its output";
  EXPECT_TRUE(testing::same_bytes(r.download(out_i32), before_i32)) << "a rejected call wrote its output";
  EXPECT_TRUE(testing::same_bytes(r.download(out_bool), before_bool)) << "a rejected call wrote its output";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace planrt::kernels::cuda
