// Device code of fused attention: softmax(scale * q k^T [causal mask]) v in one pass over the
// keys, with an online softmax, so no [sq, sk] score matrix ever exists in memory (the
// unfused path in attention.cpp keeps one per group of heads). f32 throughout, FFMA only
// (no TF32), for head dim 64 (d == dv == 64, the common case; others take the unfused path).
//
// Work split: one block of 128 threads per 64 query rows of one head. Keys and values come
// through shared memory 64 rows at a time, double-buffered with cp.async so the next tile
// loads while this one computes. Thread (ty, tx), ty in 0..15 and tx in 0..7, owns query
// rows ty*4..ty*4+3 and, of each 64-key tile, keys tx + 8j (j < 8): strided keys keep the
// eight threads of a row on eight different shared-memory banks. Per tile a thread computes
// its 4 x 8 scores, folds them into the running max m and sum l of its rows (the max is
// shared by the eight threads of a row through warp shuffles; l stays per thread until the
// end), writes the probabilities to shared memory transposed, and accumulates its 4 x 8
// slice of the output (columns tx*4..+3 and 32+tx*4..+3) from them and the value tile.
// Exponentials are base 2 with log2(e) folded into the scale.
//
// The optional mask (kernels/attention_layout.h) is a template parameter: without one the
// kernel does no per-score work for it. A bool mask sets the scores of the keys it drops to
// -inf, as the causal mask does; an additive one is added to the scaled score. With an
// additive mask the scores stay in natural units (scale * q.k + mask, as the CPU kernel adds
// them) and log2(e) multiplies the differences in the exponentials instead: folded into the
// score, a large finite mask value (-3.4e38, transformers' "min of the dtype") would overflow
// to -inf and a row of only such keys would weigh nothing instead of averaging them. A row
// whose keys are all masked keeps max -inf and sum 0 and gives zeros.
// The unfused path's softmax under a mask (attention_softmax_rows) is at the end.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/attention_dispatch.cuh"
#include "kernels/cuda/launch.h"

namespace planrt::kernels::cuda::launch {
namespace {

constexpr int kHeadDim = 64;
constexpr int kRows = 64;     // query rows per block
constexpr int kKeys = 64;     // keys per tile
constexpr int kThreads = 128;
constexpr int kPitch = kHeadDim + 4;  // padded rows of Q, K and P: conflict-free strided reads
constexpr int kMaxGridY = 65535;

constexpr size_t kQFloats = size_t{kRows} * kPitch;
constexpr size_t kKFloats = size_t{kKeys} * kPitch;      // one stage
constexpr size_t kVFloats = size_t{kKeys} * kHeadDim;    // one stage
constexpr size_t kPFloats = size_t{kKeys} * kPitch;      // P transposed: [key][row]
constexpr size_t kSharedBytes = (kQFloats + 2 * kKFloats + 2 * kVFloats + kPFloats) * sizeof(float);

// Copies `bytes` (4 or 16) from global to shared memory asynchronously; fills zeros instead
// when !valid (rows past the end of q, k or v).
template <int Bytes>
__device__ __forceinline__ void copy_async(float* dst, const float* src, bool valid) {
  const unsigned dst_addr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int src_bytes = valid ? Bytes : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst_addr), "l"(src),
               "n"(Bytes), "r"(src_bytes));
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

// Rows [first, first + 64) of a [rows, 64] matrix whose rows start `src_pitch` floats apart
// into shared memory of row pitch `pitch`; rows at or past `rows` read as zeros. Vec:
// 16-byte copies (every row start is 16-byte aligned), else 4-byte ones.
template <bool Vec>
__device__ __forceinline__ void load_tile(float* dst, int pitch, const float* src,
                                          int64_t src_pitch, int64_t first, int64_t rows) {
  constexpr int kUnit = Vec ? 4 : 1;                      // floats per copy
  constexpr int kUnitsPerRow = kHeadDim / kUnit;
  constexpr int kPerThread = kRows * kUnitsPerRow / kThreads;
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int unit = threadIdx.x + u * kThreads;
    const int row = unit / kUnitsPerRow;
    const int col = (unit % kUnitsPerRow) * kUnit;
    const bool valid = first + row < rows;
    const float* from = valid ? src + (first + row) * src_pitch + col : src;
    copy_async<kUnit * 4>(dst + row * pitch + col, from, valid);
  }
}

constexpr float kLog2e = 1.4426950408889634f;

// A difference of two scores in base-2 units: the additive mask's scores are natural units.
template <AttentionMaskKind Mask>
__device__ __forceinline__ float in_log2_units(float x) {
  if constexpr (Mask == AttentionMaskKind::Additive) {
    return x * kLog2e;
  } else {
    return x;
  }
}

