#include "kernels/cpu/broadcast.h"

#include <algorithm>

namespace planrt::kernels::cpu {

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

}  // namespace planrt::kernels::cpu
