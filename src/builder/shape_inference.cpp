#include "builder/shape_inference.h"

#include <algorithm>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "builder/sym_shape.h"
#include "kernels/elementwise_ops.h"
#include "kernels/op_plans.h"

namespace planrt::builder::ir {
namespace {

Status bad(std::string message) { return Status(ErrorCode::InvalidArgument, std::move(message)); }

struct Ctx {
  std::span<const Operand> in;
  const Attrs& attrs;
  std::span<const DimDecl> dims;
  InferredNode out;
  std::string_view op;

  const TensorType& type(size_t i) const { return *in[i].type; }
  const SymShape& shape(size_t i) const { return in[i].type->shape; }
  bool present(size_t i) const { return i < in.size() && in[i].type != nullptr; }
  std::string shape_str(const SymShape& s) const { return shape_to_string(s, dims); }
  std::string describe(size_t i) const {
    return fmt::format("operand {} '{}' ({})", i, in[i].name, type_to_string(type(i), dims));
  }
};

// ---- attributes -------------------------------------------------------------------------

const AttrValue* find_attr(const Ctx& c, std::string_view name) {
  auto it = c.attrs.find(name);
  return it == c.attrs.end() ? nullptr : &it->second;
}

Result<int64_t> attr_int(const Ctx& c, std::string_view name, std::optional<int64_t> fallback) {
  const AttrValue* v = find_attr(c, name);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return bad(fmt::format("missing attribute '{}' (an integer)", name));
  }
  if (const auto* i = std::get_if<int64_t>(v)) return *i;
  return bad(fmt::format("attribute '{}' must be an integer", name));
}

Result<double> attr_float(const Ctx& c, std::string_view name, double fallback) {
  const AttrValue* v = find_attr(c, name);
  if (v == nullptr) return fallback;
  if (const auto* d = std::get_if<double>(v)) return *d;
  if (const auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  return bad(fmt::format("attribute '{}' must be a number", name));
}

Result<bool> attr_bool(const Ctx& c, std::string_view name, bool fallback) {
  const AttrValue* v = find_attr(c, name);
  if (v == nullptr) return fallback;
  if (const auto* b = std::get_if<bool>(v)) return *b;
  return bad(fmt::format("attribute '{}' must be true or false", name));
}

Result<std::vector<int64_t>> attr_ints(const Ctx& c, std::string_view name) {
  const AttrValue* v = find_attr(c, name);
  if (v == nullptr) return bad(fmt::format("missing attribute '{}' (a list of integers)", name));
  if (const auto* ints = std::get_if<std::vector<int64_t>>(v)) return *ints;
  return bad(fmt::format("attribute '{}' must be a list of integers", name));
}

// The `shape` attribute of reshape and expand: integers, or integers and dim names.
Result<ShapeSpec> shape_spec_attr(const Ctx& c, std::string_view what) {
  const AttrValue* v = find_attr(c, "shape");
  if (v == nullptr) return bad(fmt::format("missing attribute 'shape' ({})", what));
  if (const auto* ints = std::get_if<std::vector<int64_t>>(v)) {
    ShapeSpec spec;
    for (int64_t i : *ints) spec.push_back({i, ""});
    return spec;
  }
  if (const auto* s = std::get_if<ShapeSpec>(v)) return *s;
  return bad("attribute 'shape' must be a list of integers and dim names");
}

// PyTorch's negative dims count from the end; the program carries them non-negative.
Result<int64_t> normalize_dim(int64_t d, size_t rank, std::string_view what) {
  auto r = static_cast<int64_t>(rank);
  if (d < -r || d >= r) {
    return bad(fmt::format("{} {} is out of range for rank {} (expected {}..{})", what, d, rank,
                           -r, r - 1));
  }
  return d < 0 ? d + r : d;
}

// ---- operand checks ---------------------------------------------------------------------

Status same_dtype(const Ctx& c, size_t first = 0) {
  for (size_t i = first + 1; i < c.in.size(); ++i) {
    if (c.present(i) && c.type(i).dtype != c.type(first).dtype) {
      return bad(fmt::format("dtype mismatch: {} but {}", c.describe(i), c.describe(first)));
    }
  }
  return {};
}

Status floating(const Ctx& c, size_t i) {
  if (!is_floating(c.type(i).dtype)) {
    return bad(fmt::format("{} must be a floating-point tensor (f32, f16, bf16)", c.describe(i)));
  }
  return {};
}

Status rank_at_least(const Ctx& c, size_t i, size_t rank) {
  if (c.shape(i).size() < rank) {
    return bad(fmt::format("{} must have rank >= {}", c.describe(i), rank));
  }
  return {};
}

Status rank_is(const Ctx& c, size_t i, size_t rank) {
  if (c.shape(i).size() != rank) {
    return bad(fmt::format("{} must have rank {}", c.describe(i), rank));
  }
  return {};
}

// An optional per-feature parameter (norm weight, bias) must be [features].
Status is_vector_of(const Ctx& c, size_t i, Dim features, std::string_view what) {
  if (!c.present(i)) return {};
  if (c.shape(i) != SymShape{features}) {
    return bad(fmt::format("{} must have shape {} ({})", c.describe(i), c.shape_str({features}),
                           what));
  }
  return {};
}

InferredNode& emit(Ctx& c, TensorType out) {
  c.out.outputs.push_back(std::move(out));
  return c.out;
}

// ---- rules ------------------------------------------------------------------------------

Status not_bool(const Ctx& c, size_t i) {
  if (c.type(i).dtype == DType::Bool) {
    return bad(fmt::format("{} is bool; arithmetic takes numbers (cast it first)", c.describe(i)));
  }
  return {};
}

Result<InferredNode> elementwise_binary(Ctx& c) {
  PLANRT_RETURN_IF_ERROR(same_dtype(c));
  PLANRT_RETURN_IF_ERROR(not_bool(c, 0));
  PLANRT_ASSIGN_OR_RETURN(SymShape s, broadcast_shapes(c.shape(0), c.shape(1), c.dims));
  return emit(c, {c.type(0).dtype, std::move(s)});
}

Result<InferredNode> unary_floating(Ctx& c) {
  PLANRT_RETURN_IF_ERROR(floating(c, 0));
  return emit(c, c.type(0));
}

Result<InferredNode> relu(Ctx& c) { return emit(c, c.type(0)); }

// neg: any number (integers wrap).
Result<InferredNode> unary_numeric(Ctx& c) {
  PLANRT_RETURN_IF_ERROR(not_bool(c, 0));
  return emit(c, c.type(0));
}

// The typed elementwise family (kernels/elementwise_ops.h): its dtype rule, every input
// broadcast.
Result<InferredNode> typed_elementwise(const kernels::ElementwiseOp& op, Ctx& c) {
  std::optional<DType> cast_to;
  if (op.rule == kernels::ElementwiseRule::Cast) {
    const AttrValue* v = find_attr(c, "dtype");
    const auto* name = v == nullptr ? nullptr : std::get_if<std::string>(v);
    if (name == nullptr) return bad("attribute 'dtype' (a string: the dtype to cast to) is required");
    Result<DType> d = parse_dtype(*name);
    if (!d.ok()) return bad(fmt::format("attribute 'dtype': {}", d.status().message()));
    cast_to = *d;
  }
  for (std::string_view flag : {"positive", "negative", "fmod"}) {
    if (find_attr(c, flag) != nullptr) PLANRT_RETURN_IF_ERROR(attr_bool(c, flag, true).status());
  }
  for (const kernels::ElementwiseParam& p : op.params) {
    if (!p.name.empty()) PLANRT_RETURN_IF_ERROR(attr_float(c, p.name, p.fallback).status());
  }
  if (op.fn == kernels::ElementwiseFn::Celu) {
    PLANRT_ASSIGN_OR_RETURN(double alpha, attr_float(c, "alpha", 1.0));
    if (alpha == 0.0) return bad("attribute 'alpha' is 0 (celu divides by it)");
  }
  std::vector<DType> dtypes;
  for (size_t i = 0; i < c.in.size(); ++i) dtypes.push_back(c.type(i).dtype);
  Result<DType> out = kernels::elementwise_output_dtype(op, dtypes, cast_to);
  if (!out.ok()) {
    std::string operands;
    for (size_t i = 0; i < c.in.size(); ++i) operands += (i ? "; " : "") + c.describe(i);
    return bad(fmt::format("{} ({})", out.status().message(), operands));
  }
  SymShape shape = c.shape(0);
  for (size_t i = 1; i < c.in.size(); ++i) {
    PLANRT_ASSIGN_OR_RETURN(shape, broadcast_shapes(shape, c.shape(i), c.dims));
  }
  return emit(c, {*out, std::move(shape)});
}

Result<InferredNode> gelu(Ctx& c) {
  PLANRT_RETURN_IF_ERROR(floating(c, 0));
  if (const AttrValue* v = find_attr(c, "approximate")) {
    const auto* s = std::get_if<std::string>(v);
    if (s == nullptr || (*s != "none" && *s != "tanh")) {
      return bad("attribute 'approximate' must be \"none\" or \"tanh\"");
    }
  }
  return emit(c, c.type(0));
}

Result<InferredNode> softmax(Ctx& c) {
  PLANRT_RETURN_IF_ERROR(floating(c, 0));
  PLANRT_RETURN_IF_ERROR(rank_at_least(c, 0, 1));
  PLANRT_ASSIGN_OR_RETURN(int64_t dim, attr_int(c, "dim", -1));
  PLANRT_ASSIGN_OR_RETURN(dim, normalize_dim(dim, c.shape(0).size(), "attribute 'dim'"));
  c.out.attrs["dim"] = dim;
  return emit(c, c.type(0));
}

// The reductions (reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod) over
// adjacent dims (the kernels' limit, checked here so that a model fails at build time);
// keepdim keeps them as size 1, as torch.sum(x, dims, keepdim).
Result<InferredNode> reduce(Ctx& c) {
  PLANRT_RETURN_IF_ERROR(floating(c, 0));
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, attr_ints(c, "dims"));
  PLANRT_ASSIGN_OR_RETURN(bool keepdim, attr_bool(c, "keepdim", false));
  const SymShape& x = c.shape(0);
  if (dims.empty()) return bad("attribute 'dims' is empty (reduce at least one dim)");
  for (int64_t& d : dims) {
    PLANRT_ASSIGN_OR_RETURN(d, normalize_dim(d, x.size(), "attribute 'dims' entry"));
  }
  std::sort(dims.begin(), dims.end());
  for (size_t i = 1; i < dims.size(); ++i) {
    if (dims[i] != dims[i - 1] + 1) {
      return bad(fmt::format("attribute 'dims' {} and {} of {} are not adjacent ({} "
                             "reduces one run of adjacent dims)", dims[i - 1], dims[i],
                             c.describe(0), c.op));
    }
  }
  SymShape out;
  for (size_t d = 0; d < x.size(); ++d) {
    const bool reduced = static_cast<int64_t>(d) >= dims.front() && static_cast<int64_t>(d) <= dims.back();
    if (!reduced) {
      out.push_back(x[d]);
    } else if (keepdim) {
      out.push_back(Dim::fixed(1));
    }
  }
  c.out.attrs["dims"] = dims;
  c.out.attrs["keepdim"] = keepdim;
  return emit(c, {c.type(0).dtype, std::move(out)});
}

// argmax, argmin along `dim` (default 0): an i64 index per line, the dim dropped or kept as
// 1 (keepdim, default false, as torch.argmax); the dim must not be empty.
Result<InferredNode> arg_reduce(Ctx& c) {
  PLANRT_RETURN_IF_ERROR(floating(c, 0));
  PLANRT_ASSIGN_OR_RETURN(int64_t dim, attr_int(c, "dim", 0));
  PLANRT_ASSIGN_OR_RETURN(bool keepdim, attr_bool(c, "keepdim", false));
  PLANRT_ASSIGN_OR_RETURN(bool last, attr_bool(c, "select_last_index", false));
  const SymShape& x = c.shape(0);
  PLANRT_ASSIGN_OR_RETURN(dim, normalize_dim(dim, x.size(), "attribute 'dim'"));
  SymShape out;
  for (size_t d = 0; d < x.size(); ++d) {
    if (static_cast<int64_t>(d) != dim) {
      out.push_back(x[d]);
      continue;
    }
    if (max_size(x[d], c.dims) == 0) {
      return bad(fmt::format("{} has no elements along dim {}: there is no index to return",
                             c.describe(0), dim));
    }
    if (keepdim) out.push_back(Dim::fixed(1));
  }
  c.out.attrs["dim"] = dim;
  c.out.attrs["keepdim"] = keepdim;
  c.out.attrs["select_last_index"] = last;
  return emit(c, {DType::I64, std::move(out)});
}

// cumsum along `dim` (required): x's type; any number but bool.
Result<InferredNode> cumsum(Ctx& c) {
  PLANRT_RETURN_IF_ERROR(not_bool(c, 0));
  PLANRT_ASSIGN_OR_RETURN(int64_t dim, attr_int(c, "dim", std::nullopt));
  PLANRT_ASSIGN_OR_RETURN(dim, normalize_dim(dim, c.shape(0).size(), "attribute 'dim'"));
  PLANRT_ASSIGN_OR_RETURN(bool exclusive, attr_bool(c, "exclusive", false));
  PLANRT_ASSIGN_OR_RETURN(bool reverse, attr_bool(c, "reverse", false));
  c.out.attrs["dim"] = dim;
  c.out.attrs["exclusive"] = exclusive;
  c.out.attrs["reverse"] = reverse;
  return emit(c, c.type(0));
}

Result<InferredNode> norm(Ctx& c, bool has_bias, double default_eps) {
  PLANRT_RETURN_IF_ERROR(floating(c, 0));
  PLANRT_RETURN_IF_ERROR(rank_at_least(c, 0, 1));
  PLANRT_RETURN_IF_ERROR(same_dtype(c));
  Dim features = c.shape(0).back();
  PLANRT_RETURN_IF_ERROR(is_vector_of(c, 1, features, "the normalized last dim"));
  if (has_bias) PLANRT_RETURN_IF_ERROR(is_vector_of(c, 2, features, "the normalized last dim"));
  PLANRT_ASSIGN_OR_RETURN(double eps, attr_float(c, "eps", default_eps));
  if (!(eps >= 0)) return bad(fmt::format("attribute 'eps' must be >= 0, got {}", eps));
  c.out.attrs["eps"] = eps;
  return emit(c, c.type(0));
}
// The defaults are the CPU kernels' (and PyTorch's for layer_norm); the program always
// carries the value used.
Result<InferredNode> layer_norm(Ctx& c) { return norm(c, true, 1e-5); }
Result<InferredNode> rms_norm(Ctx& c) { return norm(c, false, 1e-6); }

Result<InferredNode> linear(Ctx& c) {
  PLANRT_RETURN_IF_ERROR(floating(c, 0));
  PLANRT_RETURN_IF_ERROR(same_dtype(c));
  PLANRT_RETURN_IF_ERROR(rank_at_least(c, 0, 1));
  PLANRT_RETURN_IF_ERROR(rank_is(c, 1, 2));
  const SymShape& x = c.shape(0);
  const SymShape& w = c.shape(1);
  if (x.back() != w[1]) {
    return bad(fmt::format("shape mismatch: {} has {} input features but {} expects {} "
                           "(weight is [out, in])",
                           c.describe(0), c.shape_str({x.back()}), c.describe(1),
                           c.shape_str({w[1]})));
  }
  PLANRT_RETURN_IF_ERROR(is_vector_of(c, 2, w[0], "the weight's output features"));
  // A fused activation (the builder's host fusion, rewrite.h; written by hand too).
  std::string activation = "none";
  if (const AttrValue* act = find_attr(c, "activation")) {
    const auto* name = std::get_if<std::string>(act);
    if (name == nullptr || (*name != "none" && *name != "relu" && *name != "gelu")) {
      return bad("attribute 'activation' must be \"none\", \"relu\" or \"gelu\"");
    }
    activation = *name;
  }
  if (const AttrValue* v = find_attr(c, "approximate")) {
    const auto* s = std::get_if<std::string>(v);
    if (activation != "gelu") return bad("attribute 'approximate' needs activation gelu");
    if (s == nullptr || (*s != "none" && *s != "tanh")) return bad("attribute 'approximate' must be \"none\" or \"tanh\"");
  }
  SymShape out(x.begin(), x.end() - 1);
  out.push_back(w[0]);
  return emit(c, {c.type(0).dtype, std::move(out)});
}

Result<InferredNode> matmul(Ctx& c) {
  PLANRT_RETURN_IF_ERROR(floating(c, 0));
  PLANRT_RETURN_IF_ERROR(same_dtype(c));
  PLANRT_RETURN_IF_ERROR(rank_at_least(c, 0, 1));
  PLANRT_RETURN_IF_ERROR(rank_at_least(c, 1, 1));
  // 1-D operands are promoted to matrices and the added dim dropped again (torch.matmul).
  SymShape a = c.shape(0), b = c.shape(1);
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), Dim::fixed(1));
  if (b_vec) b.push_back(Dim::fixed(1));
  if (a.back() != b[b.size() - 2]) {
    return bad(fmt::format("shape mismatch: {} and {} cannot be multiplied (inner dims {} vs {})",
                           c.describe(0), c.describe(1), c.shape_str({a.back()}),
                           c.shape_str({b[b.size() - 2]})));
  }
  SymShape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  auto batch = broadcast_shapes(a_batch, b_batch, c.dims);
  if (!batch.ok()) return batch.status().with_context("batch dims");
  SymShape out = *batch;
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b.back());
  return emit(c, {c.type(0).dtype, std::move(out)});
}

