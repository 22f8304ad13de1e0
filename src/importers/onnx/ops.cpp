// The run-time side of each ONNX op: planrt IR nodes for values computed when the program
// runs. Build-time values never get here (fold.cpp evaluates them); an op whose every input
// is known or symbolic is folded first.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "importers/onnx/importer.h"
#include "importers/onnx/fold_support.h"
#include "importers/onnx/ops_support.h"

namespace planrt::importers::onnx {
namespace {

Status not_supported(const OpContext& c, std::string what) {
  return Status(ErrorCode::NotSupported, fmt::format("{} {}", c.node.op_type(), what));
}

const std::string& out_name(const OpContext& c, int i = 0) { return c.node.output(i); }

Result<int64_t> norm_axis(const OpContext& c, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return c.error(fmt::format("axis {} is out of range for rank {}", axis, rank));
  }
  return axis < 0 ? axis + rank : axis;
}

Status require_float(const OpContext& c, size_t i) {
  const Value& v = c.input(i);
  if (!elem_is_float(v.elem)) {
    return not_supported(c, fmt::format("at run time on input {} of type {} (planrt computes in "
                                        "floating point; integer tensors only index and move)",
                                        i, elem_name(v.elem)));
  }
  return {};
}

// The logical shape of an output that keeps `like`'s folded leading dims.
void keep_folded(Value& out, const Value& like) {
  if (like.folded == 0) return;
  std::vector<SymInt> logical{like.shape[0]};
  std::vector<SymInt> rest = Importer::from_ir_shape(out.ir_shape);
  logical.insert(logical.end(), rest.begin() + like.folded, rest.end());
  out.shape = std::move(logical);
  out.folded = like.folded;
}

SymInt product(const std::vector<SymInt>& s, size_t begin, size_t end) {
  SymInt p = sym_const(1);
  for (size_t i = begin; i < end; ++i) {
    p.coeff *= s[i].coeff;
    p.dims.insert(p.dims.end(), s[i].dims.begin(), s[i].dims.end());
  }
  std::sort(p.dims.begin(), p.dims.end());
  return p;
}

// x (run time) to the logical shape `target`. When target is expressible, an IR reshape.
// When only its dim 0 is not (a product of dims: the S*B rows before a Gemm), the IR value
// keeps that dim as one IR dim per factor and the Value is marked folded: a reshape is only
// a new view of the same row-major bytes, so rows factored either way are the same rows.
Result<Value> reshape_to(OpContext& c, const Value& x, const std::vector<SymInt>& target,
                         const std::string& name) {
  Result<ir::SymShape> ir_target = c.im.to_ir_shape(target);
  int folded = 0;
  if (!ir_target.ok()) {
    if (target.empty() || target[0].dims.size() < 2) return ir_target.status();
    Result<ir::SymShape> rest = c.im.to_ir_shape({target.begin() + 1, target.end()});
    if (!rest.ok()) return ir_target.status();
    ir::SymShape factored;
    for (size_t i = 0; i < target[0].dims.size(); ++i) {
      factored.push_back(ir::Dim::named(target[0].dims[i], i == 0 ? target[0].coeff : 1));
    }
    folded = static_cast<int>(factored.size());
    factored.insert(factored.end(), rest->begin(), rest->end());
    ir_target = std::move(factored);
  }
  Value out;
  if (*ir_target == x.ir_shape && !x.known && !x.sym) {
    out = x;  // already this view
  } else {
    PLANRT_ASSIGN_OR_RETURN(ir::ShapeSpec spec, c.im.reshape_spec(*ir_target));
    PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x, false));
    PLANRT_ASSIGN_OR_RETURN(out, c.im.emit("reshape", {in}, {{"shape", spec}},
                                           folded ? name + ".rows" : name));
  }
  out.shape = target;
  out.folded = folded;
  return out;
}

Result<std::vector<SymInt>> reshape_target(OpContext& c, const Value& x) {
  PLANRT_ASSIGN_OR_RETURN(std::vector<SymInt> target, c.sym_ints(1, "shape"));
  PLANRT_ASSIGN_OR_RETURN(int64_t allowzero, c.attr_int("allowzero", 0));
  int infer = -1;
  std::vector<SymInt> known;
  for (size_t i = 0; i < target.size(); ++i) {
    SymInt& t = target[i];
    if (sym_is_const(t) && t.coeff == 0 && allowzero == 0) {
      if (i >= x.shape.size()) return c.error(fmt::format("shape entry {} is 0 (copy) past the input's rank", i));
      t = x.shape[i];
    }
    if (sym_is_const(t) && t.coeff == -1) {
      if (infer >= 0) return c.error("shape has more than one -1");
      infer = static_cast<int>(i);
      continue;
    }
    if (sym_is_const(t) && t.coeff < 0) return c.error(fmt::format("shape entry {} is {}", i, t.coeff));
    known.push_back(t);
  }
  const SymInt total = product(x.shape, 0, x.shape.size());
  const SymInt have = product(known, 0, known.size());
  if (infer >= 0) {
    Result<ir::Dim> q = ir::divide(total, have);
    SymInt r;
    if (q.ok()) {
      r = q->is_static() ? sym_const(q->value) : SymInt{q->value, {q->dim}};
    } else if (have.coeff != 0 && total.coeff % have.coeff == 0 &&
               std::includes(total.dims.begin(), total.dims.end(), have.dims.begin(), have.dims.end())) {
      r = SymInt{total.coeff / have.coeff, {}};
      std::set_difference(total.dims.begin(), total.dims.end(), have.dims.begin(), have.dims.end(),
                          std::back_inserter(r.dims));
    } else {
      return c.error(fmt::format("reshape of {} to {}: the -1 entry does not divide",
                                 c.im.shape_str(x.shape), c.im.shape_str(target)));
    }
    target[infer] = r;
  } else if (have != total) {
    return c.error(fmt::format("reshape of {} to {}: element counts differ", c.im.shape_str(x.shape),
                               c.im.shape_str(target)));
  }
  return target;
}

// ---- elementwise ----------------------------------------------------------------------------

Status unary(OpContext& c, const char* op) {
  PLANRT_RETURN_IF_ERROR(require_float(c, 0));
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x, false));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit(op, {in}, {}, out_name(c)));
  keep_folded(y, x);
  c.out.push_back(std::move(y));
  return {};
}

