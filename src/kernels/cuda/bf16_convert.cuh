// The f32 <-> storage conversions every .cu file with a 16-bit path shares: bf16 and f16
// (IEEE half) tensors are storage only, widened to f32 on load and rounded to nearest even on
// store (f16: a value past 65504 rounds to +-inf, as PyTorch's f16 kernels store it).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace planrt::kernels::cuda::launch {

using bf16 = __nv_bfloat16;
using f16 = __half;
__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float widen(f16 x) { return __half2float(x); }
template <typename T>
__device__ __forceinline__ T narrow(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, f16>) {
    return __float2half_rn(x);
  } else {
    static_assert(std::is_same_v<T, bf16>, "float, bf16 or f16");
    return __float2bfloat16_rn(x);
  }
}

// Two 16-bit elements in one 32-bit word (.x, the low half, first): bf16 or f16 pairs.
template <typename T>
struct Pair;
template <>
struct Pair<bf16> {
  using type = __nv_bfloat162;
  __device__ static __forceinline__ type from(float lo, float hi) { return __floats2bfloat162_rn(lo, hi); }
};
template <>
struct Pair<f16> {
  using type = __half2;
  __device__ static __forceinline__ type from(float lo, float hi) { return __floats2half2_rn(lo, hi); }
};

}  // namespace planrt::kernels::cuda::launch
