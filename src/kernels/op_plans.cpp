#include "kernels/op_plans.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/operands.h"

namespace planrt::kernels {
namespace {

std::string fmt_ints(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

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

Result<LinearActivation> plan_linear_activation(const OpAttrs& attrs) {
  constexpr std::string_view op = "linear";
  // Not PLANRT_ASSIGN_OR_RETURN: GCC 12 misreports the moved-out string as uninitialized.
  Result<std::string> name = with_op(op, attrs.get_string("activation", "none"));
  if (!name.ok()) return name.status();
  if (*name != "gelu" && attrs.has("approximate")) {
    return make_error(ErrorCode::InvalidArgument, "{}: attribute 'approximate' needs activation gelu, not '{}'",
                      op, *name);
  }
  if (*name == "none") return LinearActivation::None;
  if (*name == "relu") return LinearActivation::Relu;
  if (*name == "gelu") {
    Result<GeluApproximation> mode = plan_gelu(attrs);
    if (!mode.ok()) return mode.status();
    return *mode == GeluApproximation::None ? LinearActivation::Gelu : LinearActivation::GeluTanh;
  }
  return make_error(ErrorCode::InvalidArgument, "{}: activation '{}', expected 'none', 'relu' or 'gelu'", op, *name);
}

std::string_view linear_activation_name(LinearActivation a) {
  switch (a) {
    case LinearActivation::None: return "none";
    case LinearActivation::Relu: return "relu";
    case LinearActivation::Gelu: return "gelu";
    case LinearActivation::GeluTanh: return "gelu (tanh)";
  }
  return "?";
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

namespace {

// x viewed as [outer, n, inner] around dim (a rank-0 x is one line of one).
void split_at(const TensorView& x, int dim, int64_t& outer, int64_t& n, int64_t& inner) {
  n = x.rank() == 0 ? 1 : x.sizes[dim];
  inner = x.rank() == 0 ? 1 : contiguous_strides(x.sizes)[dim];
  // An empty x may have n * inner == 0: no lines, rather than a division by zero.
  outer = x.numel() == 0 ? 0 : x.numel() / (n * inner);
}

// x's shape with `dim` as 1 (kept) and without it (dropped): a reduction's output may be
// either, as for reshape.
Status check_reduced_output(std::string_view op, std::span<const TensorView> inputs,
                            const TensorView& out, DType dtype, int first, int last) {
  const TensorView& x = inputs[0];
  Shape kept, dropped;
  for (int d = 0; d < x.rank(); ++d) {
    const bool reduced = d >= first && d <= last;
    (void)kept.push_back(reduced ? 1 : x.sizes[d]);  // rank of x: cannot fail
    if (!reduced) (void)dropped.push_back(x.sizes[d]);
  }
  if (out.sizes != kept) return check_output(op, inputs, out, dtype, dropped);
  return check_output(op, inputs, out, dtype, kept);
}

}  // namespace

// dim defaults to -1 (the last), the usual choice; torch.softmax itself requires it.
Result<SoftmaxPlan> plan_softmax(std::string_view op, const OpAttrs& attrs,
                                 std::span<const TensorView> inputs,
                                 std::span<const TensorView> outputs) {
  const TensorView& x = inputs[0];
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], inputs[0].dtype, x.sizes));
  PLANRT_ASSIGN_OR_RETURN(int64_t dim_attr, with_op(op, attrs.get_int("dim", -1)));
  PLANRT_ASSIGN_OR_RETURN(int dim, normalize_dim(op, "dim", dim_attr, x.rank()));
  SoftmaxPlan plan;
  split_at(x, dim, plan.outer, plan.n, plan.inner);
  return plan;
}

std::optional<ReduceFn> reduce_fn_of(std::string_view op) {
  if (op == "reduce_sum") return ReduceFn::Sum;
  if (op == "reduce_mean") return ReduceFn::Mean;
  if (op == "reduce_max") return ReduceFn::Max;
  if (op == "reduce_min") return ReduceFn::Min;
  if (op == "reduce_prod") return ReduceFn::Prod;
  return std::nullopt;
}

Result<ReducePlan> plan_reduce(std::string_view op, const OpAttrs& attrs,
                               std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs) {
  const std::optional<ReduceFn> fn = reduce_fn_of(op);
  if (!fn) return make_error(ErrorCode::Internal, "{} is not a reduction", op);
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
  plan.fn = *fn;
  plan.outer = 1;
  plan.n = 1;
  plan.inner = 1;
  for (int d = 0; d < x.rank(); ++d) {
    const bool reduced = d >= dims.front() && d <= dims.back();
    int64_t& part = reduced ? plan.n : (d < dims.front() ? plan.outer : plan.inner);
    part *= x.sizes[d];
  }
  PLANRT_RETURN_IF_ERROR(
      check_reduced_output(op, inputs, outputs[0], x.dtype, dims.front(), dims.back()));
  if (x.rank() == 0) plan.n = 1;
  return plan;
}

Result<ArgReducePlan> plan_arg_reduce(std::string_view op, const OpAttrs& attrs,
                                      std::span<const TensorView> inputs,
                                      std::span<const TensorView> outputs) {
  if (op != "argmax" && op != "argmin") {
    return make_error(ErrorCode::Internal, "{} is not argmax or argmin", op);
  }
  const TensorView& x = inputs[0];
  PLANRT_ASSIGN_OR_RETURN(int64_t dim_attr, with_op(op, attrs.get_int("dim", 0)));
  PLANRT_ASSIGN_OR_RETURN(int dim, normalize_dim(op, "dim", dim_attr, x.rank()));
  PLANRT_ASSIGN_OR_RETURN(bool last, with_op(op, attrs.get_bool("select_last_index", false)));
  ArgReducePlan plan;
  plan.max = op == "argmax";
  plan.select_last = last;
  split_at(x, dim, plan.outer, plan.n, plan.inner);
  if (x.rank() != 0 && x.sizes[dim] == 0) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: x {} has no elements along dim {}; there is no index to return", op,
                      x.sizes.to_string(), dim);
  }
  if (x.numel() == 0) plan.outer = 0;
  PLANRT_RETURN_IF_ERROR(check_reduced_output(op, inputs, outputs[0], DType::I64,
                                              x.rank() == 0 ? 0 : dim, x.rank() == 0 ? -1 : dim));
  return plan;
}

