#include "kernels/operands.h"

#include <fmt/format.h>

#include <algorithm>

namespace planrt::kernels {

std::string input_role(std::string_view op, size_t index) {
  auto pick = [index](std::initializer_list<std::string_view> names) -> std::string {
    if (index < names.size()) return std::string(names.begin()[index]);
    return fmt::format("input {}", index);
  };
  if (op == "linear" || op == "layer_norm" || op == "rms_norm" || op == "conv2d")
    return pick({"x", "weight", "bias"});
  if (op == "matmul" || op == "add" || op == "sub" || op == "mul" || op == "div") {
    return pick({"a", "b"});
  }
  if (op == "pow") return pick({"base", "exponent"});
  if (op == "scaled_dot_product_attention") return pick({"q", "k", "v", "mask"});
  if (op == "embedding") return pick({"ids", "table"});
  if (op == "concat") return fmt::format("xs[{}]", index);
  return pick({"x"});
}

std::string describe_inputs(std::string_view op, std::span<const TensorView> inputs) {
  std::string out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].is_none()) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {} {}", input_role(op, i), dtype_name(inputs[i].dtype),
                       inputs[i].sizes.to_string());
  }
  return out;
}

Status check_output(std::string_view op, std::span<const TensorView> inputs, const TensorView& out,
                    DType dtype, const Shape& shape) {
  if (out.dtype == dtype && out.sizes == shape) return {};
  return make_error(ErrorCode::InvalidArgument, "{}: output is {} {}, expected {} {} (inputs: {})",
                    op, dtype_name(out.dtype), out.sizes.to_string(), dtype_name(dtype),
                    shape.to_string(), describe_inputs(op, inputs));
}

Result<int> normalize_dim(std::string_view op, std::string_view attr, int64_t dim, int rank) {
  const int64_t extent = rank == 0 ? 1 : rank;
  if (dim < -extent || dim >= extent) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: {} = {} is out of range for rank {} (expected {} to {})", op, attr, dim,
                      rank, -extent, extent - 1);
  }
  return static_cast<int>(dim < 0 ? dim + extent : dim);
}

Result<Shape> broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  Shape out;
  for (int i = 0; i < rank; ++i) {
    // Right-aligned: dim i of the result pairs with dim i - (rank - r) of a rank-r operand.
    const int ia = i - (rank - a.rank());
    const int ib = i - (rank - b.rank());
    const int64_t da = ia >= 0 ? a[ia] : 1;
    const int64_t db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      return make_error(ErrorCode::InvalidArgument,
                        "{}: shapes {} and {} do not broadcast (dim {} from the end: {} vs {})", op,
                        a.to_string(), b.to_string(), rank - i, da, db);
    }
    // Rank is at most max(a, b) <= kMaxRank, so push_back cannot fail.
    (void)out.push_back(da == 1 ? db : da);
  }
  return out;
}

Shape broadcast_strides(const Shape& in, const Shape& out) {
  const Shape own = contiguous_strides(in);
  Shape strides = out;
  const int shift = out.rank() - in.rank();
  for (int i = 0; i < out.rank(); ++i) {
    const int j = i - shift;
    strides[i] = (j < 0 || in[j] == 1) ? 0 : own[j];
  }
  return strides;
}

Shape drop_last(const Shape& shape, int count) {
  Shape out;
  for (int i = 0; i + count < shape.rank(); ++i) (void)out.push_back(shape[i]);
  return out;
}

}  // namespace planrt::kernels