Result<InferredNode> reshape(Ctx& c) {
  PLANRT_ASSIGN_OR_RETURN(ShapeSpec spec, shape_spec_attr(c, "integers, dim names, one -1"));
  SymShape out(spec.size());
  std::optional<size_t> infer;
  for (size_t i = 0; i < spec.size(); ++i) {
    const ShapeItem& item = spec[i];
    if (!item.name.empty()) {
      auto it = std::find_if(c.dims.begin(), c.dims.end(),
                             [&](const DimDecl& d) { return d.name == item.name; });
      if (it == c.dims.end()) {
        return bad(fmt::format("attribute 'shape' entry {} names dim '{}', which the method does "
                               "not declare", i, item.name));
      }
      out[i] = Dim::named(static_cast<int32_t>(it - c.dims.begin()));
    } else if (item.value == -1) {
      if (infer) return bad("attribute 'shape' has more than one -1");
      infer = i;
    } else if (item.value < 1) {
      return bad(fmt::format("attribute 'shape' entry {} is {} (sizes are >= 1, or -1)", i,
                             item.value));
    } else {
      out[i] = Dim::fixed(item.value);
    }
  }
  PLANRT_ASSIGN_OR_RETURN(Monomial have, numel(c.shape(0)));
  SymShape known;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!infer || i != *infer) known.push_back(out[i]);
  }
  PLANRT_ASSIGN_OR_RETURN(Monomial want, numel(known));
  if (infer) {
    auto q = divide(have, want);
    if (!q.ok()) {
      return bad(fmt::format("reshape of {} to {}: the -1 entry would be {} / {}, which {}",
                             c.describe(0), c.shape_str(known), monomial_to_string(have, c.dims),
                             monomial_to_string(want, c.dims), q.status().message()));
    }
    out[*infer] = *q;
  } else if (have != want) {
    return bad(fmt::format("reshape of {} to {}: element counts differ ({} vs {})", c.describe(0),
                           c.shape_str(out), monomial_to_string(have, c.dims),
                           monomial_to_string(want, c.dims)));
  }
  // The runtime takes the output's size from its DimRefs; the attribute is informative and
  // can only carry one unknown entry.
  std::vector<int64_t> emitted;
  size_t symbolic = 0;
  for (const Dim& d : out) {
    emitted.push_back(d.is_static() ? d.value : -1);
    symbolic += d.is_static() ? 0 : 1;
  }
  if (symbolic <= 1) {
    c.out.attrs["shape"] = std::move(emitted);
  } else {
    c.out.attrs.erase("shape");
  }
  return emit(c, {c.type(0).dtype, std::move(out)});
}

