#include "kernels/op_plans.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/operands.h"

namespace planrt::kernels {
namespace {

// Appends `d` to `shape` unless the result would pass kMaxRank.
Status append_dim(std::string_view op, Shape& shape, int64_t d) {
  Status s = shape.push_back(d);
  if (s.ok()) return s;
  return s.with_context(std::string(op));
}

// x [..., N] with optional per-feature vectors [N] at inputs[1..]; the output matches x.
Result<NormPlan> plan_norm(std::string_view op, double default_eps, const OpAttrs& attrs,
                           std::span<const TensorView> inputs,
                           std::span<const TensorView> outputs) {
  const TensorView& x = inputs[0];
  if (x.rank() < 1) {
    return make_error(ErrorCode::InvalidArgument, "{}: x needs rank >= 1; got {}", op,
                      describe_inputs(op, inputs));
  }
  for (size_t i = 1; i < inputs.size(); ++i) {
    const TensorView& v = inputs[i];
    if (v.is_none()) continue;
    if (v.rank() != 1 || v.sizes[0] != x.sizes.size(-1)) {
      return make_error(ErrorCode::InvalidArgument,
                        "{}: {} must be [{}] to match the last dim of x; got {}", op,
                        input_role(op, i), x.sizes.size(-1), describe_inputs(op, inputs));
    }
  }
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], inputs[0].dtype, x.sizes));
  NormPlan plan;
  PLANRT_ASSIGN_OR_RETURN(plan.eps, with_op(op, attrs.get_float("eps", default_eps)));
  plan.n = x.sizes.size(-1);
  plan.rows = plan.n == 0 ? 0 : x.numel() / plan.n;
  return plan;
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

// out = x.permute(perm); perm is already validated as a permutation of x's dims.
Result<PermutePlan> plan_permutation(std::string_view op, std::span<const TensorView> inputs,
                                     std::span<const TensorView> outputs,
                                     const std::vector<int>& perm) {
  const TensorView& x = inputs[0];
  const Shape x_strides = contiguous_strides(x.sizes);
  PermutePlan plan;
  for (int p : perm) {
    (void)plan.shape.push_back(x.sizes[p]);  // rank unchanged: cannot fail
    (void)plan.src_strides.push_back(x_strides[p]);
  }
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], x.dtype, plan.shape));
  return plan;
}

}  // namespace

Result<Shape> plan_binary(std::string_view op, std::span<const TensorView> inputs,
                          std::span<const TensorView> outputs) {
  PLANRT_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(op, inputs[0].sizes, inputs[1].sizes));
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], inputs[0].dtype, shape));
  return shape;
}

Status plan_unary(std::string_view op, std::span<const TensorView> inputs,
                  std::span<const TensorView> outputs) {
  return check_output(op, inputs, outputs[0], inputs[0].dtype, inputs[0].sizes);
}

Result<GeluApproximation> plan_gelu(const OpAttrs& attrs) {
  constexpr std::string_view op = "gelu";
  // Not PLANRT_ASSIGN_OR_RETURN: GCC 12 misreports the moved-out string as uninitialized.
  Result<std::string> approximate = with_op(op, attrs.get_string("approximate", "none"));
  if (!approximate.ok()) return approximate.status();
  const std::string& mode = *approximate;
  if (mode == "none") return GeluApproximation::None;
  if (mode == "tanh") return GeluApproximation::Tanh;
  return make_error(ErrorCode::InvalidArgument, "{}: approximate = '{}', expected 'none' or 'tanh'",
                    op, mode);
}

