// reshape, permute, transpose, concat, slice and embedding: data movement, so every dtype
// works and elements move by their size (embedding's ids are i32 or i64).
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/cpu/broadcast.h"
#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.h"

namespace planrt::kernels::cuda {
namespace {

Status launched(std::string_view op, cudaError_t err) { return cuda_status(op, "kernel launch", err); }

// out = x.permute(perm); perm is already validated as a permutation of x's dims.
Status permute_into(std::string_view op, const CudaKernelContext& ctx,
                    std::span<const TensorView> inputs, const TensorView& out,
                    const std::vector<int>& perm) {
  const TensorView& x = inputs[0];
  const Shape x_strides = contiguous_strides(x.sizes);
  Shape shape;
  launch::IndexMap map;
  map.rank = static_cast<int>(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    (void)shape.push_back(x.sizes[perm[i]]);  // rank unchanged: cannot fail
    map.size[i] = x.sizes[perm[i]];
    map.stride_a[i] = x_strides[perm[i]];
  }
  PLANRT_RETURN_IF_ERROR(cpu::check_output(op, inputs, out, x.dtype, shape));
  return launched(op, launch::permute(x.data, out.data, element_size(x.dtype), x.numel(), map,
                                      ctx.stream));
}

Status require_rank(std::string_view op, std::span<const TensorView> inputs, int min_rank) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].is_none()) {
      return make_error(ErrorCode::InvalidArgument, "{}: {} is absent", op,
                        cpu::input_role(op, i));
    }
    if (inputs[i].rank() < min_rank) {
      return make_error(ErrorCode::InvalidArgument, "{}: {} needs rank >= {}; got {}", op,
                        cpu::input_role(op, i), min_rank, cpu::describe_inputs(op, inputs));
    }
  }
  return {};
}

}  // namespace

// The output's shape is the caller's; only the element count and dtype are checked. An
// exact alias (out.data == x.data) copies nothing; partial overlap is not allowed.
Status reshape(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> inputs,
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
  if (out.data == x.data || x.nbytes() == 0) return {};
  return cuda_status(op, "cudaMemcpyAsync",
                     cudaMemcpyAsync(out.data, x.data, x.nbytes(), cudaMemcpyDeviceToDevice,
                                     ctx.stream));
}

Status permute(const CudaKernelContext& ctx, const OpAttrs& attrs,
               std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "permute";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, cpu::with_op(op, attrs.get_ints("dims")));
  const int rank = inputs[0].rank();
  if (static_cast<int64_t>(dims.size()) != rank) {
    return make_error(ErrorCode::InvalidArgument, "{}: dims has {} entries for x of rank {} ({})",
                      op, dims.size(), rank, inputs[0].sizes.to_string());
  }
  std::vector<int> perm;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t d : dims) {
    PLANRT_ASSIGN_OR_RETURN(int p, cpu::normalize_dim(op, "dims entry", d, std::max(rank, 1)));
    if (seen[static_cast<size_t>(p)]) {
      return make_error(ErrorCode::InvalidArgument, "{}: dims repeats dim {} (x {})", op, p,
                        inputs[0].sizes.to_string());
    }
    seen[static_cast<size_t>(p)] = true;
    perm.push_back(p);
  }
  return permute_into(op, ctx, inputs, outputs[0], perm);
}

Status transpose(const CudaKernelContext& ctx, const OpAttrs& attrs,
                 std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "transpose";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  for (std::string_view name : {"dim0", "dim1"}) {
    if (!attrs.has(name)) {
      return make_error(ErrorCode::NotFound, "{}: attribute '{}' is required and missing", op,
                        name);
    }
  }
  const int rank = inputs[0].rank();
  PLANRT_ASSIGN_OR_RETURN(int64_t a0, cpu::with_op(op, attrs.get_int("dim0", 0)));
  PLANRT_ASSIGN_OR_RETURN(int64_t a1, cpu::with_op(op, attrs.get_int("dim1", 0)));
  PLANRT_ASSIGN_OR_RETURN(int d0, cpu::normalize_dim(op, "dim0", a0, rank));
  PLANRT_ASSIGN_OR_RETURN(int d1, cpu::normalize_dim(op, "dim1", a1, rank));
  std::vector<int> perm(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = i;
  if (rank > 0) std::swap(perm[static_cast<size_t>(d0)], perm[static_cast<size_t>(d1)]);
  return permute_into(op, ctx, inputs, outputs[0], perm);
}

// concat(xs...; dim = 0): one strided row copy per input into its column band of the output.
Status concat(const CudaKernelContext& ctx, const OpAttrs& attrs,
              std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "concat";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_rank(op, inputs, 1));
  const TensorView& first = inputs[0];
  PLANRT_ASSIGN_OR_RETURN(int64_t dim_attr, cpu::with_op(op, attrs.get_int("dim", 0)));
  PLANRT_ASSIGN_OR_RETURN(int dim, cpu::normalize_dim(op, "dim", dim_attr, first.rank()));
  Shape shape = first.sizes;
  shape[dim] = 0;
  for (const TensorView& x : inputs) {
    bool same = x.dtype == first.dtype && x.rank() == first.rank();
    for (int d = 0; same && d < x.rank(); ++d) same = d == dim || x.sizes[d] == first.sizes[d];
    if (!same) {
      return make_error(ErrorCode::InvalidArgument,
                        "{}: inputs must share dtype and every size but dim {}; got {}", op, dim,
                        cpu::describe_inputs(op, inputs));
    }
    shape[dim] += x.sizes[dim];
  }
  PLANRT_RETURN_IF_ERROR(cpu::check_output(op, inputs, outputs[0], first.dtype, shape));
  if (outputs[0].numel() == 0) return {};
  const auto inner_bytes = contiguous_strides(first.sizes)[dim] *
                           static_cast<int64_t>(element_size(first.dtype));
  const int64_t outer = cpu::drop_last(first.sizes, first.rank() - dim).numel();
  const int64_t out_pitch = shape[dim] * inner_bytes;
  auto* dst = static_cast<unsigned char*>(outputs[0].data);
  for (const TensorView& x : inputs) {
    const int64_t chunk = x.sizes[dim] * inner_bytes;
    if (chunk == 0) continue;
    PLANRT_RETURN_IF_ERROR(
        launched(op, launch::copy_rows(x.data, chunk, dst, out_pitch, outer, chunk, ctx.stream)));
    dst += chunk;
  }
  return {};
}