Result<CumsumPlan> plan_cumsum(const OpAttrs& attrs, std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs) {
  constexpr std::string_view op = "cumsum";
  const TensorView& x = inputs[0];
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], x.dtype, x.sizes));
  if (!attrs.has("dim")) return make_error(ErrorCode::NotFound, "{}: attribute 'dim' is required", op);
  PLANRT_ASSIGN_OR_RETURN(int64_t dim_attr, with_op(op, attrs.get_int("dim", 0)));
  PLANRT_ASSIGN_OR_RETURN(int dim, normalize_dim(op, "dim", dim_attr, x.rank()));
  CumsumPlan plan;
  PLANRT_ASSIGN_OR_RETURN(plan.exclusive, with_op(op, attrs.get_bool("exclusive", false)));
  PLANRT_ASSIGN_OR_RETURN(plan.reverse, with_op(op, attrs.get_bool("reverse", false)));
  split_at(x, dim, plan.outer, plan.n, plan.inner);
  return plan;
}

namespace {

// An operand of attribute `heads` = h: [..., S, parts * h * D] read as `parts` operands
// [..., S, h, D] side by side in each row (parts 3: a packed q|k|v projection).
Result<Shape> split_heads(std::string_view op, const TensorView& x, int64_t heads, int64_t parts,
                          std::span<const TensorView> inputs) {
  if (x.rank() < 2 || x.rank() >= kMaxRank) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: attribute heads splits the last dim of operands [..., S, {}heads x D] of rank 2 "
                      "to {}; got {}",
                      op, parts == 1 ? "" : "3 x ", kMaxRank - 1, describe_inputs(op, inputs));
  }
  const int64_t last = x.sizes.size(-1);
  if (heads > last / parts || last % (parts * heads) != 0) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: attribute heads = {} needs operands [..., S, {}heads x D]: a last dim that "
                      "is a multiple of {} x {}; got {}",
                      op, heads, parts == 1 ? "" : "3 x ", parts, heads, describe_inputs(op, inputs));
  }
  Shape out = drop_last(x.sizes, 1);
  PLANRT_RETURN_IF_ERROR(out.push_back(heads));
  PLANRT_RETURN_IF_ERROR(out.push_back(last / (parts * heads)));
  return out;
}

}  // namespace

// causal (PyTorch's is_causal) masks key j for query i when j > i, aligned top-left as
// PyTorch does when Sq != Sk; scale defaults to 1 / sqrt(D). Shapes: q [..., Sq, D],
// k [..., Sk, D], v [..., Sk, Dv] with equal leading dims (usually [B, H]); the output is
// [..., Sq, Dv]. Layout "bshd": q [..., Sq, H, D], k [..., Sk, H, D], v [..., Sk, H, Dv],
// the output [..., Sq, H, Dv]; with attribute heads = H the last two dims are one
// ([..., S, H * D]), and one input alone is a packed projection [..., S, 3 * H * D] holding
// q, k and v side by side in each row. The plan's strides say where each head's rows are.
// The mask's strides over the flat heads (dims heads_shape, the last one H), the query rows
// and the keys (kernels/attention_layout.h): its last dim Sk, the one before Sq or 1, and its
// leading dims, right-aligned against heads_shape, 1 or equal, with the batch dims (all but
// H) either all 1 or all present.
Result<AttentionMask> plan_attention_mask(const TensorView& mask, DType dtype, const Shape& heads_shape, int64_t sq,
                                          int64_t sk) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  AttentionMask m;
  if (mask.dtype == DType::Bool) {
    m.kind = AttentionMaskKind::Bool;
  } else if (mask.dtype == dtype) {
    m.kind = AttentionMaskKind::Additive;
  } else {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: the mask is {}; expected bool (true: attend) or the operands' dtype {} (added to the "
                      "scores)", op, dtype_name(mask.dtype), dtype_name(dtype));
  }
  const Shape& ms = mask.sizes;
  const int lead = ms.rank() - 2;
  const int n = heads_shape.rank();
  auto refuse = [&](std::string_view why) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: the mask {} does not broadcast to the scores [{}{}{}, {}] ({})", op, ms.to_string(),
                      heads_shape.to_string().substr(1, heads_shape.to_string().size() - 2), n > 0 ? ", " : "",
                      sq, sk, why);
  };
  if (ms.rank() < 2 || lead > n) return refuse("its rank");
  if (ms.size(-1) != sk) return refuse("its last dim must be the keys, Sk");
  if (ms.size(-2) != sq && ms.size(-2) != 1) return refuse("its query dim must be Sq or 1");
  if (!mask.is_contiguous()) return refuse("it is not contiguous");
  const int64_t h = n > 0 ? heads_shape[n - 1] : 1;
  const int64_t mh = lead > 0 ? ms[lead - 1] : 1;
  if (mh != 1 && mh != h) return refuse("its head dim must be H or 1");
  bool all_one = true, all_equal = lead - 1 == n - 1;
  for (int i = 0; i + 1 < lead; ++i) {
    const int64_t want = heads_shape[n - lead + i];
    all_one = all_one && ms[i] == 1;
    all_equal = all_equal && ms[i] == want;
  }
  if (!all_one && !all_equal) return refuse("its batch dims must be all 1 or all those of the scores");
  m.heads_per_batch = std::max<int64_t>(h, 1);
  m.row = ms.size(-2) == 1 ? 0 : sk;
  m.head = mh == 1 ? 0 : ms.size(-2) * sk;
  m.batch = all_one ? 0 : mh * ms.size(-2) * sk;
  return m;
}