Status handle_relu(OpContext& c) { return unary(c, "relu"); }
Status handle_sqrt(OpContext& c) { return unary(c, "sqrt"); }
Status handle_neg(OpContext& c) {
  if (!elem_is_float(c.input(0).elem)) return emit_integer_unary(c, "neg");
  return unary(c, "neg");
}
Status handle_exp(OpContext& c) { return unary(c, "exp"); }
Status handle_erf(OpContext& c) { return unary(c, "erf"); }
Status handle_tanh(OpContext& c) { return unary(c, "tanh"); }
Status handle_sigmoid(OpContext& c) { return unary(c, "sigmoid"); }

// Gelu (opset 20; torch 2.9+'s exporter writes it for nn.GELU): planrt's gelu, exact or tanh.
Status handle_gelu(OpContext& c) {
  PLANRT_RETURN_IF_ERROR(require_float(c, 0));
  PLANRT_ASSIGN_OR_RETURN(std::string approximate, c.attr_string("approximate", "none"));
  if (approximate != "none" && approximate != "tanh") {
    return not_supported(c, fmt::format("with approximate = '{}' (none and tanh are defined)", approximate));
  }
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x, false));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("gelu", {in}, {{"approximate", approximate}}, out_name(c)));
  keep_folded(y, x);
  c.out.push_back(std::move(y));
  return {};
}

// A known operand of a float op at run time takes the other operand's float type.
Result<std::string> operand_as(OpContext& c, const Value& v, Elem elem) {
  if (v.known && v.known->elem != elem && elem_is_float(elem)) {
    Tensor t = Tensor::from_f64(elem, v.known->shape, v.known->to_f64());
    return c.im.constant(t, v.ir.empty() ? "const" : v.ir);
  }
  return c.im.ir_of(v, false);
}

// ---- causal masks --------------------------------------------------------------------------

// Whether a mask over [..., i, j] (its last two dims, every leading index alike) is causal:
// `masked(i, j)` holds exactly where j > i.
bool is_causal(const Tensor& mask, const std::function<bool(double)>& masked) {
  if (mask.shape.size() < 2) return false;
  const int64_t rows = mask.shape[mask.shape.size() - 2], cols = mask.shape.back();
  const std::vector<double> v = mask.to_f64();
  for (size_t k = 0; k < v.size(); ++k) {
    const int64_t j = static_cast<int64_t>(k) % cols, i = static_cast<int64_t>(k) / cols % rows;
    if (masked(v[k]) != (j > i)) return false;
  }
  return true;
}

// A score value masked by `mask` (a window or a constant) in its last two dims: the mask's
// last two dims are the scores' and its leading ones broadcast.
bool mask_fits(const Value& mask, const Value& scores) {
  const int r = mask.rank();
  if (r < 2 || r > scores.rank() || scores.folded) return false;
  for (int d = 0; d < r; ++d) {
    const SymInt& m = mask.shape[d];
    const SymInt& s = scores.shape[scores.rank() - r + d];
    if (d >= r - 2 ? m != s : (m != s && m != sym_const(1))) return false;
  }
  return true;
}

const Tensor* mask_tensor(const Value& v) {
  return v.window_base ? &*v.window_base : v.known ? &*v.known : nullptr;
}

// Very negative: what softmax turns into an exact 0 (exp underflows in f32).
bool is_fill(double v) { return v <= -1e4; }

Value causally_masked(const Value& scores) {
  Value out = scores;
  out.causal = true;
  return out;
}

Status handle_where(OpContext& c) {
  const Value& cond = c.input(0);
  const Value& a = c.input(1);
  const Value& b = c.input(2);
  const Tensor* mask = mask_tensor(cond);
  // Where(mask, fill, scores) or Where(mask, scores, fill) with a causal mask: masking.
  const Value* scores = a.is_runtime() ? &a : &b;
  const Value& fill = a.is_runtime() ? b : a;
  if (mask != nullptr && scores->is_runtime() && fill.known && fill.known->numel() == 1 &&
      is_fill(fill.known->to_f64()[0]) && mask_fits(cond, *scores)) {
    const bool fill_when_true = &fill == &a;
    if (is_causal(*mask, [&](double m) { return (m != 0) == fill_when_true; })) {
      c.out.push_back(causally_masked(*scores));
      return {};
    }
  }
  return emit_where(c);
}

Status binary(OpContext& c, const char* op) {
  const Value& a = c.input(0);
  const Value& b = c.input(1);
  if (std::string_view(op) == "add" && (a.is_runtime() != b.is_runtime())) {
    // scores + mask with 0 on and below the diagonal and a very negative fill above it.
    const Value& scores = a.is_runtime() ? a : b;
    const Value& m = a.is_runtime() ? b : a;
    const Tensor* mask = mask_tensor(m);
    auto zero_or_fill = [&] {
      for (double v : mask->to_f64()) {
        if (v != 0 && !is_fill(v)) return false;
      }
      return true;
    };
    if (mask != nullptr && mask_fits(m, scores) && zero_or_fill() && is_causal(*mask, is_fill)) {
      c.out.push_back(causally_masked(scores));
      return {};
    }
  }
  const Value& rt = a.is_runtime() ? a : b;
  if (!elem_is_float(rt.elem)) return emit_integer_arithmetic(c, op);
  PLANRT_RETURN_IF_ERROR(require_float(c, a.is_runtime() ? 0 : 1));
  // A folded operand stays folded when the other one broadcasts over its trailing dims
  // only (a bias, a scale): those are the same in the IR shape.
  const Value* folded = a.folded ? &a : b.folded ? &b : nullptr;
  const Value* other = folded == &a ? &b : &a;
  const bool keep = folded != nullptr && other->folded == 0 && other->rank() < folded->rank();
  auto operand = [&](const Value& v) -> Result<std::string> {
    if (keep && &v == folded) return c.im.ir_of(v, false);
    if (v.folded) return c.im.ir_of(v);
    return operand_as(c, v, rt.elem);
  };
  PLANRT_ASSIGN_OR_RETURN(std::string ia, operand(a));
  PLANRT_ASSIGN_OR_RETURN(std::string ib, operand(b));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit(op, {ia, ib}, {}, out_name(c)));
  if (keep) keep_folded(y, *folded);
  c.out.push_back(std::move(y));
  return {};
}