Result<InferredNode> permute(Ctx& c) {
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> perm, attr_ints(c, "dims"));
  const SymShape& x = c.shape(0);
  if (perm.size() != x.size()) {
    return bad(fmt::format("attribute 'dims' has {} entries but {} has rank {}", perm.size(),
                           c.describe(0), x.size()));
  }
  std::vector<bool> seen(x.size(), false);
  SymShape out;
  for (int64_t& d : perm) {
    PLANRT_ASSIGN_OR_RETURN(d, normalize_dim(d, x.size(), "attribute 'dims' entry"));
    if (seen[d]) return bad(fmt::format("attribute 'dims' names dim {} twice", d));
    seen[d] = true;
    out.push_back(x[d]);
  }
  c.out.attrs["dims"] = perm;
  return emit(c, {c.type(0).dtype, std::move(out)});
}

Result<InferredNode> transpose(Ctx& c) {
  SymShape x = c.shape(0);
  PLANRT_ASSIGN_OR_RETURN(int64_t d0, attr_int(c, "dim0", std::nullopt));
  PLANRT_ASSIGN_OR_RETURN(int64_t d1, attr_int(c, "dim1", std::nullopt));
  PLANRT_ASSIGN_OR_RETURN(d0, normalize_dim(d0, x.size(), "attribute 'dim0'"));
  PLANRT_ASSIGN_OR_RETURN(d1, normalize_dim(d1, x.size(), "attribute 'dim1'"));
  std::swap(x[d0], x[d1]);
  c.out.attrs["dim0"] = d0;
  c.out.attrs["dim1"] = d1;
  return emit(c, {c.type(0).dtype, std::move(x)});
}