Result<AttentionPlan> plan_attention(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                     std::span<const TensorView> outputs) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  PLANRT_ASSIGN_OR_RETURN(std::string layout, with_op(op, attrs.get_string("layout", "bhsd")));
  if (layout != "bhsd" && layout != "bshd" && layout != "sbhd") {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: attribute layout is '{}'; expected \"bhsd\", \"bshd\" or \"sbhd\"", op, layout);
  }
  // bshd and sbhd: the heads of one position side by side; sbhd: the sequence dim first.
  const bool seq_first = layout == "sbhd";
  const bool seq_major = layout == "bshd" || seq_first;
  PLANRT_ASSIGN_OR_RETURN(int64_t heads_attr, with_op(op, attrs.get_int("heads", 0)));
  const bool packed = attention_is_packed(inputs);
  const size_t operands = std::min<size_t>(inputs.size(), 3);
  const bool absent = inputs[0].is_none() ||
                      (!packed && std::any_of(inputs.begin(), inputs.begin() + operands,
                                              [](const TensorView& t) { return t.is_none(); }));
  if (heads_attr < 0 || (heads_attr > 0 && !seq_major) || (packed && heads_attr == 0) ||
      (inputs.size() != 1 && inputs.size() != 3 && inputs.size() != 4) || absent) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: takes q, k, v and an optional mask, or with layout \"bshd\" or \"sbhd\" and "
                      "attribute heads > 0 one packed [..., S, 3 x heads x D] input (k and v absent); got {} "
                      "input(s){}, layout {}, heads {}",
                      op, inputs.size(), absent ? " (one absent)" : "", layout, heads_attr);
  }
  // The operands as [..., S, H, D] (bshd) or [..., S, D] (bhsd).
  Shape qs, ks, vs;
  if (packed) {
    PLANRT_ASSIGN_OR_RETURN(qs, split_heads(op, inputs[0], heads_attr, 3, inputs));
    ks = vs = qs;
  } else if (heads_attr > 0) {
    PLANRT_ASSIGN_OR_RETURN(qs, split_heads(op, inputs[0], heads_attr, 1, inputs));
    PLANRT_ASSIGN_OR_RETURN(ks, split_heads(op, inputs[1], heads_attr, 1, inputs));
    PLANRT_ASSIGN_OR_RETURN(vs, split_heads(op, inputs[2], heads_attr, 1, inputs));
  } else {
    qs = inputs[0].sizes, ks = inputs[1].sizes, vs = inputs[2].sizes;
  }
  // The dims after the batch dims: [S, D] (bhsd, heads among the batch dims) or [S, H, D];
  // sbhd: [S, ..., H, D], the batch dims between the sequence and the heads.
  const int tail = seq_major ? 3 : 2;
  const int seq = seq_first ? 0 : qs.rank() - tail;
  auto batch_dims = [&](const Shape& x) {
    if (!seq_first) return drop_last(x, tail);
    Shape b;
    for (int i = 1; i + 2 < x.rank(); ++i) (void)b.push_back(x[i]);  // rank < kMaxRank: fits
    return b;
  };
  if (qs.rank() < tail || ks.rank() != qs.rank() || vs.rank() != qs.rank() ||
      batch_dims(ks) != batch_dims(qs) || batch_dims(vs) != batch_dims(qs) ||
      ks.size(-1) != qs.size(-1) || vs.size(seq) != ks.size(seq) ||
      (seq_major && (ks.size(-2) != qs.size(-2) || vs.size(-2) != qs.size(-2)))) {
    return make_error(ErrorCode::InvalidArgument, "{}: expected {} with equal {} dims; got {}", op,
                      !seq_major        ? "q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv]"
                      : seq_first && heads_attr == 0
                          ? "q [Sq, ..., H, D], k [Sk, ..., H, D], v [Sk, ..., H, Dv] (layout sbhd)"
                      : seq_first       ? "q [Sq, ..., H x D], k [Sk, ..., H x D], v [Sk, ..., H x Dv] (layout sbhd, heads H)"
                      : heads_attr == 0 ? "q [..., Sq, H, D], k [..., Sk, H, D], v [..., Sk, H, Dv] (layout bshd)"
                                        : "q [..., Sq, H x D], k [..., Sk, H x D], v [..., Sk, H x Dv] (heads H)",
                      seq_first ? "batch" : "leading", describe_inputs(op, inputs));
  }
  AttentionPlan plan;
  plan.sq = qs.size(seq);
  plan.sk = ks.size(seq);
  plan.d = qs.size(-1);
  plan.dv = vs.size(-1);
  plan.heads = drop_last(qs, 2).numel();  // bshd and sbhd: batch dims x H, below
  AttentionLayout& l = plan.layout;
  if (seq_major) {
    const int64_t h = qs.size(-2);
    const int64_t batches = batch_dims(qs).numel();
    plan.heads = batches * h;
    l.heads_per_batch = std::max<int64_t>(h, 1);
    // A position's row holds its heads (bshd), or every batch's heads (sbhd); a batch's
    // heads start every `sq` rows (bshd) or every h heads into the row (sbhd).
    const int64_t rows_per_position = seq_first ? batches : 1;
    auto strides = [&](int64_t width, int64_t seq_len, int64_t start) {  // width: a batch's part of a row
      const int64_t row = rows_per_position * width;
      return AttentionStrides{row, 0, seq_first ? width : seq_len * row, start};
    };
    if (packed) {  // q | k | v side by side in each row of 3 h d (per batch)
      const int64_t width = 3 * h * plan.d;
      l.q = strides(width, plan.sq, 0);
      l.k = strides(width, plan.sq, h * plan.d);
      l.v = strides(width, plan.sq, 2 * h * plan.d);
    } else {
      l.q = strides(h * plan.d, plan.sq, 0);
      l.k = strides(h * plan.d, plan.sk, 0);
      l.v = strides(h * plan.dv, plan.sk, 0);
    }
    l.out = strides(h * plan.dv, plan.sq, 0);
    l.q.head = l.k.head = plan.d;
    l.v.head = packed ? plan.d : plan.dv;
    l.out.head = plan.dv;
  } else {
    l.heads_per_batch = std::max<int64_t>(plan.heads, 1);
    l.q = {plan.d, plan.sq * plan.d, 0};
    l.k = {plan.d, plan.sk * plan.d, 0};
    l.v = {plan.dv, plan.sk * plan.dv, 0};
    l.out = {plan.dv, plan.sq * plan.dv, 0};
  }
  Shape expected = inputs[0].sizes;  // [..., Sq, H, Dv], or [..., Sq, H x Dv] with heads
  expected[expected.rank() - 1] = heads_attr > 0 ? heads_attr * plan.dv : plan.dv;
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], inputs[0].dtype, expected));
  if (inputs.size() > 3 && !inputs[3].is_none()) {
    // The flat heads' dims: [batch dims..., H] (bhsd: q's leading dims, the last one H).
    Shape heads_shape = seq_major ? batch_dims(qs) : drop_last(qs, 2);
    if (seq_major) (void)heads_shape.push_back(qs.size(-2));
    PLANRT_ASSIGN_OR_RETURN(l.mask, plan_attention_mask(inputs[3], inputs[0].dtype, heads_shape, plan.sq, plan.sk));
  }
  PLANRT_ASSIGN_OR_RETURN(plan.causal, with_op(op, attrs.get_bool("causal", false)));
  PLANRT_ASSIGN_OR_RETURN(plan.scale,
                          with_op(op, attrs.get_float("scale", 1.0 / std::sqrt(double(plan.d)))));
  PLANRT_ASSIGN_OR_RETURN(plan.fused, with_op(op, attrs.get_bool("fused", true)));
  return plan;
}