Status handle_add(OpContext& c) { return binary(c, "add"); }
Status handle_sub(OpContext& c) { return binary(c, "sub"); }
Status handle_mul(OpContext& c) { return binary(c, "mul"); }
Status handle_div(OpContext& c) { return binary(c, "div"); }
Status handle_pow(OpContext& c) {
  // Pow's exponent may have another type than its base (ONNX's T and T1).
  if (c.input(0).elem != c.input(1).elem && !(c.input(1).known && elem_is_float(c.input(0).elem))) {
    return emit_mixed_pow(c);
  }
  return binary(c, "pow");
}

// ---- linear algebra ---------------------------------------------------------------------------

Tensor transpose_2d(const Tensor& w) {
  const int64_t rows = w.shape[0], cols = w.shape[1];
  const size_t es = elem_size(w.elem);
  std::vector<uint8_t> bytes(w.bytes.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) {
      std::memcpy(bytes.data() + (k * rows + r) * es, w.bytes.data() + (r * cols + k) * es, es);
    }
  }
  return Tensor::owning(w.elem, {cols, rows}, std::move(bytes));
}

Tensor scaled(const Tensor& t, double s) {
  std::vector<double> v = t.to_f64();
  for (double& x : v) x *= s;
  return Tensor::from_f64(t.elem, t.shape, v);
}

// y = x @ W (W known [K, N]) as planrt's linear with weight W^T [N, K] (+ bias [N]).
Result<Value> linear(OpContext& c, const Value& x, const Tensor& weight_nk, const Tensor* bias,
                     const std::string& name) {
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x, false));
  PLANRT_ASSIGN_OR_RETURN(std::string w, c.im.constant(weight_nk, name + ".weight"));
  std::vector<std::string> inputs{in, w};
  if (bias != nullptr) {
    PLANRT_ASSIGN_OR_RETURN(std::string b, c.im.constant(*bias, name + ".bias"));
    inputs.push_back(b);
  }
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("linear", inputs, {}, name));
  keep_folded(y, x);
  return y;
}

Status handle_matmul(OpContext& c) {
  const Value& a = c.input(0);
  const Value& b = c.input(1);
  PLANRT_RETURN_IF_ERROR(require_float(c, a.is_runtime() ? 0 : 1));
  if (a.is_runtime() && b.known && b.rank() == 2 && a.rank() >= 1) {
    PLANRT_ASSIGN_OR_RETURN(Value y, linear(c, a, transpose_2d(*b.known), nullptr, out_name(c)));
    c.out.push_back(std::move(y));
    return {};
  }
  PLANRT_ASSIGN_OR_RETURN(std::string ia, c.im.ir_of(a));
  PLANRT_ASSIGN_OR_RETURN(std::string ib, c.im.ir_of(b));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("matmul", {ia, ib}, {}, out_name(c)));
  c.out.push_back(std::move(y));
  return {};
}

// alpha * op(A) @ op(B) + beta * C with B computed at run time: matmul, then scale and add.
Status gemm_general(OpContext& c, bool trans_a, bool trans_b, double alpha, double beta) {
  const Elem elem = c.input(0).is_runtime() ? c.input(0).elem : c.input(1).elem;
  auto operand = [&](size_t i, bool transposed) -> Result<std::string> {
    PLANRT_ASSIGN_OR_RETURN(std::string name, operand_as(c, c.input(i), elem));
    if (!transposed) return name;
    PLANRT_ASSIGN_OR_RETURN(Value t, c.im.emit("permute", {name}, {{"dims", std::vector<int64_t>{1, 0}}},
                                               fmt::format("{}.{}", out_name(c), i == 0 ? "at" : "bt")));
    return t.ir;
  };
  PLANRT_ASSIGN_OR_RETURN(std::string ia, operand(0, trans_a));
  PLANRT_ASSIGN_OR_RETURN(std::string ib, operand(1, trans_b));
  const bool has_c = c.has(2) && beta != 0.0;
  auto scalar = [&](double v, const char* what) {
    return c.im.constant(Tensor::from_f64(elem, {}, {v}), fmt::format("{}.{}", out_name(c), what));
  };
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("matmul", {ia, ib}, {},
                                             alpha != 1.0 || has_c ? out_name(c) + ".ab" : out_name(c)));
  if (alpha != 1.0) {
    PLANRT_ASSIGN_OR_RETURN(std::string s, scalar(alpha, "alpha"));
    PLANRT_ASSIGN_OR_RETURN(y, c.im.emit("mul", {y.ir, s}, {}, has_c ? out_name(c) + ".scaled" : out_name(c)));
  }
  if (has_c) {
    PLANRT_ASSIGN_OR_RETURN(std::string ic, operand_as(c, c.input(2), elem));
    if (beta != 1.0) {
      PLANRT_ASSIGN_OR_RETURN(std::string s, scalar(beta, "beta"));
      PLANRT_ASSIGN_OR_RETURN(Value bc, c.im.emit("mul", {ic, s}, {}, out_name(c) + ".c"));
      ic = bc.ir;
    }
    PLANRT_ASSIGN_OR_RETURN(y, c.im.emit("add", {y.ir, ic}, {}, out_name(c)));
  }
  c.out.push_back(std::move(y));
  return {};
}

Status handle_gemm(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(int64_t trans_a, c.attr_int("transA", 0));
  PLANRT_ASSIGN_OR_RETURN(int64_t trans_b, c.attr_int("transB", 0));
  PLANRT_ASSIGN_OR_RETURN(double alpha, c.attr_float("alpha", 1.0));
  PLANRT_ASSIGN_OR_RETURN(double beta, c.attr_float("beta", 1.0));
  const Value& a = c.input(0);
  const Value& b = c.input(1);
  PLANRT_RETURN_IF_ERROR(require_float(c, a.is_runtime() ? 0 : 1));
  if (a.rank() != 2 || b.rank() != 2) return c.error("A and B must be 2-D");
  if (!b.known) return gemm_general(c, trans_a != 0, trans_b != 0, alpha, beta);
  Value x = a;
  if (trans_a != 0) {
    PLANRT_ASSIGN_OR_RETURN(std::string ia, c.im.ir_of(a));
    PLANRT_ASSIGN_OR_RETURN(x, c.im.emit("permute", {ia}, {{"dims", std::vector<int64_t>{1, 0}}},
                                         out_name(c) + ".a"));
  }
  Tensor w = trans_b != 0 ? *b.known : transpose_2d(*b.known);  // [N, K]
  if (alpha != 1.0) w = scaled(w, alpha);
  const int64_t n = w.shape[0];
  std::optional<Tensor> bias;
  const Value* extra = nullptr;  // a C that is not a row vector: added after
  if (c.has(2) && beta != 0.0) {
    const Value& cv = c.input(2);
    const bool row = cv.known && cv.known->numel() == n &&
                     (cv.rank() == 1 || (cv.rank() == 2 && cv.shape[0].coeff == 1 && sym_is_const(cv.shape[0])));
    if (row) {
      Tensor t = *cv.known;
      t.shape = {n};
      bias = beta != 1.0 ? scaled(t, beta) : t;
    } else if (beta == 1.0) {
      extra = &cv;
    } else {
      return not_supported(c, "with beta != 1 and a C that is not a constant row");
    }
  }
  PLANRT_ASSIGN_OR_RETURN(Value y, linear(c, x, w, bias ? &*bias : nullptr,
                                          extra ? out_name(c) + ".ab" : out_name(c)));
  if (extra != nullptr) {
    PLANRT_ASSIGN_OR_RETURN(std::string iy, c.im.ir_of(y));
    PLANRT_ASSIGN_OR_RETURN(std::string ic, operand_as(c, *extra, y.elem));
    PLANRT_ASSIGN_OR_RETURN(y, c.im.emit("add", {iy, ic}, {}, out_name(c)));
  }
  c.out.push_back(std::move(y));
  return {};
}