Result<InferredNode> sdpa(Ctx& c) {
  // layout "bhsd" (the default): [..., S, D] with equal leading dims, usually [B, H], or one
  // merged [B*H] as exporters of nn.MultiheadAttention write. layout "bshd": [..., S, H, D],
  // the heads of a position side by side (kernels/attention_layout.h); layout "sbhd": [S,
  // ..., H, D], the batch dims between the sequence and the heads (a sequence-first model's
  // rows). With attribute heads = H (bshd, sbhd) the last two dims are one, [..., H * D], and
  // one input alone is a packed projection [..., 3 * H * D].
  bool seq_major = false, seq_first = false;
  if (const AttrValue* l = find_attr(c, "layout")) {
    const auto* name = std::get_if<std::string>(l);
    if (name == nullptr || (*name != "bhsd" && *name != "bshd" && *name != "sbhd")) {
      return bad("attribute 'layout' must be \"bhsd\", \"bshd\" or \"sbhd\"");
    }
    seq_first = *name == "sbhd";
    seq_major = *name == "bshd" || seq_first;
    if (seq_major) c.out.attrs["layout"] = *name;  // kept only when not the default
  }
  PLANRT_ASSIGN_OR_RETURN(int64_t heads, attr_int(c, "heads", 0));
  // Inputs q, k, v, mask?; or one packed q|k|v input with k and v absent (then mask?).
  const bool packed = c.in.size() == 1 || (c.in.size() > 2 && !c.present(1) && !c.present(2));
  if (c.in.size() == 2) return bad("takes q, k, v and an optional mask; or packed q|k|v, absent k and v, and a mask");
  if (heads < 0 || (heads > 0 && !seq_major) || (packed && heads == 0)) {
    return bad(fmt::format("attribute 'heads' ({}) must be positive, and needs layout \"bshd\" or \"sbhd\"; one "
                           "packed q|k|v input needs it",
                           heads));
  }
  if (heads > 0) c.out.attrs["heads"] = heads;
  if (!packed && (!c.present(1) || !c.present(2))) {
    return bad("expected q, k and v, or one packed q|k|v input alone with attribute 'heads'");
  }
  const size_t operands = packed ? 1 : 3;
  PLANRT_RETURN_IF_ERROR(rank_at_least(c, 0, heads > 0 ? 2 : 3));
  if (heads > 0 && c.shape(0).size() >= static_cast<size_t>(kMaxRank)) {
    return bad(fmt::format("{}: attribute 'heads' splits the last dim, so operands have rank at most {}",
                           c.describe(0), kMaxRank - 1));
  }
  for (size_t i = 1; i < operands; ++i) PLANRT_RETURN_IF_ERROR(rank_is(c, i, c.shape(0).size()));
  PLANRT_RETURN_IF_ERROR(floating(c, 0));
  for (size_t i = 1; i < operands; ++i) {
    if (c.type(i).dtype != c.type(0).dtype) {
      return bad(fmt::format("dtype mismatch: {} but {}", c.describe(i), c.describe(0)));
    }
  }
  // The operands as [..., S, H, D] (attribute heads: split from a static last dim).
  std::vector<SymShape> qkv;
  for (size_t i = 0; i < 3; ++i) {
    const size_t from = packed ? 0 : i;
    SymShape s = c.shape(from);
    if (heads > 0) {
      const Dim last = s.back();
      const int64_t parts = packed ? 3 : 1;
      if (!last.is_static() || heads > last.value / parts || last.value % (parts * heads) != 0) {
        return bad(fmt::format("{}: attribute heads = {} needs a static last dim that is a multiple of {} x {}",
                               c.describe(from), heads, parts, heads));
      }
      s.back() = Dim::fixed(heads);
      s.push_back(Dim::fixed(last.value / (parts * heads)));
    }
    qkv.push_back(std::move(s));
  }
  const SymShape &q = qkv[0], &k = qkv[1], &v = qkv[2];
  const size_t r = q.size();
  const size_t seq = seq_first ? 0 : seq_major ? r - 3 : r - 2;  // the sequence dim
  auto mismatch = [&](size_t a, size_t b, std::string_view what) {
    return bad(fmt::format("shape mismatch: {} and {} differ in {} ({})", c.describe(a), c.describe(b), what,
                           seq_first   ? "layout sbhd: q, k, v are [S, ..., H, D] with equal batch dims, "
                                         "usually [S, B, H, D]"
                           : seq_major ? "layout bshd: q, k, v are [..., S, H, D] with equal leading dims, "
                                         "usually [B, S, H, D]"
                                       : "q, k, v are [..., S, D] with equal leading dims, usually [B, H, S, D]"));
  };
  // The batch dims: before the sequence dim, or (sbhd) between it and the heads.
  const size_t batch_begin = seq_first ? 1 : 0, batch_end = seq_first ? r - 2 : seq;
  for (size_t d = batch_begin; d < batch_end; ++d) {
    if (k[d] != q[d] || v[d] != q[d]) return mismatch(0, k[d] != q[d] ? 1 : 2, fmt::format("{} dim {}", seq_first ? "batch" : "leading", d));
  }
  if (seq_major && (k[r - 2] != q[r - 2] || v[r - 2] != q[r - 2])) {
    return mismatch(0, k[r - 2] != q[r - 2] ? 1 : 2, "heads");
  }
  if (k[r - 1] != q[r - 1]) return mismatch(0, 1, "head dim");
  if (v[seq] != k[seq]) return mismatch(1, 2, "sequence length");
  if (c.present(3)) {
    // The mask broadcasts to the scores [batch dims..., H, Sq, Sk] in every layout
    // (kernels/attention_layout.h), bool (true: attend) or additive in q's dtype.
    if (c.type(3).dtype != DType::Bool && c.type(3).dtype != c.type(0).dtype) {
      return bad(fmt::format("{}: a mask is bool (true: attend) or {} like q (added to the scores)",
                             c.describe(3), dtype_name(c.type(0).dtype)));
    }
    SymShape scores;
    for (size_t d = batch_begin; d < batch_end; ++d) scores.push_back(q[d]);
    if (seq_major) scores.push_back(q[r - 2]);
    scores.push_back(q[seq]);
    scores.push_back(k[seq]);
    auto b = broadcast_shapes(c.shape(3), scores, c.dims);
    if (!b.ok() || *b != scores || c.shape(3).size() < 2 || c.shape(3).back() != k[seq]) {
      return bad(fmt::format("{} does not broadcast to the scores' shape {} (its last dim the keys)", c.describe(3),
                             c.shape_str(scores)));
    }
    // Its batch dims (before the heads') are all 1 or all the scores' (kernels::plan_attention_mask).
    const SymShape& ms = c.shape(3);
    const size_t lead = ms.size() - 2, batch_dims = scores.size() - 3;
    bool all_one = true, all_equal = lead == scores.size() - 2;
    for (size_t i = 0; i + 1 < lead; ++i) {
      all_one = all_one && ms[i] == Dim::fixed(1);
      all_equal = all_equal && ms[i] == scores[batch_dims + 1 - lead + i];
    }
    if (!all_one && !all_equal) {
      return bad(fmt::format("{}: a mask's batch dims are all 1 or all those of the scores {}", c.describe(3),
                             c.shape_str(scores)));
    }
  }
  PLANRT_ASSIGN_OR_RETURN(bool causal, attr_bool(c, "causal", false));
  c.out.attrs["causal"] = causal;
  if (find_attr(c, "scale") != nullptr) {
    PLANRT_ASSIGN_OR_RETURN(double scale, attr_float(c, "scale", 0.0));
    c.out.attrs["scale"] = scale;
  }
  if (find_attr(c, "fused") != nullptr) {  // kept only when given: the default is fused
    PLANRT_ASSIGN_OR_RETURN(bool fused, attr_bool(c, "fused", true));
    c.out.attrs["fused"] = fused;
  }
  SymShape out = c.shape(0);  // q's, with the value dim: [..., S, H, Dv] or [..., S, H x Dv]
  out.back() = heads > 0 ? Dim::fixed(heads * v[r - 1].value) : v[r - 1];
  return emit(c, {c.type(0).dtype, std::move(out)});
}

