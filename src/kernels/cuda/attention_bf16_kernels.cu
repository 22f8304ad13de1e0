// Device code of fused attention for bf16 or f16 operands, head dim 64, on the tensor cores:
// softmax(scale * q k^T [causal mask]) v in one pass over the keys with an online softmax,
// as the f32 kernel (attention_kernels.cu), but both products are mma.sync m16n8k16
// (bf16 x bf16 -> f32, or f16 x f16 -> f32) instead of FFMA: the 16-bit models are GEMM-rate
// bound, and an FFMA kernel would spend more time in attention than every projection of the
// block together. One kernel templated on the element type T (__nv_bfloat16 or __half): the
// two differ only in the mma's operand type, the packing of two floats into a word and the
// conversions (bf16_convert.cuh); the fragment layouts are the same.
//
// Work split: a block owns 64 or 128 query rows of one head (see fused_attention for the
// choice); a row warp owns 16 of them, and with a key split of two, two warps share those 16
// rows, each scoring half of every key tile, their results merged at the end as the online
// softmax merges tiles. Keys and values come through shared memory 64 rows at a time,
// double-buffered with cp.async, one barrier per tile. Per key tile a warp computes its
// scores into registers (m16n8 accumulators), folds them into the running max and sum of
// its rows, and multiplies the probabilities by the value tile. The score accumulators'
// layout is the A-operand layout of the second product, so the probabilities go from
// registers to the tensor cores without touching shared memory (FlashAttention-2's trick).
// The key and value operands come from shared memory by ldmatrix (values transposed on the
// way), four fragments per instruction, and only a warp whose keys of a tile reach a masked
// key tests keys: the first version, with scalar shared loads and a mask test per score,
// spent more of its time on the instructions around the products than on them.
// The output stays in f32 registers until the end; exponentials are base 2 with log2(e)
// folded into the scale.
// The optional mask (kernels/attention_layout.h) is a template parameter, as in the f32
// kernel (attention_kernels.cu, which says why an additive mask keeps the scores in natural
// units): with one, every warp tests its keys of every tile (bool: -inf where the mask is 0;
// additive: the value (the operands' dtype) added, in f32); without one, nothing changes.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 with .bf16 or .f16, the same for both): lane l,
// g = l / 4, t = l % 4.
//   A (16 x 16, row): reg0 (row g, cols 2t, 2t+1), reg1 (g + 8, 2t..), reg2 (g, 2t + 8..),
//                     reg3 (g + 8, 2t + 8..); the lower column in the low half.
//   B (16 x 8, col):  reg0 (k 2t, 2t+1; n g), reg1 (k 2t + 8, 2t + 9; n g).
//   C (16 x 8, f32):  c0, c1 (row g, cols 2t, 2t+1), c2, c3 (row g + 8, same cols).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/attention_dispatch.cuh"
#include "kernels/cuda/bf16_convert.cuh"
#include "kernels/cuda/launch.h"

