// embedding(ids, table): row gather. ids are i32 or i64; the table may have any dtype since
// rows are copied as bytes. An id outside [0, V) is OutOfRange naming the id and its
// position, checked before anything is written (no negative wrap-around, as in PyTorch).
#include <cstring>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"

namespace planrt::kernels::cpu {
namespace {

template <typename Id>
Status gather(std::string_view op, const TensorView& ids, const TensorView& table,
              const TensorView& out) {
  const Id* id = ids.data_as<const Id>();
  const int64_t n = ids.numel();
  const int64_t rows = table.sizes[0];
  for (int64_t i = 0; i < n; ++i) {
    if (id[i] < 0 || static_cast<int64_t>(id[i]) >= rows) {
      return make_error(ErrorCode::OutOfRange,
                        "{}: ids[{}] = {} is outside the table's {} rows (ids {}, table {})", op, i,
                        static_cast<int64_t>(id[i]), rows, ids.sizes.to_string(),
                        table.sizes.to_string());
    }
  }
  const size_t row_bytes = static_cast<size_t>(table.sizes[1]) * element_size(table.dtype);
  if (row_bytes == 0) return {};
  const auto* src = static_cast<const unsigned char*>(table.data);
  auto* dst = static_cast<unsigned char*>(out.data);
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + static_cast<size_t>(i) * row_bytes,
                src + static_cast<size_t>(id[i]) * row_bytes, row_bytes);
  }
  return {};
}

}  // namespace

Status embedding(const OpAttrs&, std::span<const TensorView> inputs,
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
                      describe_inputs(op, inputs));
  }
  Shape expected = ids.sizes;
  Status grown = expected.push_back(table.sizes[1]);
  if (!grown.ok()) return grown.with_context(op);
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], table.dtype, expected));
  if (ids.dtype == DType::I32) return gather<int32_t>(op, ids, table, outputs[0]);
  return gather<int64_t>(op, ids, table, outputs[0]);
}

}  // namespace planrt::kernels::cpu