// score_scale: scale * log2(e), or scale with an additive mask (natural units).
template <bool Causal, bool Vec, AttentionMaskKind Mask>
__global__ void __launch_bounds__(kThreads, 2)
    fused_attention_d64_kernel(const float* q, const float* k, const float* v, const void* mask,
                               float* out, int64_t heads, int64_t sq, int64_t sk, float score_scale,
                               AttentionLayout layout) {
  extern __shared__ float4 shared4[];
  float* shared = reinterpret_cast<float*>(shared4);
  float* q_s = shared;
  float* k_s = q_s + kQFloats;        // [2][64][kPitch]
  float* v_s = k_s + 2 * kKFloats;    // [2][64][64]
  float* p_s = v_s + 2 * kVFloats;    // [64 keys][kPitch]
  const int tx = threadIdx.x & 7;
  const int ty = threadIdx.x >> 3;
  const int64_t q0 = int64_t{blockIdx.x} * kRows;

  // Keys a block needs: all, or under the causal mask those up to its last query row.
  int64_t key_end = sk;
  if (Causal) key_end = min(sk, min(q0 + kRows, sq));
  const int tiles = static_cast<int>((key_end + kKeys - 1) / kKeys);

  for (int64_t head = blockIdx.y; head < heads; head += gridDim.y) {
    const float* qh = q + layout.head_offset(layout.q, head);
    const float* kh = k + layout.head_offset(layout.k, head);
    const float* vh = v + layout.head_offset(layout.v, head);
    float* oh = out + layout.head_offset(layout.out, head);
    // The mask's rows of this head: keys contiguous, query rows layout.mask.row apart.
    const uint8_t* keep_h = nullptr;
    const float* add_h = nullptr;
    if constexpr (Mask == AttentionMaskKind::Bool) {
      keep_h = static_cast<const uint8_t*>(mask) + layout.mask.row_offset(head, 0);
    } else if constexpr (Mask == AttentionMaskKind::Additive) {
      add_h = static_cast<const float*>(mask) + layout.mask.row_offset(head, 0);
    }

    load_tile<Vec>(q_s, kPitch, qh, layout.q.row, q0, sq);
    load_tile<Vec>(k_s, kPitch, kh, layout.k.row, 0, sk);
    load_tile<Vec>(v_s, kHeadDim, vh, layout.v.row, 0, sk);
    commit_copies();

    float o[4][8];
    float m[4];
    float l[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      m[i] = -INFINITY;
      l[i] = 0.0f;
#pragma unroll
      for (int c = 0; c < 8; ++c) o[i][c] = 0.0f;
    }

    for (int t = 0; t < tiles; ++t) {
      const int stage = t & 1;
      if (t + 1 < tiles) {  // the next tile's stage was last read before the previous barrier
        load_tile<Vec>(k_s + (stage ^ 1) * kKFloats, kPitch, kh, layout.k.row, int64_t{t + 1} * kKeys, sk);
        load_tile<Vec>(v_s + (stage ^ 1) * kVFloats, kHeadDim, vh, layout.v.row, int64_t{t + 1} * kKeys, sk);
        commit_copies();
        wait_copies<1>();
      } else {
        wait_copies<0>();
      }
      __syncthreads();

      // Scores: s[i][j] = q[row i] . k[key j].
      const float* kt = k_s + stage * kKFloats;
      float s[4][8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) s[i][j] = 0.0f;
      }
#pragma unroll 4
      for (int d = 0; d < kHeadDim; d += 4) {
        float4 qa[4];
        float4 kb[8];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          qa[i] = *reinterpret_cast<const float4*>(q_s + (ty * 4 + i) * kPitch + d);
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          kb[j] = *reinterpret_cast<const float4*>(kt + (tx + 8 * j) * kPitch + d);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            s[i][j] = fmaf(qa[i].x, kb[j].x, s[i][j]);
            s[i][j] = fmaf(qa[i].y, kb[j].y, s[i][j]);
            s[i][j] = fmaf(qa[i].z, kb[j].z, s[i][j]);
            s[i][j] = fmaf(qa[i].w, kb[j].w, s[i][j]);
          }
        }
      }

      // Online softmax: mask, new running max per row, rescale what came before.
      const int64_t key0 = int64_t{t} * kKeys + tx;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = q0 + ty * 4 + i;
        // Rows past the end (computed, never written) read no mask.
        const bool row_in = Mask != AttentionMaskKind::None && row < sq;
        const int64_t mask_row = row * layout.mask.row;
        float tile_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int64_t key = key0 + 8 * j;
          bool masked = key >= sk || (Causal && key > row);
          float x = s[i][j] * score_scale;
          if constexpr (Mask == AttentionMaskKind::Bool) {
            if (!masked && row_in) masked = keep_h[mask_row + key] == 0;
          } else if constexpr (Mask == AttentionMaskKind::Additive) {
            if (!masked && row_in) x += add_h[mask_row + key];
          }
          s[i][j] = masked ? -INFINITY : x;
          tile_max = fmaxf(tile_max, s[i][j]);
        }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 4));
        const float m_new = fmaxf(m[i], tile_max);
        // A row with every key so far masked keeps weight 0 instead of exp2(-inf + inf).
        const bool empty = m_new == -INFINITY;
        // (m -inf and m_new finite: exp2(-inf) = 0, nothing accumulated to keep.)
        const float alpha = empty ? 1.0f : exp2f(in_log2_units<Mask>(m[i] - m_new));
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          s[i][j] = empty ? 0.0f : exp2f(in_log2_units<Mask>(s[i][j] - m_new));
          sum += s[i][j];
        }
        l[i] = l[i] * alpha + sum;
        m[i] = m_new;