namespace planrt::kernels::cuda::launch {
namespace {

constexpr int kHeadDim = 64;
constexpr int kKeys = 64;  // keys per tile
// Row pitch in shared memory, in 16-bit elements: 144 bytes keeps rows 16-byte aligned for cp.async
// and puts the 32 lanes' fragment words on 32 different banks (word 36g + t).
constexpr int kPitch = kHeadDim + 8;
constexpr int kMaxGridY = 65535;

constexpr int kTileElems = kKeys * kPitch;  // one K or V stage
// Two stages of K and V: 36 KiB. The block's query rows (64 or 128) are staged through the
// second stage before the first tile and held in registers from then on.
constexpr int kSharedElems = 4 * kTileElems;
static_assert(kSharedElems * sizeof(uint16_t) <= 48 * 1024, "fits the default shared memory of a block");

template <typename T>
__device__ __forceinline__ void copy_async16(T* dst, const T* src, bool valid) {
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
template <bool Vec, int Threads, typename T>
__device__ __forceinline__ void load_tile(T* dst, const T* src, int64_t src_pitch,
                                          int64_t first, int64_t rows) {
  if (Vec) {
    constexpr int kUnitsPerRow = kHeadDim / 8;
#pragma unroll
    for (int u = 0; u < kKeys * kUnitsPerRow / Threads; ++u) {
      const int unit = threadIdx.x + u * Threads;
      const int row = unit / kUnitsPerRow;
      const int col = (unit % kUnitsPerRow) * 8;
      const bool valid = first + row < rows;
      copy_async16(dst + row * kPitch + col, valid ? src + (first + row) * src_pitch + col : src,
                   valid);
    }
  } else {
    for (int i = threadIdx.x; i < kKeys * kHeadDim; i += Threads) {
      const int row = i / kHeadDim;
      const int col = i % kHeadDim;
      const bool valid = first + row < rows;
      dst[row * kPitch + col] = valid ? src[(first + row) * src_pitch + col] : narrow<T>(0.0f);
    }
  }
}

template <typename T>
__device__ __forceinline__ uint32_t word_at(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}
template <typename T>
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  const typename Pair<T>::type two = Pair<T>::from(lo, hi);  // .x, the low half: lo
  return *reinterpret_cast<const uint32_t*>(&two);
}

// Four 8 x 8 matrices of 16-bit elements from shared memory, one per register: lanes 8i..8i+7 give the
// row addresses of matrix i (16-byte aligned rows). Plain: lane l gets row l / 4, columns
// 2 (l % 4) and 2 (l % 4) + 1 (a B fragment when rows are n); .trans: rows 2 (l % 4) and
// 2 (l % 4) + 1 of column l / 4 (a B fragment when rows are k).
template <typename T>
__device__ __forceinline__ void load_matrices(uint32_t r[4], const T* row) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
template <typename T>
__device__ __forceinline__ void load_matrices_transposed(uint32_t r[4], const T* row) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// 2^x on the special-function unit; results below 2^-126 flush to zero. A probability that
// small cannot move a bf16 or f16 output: every row's sum of probabilities is at least 1 (its
// largest score contributes 2^0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// c += a (16 x 16) b (16 x 8), operands of T, accumulated in f32.
template <typename T>
__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, f16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, bf16>, "bf16 or f16 operands");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
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

// RowWarps warps own 16 query rows each (64 or 128 rows per block: 128 halves the key and
// value traffic, which every block reads whole, where there are enough blocks to fill the
// device); KeySplit warps share each row group, each taking 64 / KeySplit keys of every tile
// (for short sequences, where there are too few blocks), merged at the end.
// score_scale: scale * log2(e), or scale with an additive mask (natural units).
template <typename T, bool Causal, bool Vec, AttentionMaskKind Mask, int RowWarps, int KeySplit>
__global__ void __launch_bounds__(32 * RowWarps * KeySplit)
    fused_attention_bf16_d64_kernel(const T* q, const T* k, const T* v, const void* mask,
                                    T* out, int64_t heads, int64_t sq, int64_t sk,
                                    float score_scale, AttentionLayout layout) {
  constexpr int kRows = 16 * RowWarps;
  constexpr int kRowThreads = 32 * RowWarps;
  constexpr int kBlockThreads = kRowThreads * KeySplit;
  constexpr int kWarpKeys = kKeys / KeySplit;     // keys of a tile one warp scores
  constexpr int kKeyBlocks = kWarpKeys / 8;       // its n-tiles of the first product
  constexpr int kKeySteps = kWarpKeys / 16;       // its k-steps of the second
  static_assert(kRows * kPitch <= 2 * kTileElems, "the query rows fit in the second stage");
  __shared__ __align__(16) T shared[kSharedElems];
  T* k_s = shared;                // stage i: k_s + 2i tiles
  T* v_s = shared + kTileElems;   // stage i: v_s + 2i tiles
  T* q_s = shared + 2 * kTileElems;
  const int warp = (threadIdx.x >> 5) % RowWarps;  // the query rows: 16 warp..
  const int part = (threadIdx.x >> 5) / RowWarps;  // the keys of each tile: kWarpKeys part..
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int ldm_row = lane & 7;  // the row this lane addresses in its ldmatrix
  const int ldm_matrix = lane >> 3;
  const int64_t q0 = int64_t{blockIdx.x} * kRows;
  const int64_t row_lo = q0 + warp * 16 + g;  // the lane's two rows: row_lo and row_lo + 8

  int64_t key_end = sk;  // under the causal mask, keys up to the block's last query row
  if (Causal) key_end = min(sk, min(q0 + kRows, sq));
  const int tiles = static_cast<int>((key_end + kKeys - 1) / kKeys);

  for (int64_t head = blockIdx.y; head < heads; head += gridDim.y) {
    const T* qh = q + layout.head_offset(layout.q, head);
    const T* kh = k + layout.head_offset(layout.k, head);
    const T* vh = v + layout.head_offset(layout.v, head);
    T* oh = out + layout.head_offset(layout.out, head);
    // The mask's rows of this head: keys contiguous, query rows layout.mask.row apart.
    const uint8_t* keep_h = nullptr;
    const T* add_h = nullptr;
    if constexpr (Mask == AttentionMaskKind::Bool) {
      keep_h = static_cast<const uint8_t*>(mask) + layout.mask.row_offset(head, 0);
    } else if constexpr (Mask == AttentionMaskKind::Additive) {
      add_h = static_cast<const T*>(mask) + layout.mask.row_offset(head, 0);
    }

#pragma unroll
    for (int rows = 0; rows < kRows; rows += kKeys) {
      load_tile<Vec, kBlockThreads>(q_s + rows * kPitch, qh, layout.q.row, q0 + rows, sq);
    }
    if (tiles > 0) {
      load_tile<Vec, kBlockThreads>(k_s, kh, layout.k.row, 0, sk);
      load_tile<Vec, kBlockThreads>(v_s, vh, layout.v.row, 0, sk);
    }
    commit_copies();
    wait_copies<0>();
    __syncthreads();
    uint32_t qa[4][4];  // the warp's 16 query rows as A fragments, one per 16 dims
    {
      const T* qw = q_s + (warp * 16 + g) * kPitch + 2 * t;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        qa[kk][0] = word_at(qw + kk * 16);
        qa[kk][1] = word_at(qw + 8 * kPitch + kk * 16);
        qa[kk][2] = word_at(qw + kk * 16 + 8);
        qa[kk][3] = word_at(qw + 8 * kPitch + kk * 16 + 8);
      }
    }
    __syncthreads();  // the second stage is free for the keys and values

    float o[8][4];  // 16 x 64 output: n-tile j holds dims 8j..8j+7
    float m[2] = {-INFINITY, -INFINITY};  // running max of rows g and g + 8
    float l[2] = {0.0f, 0.0f};            // the lane's part of their running sums
#pragma unroll
    for (int j = 0; j < 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

    // One barrier per tile: the next tile's copies are issued before this tile's products
    // and waited for after them; the barrier then makes them visible and frees this stage.
    for (int tile = 0; tile < tiles; ++tile) {
      const int stage = tile & 1;
      const bool more = tile + 1 < tiles;
      if (more) {
        const int next = (stage ^ 1) * 2 * kTileElems;
        load_tile<Vec, kBlockThreads>(k_s + next, kh, layout.k.row, int64_t{tile + 1} * kKeys, sk);
        load_tile<Vec, kBlockThreads>(v_s + next, vh, layout.v.row, int64_t{tile + 1} * kKeys, sk);
        commit_copies();
      }

      // Scores: s[j] is the 16 x 8 block of the warp's keys 8j..8j+7 (B = k^T: column n is
      // key row n). Two ldmatrix per key block: matrix i of the first holds dims 8i..8i+7 of
      // its 8 keys, so registers (0, 1) are the B fragment of dims 0..15, (2, 3) of 16..31.
      const T* kt = k_s + stage * 2 * kTileElems + part * kWarpKeys * kPitch;
      float s[kKeyBlocks][4];
#pragma unroll
      for (int j = 0; j < kKeyBlocks; ++j) {
        s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
        const T* key_row = kt + (8 * j + ldm_row) * kPitch + 8 * ldm_matrix;
#pragma unroll
        for (int half_dims = 0; half_dims < 2; ++half_dims) {
          uint32_t b[4];
          load_matrices(b, key_row + 32 * half_dims);
          mma<T>(s[j], qa[2 * half_dims], b[0], b[1]);
          mma<T>(s[j], qa[2 * half_dims + 1], b[2], b[3]);
        }
      }

      // A key is masked past the end, (causal) past its query row, or by the mask; only a
      // warp whose keys of this tile reach past the end or past its first row, or any warp
      // under a mask, tests them (uniform per warp).
      const int64_t first_key = int64_t{tile} * kKeys + part * kWarpKeys;
      const int64_t last_key = first_key + kWarpKeys - 1;
      const bool masked_keys = Mask != AttentionMaskKind::None || last_key >= sk ||
                               (Causal && last_key > q0 + warp * 16);
      const int64_t key0 = first_key + 2 * t;
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // row g (c0, c1), row g + 8 (c2, c3)
        const int64_t row = row_lo + 8 * half;
        // Rows past the end (computed, never written) read no mask.
        const bool row_in = Mask != AttentionMaskKind::None && row < sq;
        const int64_t mask_row = row * layout.mask.row;
        float tile_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < kKeyBlocks; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[j][2 * half + e];
            x *= score_scale;
            if (masked_keys) {
              const int64_t key = key0 + 8 * j + e;
              bool masked = key >= sk || (Causal && key > row);
              if constexpr (Mask == AttentionMaskKind::Bool) {
                if (!masked && row_in) masked = keep_h[mask_row + key] == 0;
              } else if constexpr (Mask == AttentionMaskKind::Additive) {
                if (!masked && row_in) x += widen(add_h[mask_row + key]);
              }
              if (masked) x = -INFINITY;
            }
            tile_max = fmaxf(tile_max, x);
          }
        }
        // Online softmax: the four lanes of a quad share the row.
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        const float m_new = fmaxf(m[half], tile_max);
        // A row with every key so far masked keeps weight 0 instead of exp2(-inf + inf).
        const bool empty = m_new == -INFINITY;
        // (m -inf and m_new finite: exp2(-inf) = 0, nothing accumulated to keep.)
        const float alpha = empty ? 1.0f : fast_exp2(in_log2_units<Mask>(m[half] - m_new));
        const float shift = empty ? 0.0f : m_new;  // exp2(-inf - 0) = 0 for an empty row
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < kKeyBlocks; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[j][2 * half + e];
            x = fast_exp2(in_log2_units<Mask>(x - shift));
            sum += x;
          }
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          o[j][2 * half] *= alpha;
          o[j][2 * half + 1] *= alpha;
        }
        l[half] = l[half] * alpha + sum;
        m[half] = m_new;
      }

      // o += p v. The probabilities of keys 16kk..16kk+15 are the A fragment
      // {s[2kk] c0c1, s[2kk] c2c3, s[2kk+1] c0c1, s[2kk+1] c2c3}; B (k = key, n = dim) comes
      // from the value tile by transposing loads: matrix i of one ldmatrix holds keys
      // 16kk + 8 (i & 1).. and dims 8j + 8 (i >> 1).., so registers (0, 1) are the B fragment
      // of dims 8j..8j+7 and (2, 3) of the next 8.
      const T* vt = v_s + stage * 2 * kTileElems + part * kWarpKeys * kPitch;