Result<InferredNode> embedding(Ctx& c) {
  DType ids = c.type(0).dtype;
  if (ids != DType::I32 && ids != DType::I64) {
    return bad(fmt::format("{} must hold indices (i32 or i64)", c.describe(0)));
  }
  PLANRT_RETURN_IF_ERROR(rank_is(c, 1, 2));
  SymShape out = c.shape(0);
  out.push_back(c.shape(1)[1]);
  return emit(c, {c.type(1).dtype, std::move(out)});
}

Result<InferredNode> concat(Ctx& c) {
  if (c.in.empty()) return bad("concat needs at least one operand");
  PLANRT_RETURN_IF_ERROR(same_dtype(c));
  PLANRT_RETURN_IF_ERROR(rank_at_least(c, 0, 1));
  SymShape out = c.shape(0);
  PLANRT_ASSIGN_OR_RETURN(int64_t dim, attr_int(c, "dim", 0));
  PLANRT_ASSIGN_OR_RETURN(dim, normalize_dim(dim, out.size(), "attribute 'dim'"));
  for (size_t i = 1; i < c.in.size(); ++i) {
    const SymShape& s = c.shape(i);
    if (s.size() != out.size()) {
      return bad(fmt::format("rank mismatch: {} but {}", c.describe(i), c.describe(0)));
    }
    for (size_t d = 0; d < s.size(); ++d) {
      if (static_cast<int64_t>(d) == dim) {
        if (!add_dims(out[d], s[d], &out[d])) {
          return bad(fmt::format("concatenating {} along dim {} gives a size that is not a "
                                 "multiple of one named dim",
                                 c.describe(i), dim));
        }
      } else if (s[d] != out[d]) {
        return bad(fmt::format("shape mismatch: {} differs from {} in dim {} (only dim {} may "
                               "differ)", c.describe(i), c.describe(0), d, dim));
      }
    }
  }
  c.out.attrs["dim"] = dim;
  return emit(c, {c.type(0).dtype, std::move(out)});
}

Result<InferredNode> slice(Ctx& c) {
  SymShape x = c.shape(0);
  PLANRT_RETURN_IF_ERROR(rank_at_least(c, 0, 1));
  PLANRT_ASSIGN_OR_RETURN(int64_t dim, attr_int(c, "dim", 0));
  PLANRT_ASSIGN_OR_RETURN(dim, normalize_dim(dim, x.size(), "attribute 'dim'"));
  PLANRT_ASSIGN_OR_RETURN(int64_t start, attr_int(c, "start", 0));
  if (const AttrValue* e = find_attr(c, "end"); e != nullptr && std::holds_alternative<std::string>(*e)) {
    // [0:D] with D a named dim: the output is D long; the program carries no end (the kernel
    // takes the length from the output).
    const std::string& name = std::get<std::string>(*e);
    auto it = std::find_if(c.dims.begin(), c.dims.end(), [&](const DimDecl& d) { return d.name == name; });
    if (it == c.dims.end()) {
      return bad(fmt::format("attribute 'end' names dim '{}', which the method does not declare", name));
    }
    const Dim d = x[dim];
    const Dim length = Dim::named(static_cast<int32_t>(it - c.dims.begin()));
    if (start != 0) return bad(fmt::format("a slice to dim '{}' must start at 0, not {}", name, start));
    if (d != length && !(d.is_static() && d.value >= it->max)) {
      return bad(fmt::format("slice [0:{}] of dim {} ({}) of {}: {} may reach {}, past the dim", name,
                             dim, c.shape_str({d}), c.describe(0), name, it->max));
    }
    x[dim] = length;
    c.out.attrs["dim"] = dim;
    c.out.attrs["start"] = int64_t{0};
    c.out.attrs.erase("end");
    return emit(c, {c.type(0).dtype, std::move(x)});
  }
  PLANRT_ASSIGN_OR_RETURN(int64_t end, attr_int(c, "end", std::numeric_limits<int64_t>::max()));
  PLANRT_ASSIGN_OR_RETURN(int64_t step, attr_int(c, "step", 1));
  if (step != 1) return bad(fmt::format("attribute 'step' is {}; only step 1 is supported", step));
  Dim d = x[dim];
  if (d.is_static()) {
    // Python slice clamping, as torch.narrow-free indexing x[start:end] does.
    auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + d.value : i, int64_t{0}, d.value); };
    start = clamp(start);
    end = clamp(end);
    if (end <= start) {
      return bad(fmt::format("slice [{}:{}] of dim {} (size {}) of {} is empty", start, end, dim,
                             d.value, c.describe(0)));
    }
    x[dim] = Dim::fixed(end - start);
  } else {
    // Bounds on a named dim are expressible only when they do not depend on its value.
    int64_t lo = min_size(d, c.dims), hi = max_size(d, c.dims);
    if (start < 0 || end < 0) {
      return bad(fmt::format("slice of dim {} ({}) of {}: negative bounds on a named dim are not "
                             "expressible", dim, c.shape_str({d}), c.describe(0)));
    }
    if (start == 0 && end >= hi) {
      // The whole dim: keeps its symbolic size.
    } else if (end <= lo && start < end) {
      x[dim] = Dim::fixed(end - start);
    } else {
      return bad(fmt::format("slice [{}:{}] of dim {} ({}, between {} and {}) of {} has a size "
                             "that depends on the dim in a way a program cannot express",
                             start, end, dim, c.shape_str({d}), lo, hi, c.describe(0)));
    }
  }
  c.out.attrs["dim"] = dim;
  c.out.attrs["start"] = start;
  c.out.attrs["end"] = end;
  return emit(c, {c.type(0).dtype, std::move(x)});
}

// ---- convolution and pooling (NCHW; spatial dims static, the batch any) -----------------

// A list attribute of `count` integers each >= `min`, or `fallback` when absent.
Result<std::vector<int64_t>> attr_ints_of(const Ctx& c, std::string_view name, size_t count, int64_t min,
                                          std::vector<int64_t> fallback) {
  if (find_attr(c, name) == nullptr) return fallback;
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> v, attr_ints(c, name));
  if (v.size() != count || std::any_of(v.begin(), v.end(), [&](int64_t i) { return i < min; })) {
    return bad(fmt::format("attribute '{}' must be {} integers >= {}", name, count, min));
  }
  return v;
}