Result<GatherElementsPlan> plan_gather_elements(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                                std::span<const TensorView> outputs) {
  constexpr std::string_view op = "gather_elements";
  const TensorView& x = inputs[0];
  const TensorView& idx = inputs[1];
  if (idx.dtype != DType::I32 && idx.dtype != DType::I64) {
    return make_error(ErrorCode::NotSupported, "{}: indices have dtype {}; expected i32 or i64", op,
                      dtype_name(idx.dtype));
  }
  if (idx.rank() != x.rank() || x.rank() == 0) {
    return make_error(ErrorCode::InvalidArgument, "{}: indices must have x's rank (>= 1); got {}", op,
                      describe_inputs(op, inputs));
  }
  GatherElementsPlan plan;
  PLANRT_ASSIGN_OR_RETURN(int64_t dim, with_op(op, attrs.get_int("dim", 0)));
  PLANRT_ASSIGN_OR_RETURN(plan.dim, normalize_dim(op, "dim", dim, x.rank()));
  for (int d = 0; d < x.rank(); ++d) {
    if (d != plan.dim && idx.sizes[d] > x.sizes[d]) {
      return make_error(ErrorCode::InvalidArgument, "{}: indices' dim {} ({}) exceeds x's ({}): {}", op, d,
                        idx.sizes[d], x.sizes[d], describe_inputs(op, inputs));
    }
  }
  if (x.sizes[plan.dim] == 0 && idx.numel() > 0) {
    return make_error(ErrorCode::InvalidArgument, "{}: gathering from an empty dim {}: {}", op, plan.dim,
                      describe_inputs(op, inputs));
  }
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], x.dtype, idx.sizes));
  plan.i64_indices = idx.dtype == DType::I64;
  plan.x_strides = x.sizes;
  int64_t stride = 1;
  for (int d = x.rank() - 1; d >= 0; --d) {
    plan.x_strides[d] = stride;
    stride *= x.sizes[d];
  }
  return plan;
}

Result<TakePlan> plan_take(std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "take";
  const TensorView& idx = inputs[1];
  if (idx.dtype != DType::I32 && idx.dtype != DType::I64) {
    return make_error(ErrorCode::NotSupported, "{}: indices have dtype {}; expected i32 or i64", op,
                      dtype_name(idx.dtype));
  }
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], inputs[0].dtype, idx.sizes));
  if (inputs[0].numel() == 0 && idx.numel() > 0) {
    return make_error(ErrorCode::InvalidArgument, "{}: taking from an empty x ({})", op, describe_inputs(op, inputs));
  }
  return TakePlan{idx.dtype == DType::I64, inputs[0].numel()};
}

Result<int64_t> plan_size(const OpAttrs& attrs, std::span<const TensorView> inputs,
                          std::span<const TensorView> outputs) {
  constexpr std::string_view op = "size";
  const TensorView& x = inputs[0];
  Result<int64_t> dim = with_op(op, attrs.get_int("dim", std::numeric_limits<int64_t>::min()));
  if (!dim.ok()) return dim.status();
  if (*dim == std::numeric_limits<int64_t>::min()) return make_error(ErrorCode::NotFound, "{}: attribute 'dim' is required", op);
  if (x.rank() == 0) return make_error(ErrorCode::InvalidArgument, "{}: x is a scalar (it has no dims)", op);
  PLANRT_ASSIGN_OR_RETURN(int d, normalize_dim(op, "dim", *dim, x.rank()));
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], DType::I64, Shape{}));
  return x.sizes[d];
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
Result<PermutePlan> plan_expand(std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "expand";
  const TensorView& x = inputs[0];
  PLANRT_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(op, x.sizes, outputs[0].sizes));
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], x.dtype, shape));
  return PermutePlan{shape, broadcast_strides(x.sizes, shape)};
}

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

Result<int64_t> window_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                                   int64_t pad_end, int64_t dilation, bool ceil_mode) {
  if (in < 1 || kernel < 1 || stride < 1 || dilation < 1 || pad_begin < 0 || pad_end < 0) {
    return make_error(ErrorCode::InvalidArgument,
                      "window over {} elements: kernel {}, stride {}, dilation {} must be >= 1 and "
                      "pads {}, {} >= 0", in, kernel, stride, dilation, pad_begin, pad_end);
  }
  const int64_t span = dilation * (kernel - 1) + 1;
  const int64_t room = in + pad_begin + pad_end - span;
  if (room < 0) {
    return make_error(ErrorCode::InvalidArgument,
                      "a window of {} elements (kernel {}, dilation {}) does not fit in {} elements "
                      "padded by {} and {}", span, kernel, dilation, in, pad_begin, pad_end);
  }
  int64_t out = (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
  // A last window that would start past the input and the begin padding reads only end
  // padding: ceil mode drops it.
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

Result<Window2d> parse_window2d(std::string_view op, const OpAttrs& attrs, const int64_t* kernel_hw) {
  auto pair = [&](std::string_view name, int64_t fallback, int64_t* a, int64_t* b) -> Status {
    if (!attrs.has(name)) {
      *a = *b = fallback;
      return {};
    }
    PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> v, with_op(op, attrs.get_ints(name)));
    if (v.size() != 2 || v[0] < 1 || v[1] < 1) {
      return make_error(ErrorCode::InvalidArgument, "{}: {} must be two integers >= 1, got {}", op,
                        name, fmt_ints(v));
    }
    *a = v[0];
    *b = v[1];
    return {};
  };
  Window2d w;
  if (kernel_hw != nullptr) {
    w.kh = kernel_hw[0];
    w.kw = kernel_hw[1];
  } else {
    if (!attrs.has("kernel")) {
      return make_error(ErrorCode::NotFound, "{}: attribute kernel ([kh, kw]) is required", op);
    }
    PLANRT_RETURN_IF_ERROR(pair("kernel", 1, &w.kh, &w.kw));
  }
  PLANRT_RETURN_IF_ERROR(pair("strides", 1, &w.stride_h, &w.stride_w));
  PLANRT_RETURN_IF_ERROR(pair("dilations", 1, &w.dilation_h, &w.dilation_w));
  if (attrs.has("pads")) {
    PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> p, with_op(op, attrs.get_ints("pads")));
    if (p.size() != 4 || *std::min_element(p.begin(), p.end()) < 0) {
      return make_error(ErrorCode::InvalidArgument,
                        "{}: pads must be four integers >= 0 [top, left, bottom, right], got {}", op,
                        fmt_ints(p));
    }
    w.pad_top = p[0];
    w.pad_left = p[1];
    w.pad_bottom = p[2];
    w.pad_right = p[3];
  }
  PLANRT_ASSIGN_OR_RETURN(w.ceil_mode, with_op(op, attrs.get_bool("ceil_mode", false)));
  return w;
}

