// reshape, permute, transpose, concat, slice, pad: pure data movement, so every dtype works and
// elements are moved by their size, never interpreted.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/threading.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cpu {
namespace {

using Byte = unsigned char;

template <typename T>
void strided_copy(Byte* dst, const Byte* src, int64_t n, int64_t src_stride) {
  T* d = reinterpret_cast<T*>(dst);
  const T* s = reinterpret_cast<const T*>(src);
  for (int64_t i = 0; i < n; ++i) d[i] = s[i * src_stride];
}

// Copies n elements of `size` bytes, reading every `src_stride`-th element of src.
void copy_elements(Byte* dst, const Byte* src, int64_t n, int64_t src_stride, size_t size) {
  if (src_stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * size);
    return;
  }
  switch (size) {
    case 1:
      return strided_copy<uint8_t>(dst, src, n, src_stride);
    case 2:
      return strided_copy<uint16_t>(dst, src, n, src_stride);
    case 4:
      return strided_copy<uint32_t>(dst, src, n, src_stride);
    case 8:
      return strided_copy<uint64_t>(dst, src, n, src_stride);
    default:
      for (int64_t i = 0; i < n; ++i) {
        std::memcpy(dst + static_cast<size_t>(i) * size,
                    src + static_cast<size_t>(i * src_stride) * size, size);
      }
  }
}

// The output's dims with the source's strides, size-1 dims dropped and neighbours merged
// where the source holds them contiguously too (fewer, longer loops).
void merge_dims(const PermutePlan& plan, std::vector<int64_t>* shape, std::vector<int64_t>* strides) {
  for (int d = 0; d < plan.shape.rank(); ++d) {
    if (plan.shape[d] == 1) continue;
    if (!shape->empty() && strides->back() == plan.src_strides[d] * plan.shape[d]) {
      shape->back() *= plan.shape[d];
      strides->back() = plan.src_strides[d];
      continue;
    }
    shape->push_back(plan.shape[d]);
    strides->push_back(plan.src_strides[d]);
  }
}

// Source and destination element offsets of outer index `index` over `dims` (mixed radix).
void offsets_of(int64_t index, const std::vector<int>& dims, const std::vector<int64_t>& shape,
                const std::vector<int64_t>& src_strides, const std::vector<int64_t>& dst_strides, int64_t* src,
                int64_t* dst) {
  *src = *dst = 0;
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    const int64_t i = index % shape[*it];
    index /= shape[*it];
    *src += i * src_strides[*it];
    *dst += i * dst_strides[*it];
  }
}

// One tile of a 2-D transpose: dst[a * dst_a + b] = src[a + b * src_b].
template <typename T>
void transpose_tile(Byte* dst, const Byte* src, int64_t a0, int64_t a1, int64_t b0, int64_t b1, int64_t dst_a,
                    int64_t src_b) {
  T* d = reinterpret_cast<T*>(dst);
  const T* s = reinterpret_cast<const T*>(src);
  for (int64_t a = a0; a < a1; ++a) {
    for (int64_t b = b0; b < b1; ++b) d[a * dst_a + b] = s[a + b * src_b];
  }
}

// The same for output rows of B elements, B a constant (an image's 3 or 4 channels going
// channels-last at a convolution region's edge): the compiler unrolls the row, and a tile
// of many rows keeps the per-tile offset arithmetic off the hot path (2x on a 224x224 RGB
// image at one thread).
template <int B>
void transpose_narrow_tile(Byte* dst, const Byte* src, int64_t a0, int64_t a1, int64_t src_b) {
  auto* d = reinterpret_cast<uint32_t*>(dst);
  const auto* s = reinterpret_cast<const uint32_t*>(src);
  for (int64_t a = a0; a < a1; ++a) {
#pragma GCC unroll 4
    for (int b = 0; b < B; ++b) d[a * B + b] = s[a + b * src_b];
  }
}