#pragma unroll
        for (int c = 0; c < 8; ++c) o[i][c] *= alpha;
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        *reinterpret_cast<float4*>(p_s + (tx + 8 * j) * kPitch + ty * 4) =
            make_float4(s[0][j], s[1][j], s[2][j], s[3][j]);
      }
      __syncthreads();

      // o += p v over the tile's keys.
      const float* vt = v_s + stage * kVFloats;
#pragma unroll 8
      for (int key = 0; key < kKeys; ++key) {
        const float4 p = *reinterpret_cast<const float4*>(p_s + key * kPitch + ty * 4);
        const float4 va = *reinterpret_cast<const float4*>(vt + key * kHeadDim + tx * 4);
        const float4 vb = *reinterpret_cast<const float4*>(vt + key * kHeadDim + 32 + tx * 4);
        const float pr[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          o[i][0] = fmaf(pr[i], va.x, o[i][0]);
          o[i][1] = fmaf(pr[i], va.y, o[i][1]);
          o[i][2] = fmaf(pr[i], va.z, o[i][2]);
          o[i][3] = fmaf(pr[i], va.w, o[i][3]);
          o[i][4] = fmaf(pr[i], vb.x, o[i][4]);
          o[i][5] = fmaf(pr[i], vb.y, o[i][5]);
          o[i][6] = fmaf(pr[i], vb.z, o[i][6]);
          o[i][7] = fmaf(pr[i], vb.w, o[i][7]);
        }
      }
      __syncthreads();  // p_s and this stage are free for the next tile
    }

#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float total = l[i];
      total += __shfl_xor_sync(0xffffffffu, total, 1);
      total += __shfl_xor_sync(0xffffffffu, total, 2);
      total += __shfl_xor_sync(0xffffffffu, total, 4);
      const int64_t row = q0 + ty * 4 + i;
      if (row >= sq) continue;
      const float inv = total > 0.0f ? 1.0f / total : 0.0f;
      float* orow = oh + row * layout.out.row;
      if (Vec) {
        *reinterpret_cast<float4*>(orow + tx * 4) =
            make_float4(o[i][0] * inv, o[i][1] * inv, o[i][2] * inv, o[i][3] * inv);
        *reinterpret_cast<float4*>(orow + 32 + tx * 4) =
            make_float4(o[i][4] * inv, o[i][5] * inv, o[i][6] * inv, o[i][7] * inv);
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          orow[tx * 4 + c] = o[i][c] * inv;
          orow[32 + tx * 4 + c] = o[i][4 + c] * inv;
        }
      }
    }
    __syncthreads();  // q_s and the stages are reloaded for the next head
  }
}

template <bool Causal, bool Vec, AttentionMaskKind Mask>
cudaError_t launch_fused(const float* q, const float* k, const float* v, const void* mask, float* out,
                         int64_t heads, int64_t sq, int64_t sk, float scale,
                         const AttentionLayout& layout, cudaStream_t stream) {
  auto kernel = fused_attention_d64_kernel<Causal, Vec, Mask>;
  const float score_scale = Mask == AttentionMaskKind::Additive ? scale : attention_scale_log2(scale);
  // Above the 48 KiB default: allowed per function (cheap; repeated calls are no-ops).
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kSharedBytes));
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((sq + kRows - 1) / kRows),
                  static_cast<unsigned>(heads < kMaxGridY ? heads : kMaxGridY));
  kernel<<<grid, kThreads, kSharedBytes, stream>>>(q, k, v, mask, out, heads, sq, sk, score_scale, layout);
  return cudaGetLastError();
}

