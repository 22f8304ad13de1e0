// gather_elements(x, indices) along a dim (kernels/op_plans.h): elements move as bytes, so
// every dtype is served by one loop per element size. An index outside [-size, size) is
// OutOfRange naming it and its position. And take(x, indices), the same over x's flat
// positions; and size(x): x's size along a dim, as data.
#include <array>
#include <cstring>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cpu {
namespace {

template <typename Index, typename Word>
Status gather(const GatherElementsPlan& plan, const TensorView& x, const TensorView& idx, const TensorView& out) {
  const Index* ip = idx.data_as<const Index>();
  const Word* xp = static_cast<const Word*>(x.data);
  Word* yp = static_cast<Word*>(out.data);
  const int rank = idx.rank();
  const int64_t n = idx.numel();
  const int64_t size = x.sizes[plan.dim];
  std::array<int64_t, kMaxRank> index{};
  int64_t base = 0;  // x's offset of `index` with its dim entry 0
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = static_cast<int64_t>(ip[i]);
    if (k < -size || k >= size) {
      return make_error(ErrorCode::OutOfRange, "gather_elements: indices[{}] = {} is outside [-{}, {}) along dim {} (x {})",
                        i, k, size, size, plan.dim, x.sizes.to_string());
    }
    if (k < 0) k += size;
    yp[i] = xp[base + k * plan.x_strides[plan.dim]];
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t step = d == plan.dim ? 0 : plan.x_strides[d];
      if (++index[d] < idx.sizes[d]) {
        base += step;
        break;
      }
      base -= step * (idx.sizes[d] - 1);
      index[d] = 0;
    }
  }
  return {};
}

template <typename Index>
Status gather_any_word(const GatherElementsPlan& plan, const TensorView& x, const TensorView& idx, const TensorView& out) {
  switch (element_size(x.dtype)) {
    case 1: return gather<Index, uint8_t>(plan, x, idx, out);
    case 2: return gather<Index, uint16_t>(plan, x, idx, out);
    case 4: return gather<Index, uint32_t>(plan, x, idx, out);
    default: return gather<Index, uint64_t>(plan, x, idx, out);
  }
}

}  // namespace

Status gather_elements(const OpAttrs& attrs, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "gather_elements";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(GatherElementsPlan plan, plan_gather_elements(attrs, inputs, outputs));
  if (plan.i64_indices) return gather_any_word<int64_t>(plan, inputs[0], inputs[1], outputs[0]);
  return gather_any_word<int32_t>(plan, inputs[0], inputs[1], outputs[0]);
}

namespace {

template <typename Index, typename Word>
Status take_words(const TakePlan& plan, const TensorView& x, const TensorView& idx, const TensorView& out) {
  const Index* ip = idx.data_as<const Index>();
  const Word* xp = static_cast<const Word*>(x.data);
  Word* yp = static_cast<Word*>(out.data);
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t k = static_cast<int64_t>(ip[i]);
    if (k < -plan.numel || k >= plan.numel) {
      return make_error(ErrorCode::OutOfRange, "take: indices[{}] = {} is outside [-{}, {}) (x {})", i, k, plan.numel,
                        plan.numel, x.sizes.to_string());
    }
    yp[i] = xp[k < 0 ? k + plan.numel : k];
  }
  return {};
}

template <typename Index>
Status take_any_word(const TakePlan& plan, const TensorView& x, const TensorView& idx, const TensorView& out) {
  switch (element_size(x.dtype)) {
    case 1: return take_words<Index, uint8_t>(plan, x, idx, out);
    case 2: return take_words<Index, uint16_t>(plan, x, idx, out);
    case 4: return take_words<Index, uint32_t>(plan, x, idx, out);
    default: return take_words<Index, uint64_t>(plan, x, idx, out);
  }
}

}  // namespace

Status take(const OpAttrs&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands("take", inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(TakePlan plan, plan_take(inputs, outputs));
  if (plan.i64_indices) return take_any_word<int64_t>(plan, inputs[0], inputs[1], outputs[0]);
  return take_any_word<int32_t>(plan, inputs[0], inputs[1], outputs[0]);
}

Status size(const OpAttrs& attrs, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "size";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(int64_t n, plan_size(attrs, inputs, outputs));
  *outputs[0].data_as<int64_t>() = n;
  return {};
}

}  // namespace planrt::kernels::cpu