struct Window {
  std::vector<int64_t> kernel, strides, pads, dilations;
  bool ceil_mode = false;
};

Result<Window> window_attrs(Ctx& c, std::optional<std::vector<int64_t>> kernel) {
  Window w;
  if (kernel) {
    w.kernel = *kernel;
  } else {
    if (find_attr(c, "kernel") == nullptr) return bad("missing attribute 'kernel' ([kh, kw])");
    PLANRT_ASSIGN_OR_RETURN(w.kernel, attr_ints_of(c, "kernel", 2, 1, {}));
    c.out.attrs["kernel"] = w.kernel;
  }
  PLANRT_ASSIGN_OR_RETURN(w.strides, attr_ints_of(c, "strides", 2, 1, {1, 1}));
  PLANRT_ASSIGN_OR_RETURN(w.pads, attr_ints_of(c, "pads", 4, 0, {0, 0, 0, 0}));
  PLANRT_ASSIGN_OR_RETURN(w.dilations, attr_ints_of(c, "dilations", 2, 1, {1, 1}));
  PLANRT_ASSIGN_OR_RETURN(w.ceil_mode, attr_bool(c, "ceil_mode", false));
  c.out.attrs["strides"] = w.strides;
  c.out.attrs["pads"] = w.pads;
  c.out.attrs["dilations"] = w.dilations;
  return w;
}

// The image operand's layout: "nchw" (default) or "nhwc" (kept in the output's attributes
// only when not the default). Where C, H and W lie in x.
struct ImageAxes {
  bool channels_last = false;
  int c = 1, h = 2, w = 3;
};
Result<ImageAxes> image_axes(Ctx& c) {
  ImageAxes a;
  if (const AttrValue* l = find_attr(c, "layout")) {
    const auto* name = std::get_if<std::string>(l);
    if (name == nullptr || (*name != "nchw" && *name != "nhwc")) {
      return bad("attribute 'layout' must be \"nchw\" or \"nhwc\"");
    }
    if (*name == "nhwc") {
      a = {true, 3, 1, 2};
      c.out.attrs["layout"] = *name;
    }
  }
  return a;
}

SymShape image_of(const ImageAxes& a, Dim n, Dim ch, Dim h, Dim w) {
  return a.channels_last ? SymShape{n, h, w, ch} : SymShape{n, ch, h, w};
}

// x with H and W fixed: the output's [H', W'].
Result<std::pair<int64_t, int64_t>> window_output(const Ctx& c, const Window& w, const ImageAxes& a) {
  const SymShape& x = c.shape(0);
  const Dim spatial[2] = {x[a.h], x[a.w]};
  if (!spatial[0].is_static() || !spatial[1].is_static()) {
    return bad(fmt::format("{}: the spatial dims must be fixed sizes (give the image size with "
                           "--dim)", c.describe(0)));
  }
  int64_t out[2];
  for (int i = 0; i < 2; ++i) {
    Result<int64_t> o = kernels::window_output_size(spatial[i].value, w.kernel[i], w.strides[i], w.pads[i],
                                                    w.pads[2 + i], w.dilations[i], w.ceil_mode);
    if (!o.ok()) return bad(fmt::format("{}: {}", c.describe(0), o.status().message()));
    out[i] = *o;
  }
  return std::pair{out[0], out[1]};
}

Result<InferredNode> conv2d(Ctx& c) {
  PLANRT_RETURN_IF_ERROR(floating(c, 0));
  PLANRT_RETURN_IF_ERROR(same_dtype(c));
  PLANRT_RETURN_IF_ERROR(rank_is(c, 0, 4));
  PLANRT_RETURN_IF_ERROR(rank_is(c, 1, 4));
  PLANRT_ASSIGN_OR_RETURN(ImageAxes a, image_axes(c));
  const SymShape& x = c.shape(0);
  const SymShape& wt = c.shape(1);
  // weight [K, C/groups, KH, KW], or [K, KH, KW, C/groups] in layout nhwc.
  const Dim w_channels = wt[a.channels_last ? 3 : 1], w_kh = wt[a.channels_last ? 1 : 2], w_kw = wt[a.channels_last ? 2 : 3];
  const char* weight_form = a.channels_last ? "[K, KH, KW, C/groups] (layout nhwc)" : "[K, C/groups, KH, KW]";
  for (const Dim& d : {x[a.c], wt[0], w_channels, w_kh, w_kw}) {
    if (!d.is_static()) return bad(fmt::format("{} and {}: channels and kernel sizes must be fixed", c.describe(0), c.describe(1)));
  }
  PLANRT_ASSIGN_OR_RETURN(int64_t groups, attr_int(c, "groups", 1));
  const int64_t channels = x[a.c].value;
  if (groups < 1 || channels % groups != 0 || wt[0].value % groups != 0 || w_channels.value * groups != channels) {
    return bad(fmt::format("groups = {}: {} has {} channels and {} is {} (groups must "
                           "divide C and K)", groups, c.describe(0), channels, c.describe(1), weight_form));
  }
  PLANRT_RETURN_IF_ERROR(is_vector_of(c, 2, wt[0], "the output channels"));
  PLANRT_ASSIGN_OR_RETURN(Window w, window_attrs(c, std::vector<int64_t>{w_kh.value, w_kw.value}));
  if (w.ceil_mode) return bad("attribute 'ceil_mode' applies to pooling only");
  c.out.attrs.erase("ceil_mode");
  std::string activation = "none";
  if (const AttrValue* act = find_attr(c, "activation")) {
    const auto* name = std::get_if<std::string>(act);
    if (name == nullptr || (*name != "none" && *name != "relu" && *name != "clip" && *name != "hard_sigmoid" &&
                            *name != "hard_swish")) {
      return bad("attribute 'activation' must be \"none\", \"relu\", \"clip\", \"hard_sigmoid\" or \"hard_swish\"");
    }
    activation = *name;
  }
  // The clamp's own attributes (clip: min, max; hard_sigmoid: alpha, beta), only with it.
  for (std::string_view name : {"min", "max", "alpha", "beta"}) {
    if (find_attr(c, name) == nullptr) continue;
    const bool belongs = (activation == "clip" && (name == "min" || name == "max")) ||
                         (activation == "hard_sigmoid" && (name == "alpha" || name == "beta"));
    if (!belongs) return bad(fmt::format("attribute '{}' needs activation {}", name, name == "min" || name == "max" ? "clip" : "hard_sigmoid"));
    PLANRT_RETURN_IF_ERROR(attr_float(c, name, 0.0).status());
  }
  c.out.attrs["groups"] = groups;
  PLANRT_ASSIGN_OR_RETURN(auto hw, window_output(c, w, a));
  return emit(c, {c.type(0).dtype, image_of(a, x[0], wt[0], Dim::fixed(hw.first), Dim::fixed(hw.second))});
}

