// exp, erf and tanh for f32 written so that a compiler vectorizes loops over them (no calls,
// no table lookups, branches as selects), for the CPU kernels' pointwise ops, softmax and
// GELU. std::exp/std::erf are scalar library calls and cost ~10x more per element here.
//
// Accuracy against the float64 functions (tests/kernels/cpu/vector_math_test.cpp checks it
// over dense grids): exp within 2.5 ulp on [-87, 88]; erf within 4e-7 absolute everywhere and
// 1e-6 relative for |x| < 0.5; tanh within 4e-7 absolute. Special values as the C library:
// NaN in gives NaN, exp(-inf) = 0, exp(+inf) = +inf, erf(+-inf) = +-1, tanh(+-inf) = +-1.
// exp flushes results below FLT_MIN (x < -87.34) to 0 where the library gives subnormals.
//
// PLANRT_SIMD_CLONES compiles a function for AVX-512, AVX2 and baseline x86-64, the loader
// picking one by the CPU's features at run time (GCC/clang target_clones), so one binary
// runs everywhere and uses the widest vectors each machine has.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__SANITIZE_THREAD__)
#define PLANRT_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define PLANRT_SIMD_CLONES
#endif

// Forced inline: a vectorized loop must see the whole body; out of line, a call per element
// keeps the loop scalar (GCC stops inlining in large functions such as a switch over ops).
#if defined(__GNUC__) || defined(__clang__)
#define PLANRT_VMATH_INLINE [[gnu::always_inline]] inline
#else
#define PLANRT_VMATH_INLINE inline
#endif

namespace planrt::kernels::cpu::vmath {

namespace detail {

constexpr float kExpMax = 88.72283905206835f;     // ln(FLT_MAX)
constexpr float kExpMin = -87.33654475055310898f;  // ln(FLT_MIN)

// e^x for x in [kExpMin, kExpMax]: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two so
// n ln2 is exact), e^r by its Taylor series to r^7 / 7! (truncation below 2^-24 there), times
// 2^n built in the exponent bits. n stops at 127 so the bits stay finite; x up to
// ln(FLT_MAX) then leaves r < ln2. (A NaN x gives NaN.)
PLANRT_VMATH_INLINE float exp_in_range(float x, bool may_exceed_127) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // ln2's leading 16 bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723212e-6f;
  // Round to nearest by adding and removing 1.5 * 2^23 (exact for |v| < 2^22), which
  // vectorizes on every x86-64 where nearbyint needs SSE4.1.
  constexpr float kRound = 12582912.0f;
  float n = (x * kLog2e + kRound) - kRound;
  if (may_exceed_127) n = n > 127.0f ? 127.0f : n;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return p * scale;
}

}  // namespace detail

// e^x for every float x (exp_in_range above): 0 below ln(FLT_MIN), inf above ln(FLT_MAX),
// NaN for NaN.
PLANRT_VMATH_INLINE float exp(float x) {
  // Selects, not fmin/fmax, which compilers keep scalar for their NaN rules; a NaN x passes
  // through both and is answered at the end.
  float xc = x < detail::kExpMin ? detail::kExpMin : x;
  xc = xc > detail::kExpMax ? detail::kExpMax : xc;
  float y = detail::exp_in_range(xc, true);
  y = x < detail::kExpMin ? 0.0f : y;
  y = x > detail::kExpMax ? std::numeric_limits<float>::infinity() : y;
  return x != x ? x : y;
}

// e^x for x <= 0, -inf or NaN, equal to exp(x) there: a softmax's e^(s - max). Without the
// upper clamp and the selects that only a positive or NaN x needs (a NaN passes through the
// arithmetic), its vector loop runs about twice as fast as exp's (docs/performance.md). A
// positive x is out of contract.
PLANRT_VMATH_INLINE float exp_nonpositive(float x) {
  const float xc = x < detail::kExpMin ? detail::kExpMin : x;
  const float y = detail::exp_in_range(xc, false);
  return x < detail::kExpMin ? 0.0f : y;
}

// erf: for |x| < 0.5 its odd Taylor series (to x^13, truncation below 1e-9 relative there);
// beyond, 1 - (a1 t + ... + a5 t^5) e^(-x^2) with t = 1 / (1 + p |x|), Abramowitz and Stegun's
// 7.1.26 (absolute error below 1.5e-7 in exact arithmetic, ~3.5e-7 in f32), the sign restored.
PLANRT_VMATH_INLINE float erf(float x) {
  const float ax = std::fabs(x);
  const float x2 = x * x;
  // 2 / sqrt(pi) * (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320 + x^13/9360)
  float s = 1.0f / 9360.0f;
  s = s * x2 - 1.0f / 1320.0f;
  s = s * x2 + 1.0f / 216.0f;
  s = s * x2 - 1.0f / 42.0f;
  s = s * x2 + 1.0f / 10.0f;
  s = s * x2 - 1.0f / 3.0f;
  s = s * x2 + 1.0f;
  const float small = 1.12837916709551257f * x * s;
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float q = 1.061405429f;
  q = q * t - 1.453152027f;
  q = q * t + 1.421413741f;
  q = q * t - 0.284496736f;
  q = q * t + 0.254829592f;
  const float large = 1.0f - q * t * exp(-x2);
  const float y = ax < 0.5f ? small : std::copysign(large, x);
  return x != x ? x : y;
}

// tanh: for |x| < 0.25 its odd Taylor series (to x^11); beyond, 1 - 2 / (e^(2|x|) + 1),
// which loses at most a few bits to cancellation there; the sign restored.
PLANRT_VMATH_INLINE float tanh(float x) {
  const float ax = std::fabs(x);
  const float x2 = x * x;
  // x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835 - 1382x^11/155925
  float s = -1382.0f / 155925.0f;
  s = s * x2 + 62.0f / 2835.0f;
  s = s * x2 - 17.0f / 315.0f;
  s = s * x2 + 2.0f / 15.0f;
  s = s * x2 - 1.0f / 3.0f;
  s = s * x2 + 1.0f;
  const float small = x * s;
  const float large = 1.0f - 2.0f / (exp(2.0f * ax) + 1.0f);
  const float y = ax < 0.25f ? small : std::copysign(large, x);
  return x != x ? x : y;
}

// The logistic function 1 / (1 + e^-x); e^-x overflowing to inf gives 0, as it should.
PLANRT_VMATH_INLINE float sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }

// GELU, exact (erf) form: x/2 (1 + erf(x / sqrt 2)).
PLANRT_VMATH_INLINE float gelu(float x) { return 0.5f * x * (1.0f + erf(x * 0.70710678118654752440f)); }

// GELU, tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
PLANRT_VMATH_INLINE float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanh(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}

}  // namespace planrt::kernels::cpu::vmath