namespace {

// An image of h x w through `window`: the output's spatial size.
Status window_outputs(std::string_view op, std::span<const TensorView> inputs, const Window2d& w,
                      int64_t h_in, int64_t w_in, int64_t* oh, int64_t* ow) {
  Result<int64_t> h = window_output_size(h_in, w.kh, w.stride_h, w.pad_top, w.pad_bottom, w.dilation_h, w.ceil_mode);
  Result<int64_t> wd = window_output_size(w_in, w.kw, w.stride_w, w.pad_left, w.pad_right, w.dilation_w, w.ceil_mode);
  for (const Result<int64_t>* r : {&h, &wd}) {
    if (!r->ok()) {
      return Status(ErrorCode::InvalidArgument,
                    fmt::format("{}: {} ({})", op, r->status().message(), describe_inputs(op, inputs)));
    }
  }
  *oh = *h;
  *ow = *wd;
  return {};
}

// x non-empty and of rank 4; the layout attribute read: true for "nhwc".
Result<bool> image_layout(std::string_view op, const OpAttrs& attrs, std::span<const TensorView> inputs) {
  PLANRT_ASSIGN_OR_RETURN(std::string layout, with_op(op, attrs.get_string("layout", "nchw")));
  if (layout != "nchw" && layout != "nhwc") {
    return make_error(ErrorCode::InvalidArgument, "{}: attribute layout is '{}'; expected \"nchw\" or \"nhwc\"",
                      op, layout);
  }
  const bool channels_last = layout == "nhwc";
  const TensorView& x = inputs[0];
  if (x.rank() != 4 || x.numel() == 0) {
    return make_error(ErrorCode::InvalidArgument, "{}: x must be a non-empty {}; got {}", op,
                      channels_last ? "[N, H, W, C] (layout nhwc)" : "[N, C, H, W]", describe_inputs(op, inputs));
  }
  return channels_last;
}

// n, c, h, w of x in either layout.
void read_image_dims(const TensorView& x, bool channels_last, int64_t* n, int64_t* c, int64_t* h, int64_t* w) {
  *n = x.sizes[0];
  *c = x.sizes[channels_last ? 3 : 1];
  *h = x.sizes[channels_last ? 1 : 2];
  *w = x.sizes[channels_last ? 2 : 3];
}

Shape image_shape(bool channels_last, int64_t n, int64_t c, int64_t h, int64_t w) {
  return channels_last ? Shape({n, h, w, c}) : Shape({n, c, h, w});
}

}  // namespace

Result<Conv2dPlan> plan_conv2d(const OpAttrs& attrs, std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs) {
  constexpr std::string_view op = "conv2d";
  Conv2dPlan p;
  PLANRT_ASSIGN_OR_RETURN(p.channels_last, image_layout(op, attrs, inputs));
  const TensorView& x = inputs[0];
  const TensorView& wt = inputs[1];
  read_image_dims(x, p.channels_last, &p.n, &p.c, &p.h, &p.w);
  PLANRT_ASSIGN_OR_RETURN(p.groups, with_op(op, attrs.get_int("groups", 1)));
  const char* weight_form = p.channels_last ? "[K, KH, KW, C/groups] (layout nhwc)" : "[K, C/groups, KH, KW]";
  if (wt.rank() != 4 || wt.numel() == 0) {
    return make_error(ErrorCode::InvalidArgument, "{}: weight must be {}; got {}", op, weight_form,
                      describe_inputs(op, inputs));
  }
  p.k = wt.sizes[0];
  const int64_t weight_channels = wt.sizes[p.channels_last ? 3 : 1];
  if (p.groups < 1 || p.c % p.groups != 0 || p.k % p.groups != 0 || weight_channels * p.groups != p.c) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: groups = {} must divide the {} input and {} output channels, and the "
                      "weight {} must hold C / groups channels; got {}", op, p.groups, p.c, p.k, weight_form,
                      describe_inputs(op, inputs));
  }
  const int64_t kernel_hw[2] = {wt.sizes[p.channels_last ? 1 : 2], wt.sizes[p.channels_last ? 2 : 3]};
  PLANRT_ASSIGN_OR_RETURN(p.window, parse_window2d(op, attrs, kernel_hw));
  if (p.window.ceil_mode) {
    return make_error(ErrorCode::InvalidArgument, "{}: ceil_mode applies to pooling only", op);
  }
  PLANRT_RETURN_IF_ERROR(window_outputs(op, inputs, p.window, p.h, p.w, &p.oh, &p.ow));
  if (inputs.size() > 2 && !inputs[2].is_none()) {
    if (inputs[2].rank() != 1 || inputs[2].sizes[0] != p.k) {
      return make_error(ErrorCode::InvalidArgument, "{}: bias must be [{}] (output channels); got {}",
                        op, p.k, describe_inputs(op, inputs));
    }
    p.has_bias = true;
  }
  PLANRT_ASSIGN_OR_RETURN(p.activation_name, with_op(op, attrs.get_string("activation", "none")));
  if (p.activation_name == "relu") {
    p.activation = ConvActivation::Relu;
  } else if (p.activation_name == "clip" || p.activation_name == "hard_sigmoid" || p.activation_name == "hard_swish") {
    p.activation = ConvActivation::Clamp;
    Result<ClampPlan> clamp = clamp_params(p.activation_name, attrs);
    if (!clamp.ok()) return clamp.status().with_context(op);
    p.clamp = *clamp;
  } else if (p.activation_name != "none") {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: activation '{}' is not none, relu, clip, hard_sigmoid or hard_swish", op, p.activation_name);
  }
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], x.dtype, image_shape(p.channels_last, p.n, p.k, p.oh, p.ow)));
  if (outputs.size() > 1 && !outputs[1].is_none()) {
    p.workspace_bytes = static_cast<uint64_t>(outputs[1].numel()) * element_size(outputs[1].dtype);
  }
  return p;
}

Result<Pool2dPlan> plan_pool2d(std::string_view op, const OpAttrs& attrs,
                               std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs) {
  Pool2dPlan p;
  PLANRT_ASSIGN_OR_RETURN(p.channels_last, image_layout(op, attrs, inputs));
  const TensorView& x = inputs[0];
  read_image_dims(x, p.channels_last, &p.n, &p.c, &p.h, &p.w);
  PLANRT_ASSIGN_OR_RETURN(p.window, parse_window2d(op, attrs, nullptr));
  const bool avg = op == "avg_pool2d";
  if (avg && (p.window.dilation_h != 1 || p.window.dilation_w != 1)) {
    return make_error(ErrorCode::NotSupported, "{}: dilations other than 1 are not supported", op);
  }
  // A window that lies wholly in padding would have nothing to reduce.
  if (p.window.pad_top >= p.window.kh || p.window.pad_bottom >= p.window.kh ||
      p.window.pad_left >= p.window.kw || p.window.pad_right >= p.window.kw) {
    return make_error(ErrorCode::InvalidArgument, "{}: pads must be smaller than the kernel [{}, {}]",
                      op, p.window.kh, p.window.kw);
  }
  PLANRT_ASSIGN_OR_RETURN(p.count_include_pad, with_op(op, attrs.get_bool("count_include_pad", false)));
  PLANRT_RETURN_IF_ERROR(window_outputs(op, inputs, p.window, p.h, p.w, &p.oh, &p.ow));
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], x.dtype, image_shape(p.channels_last, p.n, p.c, p.oh, p.ow)));
  return p;
}

