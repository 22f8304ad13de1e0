// What the two fused attention kernels (attention_kernels.cu, f32; attention_bf16_kernels.cu,
// bf16) share on the host side: the base-2 scale and the choice among the instantiations of
// a kernel (causal or not, 16-byte copies or not, and the kind of mask).
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_runtime_api.h>

#include "kernels/attention_layout.h"

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

// launch(std::integral_constant<AttentionMaskKind, Kind>) for the mask's kind: None where
// there is no mask data, so that the kernels without a mask do no per-score work for it.
template <typename Launch>
cudaError_t with_attention_mask(const void* mask, AttentionMaskKind kind, Launch&& launch) {
  using K = AttentionMaskKind;
  if (mask == nullptr || kind == K::None) return launch(std::integral_constant<K, K::None>{});
  if (kind == K::Bool) return launch(std::integral_constant<K, K::Bool>{});
  return launch(std::integral_constant<K, K::Additive>{});
}

}  // namespace planrt::kernels::cuda::launch
