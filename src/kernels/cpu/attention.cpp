// scaled_dot_product_attention, f32, tiled: each (head, block of query rows) is one task;
// a task walks the keys a block at a time, scores = scale * q @ k^T for the block (sgemm),
// folds them into a running row max and sum (the softmax taken online, so a rescale of what
// was accumulated when the max grows), and adds scores @ v into the output rows (sgemm,
// beta = 1); the rows are divided by their sums at the end. No more than one
// kQueryBlock x kKeyBlock score tile exists per thread, however long the sequence.
// Tasks run in parallel (kernels/cpu/threading.h); each thread's tile is heap scratch, its
// allocation failing is OutOfMemory.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <new>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/threading.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cpu {
namespace {

// 128 query rows by 512 keys: sgemm packs its operand blocks on every call, so fewer and
// larger calls pay it less often (64 x 256 tiles, and 32-row ones before them, ran slower:
// docs/performance.md has the rates); the 256 KiB score tile stays in L2.
constexpr int64_t kQueryBlock = 128;
constexpr int64_t kKeyBlock = 512;
constexpr float kMasked = -std::numeric_limits<float>::infinity();

// The mask input of one head, read at query row q (kernels/attention_layout.h).
struct HeadMask {
  const void* data = nullptr;  // null: no mask
  AttentionMaskKind kind = AttentionMaskKind::None;
  const AttentionMask* layout = nullptr;
  int64_t head = 0;

  // Applies keys k0 .. k0 + cols of query row q to its scores.
  void apply(float* s, int64_t q, int64_t k0, int64_t cols) const {
    const int64_t at = layout->row_offset(head, q) + k0;
    if (kind == AttentionMaskKind::Bool) {
      const auto* keep = static_cast<const uint8_t*>(data) + at;
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) s[j] = keep[j] != 0 ? s[j] : kMasked;
    } else {
      const float* add = static_cast<const float*>(data) + at;
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) s[j] += add[j];
    }
  }
};

// Folds one tile of scores [rows, cols] (keys k0.., queries q0..) into the running max and
// sum of each row and rescales the rows of o accumulated so far; leaves e^(s - max) in the
// tile for the product with v. A row whose keys are all masked so far has max -inf and
// weighs nothing (sum 0): its e^(s - max) are taken as 0, not NaN.
PLANRT_SIMD_CLONES
void fold_tile(float* scores, int64_t rows, int64_t cols, int64_t q0, int64_t k0, bool causal, const HeadMask& mask,
               bool first, float* row_max, float* row_sum, float* o, int64_t dv, int64_t ldo) {
  for (int64_t r = 0; r < rows; ++r) {
    float* s = scores + r * cols;
    if (causal) {
      // Key j is masked for query i when j > i (top-left aligned, as the other kernels).
      for (int64_t j = std::max<int64_t>(0, q0 + r + 1 - k0); j < cols; ++j) s[j] = kMasked;
    }
    if (mask.data != nullptr) mask.apply(s, q0 + r, k0, cols);
    float m = first ? kMasked : row_max[r];
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < cols; ++j) m = s[j] > m ? s[j] : m;
    float sum = 0.0f;
    if (m == kMasked) {
      std::fill(s, s + cols, 0.0f);
    } else {
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < cols; ++j) {
        const float e = vmath::exp_nonpositive(s[j] - m);
        s[j] = e;
        sum += e;
      }
    }
    if (first) {
      row_sum[r] = sum;
    } else {
      // A row with no key yet (max -inf) has accumulated nothing to rescale.
      const float factor = row_max[r] == kMasked ? 0.0f : vmath::exp_nonpositive(row_max[r] - m);
      row_sum[r] = row_sum[r] * factor + sum;
      float* orow = o + r * ldo;
      if (factor != 1.0f) {
#pragma omp simd
        for (int64_t c = 0; c < dv; ++c) orow[c] *= factor;
      }
    }
    row_max[r] = m;
  }
}

PLANRT_SIMD_CLONES
void normalize_rows(float* o, int64_t rows, int64_t dv, int64_t ldo, const float* row_sum) {
  for (int64_t r = 0; r < rows; ++r) {
    const float inv = row_sum[r] > 0.0f ? 1.0f / row_sum[r] : 0.0f;  // no key: zeros
    float* orow = o + r * ldo;
#pragma omp simd
    for (int64_t c = 0; c < dv; ++c) orow[c] *= inv;
  }
}

struct Tile {
  std::unique_ptr<float[]> scores;
  float row_max[kQueryBlock];
  float row_sum[kQueryBlock];
};

}  // namespace