// out = x viewed through `plan`. Rows whose elements lie apart in x, the source's own
// rows lying along another output dim (NCHW <-> NHWC, a matrix transpose), are moved as
// tiles of a 2-D transpose, so that reads and writes both stay within cache lines; other
// permutes copy one (strided) row per output row. Split between threads either way.
Status permute_into(const TensorView& x, const TensorView& out, const PermutePlan& plan) {
  if (x.numel() == 0) return {};
  const size_t size = element_size(x.dtype);
  const auto* src = static_cast<const Byte*>(x.data);
  auto* dst = static_cast<Byte*>(out.data);
  std::vector<int64_t> shape, strides;
  merge_dims(plan, &shape, &strides);
  if (shape.empty()) {
    std::memcpy(dst, src, size);
    return {};
  }
  const int r = static_cast<int>(shape.size()), last = r - 1;
  std::vector<int64_t> dst_strides(shape.size(), 1);
  for (int d = last - 1; d >= 0; --d) dst_strides[d] = dst_strides[d + 1] * shape[d + 1];
  int inner = -1;  // the output dim along which the source is contiguous
  for (int d = 0; d < last; ++d) {
    if (strides[d] == 1) inner = d;
  }
  const bool typed = size == 1 || size == 2 || size == 4 || size == 8;
  if (strides[last] > 1 && inner >= 0 && typed) {
    constexpr int64_t kTile = 32;
    const int64_t a_count = shape[inner], b_count = shape[last];
    // Rows of 3 or 4 four-byte elements that follow each other in the output.
    const bool narrow = size == 4 && (b_count == 3 || b_count == 4) && dst_strides[inner] == b_count;
    const int64_t a_tile = narrow ? 32 * kTile : kTile;
    const int64_t a_tiles = (a_count + a_tile - 1) / a_tile, b_tiles = (b_count + kTile - 1) / kTile;
    std::vector<int> outer;
    int64_t outer_count = 1;
    for (int d = 0; d < last; ++d) {
      if (d == inner) continue;
      outer.push_back(d);
      outer_count *= shape[d];
    }
    const int64_t tile_elements = a_tile * std::min(kTile, b_count);
    return parallel_for(outer_count * a_tiles * b_tiles, std::max<int64_t>(1, kElementsPerThread / tile_elements),
                        [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t tile = task % (a_tiles * b_tiles);
        int64_t s_off = 0, d_off = 0;
        offsets_of(task / (a_tiles * b_tiles), outer, shape, strides, dst_strides, &s_off, &d_off);
        const int64_t a0 = tile / b_tiles * a_tile, b0 = tile % b_tiles * kTile;
        const int64_t a1 = std::min(a0 + a_tile, a_count), b1 = std::min(b0 + kTile, b_count);
        Byte* d = dst + static_cast<size_t>(d_off) * size;
        const Byte* sp = src + static_cast<size_t>(s_off) * size;
        const int64_t dst_a = dst_strides[inner], src_b = strides[last];
        if (narrow) {
          b_count == 3 ? transpose_narrow_tile<3>(d, sp, a0, a1, src_b) : transpose_narrow_tile<4>(d, sp, a0, a1, src_b);
          continue;
        }
        switch (size) {
          case 1: transpose_tile<uint8_t>(d, sp, a0, a1, b0, b1, dst_a, src_b); break;
          case 2: transpose_tile<uint16_t>(d, sp, a0, a1, b0, b1, dst_a, src_b); break;
          case 4: transpose_tile<uint32_t>(d, sp, a0, a1, b0, b1, dst_a, src_b); break;
          default: transpose_tile<uint64_t>(d, sp, a0, a1, b0, b1, dst_a, src_b); break;
        }
      }
    });
  }
  std::vector<int> row_dims(static_cast<size_t>(last));
  for (int d = 0; d < last; ++d) row_dims[static_cast<size_t>(d)] = d;
  const int64_t row = shape[last];
  const int64_t rows = x.numel() / row;
  return parallel_for(rows, std::max<int64_t>(1, kElementsPerThread / row), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t s_off = 0, d_off = 0;
      offsets_of(i, row_dims, shape, strides, dst_strides, &s_off, &d_off);
      copy_elements(dst + static_cast<size_t>(d_off) * size, src + static_cast<size_t>(s_off) * size, row,
                    strides[last], size);
    }
  });
}

}  // namespace