// ---- normalization and softmax ----------------------------------------------------------------

// Softmax and LogSoftmax (`op`: planrt's softmax or log_softmax).
Status softmax_like(OpContext& c, const std::string& op) {
  const Value& x = c.input(0);
  PLANRT_RETURN_IF_ERROR(require_float(c, 0));
  PLANRT_ASSIGN_OR_RETURN(int64_t axis, c.attr_int("axis", c.im.opset() >= 13 ? -1 : 1));
  PLANRT_ASSIGN_OR_RETURN(axis, norm_axis(c, axis, x.rank()));
  if (c.im.opset() < 13 && axis != x.rank() - 1) {
    // Before opset 13 the input is flattened to [prod(:axis), prod(axis:)] first.
    std::vector<SymInt> flat{product(x.shape, 0, axis), product(x.shape, axis, x.shape.size())};
    PLANRT_ASSIGN_OR_RETURN(Value f, reshape_to(c, x, flat, out_name(c) + ".2d"));
    PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(f));
    PLANRT_ASSIGN_OR_RETURN(Value s, c.im.emit(op, {in}, {{"dim", int64_t{1}}}, out_name(c) + ".sm"));
    PLANRT_ASSIGN_OR_RETURN(Value y, reshape_to(c, s, x.shape, out_name(c)));
    c.out.push_back(std::move(y));
    return {};
  }
  const bool last = axis == x.rank() - 1;
  if (x.causal && op == "softmax") {
    if (!last) return not_supported(c, "of causally masked scores along another axis than the last");
    PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("softmax", {x.ir}, {{"dim", int64_t{-1}}}, out_name(c)));
    c.im.mark_causal_softmax(y.ir);
    c.out.push_back(std::move(y));
    return {};
  }
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x, !last));
  const int64_t dim = last ? -1 : axis;
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit(op, {in}, {{"dim", dim}}, out_name(c)));
  if (last) keep_folded(y, x);
  c.out.push_back(std::move(y));
  return {};
}

Status handle_softmax(OpContext& c) { return softmax_like(c, "softmax"); }
Status handle_log_softmax(OpContext& c) { return softmax_like(c, "log_softmax");
}

// A LayerNormalization scale or bias as the IR vector [n] layer_norm takes: a constant
// (converted to x's type), or a run-time tensor reshaped when it has more dims.
Result<std::string> norm_vector(OpContext& c, size_t i, int64_t n, Elem elem) {
  const Value& v = c.input(i);
  const std::string role = i == 1 ? "scale" : "bias";
  if (v.known) {
    if (v.known->numel() != n) {
      return c.error(fmt::format("{} has {} elements; the normalized size is {}", role, v.known->numel(), n));
    }
    Tensor t = v.known->elem == elem ? *v.known : Tensor::from_f64(elem, v.known->shape, v.known->to_f64());
    t.shape = {n};
    return c.im.constant(t, v.ir.empty() ? role : v.ir);
  }
  if (v.rank() == 1) return c.im.ir_of(v);
  PLANRT_ASSIGN_OR_RETURN(Value flat, reshape_to(c, v, {sym_const(n)}, fmt::format("{}.{}", out_name(c), role)));
  return flat.ir;
}

