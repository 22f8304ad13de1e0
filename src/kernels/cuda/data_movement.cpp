// reshape, permute, transpose, concat, slice, embedding, gather_elements and take: data
// movement, so every dtype works and elements move by their size (embedding's ids and
// gather_elements' and take's indices are i32 or i64); and size, x's size along a dim
// written as data.
#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cuda {
namespace {

Status launched(std::string_view op, cudaError_t err) { return cuda_status(op, "kernel launch", err); }

// out = x viewed through `plan`: each output element read at its strided source offset.
Status permute_into(std::string_view op, const CudaKernelContext& ctx, const TensorView& x,
                    const TensorView& out, const PermutePlan& plan) {
  launch::IndexMap map;
  map.rank = plan.shape.rank();
  for (int i = 0; i < map.rank; ++i) {
    map.size[i] = plan.shape[i];
    map.stride_a[i] = plan.src_strides[i];
  }
  return launched(op, launch::permute(x.data, out.data, element_size(x.dtype), x.numel(), map,
                                      ctx.stream));
}

}  // namespace

// An exact alias (out.data == x.data) copies nothing; partial overlap is not allowed.
Status reshape(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> inputs,
               std::span<const TensorView> outputs) {
  constexpr std::string_view op = "reshape";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(plan_reshape(inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& out = outputs[0];
  if (out.data == x.data || x.nbytes() == 0) return {};
  return cuda_status(op, "cudaMemcpyAsync",
                     cudaMemcpyAsync(out.data, x.data, x.nbytes(), cudaMemcpyDeviceToDevice,
                                     ctx.stream));
}

Status permute(const CudaKernelContext& ctx, const OpAttrs& attrs,
               std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "permute";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(PermutePlan plan, plan_permute(attrs, inputs, outputs));
  return permute_into(op, ctx, inputs[0], outputs[0], plan);
}

Status transpose(const CudaKernelContext& ctx, const OpAttrs& attrs,
                 std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "transpose";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(PermutePlan plan, plan_transpose(attrs, inputs, outputs));
  return permute_into(op, ctx, inputs[0], outputs[0], plan);
}

// concat(xs...; dim = 0): one strided row copy per input into its column band of the output.
Status concat(const CudaKernelContext& ctx, const OpAttrs& attrs,
              std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "concat";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(ConcatPlan plan, plan_concat(attrs, inputs, outputs));
  if (outputs[0].numel() == 0) return {};
  auto* dst = static_cast<unsigned char*>(outputs[0].data);
  for (const TensorView& x : inputs) {
    const int64_t chunk = x.sizes[plan.dim] * plan.inner_bytes;
    if (chunk == 0) continue;
    PLANRT_RETURN_IF_ERROR(launched(op, launch::copy_rows(x.data, chunk, dst, plan.out_row_bytes,
                                                          plan.outer, chunk, ctx.stream)));
    dst += chunk;
  }
  return {};
}

Status slice(const CudaKernelContext& ctx, const OpAttrs& attrs,
             std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "slice";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(SlicePlan plan, plan_slice(attrs, inputs, outputs));
  if (outputs[0].numel() == 0) return {};
  const auto* src = static_cast<const unsigned char*>(inputs[0].data) + plan.offset_bytes;
  return launched(op, launch::copy_rows(src, plan.in_row_bytes, outputs[0].data,
                                        plan.out_row_bytes, plan.outer, plan.out_row_bytes,
                                        ctx.stream));
}

// embedding(ids, table): row gather; ids i32 or i64, a table of any dtype. Ids are device
// data, so the CPU kernel's OutOfRange cannot be returned here without a synchronization:
// bad ids give rows of zeros (never a read outside the table) and the first one is
// recorded in ctx.device_errors when set (cuda_kernel.h).
Status embedding(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> inputs,
                 std::span<const TensorView> outputs) {
  constexpr std::string_view op = "embedding";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(EmbeddingPlan plan, plan_embedding(inputs, outputs));
  const void* ids = inputs[0].data;
  PLANRT_RETURN_IF_ERROR(launched(op, launch::embedding_check(ids, plan.i64_ids, plan.n, plan.rows,
                                                              ctx.device_errors, ctx.stream)));
  return launched(op, launch::embedding_gather(ids, plan.i64_ids, plan.n, inputs[1].data,
                                               plan.rows, plan.row_bytes, outputs[0].data,
                                               ctx.stream));
}

// gather_elements(x, indices; dim): indices i32 or i64, x of any dtype (elements move by
// their size). Indices are device data, so the CPU kernel's OutOfRange is recorded as
// embedding's is: an index outside [-size, size) gives a zero element (never a read outside
// x), and the first one is recorded in ctx.device_errors when set.
Status gather_elements(const CudaKernelContext& ctx, const OpAttrs& attrs,
                       std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "gather_elements";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(GatherElementsPlan plan, plan_gather_elements(attrs, inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& indices = inputs[1];
  const int64_t n = indices.numel();
  if (n == 0) return {};
  if (indices.rank() > launch::kMaxDims) {
    return make_error(ErrorCode::NotSupported, "{}: rank {} exceeds the CUDA kernel's {}", op,
                      indices.rank(), launch::kMaxDims);
  }
  launch::IndexMap map;
  map.rank = indices.rank();
  for (int d = 0; d < map.rank; ++d) {
    map.size[d] = indices.sizes[d];
    map.stride_a[d] = d == plan.dim ? 0 : plan.x_strides[d];
  }
  const int64_t dim_size = x.sizes[plan.dim];
  PLANRT_RETURN_IF_ERROR(launched(
      op, launch::gather_elements_check(indices.data, plan.i64_indices, n, dim_size,
                                        ctx.device_errors, ctx.stream)));
  return launched(op, launch::gather_elements(x.data, element_size(x.dtype), indices.data,
                                              plan.i64_indices, outputs[0].data, n, map,
                                              plan.x_strides[plan.dim], dim_size, ctx.stream));
}

// take(x, indices): x's elements at flat positions, indices i32 or i64, x of any dtype.
// Indices are device data, so the CPU kernel's OutOfRange is recorded as gather_elements'
// is: an index outside [-numel, numel) gives a zero element (never a read outside x), and
// the first one is recorded in ctx.device_errors when set.
Status take(const CudaKernelContext& ctx, const OpAttrs&, std::span<const TensorView> inputs,
            std::span<const TensorView> outputs) {
  constexpr std::string_view op = "take";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(TakePlan plan, plan_take(inputs, outputs));
  const TensorView& indices = inputs[1];
  const int64_t n = indices.numel();
  if (n == 0) return {};
  PLANRT_RETURN_IF_ERROR(launched(op, launch::take_check(indices.data, plan.i64_indices, n,
                                                         plan.numel, ctx.device_errors,
                                                         ctx.stream)));
  return launched(op, launch::take(inputs[0].data, element_size(inputs[0].dtype), plan.numel,
                                   indices.data, plan.i64_indices, outputs[0].data, n,
                                   ctx.stream));
}

// size(x; dim): the plan's value written into the i64 scalar output by a one-thread kernel
// on ctx.stream (the value its argument): no copy from host memory, no synchronization, so
// a CUDA graph can capture it. x's bytes are never read.
Status size(const CudaKernelContext& ctx, const OpAttrs& attrs,
            std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "size";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(int64_t value, plan_size(attrs, inputs, outputs));
  return launched(op, launch::write_i64(outputs[0].data_as<int64_t>(), value, ctx.stream));
}

}  // namespace planrt::kernels::cuda
