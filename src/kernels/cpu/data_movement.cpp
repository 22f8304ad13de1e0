// reshape, permute, transpose, concat, slice: pure data movement, so every dtype works and
// elements are moved by their size, never interpreted.
#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"

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

// out = x.permute(perm); perm is already validated as a permutation of x's dims.
Status permute_into(std::string_view op, std::span<const TensorView> inputs, const TensorView& out,
                    const std::vector<int>& perm) {
  const TensorView& x = inputs[0];
  const Shape x_strides = contiguous_strides(x.sizes);
  Shape shape;
  Shape src_strides;
  for (int p : perm) {
    (void)shape.push_back(x.sizes[p]);  // rank unchanged: cannot fail
    (void)src_strides.push_back(x_strides[p]);
  }
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, out, x.dtype, shape));
  if (x.numel() == 0) return {};
  const size_t size = element_size(x.dtype);
  const auto* src = static_cast<const Byte*>(x.data);
  auto* dst = static_cast<Byte*>(out.data);
  if (shape.rank() == 0) {
    std::memcpy(dst, src, size);
    return {};
  }
  const int last = shape.rank() - 1;
  const int64_t row = shape[last];
  int64_t dst_index = 0;
  for_each_index<1>(
      drop_last(shape, 1), {drop_last(src_strides, 1)}, [&](const std::array<int64_t, 1>& off) {
        copy_elements(dst + static_cast<size_t>(dst_index) * size,
                      src + static_cast<size_t>(off[0]) * size, row, src_strides[last], size);
        dst_index += row;
      });
  return {};
}

// Rank-0 tensors have no dims to move along; PyTorch's cat and slice reject them too.
Status require_rank(std::string_view op, std::span<const TensorView> inputs, int min_rank) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].is_none()) {
      return make_error(ErrorCode::InvalidArgument, "{}: {} is absent", op, input_role(op, i));
    }
    if (inputs[i].rank() < min_rank) {
      return make_error(ErrorCode::InvalidArgument, "{}: {} needs rank >= {}; got {}", op,
                        input_role(op, i), min_rank, describe_inputs(op, inputs));
    }
  }
  return {};
}

}  // namespace

// The output's shape is the caller's (it resolved any -1 of the `shape` attribute); only
// the element count and dtype are checked.
Status reshape(const OpAttrs&, std::span<const TensorView> inputs,
               std::span<const TensorView> outputs) {
  constexpr std::string_view op = "reshape";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& out = outputs[0];
  if (out.dtype != x.dtype || out.numel() != x.numel()) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: output {} {} ({} elements) cannot hold x {} {} ({} elements)", op,
                      dtype_name(out.dtype), out.sizes.to_string(), out.numel(),
                      dtype_name(x.dtype), x.sizes.to_string(), x.numel());
  }
  if (out.data != x.data && x.nbytes() > 0) std::memmove(out.data, x.data, x.nbytes());
  return {};
}

Status permute(const OpAttrs& attrs, std::span<const TensorView> inputs,
               std::span<const TensorView> outputs) {
  constexpr std::string_view op = "permute";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, with_op(op, attrs.get_ints("dims")));
  const int rank = inputs[0].rank();
  if (static_cast<int64_t>(dims.size()) != rank) {
    return make_error(ErrorCode::InvalidArgument, "{}: dims has {} entries for x of rank {} ({})",
                      op, dims.size(), rank, inputs[0].sizes.to_string());
  }
  std::vector<int> perm;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t d : dims) {
    PLANRT_ASSIGN_OR_RETURN(int p, normalize_dim(op, "dims entry", d, std::max(rank, 1)));
    if (seen[static_cast<size_t>(p)]) {
      return make_error(ErrorCode::InvalidArgument, "{}: dims repeats dim {} (x {})", op, p,
                        inputs[0].sizes.to_string());
    }
    seen[static_cast<size_t>(p)] = true;
    perm.push_back(p);
  }
  return permute_into(op, inputs, outputs[0], perm);
}

