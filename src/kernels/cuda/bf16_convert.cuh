// The f32 <-> storage conversions every .cu file with a bf16 path shares: bf16 tensors are
// storage only, widened to f32 on load and rounded to nearest even on store.
#pragma once

#include <cuda_bf16.h>

namespace planrt::kernels::cuda::launch {

using bf16 = __nv_bfloat16;
__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(bf16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T narrow(float x) {
  if constexpr (sizeof(T) == sizeof(float)) {
    return x;
  } else {
    return __float2bfloat16_rn(x);
  }
}

}  // namespace planrt::kernels::cuda::launch