// The output's shape is the caller's (it resolved any -1 of the `shape` attribute).
Status reshape(const OpAttrs&, std::span<const TensorView> inputs,
               std::span<const TensorView> outputs) {
  constexpr std::string_view op = "reshape";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(plan_reshape(inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& out = outputs[0];
  if (out.data != x.data && x.nbytes() > 0) std::memmove(out.data, x.data, x.nbytes());
  return {};
}

Status permute(const OpAttrs& attrs, std::span<const TensorView> inputs,
               std::span<const TensorView> outputs) {
  constexpr std::string_view op = "permute";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(PermutePlan plan, plan_permute(attrs, inputs, outputs));
  return permute_into(inputs[0], outputs[0], plan);
}

Status transpose(const OpAttrs& attrs, std::span<const TensorView> inputs,
                 std::span<const TensorView> outputs) {
  constexpr std::string_view op = "transpose";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(PermutePlan plan, plan_transpose(attrs, inputs, outputs));
  return permute_into(inputs[0], outputs[0], plan);
}

Status concat(const OpAttrs& attrs, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "concat";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(ConcatPlan plan, plan_concat(attrs, inputs, outputs));
  if (outputs[0].numel() == 0) return {};
  const auto inner_bytes = static_cast<size_t>(plan.inner_bytes);
  const int64_t outer = plan.outer;
  const int dim = plan.dim;
  auto* dst = static_cast<Byte*>(outputs[0].data);
  for (int64_t o = 0; o < outer; ++o) {
    for (const TensorView& x : inputs) {
      const size_t chunk = static_cast<size_t>(x.sizes[dim]) * inner_bytes;
      if (chunk == 0) continue;
      std::memcpy(dst, static_cast<const Byte*>(x.data) + static_cast<size_t>(o) * chunk, chunk);
      dst += chunk;
    }
  }
  return {};
}

Status slice(const OpAttrs& attrs, std::span<const TensorView> inputs,
             std::span<const TensorView> outputs) {
  constexpr std::string_view op = "slice";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(SlicePlan plan, plan_slice(attrs, inputs, outputs));
  if (outputs[0].numel() == 0) return {};
  const auto chunk = static_cast<size_t>(plan.out_row_bytes);
  const auto pitch = static_cast<size_t>(plan.in_row_bytes);
  const auto* src =
      static_cast<const Byte*>(inputs[0].data) + static_cast<size_t>(plan.offset_bytes);
  auto* dst = static_cast<Byte*>(outputs[0].data);
  for (int64_t o = 0; o < plan.outer; ++o) {
    std::memcpy(dst + static_cast<size_t>(o) * chunk, src + static_cast<size_t>(o) * pitch, chunk);
  }
  return {};
}

namespace {

// Where output index o of a dim of `n` input elements padded by `begin` in front reads: an
// input index, or -1 for the constant.
int64_t pad_source(int64_t o, int64_t begin, int64_t n, PadMode mode) {
  const int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::Constant:
      return -1;
    case PadMode::Edge:
      return i < 0 ? 0 : n - 1;
    case PadMode::Reflect: {
      if (n == 1) return 0;
      // Reflection about the end elements repeats with period 2 (n - 1), as numpy.pad's.
      const int64_t period = 2 * (n - 1);
      const int64_t m = ((i % period) + period) % period;
      return m < n ? m : period - m;
    }
  }
  return -1;
}

}  // namespace

Status expand(const OpAttrs&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "expand";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& y = outputs[0];
  PLANRT_ASSIGN_OR_RETURN(PermutePlan plan, plan_expand(inputs, outputs));
  const Shape& shape = plan.shape;
  if (y.numel() == 0) return {};
  const size_t es = element_size(x.dtype);
  const auto* src = static_cast<const Byte*>(x.data);
  auto* dst = static_cast<Byte*>(y.data);
  if (shape.rank() == 0) {
    std::memcpy(dst, src, es);
    return {};
  }
  // Row by row of the last dim: a copy where x has it, one element repeated where x
  // broadcasts along it.
  const Shape& strides = plan.src_strides;
  const int last = shape.rank() - 1;
  const int64_t row = shape[last];
  int64_t out = 0;
  for_each_index<1>(drop_last(shape, 1), {drop_last(strides, 1)}, [&](const std::array<int64_t, 1>& off) {
    const Byte* from = src + static_cast<size_t>(off[0]) * es;
    Byte* to = dst + static_cast<size_t>(out) * es;
    if (strides[last] != 0) {
      std::memcpy(to, from, static_cast<size_t>(row) * es);
    } else {
      for (int64_t i = 0; i < row; ++i) std::memcpy(to + static_cast<size_t>(i) * es, from, es);
    }
    out += row;
  });
  return {};
}

Status pad(const OpAttrs& attrs, std::span<const TensorView> inputs,
           std::span<const TensorView> outputs) {
  constexpr std::string_view op = "pad";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(PadPlan plan, plan_pad(attrs, inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& y = outputs[0];
  if (y.numel() == 0) return {};
  const int rank = x.rank();
  const size_t es = element_size(x.dtype);
  Byte fill[8] = {};
  std::memcpy(fill, &plan.fill_bits, sizeof fill);  // little-endian: the element's bytes first
  if (rank == 0) {
    std::memcpy(y.data, x.data, es);
    return {};
  }
  // Per dim, the input index each output index reads (-1: the constant), then every output
  // element gathered through them.
  std::vector<std::vector<int64_t>> source(rank);
  for (int d = 0; d < rank; ++d) {
    source[d].resize(static_cast<size_t>(y.sizes[d]));
    for (int64_t o = 0; o < y.sizes[d]; ++o) source[d][o] = pad_source(o, plan.begin[d], x.sizes[d], plan.mode);
  }
  const Shape in_strides = contiguous_strides(x.sizes);
  const auto* src = static_cast<const Byte*>(x.data);
  auto* dst = static_cast<Byte*>(y.data);
  const int64_t row = y.sizes[rank - 1];
  std::vector<int64_t> index(rank, 0);
  for (int64_t out_row = 0; out_row < y.numel() / row; ++out_row) {
    int64_t offset = 0;
    bool constant_row = false;
    for (int d = 0; d + 1 < rank; ++d) {
      const int64_t s = source[d][index[d]];
      if (s < 0) constant_row = true;
      offset += s * in_strides[d];
    }
    Byte* out = dst + static_cast<size_t>(out_row * row) * es;
    for (int64_t o = 0; o < row; ++o) {
      const int64_t s = constant_row ? -1 : source[rank - 1][o];
      std::memcpy(out + static_cast<size_t>(o) * es, s < 0 ? fill : src + static_cast<size_t>(offset + s) * es, es);
    }
    for (int d = rank - 2; d >= 0; --d) {  // the next row's index
      if (++index[d] < y.sizes[d]) break;
      index[d] = 0;
    }
  }
  return {};
}

}  // namespace planrt::kernels::cpu