Result<InferredNode> pool2d(Ctx& c, bool average) {
  PLANRT_RETURN_IF_ERROR(floating(c, 0));
  PLANRT_RETURN_IF_ERROR(rank_is(c, 0, 4));
  PLANRT_ASSIGN_OR_RETURN(ImageAxes a, image_axes(c));
  PLANRT_ASSIGN_OR_RETURN(Window w, window_attrs(c, std::nullopt));
  if (average && (w.dilations[0] != 1 || w.dilations[1] != 1)) return bad("avg_pool2d takes no dilations");
  if (w.pads[0] >= w.kernel[0] || w.pads[2] >= w.kernel[0] || w.pads[1] >= w.kernel[1] || w.pads[3] >= w.kernel[1]) {
    return bad("attribute 'pads': each pad must be smaller than the kernel");
  }
  c.out.attrs["ceil_mode"] = w.ceil_mode;
  if (average) {
    PLANRT_ASSIGN_OR_RETURN(bool include, attr_bool(c, "count_include_pad", false));
    c.out.attrs["count_include_pad"] = include;
  }
  const SymShape& x = c.shape(0);
  if (!x[a.c].is_static()) return bad(fmt::format("{}: the channels must be a fixed size", c.describe(0)));
  PLANRT_ASSIGN_OR_RETURN(auto hw, window_output(c, w, a));
  return emit(c, {c.type(0).dtype, image_of(a, x[0], x[a.c], Dim::fixed(hw.first), Dim::fixed(hw.second))});
}
Result<InferredNode> max_pool2d(Ctx& c) { return pool2d(c, false); }
Result<InferredNode> avg_pool2d(Ctx& c) { return pool2d(c, true); }

Result<InferredNode> clamp_op(Ctx& c) {
  PLANRT_RETURN_IF_ERROR(floating(c, 0));
  for (std::string_view name : {"min", "max", "alpha", "beta"}) {
    if (find_attr(c, name) != nullptr) PLANRT_RETURN_IF_ERROR(attr_float(c, name, 0.0).status());
  }
  return emit(c, c.type(0));
}

Result<InferredNode> pad(Ctx& c) {
  const SymShape& x = c.shape(0);
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> pads, attr_ints(c, "pads"));
  if (pads.size() != 2 * x.size()) {
    return bad(fmt::format("attribute 'pads' has {} entries; {} needs {} (the begins, then the ends)",
                           pads.size(), c.describe(0), 2 * x.size()));
  }
  if (const AttrValue* m = find_attr(c, "mode")) {
    const auto* mode = std::get_if<std::string>(m);
    if (mode == nullptr || (*mode != "constant" && *mode != "reflect" && *mode != "edge")) {
      return bad("attribute 'mode' must be \"constant\", \"reflect\" or \"edge\"");
    }
  }
  PLANRT_RETURN_IF_ERROR(attr_float(c, "value", 0.0).status());
  SymShape out = x;
  for (size_t d = 0; d < x.size(); ++d) {
    const int64_t grow = pads[d] + pads[d + x.size()];
    if (grow == 0) continue;
    if (!x[d].is_static()) {
      return bad(fmt::format("{}: dim {} is not a fixed size and cannot be padded", c.describe(0), d));
    }
    if (x[d].value + grow < 1) return bad(fmt::format("attribute 'pads' crops dim {} of {} to nothing", d, c.describe(0)));
    out[d] = Dim::fixed(x[d].value + grow);
  }
  return emit(c, {c.type(0).dtype, std::move(out)});
}

// expand: x broadcast (PyTorch's rules, right-aligned) to `shape`, integers and dim names.
Result<InferredNode> expand(Ctx& c) {
  PLANRT_ASSIGN_OR_RETURN(ShapeSpec spec, shape_spec_attr(c, "integers and dim names"));
  SymShape out;
  for (size_t i = 0; i < spec.size(); ++i) {
    if (spec[i].name.empty()) {
      if (spec[i].value < 1) return bad(fmt::format("attribute 'shape' entry {} is {} (sizes are >= 1)", i, spec[i].value));
      out.push_back(Dim::fixed(spec[i].value));
      continue;
    }
    auto it = std::find_if(c.dims.begin(), c.dims.end(), [&](const DimDecl& d) { return d.name == spec[i].name; });
    if (it == c.dims.end()) {
      return bad(fmt::format("attribute 'shape' entry {} names dim '{}', which the method does not declare", i, spec[i].name));
    }
    out.push_back(Dim::named(static_cast<int32_t>(it - c.dims.begin())));
  }
  auto b = broadcast_shapes(c.shape(0), out, c.dims);
  if (!b.ok() || *b != out) {
    return bad(fmt::format("{} does not broadcast to {}", c.describe(0), c.shape_str(out)));
  }
  return emit(c, {c.type(0).dtype, std::move(out)});
}

// gather_elements(x, indices): indices' shape, x's dtype; each size of indices at most x's
// outside `dim` (equal expressions, or constants no larger).
Result<InferredNode> gather_elements(Ctx& c) {
  const DType idx = c.type(1).dtype;
  if (idx != DType::I32 && idx != DType::I64) {
    return bad(fmt::format("{} must be i32 or i64 indices", c.describe(1)));
  }
  const SymShape& x = c.shape(0);
  const SymShape& i = c.shape(1);
  if (x.size() != i.size() || x.empty()) {
    return bad(fmt::format("{} must have the rank of {} (>= 1)", c.describe(1), c.describe(0)));
  }
  PLANRT_ASSIGN_OR_RETURN(int64_t dim, attr_int(c, "dim", 0));
  PLANRT_ASSIGN_OR_RETURN(dim, normalize_dim(dim, x.size(), "attribute 'dim'"));
  c.out.attrs["dim"] = dim;
  for (size_t d = 0; d < x.size(); ++d) {
    if (static_cast<int64_t>(d) == dim || i[d] == x[d]) continue;
    if (i[d].is_static() && x[d].is_static() && i[d].value <= x[d].value) continue;
    if (i[d].is_static() && i[d].value == 1) continue;
    return bad(fmt::format("{}: its dim {} may exceed that of {}", c.describe(1), d, c.describe(0)));
  }
  return emit(c, {c.type(0).dtype, i});
}

// take(x, indices): indices' shape, x's dtype.
Result<InferredNode> take(Ctx& c) {
  const DType idx = c.type(1).dtype;
  if (idx != DType::I32 && idx != DType::I64) return bad(fmt::format("{} must be i32 or i64 indices", c.describe(1)));
  return emit(c, {c.type(0).dtype, c.shape(1)});
}

// size(x): an i64 scalar, x's size along `dim`.
Result<InferredNode> size_of(Ctx& c) {
  PLANRT_ASSIGN_OR_RETURN(int64_t dim, attr_int(c, "dim", std::nullopt));
  if (c.shape(0).empty()) return bad(fmt::format("{} is a scalar: it has no dim to take the size of", c.describe(0)));
  PLANRT_ASSIGN_OR_RETURN(dim, normalize_dim(dim, c.shape(0).size(), "attribute 'dim'"));
  c.out.attrs["dim"] = dim;
  return emit(c, {DType::I64, {}});
}