Result<LinearPlan> plan_linear(std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs) {
  constexpr std::string_view op = "linear";
  const TensorView& x = inputs[0];
  const TensorView& w = inputs[1];
  const TensorView bias = inputs.size() > 2 ? inputs[2] : TensorView::none();
  if (x.rank() < 1 || w.rank() != 2 || x.sizes.size(-1) != w.sizes[1] ||
      (!bias.is_none() && (bias.rank() != 1 || bias.sizes[0] != w.sizes[0]))) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: expected x [..., in], weight [out, in], bias [out]; got {}", op,
                      describe_inputs(op, inputs));
  }
  LinearPlan plan;
  plan.k = w.sizes[1];
  plan.n = w.sizes[0];
  plan.m = drop_last(x.sizes, 1).numel();
  Shape expected = drop_last(x.sizes, 1);
  PLANRT_RETURN_IF_ERROR(append_dim(op, expected, plan.n));
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], inputs[0].dtype, expected));
  return plan;
}

// torch.matmul: a 1-D operand is a row (a) or column (b) vector whose dim is dropped from
// the result; dims before the last two are batch dims and broadcast.
Result<MatmulPlan> plan_matmul(std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs) {
  constexpr std::string_view op = "matmul";
  const TensorView& a = inputs[0];
  const TensorView& b = inputs[1];
  if (a.rank() < 1 || b.rank() < 1) {
    return make_error(ErrorCode::InvalidArgument, "{}: both operands need rank >= 1; got {}", op,
                      describe_inputs(op, inputs));
  }
  const bool a_vec = a.rank() == 1;
  const bool b_vec = b.rank() == 1;
  MatmulPlan plan;
  plan.m = a_vec ? 1 : a.sizes.size(-2);
  plan.k = a.sizes.size(-1);
  const int64_t kb = b_vec ? b.sizes[0] : b.sizes.size(-2);
  plan.n = b_vec ? 1 : b.sizes.size(-1);
  if (plan.k != kb) {
    return make_error(ErrorCode::InvalidArgument, "{}: inner dims differ ({} vs {}); got {}", op,
                      plan.k, kb, describe_inputs(op, inputs));
  }
  plan.a_batch = drop_last(a.sizes, a_vec ? 1 : 2);
  plan.b_batch = drop_last(b.sizes, b_vec ? 1 : 2);
  PLANRT_ASSIGN_OR_RETURN(plan.batch, broadcast_shapes(op, plan.a_batch, plan.b_batch));
  Shape expected = plan.batch;
  if (!a_vec) PLANRT_RETURN_IF_ERROR(append_dim(op, expected, plan.m));
  if (!b_vec) PLANRT_RETURN_IF_ERROR(append_dim(op, expected, plan.n));
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], inputs[0].dtype, expected));
  return plan;
}

Result<NormPlan> plan_layer_norm(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                 std::span<const TensorView> outputs) {
  return plan_norm("layer_norm", 1e-5, attrs, inputs, outputs);
}

// eps defaults to 1e-6. PyTorch's rms_norm with eps=None uses finfo(dtype).eps (1.19e-7
// for f32); models (LLaMA and kin) pass their own, usually 1e-5 or 1e-6.
Result<NormPlan> plan_rms_norm(const OpAttrs& attrs, std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs) {
  return plan_norm("rms_norm", 1e-6, attrs, inputs, outputs);
}

// dim defaults to -1 (the last), the usual choice; torch.softmax itself requires it.
Result<SoftmaxPlan> plan_softmax(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                 std::span<const TensorView> outputs) {
  constexpr std::string_view op = "softmax";
  const TensorView& x = inputs[0];
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], inputs[0].dtype, x.sizes));
  PLANRT_ASSIGN_OR_RETURN(int64_t dim_attr, with_op(op, attrs.get_int("dim", -1)));
  PLANRT_ASSIGN_OR_RETURN(int dim, normalize_dim(op, "dim", dim_attr, x.rank()));
  SoftmaxPlan plan;
  plan.n = x.rank() == 0 ? 1 : x.sizes[dim];
  plan.inner = x.rank() == 0 ? 1 : contiguous_strides(x.sizes)[dim];
  // An empty x may have n * inner == 0: no lines, rather than a division by zero.
  plan.outer = x.numel() == 0 ? 0 : x.numel() / (plan.n * plan.inner);
  return plan;
}