Result<ClampPlan> plan_clamp(std::string_view op, const OpAttrs& attrs,
                             std::span<const TensorView> inputs,
                             std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], inputs[0].dtype, inputs[0].sizes));
  return clamp_params(op, attrs);
}

Result<ClampPlan> clamp_params(std::string_view op, const OpAttrs& attrs) {
  ClampPlan p;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (op == "clip") {
    PLANRT_ASSIGN_OR_RETURN(double lo, with_op(op, attrs.get_float("min", -kInf)));
    PLANRT_ASSIGN_OR_RETURN(double hi, with_op(op, attrs.get_float("max", kInf)));
    p.lo = static_cast<float>(lo);
    p.hi = static_cast<float>(hi);
  } else if (op == "hard_sigmoid") {
    PLANRT_ASSIGN_OR_RETURN(double alpha, with_op(op, attrs.get_float("alpha", 0.2)));
    PLANRT_ASSIGN_OR_RETURN(double beta, with_op(op, attrs.get_float("beta", 0.5)));
    p = {static_cast<float>(alpha), static_cast<float>(beta), 0.0f, 1.0f, false};
  } else if (op == "hard_swish") {
    p = {1.0f / 6.0f, 0.5f, 0.0f, 1.0f, true};
  } else {
    return make_error(ErrorCode::InvalidArgument, "plan_clamp: '{}' is not a clamp op", op);
  }
  if (std::isnan(p.lo) || std::isnan(p.hi)) {
    return make_error(ErrorCode::InvalidArgument, "{}: bounds must be numbers", op);
  }
  return p;
}

Result<PadPlan> plan_pad(const OpAttrs& attrs, std::span<const TensorView> inputs,
                         std::span<const TensorView> outputs) {
  constexpr std::string_view op = "pad";
  const TensorView& x = inputs[0];
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> pads, with_op(op, attrs.get_ints("pads")));
  const int r = x.rank();
  if (static_cast<int>(pads.size()) != 2 * r) {
    return make_error(ErrorCode::InvalidArgument, "{}: pads has {} entries; x of rank {} needs {} "
                      "(begins, then ends)", op, pads.size(), r, 2 * r);
  }
  PadPlan p;
  PLANRT_ASSIGN_OR_RETURN(std::string mode, with_op(op, attrs.get_string("mode", "constant")));
  if (mode == "constant") {
    p.mode = PadMode::Constant;
  } else if (mode == "reflect") {
    p.mode = PadMode::Reflect;
  } else if (mode == "edge") {
    p.mode = PadMode::Edge;
  } else {
    return make_error(ErrorCode::InvalidArgument, "{}: mode '{}' is not constant, reflect or edge", op, mode);
  }
  PLANRT_ASSIGN_OR_RETURN(p.value, with_op(op, attrs.get_float("value", 0.0)));
  switch (x.dtype) {
    case DType::F32: {
      const auto v = static_cast<float>(p.value);
      std::memcpy(&p.fill_bits, &v, sizeof v);
      break;
    }
    case DType::F16:
    case DType::BF16: {
      const uint16_t v = x.dtype == DType::F16 ? f32_to_f16_bits(static_cast<float>(p.value))
                                               : f32_to_bf16_bits(static_cast<float>(p.value));
      std::memcpy(&p.fill_bits, &v, sizeof v);
      break;
    }
    case DType::I32: {
      const auto v = static_cast<int32_t>(p.value);
      std::memcpy(&p.fill_bits, &v, sizeof v);
      break;
    }
    case DType::I64: {
      const auto v = static_cast<int64_t>(p.value);
      std::memcpy(&p.fill_bits, &v, sizeof v);
      break;
    }
    case DType::U8:
    case DType::Bool: {
      const auto v = x.dtype == DType::Bool ? static_cast<uint8_t>(p.value != 0.0)
                                            : static_cast<uint8_t>(p.value);
      std::memcpy(&p.fill_bits, &v, sizeof v);
      break;
    }
  }
  Shape shape;
  for (int d = 0; d < r; ++d) {
    const int64_t size = x.sizes[d] + pads[d] + pads[d + r];
    if (size < 0) {
      return make_error(ErrorCode::InvalidArgument, "{}: pads {} and {} crop dim {} of {} below zero", op,
                        pads[d], pads[d + r], d, describe_inputs(op, inputs));
    }
    // Reflect and edge read x along every padded dim: it must not be empty there.
    if (p.mode != PadMode::Constant && x.sizes[d] == 0 && size > 0) {
      return make_error(ErrorCode::InvalidArgument, "{}: {} padding of an empty dim {} ({})", op, mode, d,
                        describe_inputs(op, inputs));
    }
    PLANRT_RETURN_IF_ERROR(append_dim(op, shape, size));
    p.begin.push_back(pads[d]);
  }
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], x.dtype, shape));
  return p;
}

// ---- resize -----------------------------------------------------------------------------

Result<std::vector<double>> parse_float_list(std::string_view text, std::string_view what) {
  std::vector<double> out;
  size_t i = 0;
  auto skip_space = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  };
  skip_space();
  if (i == text.size()) return out;  // no numbers
  while (true) {
    skip_space();
    const char* begin = text.data() + i;
    const char* end = text.data() + text.size();
    if (begin != end && *begin == '+') ++begin;  // from_chars takes no '+'
    double v = 0.0;
    auto [ptr, ec] = std::from_chars(begin, end, v);
    if (ec != std::errc() || ptr == begin) {
      return make_error(ErrorCode::InvalidArgument,
                        "{} \"{}\": entry {} is not a number (numbers separated by commas)", what, text,
                        out.size());
    }
    out.push_back(v);
    i = static_cast<size_t>(ptr - text.data());
    skip_space();
    if (i == text.size()) break;
    if (text[i] != ',') {
      return make_error(ErrorCode::InvalidArgument,
                        "{} \"{}\": expected ',' after entry {} (numbers separated by commas)", what, text,
                        out.size() - 1);
    }
    ++i;
  }
  return out;
}