#pragma unroll
      for (int kk = 0; kk < kKeySteps; ++kk) {
        const uint32_t pa[4] = {pack<T>(s[2 * kk][0], s[2 * kk][1]), pack<T>(s[2 * kk][2], s[2 * kk][3]),
                                pack<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                pack<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
        const T* value_row =
            vt + (16 * kk + 8 * (ldm_matrix & 1) + ldm_row) * kPitch + 8 * (ldm_matrix >> 1);
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
          uint32_t b[4];
          load_matrices_transposed(b, value_row + 8 * j);
          mma<T>(o[j], pa, b[0], b[1]);
          mma<T>(o[j + 1], pa, b[2], b[3]);
        }
      }
      if (more) wait_copies<0>();
      __syncthreads();
    }

    if (KeySplit > 1) {
      // The warps of parts 1.. hand their rows' max, partial sums and outputs to part 0's
      // warp of the same rows through the (now idle) key and value stages, which merges them
      // as the online softmax merges tiles: each side rescaled to the larger max.
      constexpr int kMerged = 32 + 4;  // o, m, l of one lane
      float* merge = reinterpret_cast<float*>(shared);
      static_assert((KeySplit - 1) * kRowThreads * kMerged * sizeof(float) <= kSharedElems * sizeof(T),
                    "the merge fits in the key and value stages");
      if (part > 0) {
        float* mine = merge + (part - 1) * kRowThreads * kMerged + (threadIdx.x % kRowThreads);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) mine[(4 * j + e) * kRowThreads] = o[j][e];
        }
        mine[32 * kRowThreads] = m[0];
        mine[33 * kRowThreads] = m[1];
        mine[34 * kRowThreads] = l[0];
        mine[35 * kRowThreads] = l[1];
      }
      __syncthreads();
      if (part == 0) {
#pragma unroll
        for (int other = 1; other < KeySplit; ++other) {
          const float* theirs = merge + (other - 1) * kRowThreads * kMerged + threadIdx.x;
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const float m_other = theirs[(32 + half) * kRowThreads];
            const float l_other = theirs[(34 + half) * kRowThreads];
            const float m_new = fmaxf(m[half], m_other);
            // A side that saw only masked keys (max -inf) adds nothing.
            const float mine_w = m[half] == -INFINITY ? 0.0f : fast_exp2(in_log2_units<Mask>(m[half] - m_new));
            const float other_w = m_other == -INFINITY ? 0.0f : fast_exp2(in_log2_units<Mask>(m_other - m_new));
#pragma unroll
            for (int j = 0; j < 8; ++j) {
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                float& x = o[j][2 * half + e];
                x = x * mine_w + theirs[(4 * j + 2 * half + e) * kRowThreads] * other_w;
              }
            }
            l[half] = l[half] * mine_w + l_other * other_w;
            m[half] = m_new;
          }
        }
      }
    }

    if (part == 0) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float total = l[half];
        total += __shfl_xor_sync(0xffffffffu, total, 1);
        total += __shfl_xor_sync(0xffffffffu, total, 2);
        const int64_t row = row_lo + 8 * half;
        if (row >= sq) continue;
        const float inv = total > 0.0f ? 1.0f / total : 0.0f;
        T* orow = oh + row * layout.out.row + 2 * t;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          orow[8 * j] = narrow<T>(o[j][2 * half] * inv);
          orow[8 * j + 1] = narrow<T>(o[j][2 * half + 1] * inv);
        }
      }
    }
    __syncthreads();  // the stages are reloaded for the next head
  }
}

