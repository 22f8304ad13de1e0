// embedding(ids, table): row gather. ids are i32 or i64; the table may have any dtype since
// rows are copied as bytes. An id outside [0, V) is OutOfRange naming the id and its
// position, checked before anything is written (no negative wrap-around, as in PyTorch).
#include <cstring>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cpu {
namespace {

template <typename Id>
Status gather(std::string_view op, const EmbeddingPlan& plan, const TensorView& ids,
              const TensorView& table, const TensorView& out) {
  const Id* id = ids.data_as<const Id>();
  for (int64_t i = 0; i < plan.n; ++i) {
    if (id[i] < 0 || static_cast<int64_t>(id[i]) >= plan.rows) {
      return make_error(ErrorCode::OutOfRange,
                        "{}: ids[{}] = {} is outside the table's {} rows (ids {}, table {})", op, i,
                        static_cast<int64_t>(id[i]), plan.rows, ids.sizes.to_string(),
                        table.sizes.to_string());
    }
  }
  const auto row_bytes = static_cast<size_t>(plan.row_bytes);
  if (row_bytes == 0) return {};
  const auto* src = static_cast<const unsigned char*>(table.data);
  auto* dst = static_cast<unsigned char*>(out.data);
  for (int64_t i = 0; i < plan.n; ++i) {
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
  PLANRT_ASSIGN_OR_RETURN(EmbeddingPlan plan, plan_embedding(inputs, outputs));
  if (!plan.i64_ids) return gather<int32_t>(op, plan, inputs[0], inputs[1], outputs[0]);
  return gather<int64_t>(op, plan, inputs[0], inputs[1], outputs[0]);
}

}  // namespace planrt::kernels::cpu