std::string format_float_list(const std::vector<double>& values) {
  // fmt's "{}" writes the shortest text that reads back to the same double.
  return fmt::format("{}", fmt::join(values, ","));
}

Result<ResizeAttrs> parse_resize_attrs(const OpAttrs& attrs, int rank) {
  constexpr std::string_view op = "resize";
  ResizeAttrs a;
  PLANRT_ASSIGN_OR_RETURN(std::string mode, with_op(op, attrs.get_string("mode", "nearest")));
  if (mode == "nearest") {
    a.mode = ResizeMode::Nearest;
  } else if (mode == "linear") {
    a.mode = ResizeMode::Linear;
  } else if (mode == "cubic") {
    a.mode = ResizeMode::Cubic;
  } else {
    return make_error(ErrorCode::InvalidArgument, "{}: mode '{}' is not nearest, linear or cubic", op, mode);
  }
  PLANRT_ASSIGN_OR_RETURN(std::string ctm,
                          with_op(op, attrs.get_string("coordinate_transformation_mode", "half_pixel")));
  constexpr std::pair<std::string_view, ResizeCoordinates> kCoordinates[] = {
      {"half_pixel", ResizeCoordinates::HalfPixel},
      {"half_pixel_symmetric", ResizeCoordinates::HalfPixelSymmetric},
      {"pytorch_half_pixel", ResizeCoordinates::PytorchHalfPixel},
      {"align_corners", ResizeCoordinates::AlignCorners},
      {"asymmetric", ResizeCoordinates::Asymmetric},
      {"tf_half_pixel_for_nn", ResizeCoordinates::TfHalfPixelForNn},
      {"tf_crop_and_resize", ResizeCoordinates::TfCropAndResize},
  };
  bool found = false;
  for (const auto& [name, value] : kCoordinates) {
    if (name == ctm) {
      a.coordinates = value;
      found = true;
    }
  }
  if (!found) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: coordinate_transformation_mode '{}' is not half_pixel, half_pixel_symmetric, "
                      "pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn or tf_crop_and_resize",
                      op, ctm);
  }
  PLANRT_ASSIGN_OR_RETURN(std::string nearest, with_op(op, attrs.get_string("nearest_mode", "round_prefer_floor")));
  if (nearest == "round_prefer_floor") {
    a.nearest = ResizeNearest::RoundPreferFloor;
  } else if (nearest == "round_prefer_ceil") {
    a.nearest = ResizeNearest::RoundPreferCeil;
  } else if (nearest == "floor") {
    a.nearest = ResizeNearest::Floor;
  } else if (nearest == "ceil") {
    a.nearest = ResizeNearest::Ceil;
  } else {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: nearest_mode '{}' is not round_prefer_floor, round_prefer_ceil, floor or ceil", op, nearest);
  }
  PLANRT_ASSIGN_OR_RETURN(a.cubic_a, with_op(op, attrs.get_float("cubic_coeff_a", -0.75)));
  if (!std::isfinite(a.cubic_a)) {
    return make_error(ErrorCode::InvalidArgument, "{}: cubic_coeff_a is {}, not a finite number", op, a.cubic_a);
  }
  PLANRT_ASSIGN_OR_RETURN(a.exclude_outside, with_op(op, attrs.get_bool("exclude_outside", false)));
  PLANRT_ASSIGN_OR_RETURN(a.extrapolation, with_op(op, attrs.get_float("extrapolation_value", 0.0)));
  if (attrs.has("sizes")) {
    PLANRT_ASSIGN_OR_RETURN(a.sizes, with_op(op, attrs.get_ints("sizes")));
    if (static_cast<int>(a.sizes.size()) != rank) {
      return make_error(ErrorCode::InvalidArgument, "{}: sizes has {} entries; x has rank {}", op, a.sizes.size(),
                        rank);
    }
    for (size_t d = 0; d < a.sizes.size(); ++d) {
      if (a.sizes[d] < -1) {
        return make_error(ErrorCode::InvalidArgument, "{}: sizes[{}] is {} (a size, or -1 to keep x's)", op, d,
                          a.sizes[d]);
      }
    }
  }
  if (attrs.has("scales")) {
    PLANRT_ASSIGN_OR_RETURN(std::string text, with_op(op, attrs.get_string("scales", "")));
    PLANRT_ASSIGN_OR_RETURN(a.scales, parse_float_list(text, fmt::format("{}: scales", op)));
    if (static_cast<int>(a.scales.size()) != rank) {
      return make_error(ErrorCode::InvalidArgument, "{}: scales has {} entries; x has rank {}", op, a.scales.size(),
                        rank);
    }
    for (size_t d = 0; d < a.scales.size(); ++d) {
      if (!(a.scales[d] > 0.0) || !std::isfinite(a.scales[d])) {
        return make_error(ErrorCode::InvalidArgument, "{}: scales[{}] is {}; scales are finite and > 0", op, d,
                          a.scales[d]);
      }
    }
  }
  if (attrs.has("roi")) {
    PLANRT_ASSIGN_OR_RETURN(std::string text, with_op(op, attrs.get_string("roi", "")));
    PLANRT_ASSIGN_OR_RETURN(a.roi, parse_float_list(text, fmt::format("{}: roi", op)));
    if (static_cast<int>(a.roi.size()) != 2 * rank) {
      return make_error(ErrorCode::InvalidArgument, "{}: roi has {} entries; x of rank {} needs {} (starts, then ends)",
                        op, a.roi.size(), rank, 2 * rank);
    }
    for (size_t d = 0; d < a.roi.size(); ++d) {
      if (!std::isfinite(a.roi[d])) {
        return make_error(ErrorCode::InvalidArgument, "{}: roi[{}] is {}, not a finite number", op, d, a.roi[d]);
      }
    }
  }
  if (a.sizes.empty() && a.scales.empty()) {
    return make_error(ErrorCode::InvalidArgument, "{}: needs sizes or scales (the output's shape)", op);
  }
  return a;
}

