// Where scaled_dot_product_attention's operands keep their rows: the op's `layout`
// attribute, as strides the CPU and CUDA kernels index with (plain data, no CUDA types, so
// device code includes it too).
//
//   layout "bhsd" (the default): q [..., H, Sq, D], k [..., H, Sk, D], v [..., H, Sk, Dv],
//       out [..., H, Sq, Dv] -- each head's rows contiguous, as torch's SDPA takes them.
//   layout "bshd": q [..., Sq, H, D], k [..., Sk, H, D], v [..., Sk, H, Dv],
//       out [..., Sq, H, Dv] -- the heads of one position side by side, as a projection
//       [..., S, H * D] writes them: attention reads the projection's output and writes the
//       next projection's input directly, without the four head permutes around it.
//       With attribute `heads` the operands may be [..., S, H * D] (the same bytes), and one
//       packed input [..., S, 3 * H * D] holds q, k and v side by side in each row (one
//       projection for all three): each operand then starts `start` elements into the row.
//   layout "sbhd": q [Sq, ..., H, D], k [Sk, ..., H, D], v [Sk, ..., H, Dv], out [Sq, ..., H,
//       Dv] -- a sequence-first model's rows ([S, B, E] projections, nn.TransformerEncoder
//       without batch_first): a position's row holds every batch's heads, each batch's H
//       heads side by side; attribute heads and a packed q|k|v input as for bshd, per batch.
//
// The optional mask (input 3) is laid out the same in every layout: it broadcasts to the
// scores [batch dims..., H, Sq, Sk] (bhsd: [q's leading dims..., Sq, Sk]); see
// AttentionMask below.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PLANRT_ATTENTION_HOST_DEVICE __host__ __device__
#else
#define PLANRT_ATTENTION_HOST_DEVICE
#endif

namespace planrt::kernels {

// Element offsets of one operand: row r of flat head i (i = b * heads_per_batch + h) starts
// at start + (i / heads_per_batch) * batch + (i % heads_per_batch) * head + r * row; a row's
// elements are contiguous.
struct AttentionStrides {
  int64_t row = 0;
  int64_t head = 0;
  int64_t batch = 0;
  int64_t start = 0;  // into the tensor the operand lies in (a packed q|k|v row: k, v past q)
};

// The mask over the scores, read where the kernel has a score: key j of query row r of flat
// head i. A bool mask keeps the keys where it is true (false: the key weighs nothing); an
// additive mask (the operands' dtype) is added to the scaled score before the softmax. A
// query row left without any key (every one masked) gives zeros, as transformers' guard
// against fully masked rows makes it (`IsNaN` -> `Where`), where softmax would give NaN.
// Keys are contiguous; the mask broadcasts over heads, batches and query rows with stride 0.
enum class AttentionMaskKind : int32_t { None = 0, Bool = 1, Additive = 2 };
struct AttentionMask {
  AttentionMaskKind kind = AttentionMaskKind::None;
  int64_t heads_per_batch = 1;  // H: flat head i is batch i / H, head i % H
  int64_t batch = 0;            // element strides of those, and of a query row
  int64_t head = 0;
  int64_t row = 0;

  PLANRT_ATTENTION_HOST_DEVICE int64_t row_offset(int64_t i, int64_t r) const {
    return (i / heads_per_batch) * batch + (i % heads_per_batch) * head + r * row;
  }
};

struct AttentionLayout {
  int64_t heads_per_batch = 1;
  AttentionStrides q, k, v, out;
  AttentionMask mask;

  // Offset of row 0 of flat head i of an operand with strides s.
  PLANRT_ATTENTION_HOST_DEVICE int64_t head_offset(const AttentionStrides& s, int64_t i) const {
    return s.start + (i / heads_per_batch) * s.batch + (i % heads_per_batch) * s.head;
  }
  // Every stride a multiple of `elements` (16-byte vector access of rows).
  bool strides_multiple_of(int64_t elements) const {
    for (const AttentionStrides* s : {&q, &k, &v, &out}) {
      if (s->row % elements != 0 || s->head % elements != 0 || s->batch % elements != 0 ||
          s->start % elements != 0) {
        return false;
      }
    }
    return true;
  }
};

}  // namespace planrt::kernels