// resize(x): the resized shape from `sizes` (-1 keeps x's size) or floor(size * scale), by the
// kernels' own attribute rules (kernels/op_plans.h: parse_resize_attrs). A dim that is not a
// fixed size may only be kept (sizes -1, or scale 1).
Result<InferredNode> resize(Ctx& c) {
  PLANRT_RETURN_IF_ERROR(floating(c, 0));
  const SymShape& x = c.shape(0);
  if (x.empty()) return bad(fmt::format("{} is a scalar: it has no dim to resize", c.describe(0)));
  kernels::OpAttrs attrs;
  for (const auto& [name, value] : c.attrs) {
    if (const auto* i = std::get_if<int64_t>(&value)) attrs.set(name, *i);
    if (const auto* d = std::get_if<double>(&value)) attrs.set(name, *d);
    if (const auto* b = std::get_if<bool>(&value)) attrs.set(name, *b);
    if (const auto* s = std::get_if<std::string>(&value)) attrs.set(name, *s);
    if (const auto* v = std::get_if<std::vector<int64_t>>(&value)) attrs.set(name, *v);
    if (std::holds_alternative<ShapeSpec>(value)) return bad(fmt::format("attribute '{}' takes no dim names", name));
  }
  const auto rank = static_cast<int>(x.size());
  Result<kernels::ResizeAttrs> a = kernels::parse_resize_attrs(attrs, rank);
  if (!a.ok()) return bad(a.status().message());
  SymShape out = x;
  for (int d = 0; d < rank; ++d) {
    if (!x[d].is_static()) {
      const bool kept = a->sizes.empty() ? a->scales[d] == 1.0 : a->sizes[d] == -1;
      if (!kept) {
        return bad(fmt::format("{}: dim {} is not a fixed size; resize can only keep it (sizes entry -1, or "
                               "scale 1)", c.describe(0), d));
      }
      continue;
    }
    Result<int64_t> o = kernels::resize_output_size(*a, d, x[d].value);
    if (!o.ok()) return bad(fmt::format("{}: {}", c.describe(0), o.status().message()));
    out[d] = Dim::fixed(*o);
  }
  return emit(c, {c.type(0).dtype, std::move(out)});
}

// ---- the table --------------------------------------------------------------------------

using RuleFn = Result<InferredNode> (*)(Ctx&);
struct Rule {
  std::string_view op;
  std::vector<std::string_view> attrs;  // every attribute the op accepts
  RuleFn fn;
};

const std::initializer_list<Rule>& rules() {
  static const std::initializer_list<Rule> table = {
      {"linear", {"activation", "approximate"}, linear},
      {"matmul", {}, matmul},
      {"add", {}, elementwise_binary},
      {"sub", {}, elementwise_binary},
      {"mul", {}, elementwise_binary},
      {"div", {}, elementwise_binary},
      {"layer_norm", {"eps"}, layer_norm},
      {"rms_norm", {"eps"}, rms_norm},
      {"softmax", {"dim"}, softmax},
      {"gelu", {"approximate"}, gelu},
      {"relu", {}, relu},
      {"silu", {}, unary_floating},
      {"sqrt", {}, unary_floating},
      {"neg", {}, unary_numeric},
      {"exp", {}, unary_floating},
      {"erf", {}, unary_floating},
      {"tanh", {}, unary_floating},
      {"sigmoid", {}, unary_floating},
      {"pow", {}, elementwise_binary},
      {"reduce_mean", {"dims", "keepdim"}, reduce},
      {"reduce_sum", {"dims", "keepdim"}, reduce},
      {"reduce_max", {"dims", "keepdim"}, reduce},
      {"reduce_min", {"dims", "keepdim"}, reduce},
      {"reduce_prod", {"dims", "keepdim"}, reduce},
      {"argmax", {"dim", "keepdim", "select_last_index"}, arg_reduce},
      {"argmin", {"dim", "keepdim", "select_last_index"}, arg_reduce},
      {"cumsum", {"dim", "exclusive", "reverse"}, cumsum},
      {"log_softmax", {"dim"}, softmax},
      {"reshape", {"shape"}, reshape},
      {"permute", {"dims"}, permute},
      {"transpose", {"dim0", "dim1"}, transpose},
      {"scaled_dot_product_attention", {"causal", "scale", "fused", "layout", "heads"}, sdpa},
      {"embedding", {}, embedding},
      {"concat", {"dim"}, concat},
      {"slice", {"dim", "start", "end", "step"}, slice},
      {"conv2d", {"strides", "pads", "dilations", "groups", "activation", "min", "max", "alpha", "beta", "layout"}, conv2d},
      {"max_pool2d", {"kernel", "strides", "pads", "dilations", "ceil_mode", "layout"}, max_pool2d},
      {"avg_pool2d", {"kernel", "strides", "pads", "ceil_mode", "count_include_pad", "layout"}, avg_pool2d},
      {"clip", {"min", "max"}, clamp_op},
      {"hard_sigmoid", {"alpha", "beta"}, clamp_op},
      {"hard_swish", {}, clamp_op},
      {"pad", {"pads", "mode", "value"}, pad},
      {"expand", {"shape"}, expand},
      {"gather_elements", {"dim"}, gather_elements},
      {"size", {"dim"}, size_of},
      {"take", {}, take},
      {"resize", {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "exclude_outside",
                  "extrapolation_value", "sizes", "scales", "roi"}, resize},
  };
  return table;
}

// The typed elementwise family's rules, one per op of kernels::elementwise_ops().
const std::vector<Rule>& typed_rules() {
  static const std::vector<Rule> table = [] {
    std::vector<Rule> t;
    for (const kernels::ElementwiseOp& op : kernels::elementwise_ops()) {
      std::vector<std::string_view> attrs;
      if (op.rule == kernels::ElementwiseRule::Cast) attrs = {"dtype"};
      if (op.fn == kernels::ElementwiseFn::IsInf) attrs = {"positive", "negative"};
      if (op.fn == kernels::ElementwiseFn::Mod) attrs = {"fmod"};
      for (const kernels::ElementwiseParam& p : op.params) {
        if (!p.name.empty()) attrs.push_back(p.name);
      }
      t.push_back({op.name, std::move(attrs),
                   [](Ctx& c) -> Result<InferredNode> {
                     return typed_elementwise(*kernels::find_elementwise_op(c.op), c);
                   }});
    }
    return t;
  }();
  return table;
}

const Rule* find_rule(std::string_view op) {
  for (const Rule& r : rules()) {
    if (r.op == op) return &r;
  }
  for (const Rule& r : typed_rules()) {
    if (r.op == op) return &r;
  }
  return nullptr;
}

}  // namespace

bool has_shape_rule(std::string_view op) { return find_rule(op) != nullptr; }

Result<InferredNode> infer_node(std::string_view op, std::span<const Operand> operands,
                                const Attrs& attrs, std::span<const DimDecl> dims) {
  const Rule* rule = find_rule(op);
  if (rule == nullptr) {
    return make_error(ErrorCode::NotSupported, "op '{}' has no shape rule in the builder", op);
  }
  for (const auto& [name, value] : attrs) {
    if (std::find(rule->attrs.begin(), rule->attrs.end(), name) == rule->attrs.end()) {
      std::string accepted;
      for (std::string_view a : rule->attrs) accepted += accepted.empty() ? a : ", " + std::string(a);
      return bad(fmt::format("unknown attribute '{}' (accepted: {})", name,
                             accepted.empty() ? "none" : accepted));
    }
  }
  Ctx c{operands, attrs, dims, {}, op};
  c.out.attrs = attrs;
  return rule->fn(c);
}

}  // namespace planrt::builder::ir