Result<ReducePlan> plan_reduce_mean(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                    std::span<const TensorView> outputs) {
  constexpr std::string_view op = "reduce_mean";
  const TensorView& x = inputs[0];
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> dims_attr, with_op(op, attrs.get_ints("dims")));
  if (dims_attr.empty()) {
    return make_error(ErrorCode::InvalidArgument, "{}: dims is empty; expected at least one dim",
                      op);
  }
  std::vector<int> dims;
  for (int64_t d : dims_attr) {
    PLANRT_ASSIGN_OR_RETURN(int dim, normalize_dim(op, "dims", d, x.rank()));
    dims.push_back(dim);
  }
  std::sort(dims.begin(), dims.end());
  for (size_t i = 1; i < dims.size(); ++i) {
    if (dims[i] != dims[i - 1] + 1) {
      return make_error(ErrorCode::NotSupported,
                        "{}: dims must be adjacent and distinct (one run of dims of x); dims {} "
                        "and {} are not, for x of rank {}",
                        op, dims[i - 1], dims[i], x.rank());
    }
  }
  ReducePlan plan;
  Shape kept, dropped;
  plan.outer = 1;
  plan.n = 1;
  plan.inner = 1;
  for (int d = 0; d < x.rank(); ++d) {
    const bool reduced = d >= dims.front() && d <= dims.back();
    int64_t& part = reduced ? plan.n : (d < dims.front() ? plan.outer : plan.inner);
    part *= x.sizes[d];
    (void)kept.push_back(reduced ? 1 : x.sizes[d]);  // rank of x: cannot fail
    if (!reduced) (void)dropped.push_back(x.sizes[d]);
  }
  const TensorView& out = outputs[0];
  if (out.sizes != kept) {
    PLANRT_RETURN_IF_ERROR(check_output(op, inputs, out, x.dtype, dropped));
  }
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, out, x.dtype, out.sizes));
  if (x.rank() == 0) plan.n = 1;
  return plan;
}

// causal (PyTorch's is_causal) masks key j for query i when j > i, aligned top-left as
// PyTorch does when Sq != Sk; scale defaults to 1 / sqrt(D). Shapes: q [..., Sq, D],
// k [..., Sk, D], v [..., Sk, Dv] with equal leading dims (usually [B, H]); the output is
// [..., Sq, Dv].
Result<AttentionPlan> plan_attention(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                     std::span<const TensorView> outputs) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  const TensorView& q = inputs[0];
  const TensorView& k = inputs[1];
  const TensorView& v = inputs[2];
  if (q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank() ||
      drop_last(k.sizes, 2) != drop_last(q.sizes, 2) ||
      drop_last(v.sizes, 2) != drop_last(q.sizes, 2) || k.sizes.size(-1) != q.sizes.size(-1) ||
      v.sizes.size(-2) != k.sizes.size(-2)) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: expected q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] with equal "
                      "leading dims; got {}",
                      op, describe_inputs(op, inputs));
  }
  AttentionPlan plan;
  plan.sq = q.sizes.size(-2);
  plan.sk = k.sizes.size(-2);
  plan.d = q.sizes.size(-1);
  plan.dv = v.sizes.size(-1);
  plan.heads = drop_last(q.sizes, 2).numel();
  Shape expected = q.sizes;
  expected[expected.rank() - 1] = plan.dv;
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], inputs[0].dtype, expected));
  PLANRT_ASSIGN_OR_RETURN(plan.causal, with_op(op, attrs.get_bool("causal", false)));
  PLANRT_ASSIGN_OR_RETURN(plan.scale,
                          with_op(op, attrs.get_float("scale", 1.0 / std::sqrt(double(plan.d)))));
  PLANRT_ASSIGN_OR_RETURN(plan.fused, with_op(op, attrs.get_bool("fused", true)));
  return plan;
}

