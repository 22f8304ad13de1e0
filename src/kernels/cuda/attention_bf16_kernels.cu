// Device code of fused attention for bf16 operands, head dim 64, on the tensor cores:
// softmax(scale * q k^T [causal mask]) v in one pass over the keys with an online softmax,
// as the f32 kernel (attention_kernels.cu), but both products are mma.sync m16n8k16
// (bf16 x bf16 -> f32) instead of FFMA: the bf16 models are GEMM-rate bound, and an FFMA
// kernel would spend more time in attention than every projection of the block together.
//
// Work split: one block of 4 warps per 64 query rows of one head; warp w owns rows
// 16w..16w+15. Keys and values come through shared memory 64 rows at a time,
// double-buffered with cp.async. Per key tile a warp computes its 16 x 64 scores into
// registers (8 n-tiles of m16n8 accumulators), folds them into the running max and sum of
// its rows, and multiplies the probabilities by the value tile. The score accumulators'
// layout is the A-operand layout of the second product, so the probabilities go from
// registers to the tensor cores without touching shared memory (FlashAttention-2's trick).
// The output stays in f32 registers until the end; exponentials are base 2 with log2(e)
// folded into the scale.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 with .bf16): lane l, g = l / 4, t = l % 4.
//   A (16 x 16, row): reg0 (row g, cols 2t, 2t+1), reg1 (g + 8, 2t..), reg2 (g, 2t + 8..),
//                     reg3 (g + 8, 2t + 8..); the lower column in the low half.
//   B (16 x 8, col):  reg0 (k 2t, 2t+1; n g), reg1 (k 2t + 8, 2t + 9; n g).
//   C (16 x 8, f32):  c0, c1 (row g, cols 2t, 2t+1), c2, c3 (row g + 8, same cols).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_dispatch.cuh"
#include "kernels/cuda/launch.h"

namespace planrt::kernels::cuda::launch {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kHeadDim = 64;
constexpr int kWarps = 4;
constexpr int kRows = 16 * kWarps;  // query rows per block
constexpr int kKeys = 64;           // keys per tile
constexpr int kThreads = 32 * kWarps;
// Row pitch in shared memory, in bf16s: 144 bytes keeps rows 16-byte aligned for cp.async
// and puts the 32 lanes' fragment words on 32 different banks (word 36g + t).
constexpr int kPitch = kHeadDim + 8;
constexpr int kMaxGridY = 65535;

constexpr int kTileElems = kKeys * kPitch;  // one K or V stage; Q is the same size
constexpr size_t kSharedBytes = size_t{5} * kTileElems * sizeof(bf16);  // Q, 2 K, 2 V: 45 KiB
static_assert(kSharedBytes <= 48 * 1024, "fits the default shared memory of a block");

__device__ __forceinline__ void copy_async16(bf16* dst, const bf16* src, bool valid) {
  const unsigned dst_addr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int src_bytes = valid ? 16 : 0;  // 0: fill with zeros
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst_addr), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

// Rows [first, first + 64) of a [rows, 64] matrix whose rows start `src_pitch` elements
// apart into shared memory; rows at or past `rows` read as zeros. Vec: 16-byte asynchronous
// copies (every row start is 16-byte aligned); else plain 2-byte loads, visible after the
// caller's barrier like the copies.
template <bool Vec>
__device__ __forceinline__ void load_tile(bf16* dst, const bf16* src, int64_t src_pitch,
                                          int64_t first, int64_t rows) {
  if (Vec) {
    constexpr int kUnitsPerRow = kHeadDim / 8;
#pragma unroll
    for (int u = 0; u < kKeys * kUnitsPerRow / kThreads; ++u) {
      const int unit = threadIdx.x + u * kThreads;
      const int row = unit / kUnitsPerRow;
      const int col = (unit % kUnitsPerRow) * 8;
      const bool valid = first + row < rows;
      copy_async16(dst + row * kPitch + col, valid ? src + (first + row) * src_pitch + col : src,
                   valid);
    }
  } else {
    for (int i = threadIdx.x; i < kKeys * kHeadDim; i += kThreads) {
      const int row = i / kHeadDim;
      const int col = i % kHeadDim;
      const bool valid = first + row < rows;
      dst[row * kPitch + col] = valid ? src[(first + row) * src_pitch + col] : __float2bfloat16(0.0f);
    }
  }
}

__device__ __forceinline__ uint32_t word_at(const bf16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}
__device__ __forceinline__ uint32_t pack(bf16 lo, bf16 hi) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(lo)) |
         (static_cast<uint32_t>(__bfloat16_as_ushort(hi)) << 16);
}
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  return pack(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
}