// The unfused path's softmax under a mask: one block per score row (query `r % sq` of flat
// head `first_head + r / sq`), in place. The first pass masks the row (causal, then the mask)
// and writes the masked scores back, the second their exponentials, the third divides by
// their sum; every thread touches only its own elements, so no pass needs the row's other
// values but through the block-wide max and sum. A row with no key left (max -inf) gives
// zeros, not exp(-inf - -inf) = NaN.
constexpr int kSoftmaxThreads = 256;
constexpr int64_t kMaxSoftmaxBlocks = int64_t{1} << 20;

// The block-wide max (Max) or sum of v; `shared` holds 32 floats.
template <bool Max>
__device__ __forceinline__ float block_reduce(float v, float* shared) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = Max ? fmaxf(v, other) : v + other;
  }
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  __syncthreads();  // the previous reduction's readers are done with `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const float identity = Max ? -INFINITY : 0.0f;
  v = lane < kSoftmaxThreads / 32 ? shared[lane] : identity;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = Max ? fmaxf(v, other) : v + other;
  }
  return v;
}

template <AttentionMaskKind Mask>
__global__ void __launch_bounds__(kSoftmaxThreads)
    masked_softmax_rows_kernel(float* scores, int64_t rows, int64_t sq, int64_t sk, bool causal,
                               const void* mask, AttentionMask mask_layout, int64_t first_head) {
  static_assert(Mask != AttentionMaskKind::None, "without a mask, launch::softmax_rows");
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* sr = scores + r * sk;
    const int64_t query = r % sq;
    const int64_t at = mask_layout.row_offset(first_head + r / sq, query);
    const int64_t live = causal && query + 1 < sk ? query + 1 : sk;  // keys [0, live) unmasked
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < sk; i += kSoftmaxThreads) {
      float x = -INFINITY;
      if (i < live) {
        x = sr[i];
        if constexpr (Mask == AttentionMaskKind::Bool) {
          if (static_cast<const uint8_t*>(mask)[at + i] == 0) x = -INFINITY;
        } else {
          x += static_cast<const float*>(mask)[at + i];
        }
      }
      sr[i] = x;
      m = fmaxf(m, x);
    }
    m = block_reduce<true>(m, shared);
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < sk; i += kSoftmaxThreads) {
      const float e = m == -INFINITY ? 0.0f : expf(sr[i] - m);
      sr[i] = e;
      sum += e;
    }
    sum = block_reduce<false>(sum, shared);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int64_t i = threadIdx.x; i < sk; i += kSoftmaxThreads) sr[i] *= inv;
  }
}

}  // namespace

cudaError_t attention_softmax_rows(float* scores, int64_t heads, int64_t sq, int64_t sk,
                                   bool causal, const void* mask,
                                   const AttentionMask& mask_layout, int64_t first_head,
                                   cudaStream_t stream) {
  const int64_t rows = heads * sq;
  if (rows == 0 || sk == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(rows < kMaxSoftmaxBlocks ? rows : kMaxSoftmaxBlocks));
  if (mask == nullptr || mask_layout.kind == AttentionMaskKind::None) return cudaErrorInvalidValue;
  if (mask_layout.kind == AttentionMaskKind::Bool) {
    masked_softmax_rows_kernel<AttentionMaskKind::Bool><<<grid, kSoftmaxThreads, 0, stream>>>(
        scores, rows, sq, sk, causal, mask, mask_layout, first_head);
  } else {
    masked_softmax_rows_kernel<AttentionMaskKind::Additive><<<grid, kSoftmaxThreads, 0, stream>>>(
        scores, rows, sq, sk, causal, mask, mask_layout, first_head);
  }
  return cudaGetLastError();
}

cudaError_t fused_attention(const float* q, const float* k, const float* v, const void* mask,
                            float* out, int64_t heads, int64_t sq, int64_t sk, float scale,
                            bool causal, const AttentionLayout& layout, cudaStream_t stream) {
  if (heads == 0 || sq == 0) return cudaSuccess;
  // Vec: 16-byte copies in and float4 stores out (every row start 16-byte aligned).
  const bool vec = all_aligned16(q, k, v, out) && layout.strides_multiple_of(4);
  return with_attention_mask(mask, layout.mask.kind, [&](auto mask_c) {
    return with_attention_flags(causal, vec, [&](auto causal_c, auto vec_c) {
      return launch_fused<decltype(causal_c)::value, decltype(vec_c)::value, decltype(mask_c)::value>(
          q, k, v, mask, out, heads, sq, sk, scale, layout, stream);
    });
  });
}

}  // namespace planrt::kernels::cuda::launch