Status scaled_dot_product_attention(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                    std::span<const TensorView> outputs) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs.first(std::min<size_t>(inputs.size(), 3))));
  PLANRT_ASSIGN_OR_RETURN(AttentionPlan plan, plan_attention(attrs, inputs, outputs));
  // `fused` concerns the CUDA kernel only: this one is tiled either way. (Named copies, not a
  // structured binding: the loop's lambda captures them, which clang before 16 refuses.)
  const int64_t heads = plan.heads, sq = plan.sq, sk = plan.sk, d = plan.d, dv = plan.dv;
  const bool causal = plan.causal;
  const double scale = plan.scale;
  const AttentionLayout& layout = plan.layout;
  PLANRT_RETURN_IF_ERROR(check_gemm_dims(op, sq, sk, d));
  PLANRT_RETURN_IF_ERROR(check_gemm_dims(op, sq, dv, sk));

  float* out = outputs[0].data_as<float>();
  if (heads == 0 || sq == 0 || dv == 0) return {};
  if (sk == 0) {  // softmax over no keys weighs nothing: the weighted sum is empty
    std::fill(out, out + outputs[0].numel(), 0.0f);
    return {};
  }
  const float* q = inputs[0].data_as<const float>();
  const float* k = attention_source(inputs, 1).data_as<const float>();
  const float* v = attention_source(inputs, 2).data_as<const float>();
  const void* mask_data = attention_mask_data(inputs);
  const int64_t key_block = std::min(sk, kKeyBlock);
  const int64_t query_blocks = (sq + kQueryBlock - 1) / kQueryBlock;

  std::mutex failure_mutex;
  Status failure;
  std::atomic<bool> failed{false};
  auto fail = [&](Status s) {
    std::lock_guard lock(failure_mutex);
    if (failure.ok()) failure = std::move(s);
    failed.store(true, std::memory_order_relaxed);
  };
  // A thread takes at least kMacsPerThread of the two products (threading.h): at S = 16 a
  // task is ~30K multiply-adds, less than forking costs.
  // (In doubles: the dims are checked one by one, not their product.)
  const double task_macs = static_cast<double>(std::min(kQueryBlock, sq)) * static_cast<double>(sk) *
                           static_cast<double>(d + dv);
  const int64_t grain = task_macs >= kMacsPerThread ? 1 : static_cast<int64_t>(kMacsPerThread / task_macs);
  Status loop = parallel_for(heads * query_blocks, grain, [&](int64_t begin, int64_t end) {
    Tile tile;
    tile.scores.reset(new (std::nothrow) float[static_cast<size_t>(kQueryBlock * key_block)]);
    if (tile.scores == nullptr) {
      return fail(make_error(ErrorCode::OutOfMemory, "{}: cannot allocate {} bytes of score tile",
                             op, kQueryBlock * key_block * int64_t{sizeof(float)}));
    }
    for (int64_t task = begin; task < end && !failed.load(std::memory_order_relaxed); ++task) {
      const int64_t h = task / query_blocks;
      const int64_t q0 = (task % query_blocks) * kQueryBlock;
      const int64_t rows = std::min(kQueryBlock, sq - q0);
      // Rows of head h where the layout puts them (kernels/attention_layout.h).
      const int64_t ldq = layout.q.row, ldk = layout.k.row, ldv = layout.v.row, ldo = layout.out.row;
      const float* qh = q + layout.head_offset(layout.q, h) + q0 * ldq;
      const float* kh = k + layout.head_offset(layout.k, h);
      const float* vh = v + layout.head_offset(layout.v, h);
      float* oh = out + layout.head_offset(layout.out, h) + q0 * ldo;
      const HeadMask mask{mask_data, layout.mask.kind, &layout.mask, h};
      // Causal: keys past the block's last query are masked for every row of it.
      const int64_t keys = causal ? std::min(sk, q0 + rows) : sk;
      for (int64_t k0 = 0; k0 < keys; k0 += key_block) {
        const int64_t cols = std::min(key_block, keys - k0);
        const bool first = k0 == 0;
        Status s = gemm_nt(rows, cols, d, static_cast<float>(scale), qh, ldq, kh + k0 * ldk, ldk,
                           0.0f, tile.scores.get(), cols);
        if (s.ok()) {
          fold_tile(tile.scores.get(), rows, cols, q0, k0, causal, mask, first, tile.row_max,
                    tile.row_sum, oh, dv, ldo);
          s = gemm_nn(rows, dv, cols, 1.0f, tile.scores.get(), cols, vh + k0 * ldv, ldv,
                      first ? 0.0f : 1.0f, oh, ldo);
        }
        if (!s.ok()) return fail(s.with_context(op));
      }
      normalize_rows(oh, rows, dv, ldo, tile.row_sum);
    }
  });
  // A failure a task reported comes first; an exception the loop caught, after.
  return failure.ok() ? loop : failure;
}

}  // namespace planrt::kernels::cpu