// c += a (16 x 16) b (16 x 8).
__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <bool Causal, bool Vec>
__global__ void __launch_bounds__(kThreads)
    fused_attention_bf16_d64_kernel(const bf16* q, const bf16* k, const bf16* v, bf16* out,
                                    int64_t heads, int64_t sq, int64_t sk, float scale_log2,
                                    AttentionLayout layout) {
  __shared__ __align__(16) bf16 shared[5 * kTileElems];
  bf16* q_s = shared;
  bf16* k_s = q_s + kTileElems;      // [2][64][kPitch]
  bf16* v_s = k_s + 2 * kTileElems;  // [2][64][kPitch]
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int64_t q0 = int64_t{blockIdx.x} * kRows;
  const int64_t row_lo = q0 + warp * 16 + g;  // the lane's two rows: row_lo and row_lo + 8

  int64_t key_end = sk;  // under the causal mask, keys up to the block's last query row
  if (Causal) key_end = min(sk, min(q0 + kRows, sq));
  const int tiles = static_cast<int>((key_end + kKeys - 1) / kKeys);

  for (int64_t head = blockIdx.y; head < heads; head += gridDim.y) {
    const bf16* qh = q + layout.head_offset(layout.q, head);
    const bf16* kh = k + layout.head_offset(layout.k, head);
    const bf16* vh = v + layout.head_offset(layout.v, head);
    bf16* oh = out + layout.head_offset(layout.out, head);

    load_tile<Vec>(q_s, qh, layout.q.row, q0, sq);
    load_tile<Vec>(k_s, kh, layout.k.row, 0, sk);
    load_tile<Vec>(v_s, vh, layout.v.row, 0, sk);
    commit_copies();

    uint32_t qa[4][4];  // the warp's 16 query rows as A fragments, one per 16 dims
    float o[8][4];      // 16 x 64 output: n-tile j holds dims 8j..8j+7
    float m[2] = {-INFINITY, -INFINITY};  // running max of rows g and g + 8
    float l[2] = {0.0f, 0.0f};            // the lane's part of their running sums
#pragma unroll
    for (int j = 0; j < 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

    for (int tile = 0; tile < tiles; ++tile) {
      const int stage = tile & 1;
      if (tile + 1 < tiles) {  // the other stage was last read before the previous barrier
        load_tile<Vec>(k_s + (stage ^ 1) * kTileElems, kh, layout.k.row, int64_t{tile + 1} * kKeys, sk);
        load_tile<Vec>(v_s + (stage ^ 1) * kTileElems, vh, layout.v.row, int64_t{tile + 1} * kKeys, sk);
        commit_copies();
        wait_copies<1>();
      } else {
        wait_copies<0>();
      }
      __syncthreads();
      if (tile == 0) {
        const bf16* qw = q_s + (warp * 16 + g) * kPitch + 2 * t;
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          qa[kk][0] = word_at(qw + kk * 16);
          qa[kk][1] = word_at(qw + 8 * kPitch + kk * 16);
          qa[kk][2] = word_at(qw + kk * 16 + 8);
          qa[kk][3] = word_at(qw + 8 * kPitch + kk * 16 + 8);
        }
      }

      // Scores: s[j] is the 16 x 8 block of keys 8j..8j+7 (B = k^T: column n is key row n).
      const bf16* kt = k_s + stage * kTileElems;
      float s[8][4];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
        const bf16* key_row = kt + (8 * j + g) * kPitch + 2 * t;
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          mma(s[j], qa[kk], word_at(key_row + kk * 16), word_at(key_row + kk * 16 + 8));
        }
      }

      // Online softmax over the tile: mask, new running max, rescale what came before.
      const int64_t key0 = int64_t{tile} * kKeys + 2 * t;
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // row g (c0, c1), row g + 8 (c2, c3)
        const int64_t row = row_lo + 8 * half;
        float tile_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int64_t key = key0 + 8 * j + e;
            const bool masked = key >= sk || (Causal && key > row);
            float& x = s[j][2 * half + e];
            x = masked ? -INFINITY : x * scale_log2;
            tile_max = fmaxf(tile_max, x);
          }
        }
        // The four lanes of a quad share the row.
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        const float m_new = fmaxf(m[half], tile_max);
        // A row with every key so far masked keeps weight 0 instead of exp2(-inf + inf).
        const bool empty = m_new == -INFINITY;
        const float alpha = empty ? 1.0f : exp2f(m[half] - m_new);
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[j][2 * half + e];
            x = empty ? 0.0f : exp2f(x - m_new);
            sum += x;
          }
          o[j][2 * half] *= alpha;
          o[j][2 * half + 1] *= alpha;
        }
        l[half] = l[half] * alpha + sum;
        m[half] = m_new;
      }

      // o += p v. The probabilities of keys 16kk..16kk+15 are the A fragment
      // {s[2kk] c0c1, s[2kk] c2c3, s[2kk+1] c0c1, s[2kk+1] c2c3}; B (k = key, n = dim) is
      // the value tile, two keys per register.
      const bf16* vt = v_s + stage * kTileElems;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const uint32_t pa[4] = {pack(s[2 * kk][0], s[2 * kk][1]), pack(s[2 * kk][2], s[2 * kk][3]),
                                pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
        const bf16* key_row = vt + (16 * kk + 2 * t) * kPitch + g;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const bf16* col = key_row + 8 * j;
          mma(o[j], pa, pack(col[0], col[kPitch]), pack(col[8 * kPitch], col[9 * kPitch]));
        }
      }
      __syncthreads();  // this stage is free for the tile after next
    }