Status handle_layer_norm(OpContext& c) {
  const Value& x = c.input(0);
  PLANRT_RETURN_IF_ERROR(require_float(c, 0));
  PLANRT_ASSIGN_OR_RETURN(int64_t axis, c.attr_int("axis", -1));
  PLANRT_ASSIGN_OR_RETURN(double eps, c.attr_float("epsilon", 1e-5));
  PLANRT_ASSIGN_OR_RETURN(axis, norm_axis(c, axis, x.rank()));
  const SymInt n = product(x.shape, axis, x.shape.size());
  if (!sym_is_const(n)) return not_supported(c, "over dims whose size is not fixed");
  Value in = x;
  const bool last = axis == x.rank() - 1;
  if (!last) {
    std::vector<SymInt> flat(x.shape.begin(), x.shape.begin() + axis);
    flat.push_back(n);
    PLANRT_ASSIGN_OR_RETURN(in, reshape_to(c, x, flat, out_name(c) + ".rows"));
  }
  std::vector<std::string> inputs;
  PLANRT_ASSIGN_OR_RETURN(std::string ix, c.im.ir_of(in, false));
  inputs.push_back(ix);
  for (size_t i : {size_t{1}, size_t{2}}) {
    if (!c.has(i)) {
      inputs.push_back("");
      continue;
    }
    PLANRT_ASSIGN_OR_RETURN(std::string name, norm_vector(c, i, n.coeff, x.elem));
    inputs.push_back(name);
  }
  if (inputs.back().empty()) inputs.pop_back();
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("layer_norm", inputs, {{"eps", eps}},
                                             last ? out_name(c) : out_name(c) + ".norm"));
  if (last) {
    keep_folded(y, in);
  } else {
    PLANRT_ASSIGN_OR_RETURN(y, reshape_to(c, y, x.shape, out_name(c)));
  }
  c.out.push_back(std::move(y));
  // The optional outputs Mean and InvStdDev ([d0, ..., d(axis-1), 1, ..., 1]), when asked for.
  const bool stats = (c.node.output_size() > 1 && !c.node.output(1).empty()) ||
                     (c.node.output_size() > 2 && !c.node.output(2).empty());
  if (!stats) return {};
  std::vector<SymInt> stat_shape(x.shape.begin(), x.shape.begin() + axis);
  stat_shape.resize(x.shape.size(), sym_const(1));
  const ir::Attrs last_dim{{"dims", std::vector<int64_t>{-1}}, {"keepdim", true}};
  PLANRT_ASSIGN_OR_RETURN(Value mean, c.im.emit("reduce_mean", {ix}, last_dim, out_name(c) + ".mean"));
  PLANRT_ASSIGN_OR_RETURN(Value d, c.im.emit("sub", {ix, mean.ir}, {}, out_name(c) + ".centered"));
  PLANRT_ASSIGN_OR_RETURN(Value sq, c.im.emit("mul", {d.ir, d.ir}, {}, out_name(c) + ".squares"));
  PLANRT_ASSIGN_OR_RETURN(Value var, c.im.emit("reduce_mean", {sq.ir}, last_dim, out_name(c) + ".var"));
  PLANRT_ASSIGN_OR_RETURN(std::string e, c.im.constant(Tensor::from_f64(x.elem, {}, {eps}), out_name(c) + ".eps"));
  PLANRT_ASSIGN_OR_RETURN(Value ve, c.im.emit("add", {var.ir, e}, {}, out_name(c) + ".var_eps"));
  PLANRT_ASSIGN_OR_RETURN(Value sd, c.im.emit("sqrt", {ve.ir}, {}, out_name(c) + ".std"));
  PLANRT_ASSIGN_OR_RETURN(std::string one, c.im.constant(Tensor::from_f64(x.elem, {}, {1.0}), out_name(c) + ".one"));
  PLANRT_ASSIGN_OR_RETURN(Value inv, c.im.emit("div", {one, sd.ir}, {}, out_name(c) + ".inv_std"));
  PLANRT_ASSIGN_OR_RETURN(Value mean_out, reshape_to(c, mean, stat_shape, c.node.output_size() > 1 ? c.node.output(1) : out_name(c) + ".m"));
  c.out.push_back(std::move(mean_out));
  if (c.node.output_size() > 2) {
    PLANRT_ASSIGN_OR_RETURN(Value inv_out, reshape_to(c, inv, stat_shape, c.node.output(2)));
    c.out.push_back(std::move(inv_out));
  }
  return {};
}

// ---- data movement ---------------------------------------------------------------------------

Status handle_transpose(OpContext& c) {
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(auto perm, c.attr_ints("perm"));
  std::vector<int64_t> p;
  if (perm) {
    p = *perm;
  } else {
    for (int64_t d = x.rank() - 1; d >= 0; --d) p.push_back(d);
  }
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("permute", {in}, {{"dims", p}}, out_name(c)));
  c.out.push_back(std::move(y));
  return {};
}

Status handle_reshape(OpContext& c) {
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(std::vector<SymInt> target, reshape_target(c, x));
  PLANRT_ASSIGN_OR_RETURN(Value y, reshape_to(c, x, target, out_name(c)));
  c.out.push_back(std::move(y));
  return {};
}

Result<std::vector<int64_t>> axes_of(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(auto attr_axes, c.attr_ints("axes"));
  if (attr_axes) return *attr_axes;
  if (c.has(1)) return c.known_ints(1, "axes");
  return std::vector<int64_t>{};
}

Status handle_unsqueeze(OpContext& c) {
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> axes, axes_of(c));
  const int64_t out_rank = x.rank() + static_cast<int64_t>(axes.size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : axes) {
    PLANRT_ASSIGN_OR_RETURN(int64_t ax, norm_axis(c, a, out_rank));
    inserted[ax] = true;
  }
  std::vector<SymInt> target;
  size_t next = 0;
  for (int64_t d = 0; d < out_rank; ++d) target.push_back(inserted[d] ? sym_const(1) : x.shape[next++]);
  PLANRT_ASSIGN_OR_RETURN(Value y, reshape_to(c, x, target, out_name(c)));
  c.out.push_back(std::move(y));
  return {};
}

Status handle_squeeze(OpContext& c) {
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> axes, axes_of(c));
  std::vector<bool> removed(x.rank(), false);
  for (int64_t a : axes) {
    PLANRT_ASSIGN_OR_RETURN(int64_t ax, norm_axis(c, a, x.rank()));
    if (x.shape[ax] != sym_const(1)) return c.error(fmt::format("axis {} does not have size 1", a));
    removed[ax] = true;
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < x.rank(); ++d) removed[d] = x.shape[d] == sym_const(1);
  }
  std::vector<SymInt> target;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (!removed[d]) target.push_back(x.shape[d]);
  }
  PLANRT_ASSIGN_OR_RETURN(Value y, reshape_to(c, x, target, out_name(c)));
  c.out.push_back(std::move(y));
  return {};
}

Status handle_flatten(OpContext& c) {
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(int64_t axis, c.attr_int("axis", 1));
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis > x.rank()) return c.error(fmt::format("axis is out of range for rank {}", x.rank()));
  std::vector<SymInt> target{product(x.shape, 0, axis), product(x.shape, axis, x.shape.size())};
  PLANRT_ASSIGN_OR_RETURN(Value y, reshape_to(c, x, target, out_name(c)));
  c.out.push_back(std::move(y));
  return {};
}

Status handle_concat(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(int64_t axis, c.attr_int("axis", std::nullopt));
  PLANRT_ASSIGN_OR_RETURN(axis, norm_axis(c, axis, c.input(0).rank()));
  std::vector<std::string> inputs;
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (!c.has(i)) continue;
    PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(c.input(i)));
    inputs.push_back(in);
  }
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("concat", inputs, {{"dim", axis}}, out_name(c)));
  c.out.push_back(std::move(y));
  return {};
}

struct SliceBounds {
  int64_t start = 0;
  int64_t end = 0;
  std::string end_dim;  // set: [0:D] with D a named dim, as long as D
};

// One IR slice of x along `axis`.
Result<Value> slice_axis(OpContext& c, const Value& x, int64_t axis, const SliceBounds& b,
                         const std::string& name) {
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x));
  ir::Attrs attrs{{"dim", axis}, {"start", b.start}};
  if (b.end_dim.empty()) {
    attrs["end"] = b.end;
  } else {
    attrs["end"] = b.end_dim;
  }
  return c.im.emit("slice", {in}, std::move(attrs), name);
}