// ids are i32 or i64; the table may have any dtype since rows move as bytes.
Result<EmbeddingPlan> plan_embedding(std::span<const TensorView> inputs,
                                     std::span<const TensorView> outputs) {
  constexpr std::string_view op = "embedding";
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
  PLANRT_RETURN_IF_ERROR(append_dim(op, expected, table.sizes[1]));
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], table.dtype, expected));
  EmbeddingPlan plan;
  plan.i64_ids = ids.dtype == DType::I64;
  plan.n = ids.numel();
  plan.rows = table.sizes[0];
  plan.row_bytes = table.sizes[1] * static_cast<int64_t>(element_size(table.dtype));
  return plan;
}

Status plan_reshape(std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "reshape";
  const TensorView& x = inputs[0];
  const TensorView& out = outputs[0];
  if (out.dtype != x.dtype || out.numel() != x.numel()) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: output {} {} ({} elements) cannot hold x {} {} ({} elements)", op,
                      dtype_name(out.dtype), out.sizes.to_string(), out.numel(),
                      dtype_name(x.dtype), x.sizes.to_string(), x.numel());
  }
  return {};
}

Result<PermutePlan> plan_permute(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                 std::span<const TensorView> outputs) {
  constexpr std::string_view op = "permute";
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
  return plan_permutation(op, inputs, outputs, perm);
}

Result<PermutePlan> plan_transpose(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                   std::span<const TensorView> outputs) {
  constexpr std::string_view op = "transpose";
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
  return plan_permutation(op, inputs, outputs, perm);
}

// concat(xs...; dim = 0): every xs[i] has xs[0]'s dtype and rank and its sizes except
// along dim.
Result<ConcatPlan> plan_concat(const OpAttrs& attrs, std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs) {
  constexpr std::string_view op = "concat";
  PLANRT_RETURN_IF_ERROR(require_rank(op, inputs, 1));
  const TensorView& first = inputs[0];
  PLANRT_ASSIGN_OR_RETURN(int64_t dim_attr, with_op(op, attrs.get_int("dim", 0)));
  ConcatPlan plan;
  PLANRT_ASSIGN_OR_RETURN(plan.dim, normalize_dim(op, "dim", dim_attr, first.rank()));
  const int dim = plan.dim;
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
  plan.inner_bytes =
      contiguous_strides(first.sizes)[dim] * static_cast<int64_t>(element_size(first.dtype));
  plan.outer = drop_last(first.sizes, first.rank() - dim).numel();
  plan.out_row_bytes = shape[dim] * plan.inner_bytes;
  return plan;
}

// slice(x; dim = 0, start = 0, end = size): Python slicing with step 1. Negative bounds
// count from the end, then both clamp to [0, size] and an end before start is empty.
Result<SlicePlan> plan_slice(const OpAttrs& attrs, std::span<const TensorView> inputs,
                             std::span<const TensorView> outputs) {
  constexpr std::string_view op = "slice";
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
  // Without `end`, the output's length along dim says where the slice ends: a slice as long
  // as a named dim ([0:S] of a fixed-size table), whose end only the call knows.
  if (!attrs.has("end") && outputs[0].rank() == x.rank()) end = start + outputs[0].sizes[dim];
  end = std::max(start, clamp(end));
  Shape shape = x.sizes;
  shape[dim] = end - start;
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], x.dtype, shape));
  const int64_t inner_bytes =
      contiguous_strides(x.sizes)[dim] * static_cast<int64_t>(element_size(x.dtype));
  SlicePlan plan;
  plan.outer = drop_last(x.sizes, x.rank() - dim).numel();
  plan.offset_bytes = start * inner_bytes;
  plan.in_row_bytes = size * inner_bytes;
  plan.out_row_bytes = (end - start) * inner_bytes;
  return plan;
}

}  // namespace planrt::kernels