#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float total = l[half];
      total += __shfl_xor_sync(0xffffffffu, total, 1);
      total += __shfl_xor_sync(0xffffffffu, total, 2);
      const int64_t row = row_lo + 8 * half;
      if (row >= sq) continue;
      const float inv = total > 0.0f ? 1.0f / total : 0.0f;
      bf16* orow = oh + row * layout.out.row + 2 * t;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        orow[8 * j] = __float2bfloat16_rn(o[j][2 * half] * inv);
        orow[8 * j + 1] = __float2bfloat16_rn(o[j][2 * half + 1] * inv);
      }
    }
    __syncthreads();  // q_s and the stages are reloaded for the next head
  }
}

template <bool Causal, bool Vec>
cudaError_t launch_fused(const bf16* q, const bf16* k, const bf16* v, bf16* out, int64_t heads,
                         int64_t sq, int64_t sk, float scale_log2, const AttentionLayout& layout,
                         cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((sq + kRows - 1) / kRows),
                  static_cast<unsigned>(heads < kMaxGridY ? heads : kMaxGridY));
  fused_attention_bf16_d64_kernel<Causal, Vec>
      <<<grid, kThreads, 0, stream>>>(q, k, v, out, heads, sq, sk, scale_log2, layout);
  return cudaGetLastError();
}

}  // namespace

cudaError_t fused_attention(const bf16* q, const bf16* k, const bf16* v, bf16* out,
                            int64_t heads, int64_t sq, int64_t sk, float scale, bool causal,
                            const AttentionLayout& layout, cudaStream_t stream) {
  if (heads == 0 || sq == 0) return cudaSuccess;
  // 16-byte copies need 16-byte aligned input rows (8 elements; a 64-element row is 128
  // bytes); the output is written 2 bytes at a time either way.
  const bool vec = all_aligned16(q, k, v, q) && layout.strides_multiple_of(8);
  return with_attention_flags(causal, vec, [&](auto causal_c, auto vec_c) {
    return launch_fused<decltype(causal_c)::value, decltype(vec_c)::value>(
        q, k, v, out, heads, sq, sk, attention_scale_log2(scale), layout, stream);
  });
}

}  // namespace planrt::kernels::cuda::launch
