// reshape, permute, transpose, concat, slice: pure data movement, so every dtype works and
// elements are moved by their size, never interpreted.
#include <cstring>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
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

// out = x viewed through `plan`: one strided row read per output row.
void permute_into(const TensorView& x, const TensorView& out, const PermutePlan& plan) {
  if (x.numel() == 0) return;
  const Shape& shape = plan.shape;
  const Shape& src_strides = plan.src_strides;
  const size_t size = element_size(x.dtype);
  const auto* src = static_cast<const Byte*>(x.data);
  auto* dst = static_cast<Byte*>(out.data);
  if (shape.rank() == 0) {
    std::memcpy(dst, src, size);
    return;
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
  permute_into(inputs[0], outputs[0], plan);
  return {};
}

Status transpose(const OpAttrs& attrs, std::span<const TensorView> inputs,
                 std::span<const TensorView> outputs) {
  constexpr std::string_view op = "transpose";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(PermutePlan plan, plan_transpose(attrs, inputs, outputs));
  permute_into(inputs[0], outputs[0], plan);
  return {};
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

}  // namespace planrt::kernels::cpu