Result<int64_t> resize_output_size(const ResizeAttrs& a, int axis, int64_t in) {
  constexpr std::string_view op = "resize";
  int64_t out = 0;
  if (!a.sizes.empty()) {
    out = a.sizes[axis] < 0 ? in : a.sizes[axis];
  } else {
    // ONNX: (scales * x.shape).astype(int), in double.
    const double o = std::floor(static_cast<double>(in) * a.scales[axis]);
    if (!(o < 0x1p62)) {
      return make_error(ErrorCode::InvalidArgument, "{}: dim {} of size {} times scale {} is too large", op, axis, in,
                        a.scales[axis]);
    }
    out = static_cast<int64_t>(o);
  }
  if (in == 0 && out == 0) return out;
  if (in == 0) {
    return make_error(ErrorCode::InvalidArgument, "{}: dim {} is empty and cannot be interpolated to size {}", op,
                      axis, out);
  }
  if (out < 1) {
    return make_error(ErrorCode::InvalidArgument, "{}: dim {} of size {} resizes to {} (sizes are >= 1)", op, axis, in,
                      out);
  }
  return out;
}

ResizeTaps resize_taps(const ResizeAttrs& a, const ResizeAxis& ax, int64_t xi) {
  ResizeTaps t;
  const double x = static_cast<double>(xi);
  const double in = static_cast<double>(ax.in);
  const double out_w = ax.scale * in;  // ONNX's output_width: a float, not the output's size
  double xo = 0.0;
  switch (a.coordinates) {
    case ResizeCoordinates::HalfPixel:
      xo = (x + 0.5) / ax.scale - 0.5;
      break;
    case ResizeCoordinates::HalfPixelSymmetric: {
      const double adjustment = static_cast<double>(ax.out) / out_w;
      const double center = in / 2;
      const double offset = center * (1 - adjustment);
      xo = offset + (x + 0.5) / ax.scale - 0.5;
      break;
    }
    case ResizeCoordinates::PytorchHalfPixel:
      xo = out_w == 1.0 ? -0.5 : (x + 0.5) / ax.scale - 0.5;
      break;
    case ResizeCoordinates::AlignCorners:
      xo = out_w == 1.0 ? 0.0 : x * (in - 1) / (out_w - 1);
      break;
    case ResizeCoordinates::Asymmetric:
      xo = x / ax.scale;
      break;
    case ResizeCoordinates::TfHalfPixelForNn:
      xo = (x + 0.5) / ax.scale;
      break;
    case ResizeCoordinates::TfCropAndResize:
      xo = out_w == 1.0 ? (ax.roi_end - ax.roi_start) * (in - 1) / 2
                        : x * (ax.roi_end - ax.roi_start) * (in - 1) / (out_w - 1);
      xo += ax.roi_start * (in - 1);
      if (xo < 0 || xo > in - 1) {  // TF's CropAndResize: the extrapolation value
        t.outside = true;
        return t;
      }
      break;
  }
  // The taps: the n nearest indices of the edge-padded axis (pad n / 2 each side), ties to
  // the smaller; ratio in (0, 1] is xo's distance past the left neighbour.
  const int n = a.mode == ResizeMode::Cubic ? 4 : 2;
  const int64_t pad = n / 2;
  const double fl = std::floor(xo);
  const bool integral = xo == fl;
  const double ratio = integral ? 1.0 : xo - fl;
  double c[4] = {0, 0, 0, 0};
  switch (a.mode) {
    case ResizeMode::Nearest:
      if (integral) {
        c[1] = 1;
      } else {
        bool right = false;
        switch (a.nearest) {
          case ResizeNearest::RoundPreferFloor: right = ratio > 0.5; break;
          case ResizeNearest::RoundPreferCeil: right = ratio >= 0.5; break;
          case ResizeNearest::Floor: right = false; break;
          case ResizeNearest::Ceil: right = true; break;
        }
        c[right ? 1 : 0] = 1;
      }
      break;
    case ResizeMode::Linear:
      c[0] = 1 - ratio;
      c[1] = ratio;
      break;
    case ResizeMode::Cubic: {
      const double A = a.cubic_a;
      const double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
      c[0] = ((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A;
      c[1] = ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1;
      c[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
      c[3] = ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A;
      break;
    }
  }
  const double limit = static_cast<double>(ax.in + pad + n);
  const double cx = std::ceil(std::clamp(xo, -limit, limit));
  int64_t base = static_cast<int64_t>(cx) - pad;
  if (base < -pad) base = -pad;
  if (base + n - 1 > ax.in + pad - 1) base = ax.in + pad - n;
  if (a.exclude_outside) {
    double sum = 0;
    for (int j = 0; j < n; ++j) {
      const int64_t idx = base + j;
      if (idx < 0 || idx >= ax.in) c[j] = 0;
      sum += c[j];
    }
    for (int j = 0; j < n; ++j) c[j] /= sum;
  }
  for (int j = 0; j < n; ++j) {
    if (c[j] == 0) continue;
    const int64_t idx = std::clamp<int64_t>(base + j, 0, ax.in - 1);
    int k = 0;
    while (k < t.count && t.index[k] != idx) ++k;
    if (k == t.count) {
      t.index[t.count] = idx;
      t.weight[t.count] = 0;
      ++t.count;
    }
    t.weight[k] += c[j];
  }
  return t;
}

Result<ResizePlan> plan_resize(const OpAttrs& attrs, std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs) {
  constexpr std::string_view op = "resize";
  const TensorView& x = inputs[0];
  if (x.rank() == 0) {
    return make_error(ErrorCode::InvalidArgument, "{}: x is a scalar; it needs a dim to resize ({})", op,
                      describe_inputs(op, inputs));
  }
  ResizePlan p;
  PLANRT_ASSIGN_OR_RETURN(p.attrs, parse_resize_attrs(attrs, x.rank()));
  Shape shape;
  for (int d = 0; d < x.rank(); ++d) {
    Result<int64_t> out = resize_output_size(p.attrs, d, x.sizes[d]);
    if (!out.ok()) return out.status();
    PLANRT_RETURN_IF_ERROR(append_dim(op, shape, *out));
    ResizeAxis axis;
    axis.in = x.sizes[d];
    axis.out = *out;
    axis.scale = !p.attrs.scales.empty() ? p.attrs.scales[d]
                 : axis.in > 0           ? static_cast<double>(axis.out) / static_cast<double>(axis.in)
                                         : 1.0;
    if (!p.attrs.roi.empty()) {
      axis.roi_start = p.attrs.roi[d];
      axis.roi_end = p.attrs.roi[d + x.rank()];
    }
    axis.identity = axis.in == axis.out;
    for (int64_t i = 0; axis.identity && i < axis.out; ++i) {
      const ResizeTaps t = resize_taps(p.attrs, axis, i);
      axis.identity = !t.outside && t.count == 1 && t.index[0] == i && t.weight[0] == 1.0;
    }
    p.axes.push_back(axis);
  }
  PLANRT_RETURN_IF_ERROR(check_output(op, inputs, outputs[0], x.dtype, shape));
  return p;
}

}  // namespace planrt::kernels