Result<Value> slice_axis(OpContext& c, const Value& x, int64_t axis, int64_t start, int64_t end,
                         const std::string& name) {
  return slice_axis(c, x, axis, SliceBounds{start, end, ""}, name);
}

// ONNX slice bounds on a dim of size `dim` (a constant, or a dim expression: then only
// bounds that do not depend on its value are expressible). An end that is a named dim D on
// a dim of fixed size (x[:, :seq] of a position table) is the slice [0:D].
Result<SliceBounds> slice_bounds(const OpContext& c, const SymInt& dim, const SymInt& start,
                                 const SymInt& end) {
  constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
  if (!sym_is_const(start)) return not_supported(c, "with a start that depends on the dims");
  int64_t s = start.coeff;
  int64_t e;
  if (!sym_is_const(end)) {
    if (end == dim) {
      e = kEnd;
    } else if (sym_is_const(dim) && end.coeff == 1 && end.dims.size() == 1 &&
               std::clamp(s < 0 ? s + dim.coeff : s, int64_t{0}, dim.coeff) == 0 &&
               c.im.dims()[end.dims[0]].max <= dim.coeff) {
      return SliceBounds{0, 0, c.im.dims()[end.dims[0]].name};
    } else {
      return not_supported(c, fmt::format("with an end ({}) that depends on the dims in a way a "
                                          "program cannot express", sym_to_string(end, c.im.dims())));
    }
  } else {
    e = end.coeff;
  }
  if (sym_is_const(dim)) {
    const int64_t d = dim.coeff;
    auto clampi = [d](int64_t v) { return std::clamp(v < 0 ? v + d : v, int64_t{0}, d); };
    s = clampi(s);
    e = e == kEnd ? d : clampi(e);
    return SliceBounds{s, std::max(s, e), ""};
  }
  if (s < 0 || e < 0) return not_supported(c, "with negative bounds on a dim whose size is not fixed");
  return SliceBounds{s, e, ""};
}

Status handle_slice(OpContext& c) {
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(OpContext::SliceArgs a, c.slice_args());
  const auto& [starts, ends, axes, steps] = a;
  Value y = x;
  for (size_t i = 0; i < starts.size(); ++i) {
    if (steps[i] != 1) return not_supported(c, fmt::format("with step {} (only 1)", steps[i]));
    PLANRT_ASSIGN_OR_RETURN(int64_t ax, norm_axis(c, axes[i], x.rank()));
    PLANRT_ASSIGN_OR_RETURN(SliceBounds bounds, slice_bounds(c, x.shape[ax], starts[i], ends[i]));
    const bool last = i + 1 == starts.size();
    PLANRT_ASSIGN_OR_RETURN(y, slice_axis(c, y, ax, bounds,
                                          last ? out_name(c) : fmt::format("{}.{}", out_name(c), i)));
  }
  if (starts.empty()) {
    PLANRT_ASSIGN_OR_RETURN(y, reshape_to(c, x, x.shape, out_name(c)));
  }
  c.out.push_back(std::move(y));
  return {};
}

Status handle_split(OpContext& c) {
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(int64_t axis, c.attr_int("axis", 0));
  PLANRT_ASSIGN_OR_RETURN(axis, norm_axis(c, axis, x.rank()));
  const int64_t outputs = c.node.output_size();
  std::vector<int64_t> sizes;
  PLANRT_ASSIGN_OR_RETURN(auto attr_split, c.attr_ints("split"));
  if (attr_split) {
    sizes = *attr_split;
  } else if (c.has(1)) {
    PLANRT_ASSIGN_OR_RETURN(sizes, c.known_ints(1, "split"));
  }
  const SymInt& dim = x.shape[axis];
  if (sizes.empty()) {
    if (!sym_is_const(dim)) return not_supported(c, "into equal parts of a dim whose size is not fixed");
    const int64_t part = (dim.coeff + outputs - 1) / outputs;  // the last part may be smaller
    for (int64_t i = 0; i < outputs; ++i) sizes.push_back(std::min(part, dim.coeff - i * part));
  }
  if (static_cast<int64_t>(sizes.size()) != outputs) {
    return c.error(fmt::format("split has {} sizes for {} outputs", sizes.size(), outputs));
  }
  int64_t start = 0;
  for (int64_t i = 0; i < outputs; ++i) {
    PLANRT_ASSIGN_OR_RETURN(Value y, slice_axis(c, x, axis, start, start + sizes[i], out_name(c, i)));
    start += sizes[i];
    c.out.push_back(std::move(y));
  }
  if (sym_is_const(dim) && start != dim.coeff) {
    return c.error(fmt::format("split sizes add up to {}, but the dim is {}", start, dim.coeff));
  }
  return {};
}