Status transpose(const OpAttrs& attrs, std::span<const TensorView> inputs,
                 std::span<const TensorView> outputs) {
  constexpr std::string_view op = "transpose";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  for (std::string_view name : {"dim0", "dim1"}) {
    if (!attrs.has(name)) {
      return make_error(ErrorCode::NotFound, "{}: attribute '{}' is required and missing", op,
                        name);
    }
  }
  const int rank = inputs[0].rank();
  PLANRT_ASSIGN_OR_RETURN(int64_t a0, with_op(op, attrs.get_int("dim0", 0)));
  PLANRT_ASSIGN_OR_RETURN(int64_t a1, with_op(op, attrs.get_int("dim1", 0)));
  PLANRT_ASSIGN_OR_RETURN(int d0, normalize_dim(op, "dim0", a0, rank));
  PLANRT_ASSIGN_OR_RETURN(int d1, normalize_dim(op, "dim1", a1, rank));
  std::vector<int> perm(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = i;
  if (rank > 0) std::swap(perm[static_cast<size_t>(d0)], perm[static_cast<size_t>(d1)]);
  return permute_into(op, inputs, outputs[0], perm);
}

// concat(xs...; dim = 0): every xs[i] has xs[0]'s dtype and rank and its sizes except
// along dim.
Status concat(const OpAttrs& attrs, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "concat";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_rank(op, inputs, 1));
  const TensorView& first = inputs[0];
  PLANRT_ASSIGN_OR_RETURN(int64_t dim_attr, with_op(op, attrs.get_int("dim", 0)));
  PLANRT_ASSIGN_OR_RETURN(int dim, normalize_dim(op, "dim", dim_attr, first.rank()));
  Shape shape = first.sizes;
  shape[dim] = 0;
  for (const TensorView& x : inputs) {
    bool same = x.dtype == first.dtype && x.rank() == first.rank();
    for (int d = 0; same && d < x.rank(); ++d) same = d == dim || x.sizes[d] == first.sizes[d];
    if (!same) {
      return make_error(ErrorCode::InvalidArgument,
                        "{}: inputs must share dtype and every size but dim {}; got {}", op, dim,
                        describe_inputs(op, inputs));
    }
    shape[dim] += x.sizes[dim];
  }
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], first.dtype, shape));
  if (outputs[0].numel() == 0) return {};
  const size_t inner_bytes =
      static_cast<size_t>(contiguous_strides(first.sizes)[dim]) * element_size(first.dtype);
  const int64_t outer = drop_last(first.sizes, first.rank() - dim).numel();
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

// slice(x; dim = 0, start = 0, end = size): Python slicing with step 1. Negative bounds
// count from the end, then both clamp to [0, size] and an end before start is empty.
Status slice(const OpAttrs& attrs, std::span<const TensorView> inputs,
             std::span<const TensorView> outputs) {
  constexpr std::string_view op = "slice";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_rank(op, inputs, 1));
  const TensorView& x = inputs[0];
  PLANRT_ASSIGN_OR_RETURN(int64_t dim_attr, with_op(op, attrs.get_int("dim", 0)));
  PLANRT_ASSIGN_OR_RETURN(int64_t start, with_op(op, attrs.get_int("start", 0)));
  PLANRT_ASSIGN_OR_RETURN(int64_t end,
                          with_op(op, attrs.get_int("end", std::numeric_limits<int64_t>::max())));
  PLANRT_ASSIGN_OR_RETURN(int64_t step, with_op(op, attrs.get_int("step", 1)));
  if (step != 1) {
    return make_error(ErrorCode::NotSupported, "{}: step = {}; only step 1 is supported", op, step);
  }
  PLANRT_ASSIGN_OR_RETURN(int dim, normalize_dim(op, "dim", dim_attr, x.rank()));
  const int64_t size = x.sizes[dim];
  auto clamp = [size](int64_t v) {
    if (v < 0) v += size;
    return std::clamp<int64_t>(v, 0, size);
  };
  start = clamp(start);
  end = std::max(start, clamp(end));
  Shape shape = x.sizes;
  shape[dim] = end - start;
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], x.dtype, shape));
  if (outputs[0].numel() == 0) return {};
  const size_t inner_bytes =
      static_cast<size_t>(contiguous_strides(x.sizes)[dim]) * element_size(x.dtype);
  const int64_t outer = drop_last(x.sizes, x.rank() - dim).numel();
  const size_t chunk = static_cast<size_t>(end - start) * inner_bytes;
  const auto* src = static_cast<const Byte*>(x.data) + static_cast<size_t>(start) * inner_bytes;
  auto* dst = static_cast<Byte*>(outputs[0].data);
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(dst + static_cast<size_t>(o) * chunk,
                src + static_cast<size_t>(o) * static_cast<size_t>(size) * inner_bytes, chunk);
  }
  return {};
}

}  // namespace planrt::kernels::cpu
