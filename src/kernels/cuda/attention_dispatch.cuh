// What the two fused attention kernels (attention_kernels.cu, f32; attention_bf16_kernels.cu,
// bf16) share on the host side: the base-2 scale and the choice among the four
// instantiations of a kernel (causal or not, 16-byte copies or not).
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_runtime_api.h>

namespace planrt::kernels::cuda::launch {

// exp(x) = exp2(x * log2(e)): the kernels fold log2(e) into the scale.
inline float attention_scale_log2(float scale) { return scale * 1.4426950408889634f; }

inline bool all_aligned16(const void* a, const void* b, const void* c, const void* d) {
  return ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
           reinterpret_cast<uintptr_t>(c) | reinterpret_cast<uintptr_t>(d)) & 15u) == 0;
}

// launch(std::bool_constant<Causal>, std::bool_constant<Vec>) for the runtime values.
template <typename Launch>
cudaError_t with_attention_flags(bool causal, bool vec, Launch&& launch) {
  using Yes = std::true_type;
  using No = std::false_type;
  if (causal) return vec ? launch(Yes{}, Yes{}) : launch(Yes{}, No{});
  return vec ? launch(No{}, Yes{}) : launch(No{}, No{});
}

}  // namespace planrt::kernels::cuda::launch