Status handle_gather(OpContext& c) {
  const Value& data = c.input(0);
  const Value& idx = c.input(1);
  PLANRT_ASSIGN_OR_RETURN(int64_t axis, c.attr_int("axis", 0));
  PLANRT_ASSIGN_OR_RETURN(axis, norm_axis(c, axis, data.rank()));
  if (data.known && idx.iota && axis == 0) {
    // Rows 0..n-1 of a constant table (position embeddings of arange(seq)): a slice.
    const SymInt& n = *idx.iota;
    if (n.coeff != 1 || n.dims.size() != 1 || !sym_is_const(data.shape[0]) ||
        c.im.dims()[n.dims[0]].max > data.shape[0].coeff) {
      return not_supported(c, fmt::format("of rows 0..{} from a table of {} rows",
                                          sym_to_string(n, c.im.dims()), sym_to_string(data.shape[0], c.im.dims())));
    }
    PLANRT_ASSIGN_OR_RETURN(Value rows, slice_axis(c, data, 0, SliceBounds{0, 0, c.im.dims()[n.dims[0]].name},
                                                   out_name(c) + ".rows"));
    std::vector<SymInt> target = idx.shape;
    target.insert(target.end(), data.shape.begin() + 1, data.shape.end());
    PLANRT_ASSIGN_OR_RETURN(Value y, reshape_to(c, rows, target, out_name(c)));
    c.out.push_back(std::move(y));
    return {};
  }
  const bool unit_rows = std::all_of(data.shape.begin() + std::min<int64_t>(1, data.rank()), data.shape.end(),
                                     [](const SymInt& d) { return d == sym_const(1); });
  if (!idx.known && !idx.sym && axis == 0 && data.rank() >= 1 && unit_rows && !data.sym) {
    // Elements of a 1-D tensor (or one of [N, 1, ...]) at run-time positions (transformers'
    // mask lookup, a flattened [batch, seq] mask at batch * seq + position): planrt's take,
    // over the data's bytes as they lie (a flattened value's IR dims are the same row-major
    // elements).
    if (idx.elem != Elem::Int64 && idx.elem != Elem::Int32) {
      return not_supported(c, fmt::format("with indices of type {}", elem_name(idx.elem)));
    }
    PLANRT_ASSIGN_OR_RETURN(std::string x, c.im.ir_of(data, false));
    PLANRT_ASSIGN_OR_RETURN(std::string ids, c.im.ir_of(idx));
    if (data.rank() == 1) {
      PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("take", {x, ids}, {}, out_name(c)));
      c.out.push_back(std::move(y));
      return {};
    }
    // Rows of one element ([N, 1], a Flatten's output): the same elements, the unit dims
    // appended to the indices' shape.
    PLANRT_ASSIGN_OR_RETURN(Value taken, c.im.emit("take", {x, ids}, {}, out_name(c) + ".take"));
    std::vector<SymInt> target = idx.shape;
    target.insert(target.end(), data.shape.begin() + 1, data.shape.end());
    PLANRT_ASSIGN_OR_RETURN(Value y, reshape_to(c, taken, target, out_name(c)));
    c.out.push_back(std::move(y));
    return {};
  }
  if (data.known && !idx.known && !idx.sym) {
    // Run-time indices, or a window of a constant (BERT's position-id buffer sliced to the
    // sequence): embedding rows.
    if (axis != 0 || data.rank() != 2) {
      return not_supported(c, "of run-time indices from a constant that is not a [rows, width] "
                              "table along axis 0");
    }
    if (idx.elem != Elem::Int64 && idx.elem != Elem::Int32) {
      return not_supported(c, fmt::format("with indices of type {}", elem_name(idx.elem)));
    }
    PLANRT_ASSIGN_OR_RETURN(std::string ids, c.im.ir_of(idx));
    PLANRT_ASSIGN_OR_RETURN(std::string table, c.im.ir_of(data));
    PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("embedding", {ids, table}, {}, out_name(c)));
    c.out.push_back(std::move(y));
    return {};
  }
  if (data.is_runtime() && idx.known) {
    const SymInt& dim = data.shape[axis];
    std::vector<int64_t> indices = idx.known->to_i64();
    std::vector<std::string> parts;
    for (size_t k = 0; k < indices.size(); ++k) {
      int64_t i = indices[k];
      if (i < 0) {
        if (!sym_is_const(dim)) return not_supported(c, "with a negative index into a dim whose size is not fixed");
        i += dim.coeff;
      }
      if (i < 0 || (sym_is_const(dim) && i >= dim.coeff)) return c.error(fmt::format("index {} is out of range", indices[k]));
      PLANRT_ASSIGN_OR_RETURN(Value s, slice_axis(c, data, axis, i, i + 1, fmt::format("{}.{}", out_name(c), k)));
      parts.push_back(s.ir);
    }
    // The picked slices side by side along axis, then the indices' shape in place of it.
    Value picked;
    if (parts.size() == 1) {
      picked.ir = parts[0];
    } else {
      PLANRT_ASSIGN_OR_RETURN(picked, c.im.emit("concat", parts, {{"dim", axis}}, out_name(c) + ".picked"));
    }
    picked.elem = data.elem;
    picked.ir_shape = c.im.ir_type(picked.ir)->shape;
    picked.shape = Importer::from_ir_shape(picked.ir_shape);
    std::vector<SymInt> target(data.shape.begin(), data.shape.begin() + axis);
    for (int64_t d : idx.known->shape) target.push_back(sym_const(d));
    target.insert(target.end(), data.shape.begin() + axis + 1, data.shape.end());
    PLANRT_ASSIGN_OR_RETURN(Value y, reshape_to(c, picked, target, out_name(c)));
    c.out.push_back(std::move(y));
    return {};
  }
  if (data.is_runtime() && idx.is_runtime()) {
    // Indices into a run-time tensor pick its slices: planrt needs them when building.
    PLANRT_RETURN_IF_ERROR(c.known_ints(1, "indices").status());
  }
  return not_supported(c, "of this form (supported: run-time indices into a constant [rows, "
                          "width] table, or constant indices of rank <= 1 into a run-time tensor)");
}

Status handle_identity(OpContext& c) {
  Value y = c.input(0);
  c.out.push_back(std::move(y));
  return {};
}

Status handle_dropout(OpContext& c) {
  if (c.has(2)) {
    const Value& training = c.input(2);
    if (!training.known) return not_supported(c, "with training_mode computed at run time");
    if (training.known->to_i64().at(0) != 0) return not_supported(c, "in training mode");
  }
  PLANRT_RETURN_IF_ERROR(handle_identity(c));
  if (c.node.output_size() > 1 && !c.node.output(1).empty()) {
    // The mask: every element kept, in inference.
    const Value& x = c.input(0);
    Value keep = fold::make_known(Tensor::from_i64(Elem::Bool, {}, {1}));
    PLANRT_ASSIGN_OR_RETURN(Value mask, expand_to(c, keep, x.shape, c.node.output(1)));
    c.out.push_back(std::move(mask));
  }
  return {};
}

Status handle_cast(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(int64_t to, c.attr_int("to", std::nullopt));
  if (static_cast<Elem>(to) == c.input(0).elem) return handle_identity(c);
  return emit_cast(c, static_cast<Elem>(to));
}

// Ops that only fold: at run time their inputs would decide shapes or hold masks planrt has
// no tensor type for.
// Expand of a run-time value, or of a constant to a shape with dims (a class token to the
// batch): ONNX's bidirectional broadcast, emitted as planrt's expand.
Status handle_expand(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(std::vector<SymInt> target, c.sym_ints(1, "shape"));
  PLANRT_ASSIGN_OR_RETURN(Value y, expand_to(c, c.input(0), target, out_name(c)));
  c.out.push_back(std::move(y));
  return {};
}

Status build_time_only(OpContext& c) {
  return not_supported(c, "on values computed at run time (planrt evaluates it when the program "
                          "is built, from constants and shapes only)");
}