// slice(x; dim = 0, start = 0, end = size): Python slicing with step 1. Negative bounds
// count from the end, then both clamp to [0, size] and an end before start is empty.
Status slice(const CudaKernelContext& ctx, const OpAttrs& attrs,
             std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "slice";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_rank(op, inputs, 1));
  const TensorView& x = inputs[0];
  PLANRT_ASSIGN_OR_RETURN(int64_t dim_attr, cpu::with_op(op, attrs.get_int("dim", 0)));
  PLANRT_ASSIGN_OR_RETURN(int64_t start, cpu::with_op(op, attrs.get_int("start", 0)));
  PLANRT_ASSIGN_OR_RETURN(
      int64_t end, cpu::with_op(op, attrs.get_int("end", std::numeric_limits<int64_t>::max())));
  PLANRT_ASSIGN_OR_RETURN(int64_t step, cpu::with_op(op, attrs.get_int("step", 1)));
  if (step != 1) {
    return make_error(ErrorCode::NotSupported, "{}: step = {}; only step 1 is supported", op, step);
  }
  PLANRT_ASSIGN_OR_RETURN(int dim, cpu::normalize_dim(op, "dim", dim_attr, x.rank()));
  const int64_t size = x.sizes[dim];
  auto clamp = [size](int64_t v) {
    if (v < 0) v += size;
    return std::clamp<int64_t>(v, 0, size);
  };
  start = clamp(start);
  end = std::max(start, clamp(end));
  Shape shape = x.sizes;
  shape[dim] = end - start;
  PLANRT_RETURN_IF_ERROR(cpu::check_output(op, inputs, outputs[0], x.dtype, shape));
  if (outputs[0].numel() == 0) return {};
  const auto inner_bytes =
      contiguous_strides(x.sizes)[dim] * static_cast<int64_t>(element_size(x.dtype));
  const int64_t outer = cpu::drop_last(x.sizes, x.rank() - dim).numel();
  const int64_t chunk = (end - start) * inner_bytes;
  const auto* src = static_cast<const unsigned char*>(x.data) + start * inner_bytes;
  return launched(op, launch::copy_rows(src, size * inner_bytes, outputs[0].data, chunk, outer,
                                        chunk, ctx.stream));
}

// embedding(ids, table): row gather; ids i32 or i64, a table of any dtype. Ids are device
// data, so the CPU kernel's OutOfRange cannot be returned here without a synchronization:
// bad ids give rows of zeros (never a read outside the table) and the first one is
// recorded in ctx.device_errors when set (cuda_kernel.h).
Status embedding(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> inputs,
                 std::span<const TensorView> outputs) {
  constexpr std::string_view op = "embedding";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  const TensorView& ids = inputs[0];
  const TensorView& table = inputs[1];
  if (ids.dtype != DType::I32 && ids.dtype != DType::I64) {
    return make_error(ErrorCode::NotSupported, "{}: ids have dtype {}; expected i32 or i64", op,
                      dtype_name(ids.dtype));
  }
  if (table.rank() != 2) {
    return make_error(ErrorCode::InvalidArgument, "{}: table must be [V, D]; got {}", op,
                      cpu::describe_inputs(op, inputs));
  }
  Shape expected = ids.sizes;
  Status grown = expected.push_back(table.sizes[1]);
  if (!grown.ok()) return grown.with_context(op);
  PLANRT_RETURN_IF_ERROR(cpu::check_output(op, inputs, outputs[0], table.dtype, expected));
  const bool i64 = ids.dtype == DType::I64;
  const int64_t n = ids.numel();
  const int64_t rows = table.sizes[0];
  PLANRT_RETURN_IF_ERROR(
      launched(op, launch::embedding_check(ids.data, i64, n, rows, ctx.device_errors, ctx.stream)));
  const auto row_bytes = table.sizes[1] * static_cast<int64_t>(element_size(table.dtype));
  return launched(op, launch::embedding_gather(ids.data, i64, n, table.data, rows, row_bytes,
                                               outputs[0].data, ctx.stream));
}

}  // namespace planrt::kernels::cuda