template <typename T, bool Causal, bool Vec, AttentionMaskKind Mask, int RowWarps, int KeySplit>
cudaError_t launch_fused(const T* q, const T* k, const T* v, const void* mask, T* out,
                         int64_t heads, int64_t sq, int64_t sk, float scale,
                         const AttentionLayout& layout, cudaStream_t stream) {
  constexpr int kRows = 16 * RowWarps;
  const dim3 grid(static_cast<unsigned>((sq + kRows - 1) / kRows),
                  static_cast<unsigned>(heads < kMaxGridY ? heads : kMaxGridY));
  const float score_scale = Mask == AttentionMaskKind::Additive ? scale : attention_scale_log2(scale);
  fused_attention_bf16_d64_kernel<T, Causal, Vec, Mask, RowWarps, KeySplit>
      <<<grid, 32 * RowWarps * KeySplit, 0, stream>>>(q, k, v, mask, out, heads, sq, sk, score_scale,
                                                      layout);
  return cudaGetLastError();
}

template <typename T>
cudaError_t fused_attention_16bit(const T* q, const T* k, const T* v, const void* mask, T* out,
                                  int64_t heads, int64_t sq, int64_t sk, float scale, bool causal,
                                  const AttentionLayout& layout, cudaStream_t stream) {
  if (heads == 0 || sq == 0) return cudaSuccess;
  // 16-byte copies need 16-byte aligned input rows (8 elements; a 64-element row is 128
  // bytes); the output is written 2 bytes at a time either way.
  const bool vec = all_aligned16(q, k, v, q) && layout.strides_multiple_of(8);
  // Blocks of 128 query rows where they alone occupy at least three quarters of the SMs
  // (every block reads all of its head's keys and values, and 128 rows halve that traffic);
  // otherwise 64 rows with two warps per row group, each taking half of every key tile, so
  // that short sequences still have warps in flight. Measurements: docs/performance.md.
  int device = 0;
  int sms = 0;
  cudaError_t queried = cudaGetDevice(&device);
  if (queried == cudaSuccess) {
    queried = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  }
  if (queried != cudaSuccess) return queried;
  const bool wide_rows = (sq + 127) / 128 * heads * 4 >= int64_t{3} * sms;
  return with_attention_mask(mask, layout.mask.kind, [&](auto mask_c) {
    return with_attention_flags(causal, vec, [&](auto causal_c, auto vec_c) {
      constexpr bool kCausal = decltype(causal_c)::value;
      constexpr bool kVec = decltype(vec_c)::value;
      constexpr AttentionMaskKind kMask = decltype(mask_c)::value;
      if (wide_rows) {
        return launch_fused<T, kCausal, kVec, kMask, 8, 1>(q, k, v, mask, out, heads, sq, sk, scale, layout, stream);
      }
      return launch_fused<T, kCausal, kVec, kMask, 4, 2>(q, k, v, mask, out, heads, sq, sk, scale, layout, stream);
    });
  });
}

}  // namespace

cudaError_t fused_attention(const bf16* q, const bf16* k, const bf16* v, const void* mask,
                            bf16* out, int64_t heads, int64_t sq, int64_t sk, float scale,
                            bool causal, const AttentionLayout& layout, cudaStream_t stream) {
  return fused_attention_16bit(q, k, v, mask, out, heads, sq, sk, scale, causal, layout, stream);
}

cudaError_t fused_attention(const f16* q, const f16* k, const f16* v, const void* mask, f16* out,
                            int64_t heads, int64_t sq, int64_t sk, float scale, bool causal,
                            const AttentionLayout& layout, cudaStream_t stream) {
  return fused_attention_16bit(q, k, v, mask, out, heads, sq, sk, scale, causal, layout, stream);
}

}  // namespace planrt::kernels::cuda::launch