// Range and ConstantOfShape: their inputs' values decide the output's shape, so each must be
// known when the program is built; the error names the first that is not, and the flag that
// fixes a graph input.
Status shape_deciding_values(OpContext& c) {
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (c.has(i) && c.input(i).is_runtime()) {
      const char* role = c.node.op_type() == "Range" ? (i == 0 ? "start" : i == 1 ? "limit" : "delta") : "shape";
      return c.sym_ints(i, role).status();
    }
  }
  return build_time_only(c);
}

// clang-format off
const OpSpec kOps[] = {
    // op               inputs min, max (-1: any)   outputs max (-1: any)   attributes   handler
    {"Add", 2, 2, 1, {}, handle_add},
    {"Cast", 1, 1, 1, {"to", "saturate"}, handle_cast},
    {"Concat", 1, -1, 1, {"axis"}, handle_concat},
    {"Constant", 0, 0, 1, {"value", "value_float", "value_floats", "value_int", "value_ints"}, build_time_only},
    {"ConstantOfShape", 1, 1, 1, {"value"}, shape_deciding_values},
    {"Div", 2, 2, 1, {}, handle_div},
    {"Dropout", 1, 3, 2, {"ratio", "seed", "is_test"}, handle_dropout},
    {"Erf", 1, 1, 1, {}, handle_erf},
    {"Exp", 1, 1, 1, {}, handle_exp},
    {"Expand", 2, 2, 1, {}, handle_expand},
    {"Flatten", 1, 1, 1, {"axis"}, handle_flatten},
    {"Gather", 2, 2, 1, {"axis"}, handle_gather},
    {"Gelu", 1, 1, 1, {"approximate"}, handle_gelu},
    {"Gemm", 2, 3, 1, {"alpha", "beta", "transA", "transB"}, handle_gemm},
    {"Identity", 1, 1, 1, {}, handle_identity},
    {"LayerNormalization", 2, 3, 3, {"axis", "epsilon", "stash_type"}, handle_layer_norm},
    {"MatMul", 2, 2, 1, {}, handle_matmul},
    {"Mul", 2, 2, 1, {}, handle_mul},
    {"Neg", 1, 1, 1, {}, handle_neg},
    {"Pow", 2, 2, 1, {}, handle_pow},
    {"Range", 3, 3, 1, {}, shape_deciding_values},
    {"Relu", 1, 1, 1, {}, handle_relu},
    {"Reshape", 2, 2, 1, {"allowzero"}, handle_reshape},
    {"Shape", 1, 1, 1, {"start", "end"}, build_time_only},
    {"Sigmoid", 1, 1, 1, {}, handle_sigmoid},
    {"Size", 1, 1, 1, {}, build_time_only},
    {"Slice", 1, 5, 1, {"starts", "ends", "axes"}, handle_slice},
    {"Softmax", 1, 1, 1, {"axis"}, handle_softmax},
    {"LogSoftmax", 1, 1, 1, {"axis"}, handle_log_softmax},
    {"Split", 1, 2, -1, {"axis", "split", "num_outputs"}, handle_split},
    {"Sqrt", 1, 1, 1, {}, handle_sqrt},
    {"Squeeze", 1, 2, 1, {"axes"}, handle_squeeze},
    {"Sub", 2, 2, 1, {}, handle_sub},
    {"Tanh", 1, 1, 1, {}, handle_tanh},
    {"Transpose", 1, 1, 1, {"perm"}, handle_transpose},
    {"Unsqueeze", 1, 2, 1, {"axes"}, handle_unsqueeze},
    {"Where", 3, 3, 1, {}, handle_where},
};
// clang-format on

}  // namespace

Status require_float_input(const OpContext& c, size_t i) { return require_float(c, i); }
Result<std::string> operand_of_type(OpContext& c, const Value& v, Elem elem) { return operand_as(c, v, elem); }
void keep_folded_like(Value& out, const Value& like) { keep_folded(out, like); }
Result<Value> reshape_to_shape(OpContext& c, const Value& x, const std::vector<SymInt>& target,
                               const std::string& name) {
  return reshape_to(c, x, target, name);
}
Result<Value> expand_to(OpContext& c, const Value& x, const std::vector<SymInt>& target, const std::string& name) {
  const size_t rank = std::max(target.size(), x.shape.size());
  std::vector<SymInt> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const SymInt one = sym_const(1);
    const SymInt& a = i + x.shape.size() >= rank ? x.shape[i + x.shape.size() - rank] : one;
    const SymInt& b = i + target.size() >= rank ? target[i + target.size() - rank] : one;
    if (a == one || a == b) {
      out[i] = b;
    } else if (b == one) {
      out[i] = a;
    } else {
      return c.error(fmt::format("{} does not broadcast to {}", c.im.shape_str(x.shape), c.im.shape_str(target)));
    }
  }
  PLANRT_ASSIGN_OR_RETURN(ir::SymShape ir_out, c.im.to_ir_shape(out));
  ir::ShapeSpec spec;
  for (const ir::Dim& d : ir_out) {
    if (d.is_static()) {
      spec.push_back({d.value, ""});
    } else if (d.value == 1) {
      spec.push_back({0, c.im.dims()[d.dim].name});
    } else {
      return not_supported(c, fmt::format("to {} (a dim that is a multiple of a named dim)", c.im.shape_str(out)));
    }
  }
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x));
  return c.im.emit("expand", {in}, {{"shape", spec}}, name);
}

SymInt shape_product(const std::vector<SymInt>& shape, size_t begin, size_t end) {
  return product(shape, begin, end);
}

const OpSpec* find_op_spec(std::string_view op) {
  for (std::span<const OpSpec> table : {std::span<const OpSpec>(kOps), vision_ops, typed_ops, reduce_ops, loss_ops, layout_ops, einsum_ops}) {
    for (const OpSpec& s : table) {
      if (s.op == op) return &s;
    }
  }
  return nullptr;
}

std::vector<std::string_view> supported_ops() {
  std::vector<std::string_view> out;
  for (const OpSpec& s : kOps) out.push_back(s.op);
  for (const OpSpec& s : vision_ops) out.push_back(s.op);
  for (const OpSpec& s : typed_ops) out.push_back(s.op);
  for (const OpSpec& s : reduce_ops) out.push_back(s.op);
  for (const OpSpec& s : loss_ops) out.push_back(s.op);
  for (const OpSpec& s : layout_ops) out.push_back(s.op);
  for (const OpSpec& s : einsum_ops) out.push_back(s.op);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace planrt::importers::onnx
