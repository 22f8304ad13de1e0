// Build-time evaluation (importer.h try_fold): which evaluator a node goes to, and the ones
// over values that are not plain constants: symbolic integer vectors (shapes as expressions
// over the dims), ranges over a dim, and windows of constants (masks of a dim's size). The
// evaluator over known tensors is fold_known.cpp. What folds never reaches the planner.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "importers/onnx/fold_support.h"
#include "importers/onnx/importer.h"

namespace planrt::importers::onnx {
namespace {

using namespace fold;

// ---- symbolic vectors ---------------------------------------------------------------------

Result<SymInt> sym_binary(const OpContext& c, const std::string& op, const SymInt& a, const SymInt& b) {
  const std::vector<ir::DimDecl>& dims = c.im.dims();
  if (sym_is_const(a) && sym_is_const(b)) {
    int64_t x = a.coeff, y = b.coeff;
    int64_t r = 0;
    if (op == "Add" && !__builtin_add_overflow(x, y, &r)) return sym_const(r);
    if (op == "Sub" && !__builtin_sub_overflow(x, y, &r)) return sym_const(r);
    if (op == "Mul" && !__builtin_mul_overflow(x, y, &r)) return sym_const(r);
    if (op == "Add" || op == "Sub" || op == "Mul") return c.error("an integer on a shape overflows");
    if (op == "Div") return sym_const(y == 0 ? 0 : x / y);
    if (op == "Max") return sym_const(std::max(x, y));
    if (op == "Min") return sym_const(std::min(x, y));
  }
  if (op == "Mul") {
    SymInt out{0, a.dims};
    if (__builtin_mul_overflow(a.coeff, b.coeff, &out.coeff)) return c.error("a dim expression overflows");
    out.dims.insert(out.dims.end(), b.dims.begin(), b.dims.end());
    std::sort(out.dims.begin(), out.dims.end());
    return out;
  }
  if (op == "Div") {
    if (b.coeff != 0 && a.coeff % b.coeff == 0 &&
        std::includes(a.dims.begin(), a.dims.end(), b.dims.begin(), b.dims.end())) {
      SymInt out{a.coeff / b.coeff, {}};
      std::set_difference(a.dims.begin(), a.dims.end(), b.dims.begin(), b.dims.end(),
                          std::back_inserter(out.dims));
      return out;
    }
  }
  if ((op == "Add" || op == "Sub") && a.dims == b.dims) {
    const int64_t coeff = op == "Add" ? a.coeff + b.coeff : a.coeff - b.coeff;
    if (coeff == 0) return sym_const(0);
    if (coeff > 0) return SymInt{coeff, a.dims};
  }
  if (op == "Max" || op == "Min") {
    // A dim is >= 1: max(d, k) = d and min(d, k) = k for k <= 1 (c*d >= c).
    const SymInt& s = sym_is_const(a) ? b : a;
    const SymInt& k = sym_is_const(a) ? a : b;
    if (sym_is_const(k) && !sym_is_const(s) && s.coeff > 0 && k.coeff <= s.coeff) {
      return op == "Max" ? s : k;
    }
    if (a == b) return a;
  }
  return c.error(fmt::format("{}({}, {}) over the dims is not expressible when the program is "
                             "built", op, sym_to_string(a, dims), sym_to_string(b, dims)));
}

// Equal over dim expressions: decidable when equal, or when a positive expression is
// compared with a constant it can never reach.
Result<bool> sym_equal(const OpContext& c, const SymInt& a, const SymInt& b) {
  if (a == b) return true;
  if (sym_is_const(a) && sym_is_const(b)) return false;
  const SymInt& s = sym_is_const(a) ? b : a;
  const SymInt& k = sym_is_const(a) ? a : b;
  if (sym_is_const(k) && !sym_is_const(s)) {
    // s lies in [coeff * prod(min), coeff * prod(max)] (coeff > 0): k outside never equals.
    double lo = static_cast<double>(s.coeff), hi = lo;
    for (int32_t d : s.dims) {
      lo *= static_cast<double>(c.im.dims()[d].min);
      hi *= static_cast<double>(c.im.dims()[d].max);
    }
    if (s.coeff > 0 && (static_cast<double>(k.coeff) < lo || static_cast<double>(k.coeff) > hi)) return false;
  }
  // Inside the bounds: true for some dim values and not others.
  return c.error(fmt::format("cannot decide at build time whether {} equals {}",
                             sym_to_string(a, c.im.dims()), sym_to_string(b, c.im.dims())));
}

Result<bool> fold_symbolic(OpContext& c) {
  const std::string& op = c.node.op_type();
  for (const Value* v : c.in) {
    if (v != nullptr && v->rank() > 1) return false;
  }
  const Value& x = c.input(0);
  const bool scalar = x.rank() == 0;
  if (op == "Identity" || op == "Dropout") {
    c.out.push_back(x);
    return true;
  }
  if (op == "Cast") {
    PLANRT_ASSIGN_OR_RETURN(int64_t to, c.attr_int("to", std::nullopt));
    Value v = x;
    v.elem = static_cast<Elem>(to);
    c.out.push_back(std::move(v));
    return true;
  }
  const bool arith = op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min";
  if ((arith || op == "Equal") && c.in.size() == 2) {
    // Elementwise over two vectors of dim expressions, one of them possibly of length 1.
    std::vector<SymInt> a = sym_of(c.input(0)), b = sym_of(c.input(1));
    const size_t n = std::max(a.size(), b.size());
    if ((a.size() != n && a.size() != 1) || (b.size() != n && b.size() != 1)) {
      return c.error("operands do not broadcast");
    }
    std::vector<SymInt> out;
    for (size_t i = 0; i < n; ++i) {
      const SymInt& ai = a[a.size() == 1 ? 0 : i];
      const SymInt& bi = b[b.size() == 1 ? 0 : i];
      if (arith) {
        PLANRT_ASSIGN_OR_RETURN(SymInt r, sym_binary(c, op, ai, bi));
        out.push_back(r);
      } else {
        PLANRT_ASSIGN_OR_RETURN(bool eq, sym_equal(c, ai, bi));
        out.push_back(sym_const(eq ? 1 : 0));
      }
    }
    const bool scalar_out = c.input(0).rank() == 0 && c.input(1).rank() == 0;
    c.out.push_back(make_sym(arith ? x.elem : Elem::Bool, std::move(out), scalar_out));
    return true;
  }
  if (op == "Where") {
    if (!c.input(0).known) return c.error("the condition of Where over dims must be known");
    std::vector<int64_t> cond = c.input(0).known->to_i64();
    std::vector<SymInt> a = sym_of(c.input(1)), b = sym_of(c.input(2));
    const size_t n = std::max({cond.size(), a.size(), b.size()});
    std::vector<SymInt> out;
    for (size_t i = 0; i < n; ++i) {
      const bool pick = cond[cond.size() == 1 ? 0 : i] != 0;
      const std::vector<SymInt>& src = pick ? a : b;
      if (src.size() != n && src.size() != 1) return c.error("operands do not broadcast");
      out.push_back(src[src.size() == 1 ? 0 : i]);
    }
    c.out.push_back(make_sym(c.input(1).elem, std::move(out), false));
    return true;
  }
  if (op == "Unsqueeze") {
    if (!scalar) return false;
    c.out.push_back(make_sym(x.elem, sym_of(x), false));
    return true;
  }
  if (op == "Squeeze") {
    std::vector<SymInt> v = sym_of(x);
    if (scalar || v.size() != 1) return false;
    c.out.push_back(make_sym(x.elem, v, true));
    return true;
  }
  if (op == "Reshape") {
    PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> target, c.known_ints(1, "shape"));
    std::vector<SymInt> v = sym_of(x);
    if (target.empty() && v.size() == 1) {
      c.out.push_back(make_sym(x.elem, v, true));
      return true;
    }
    if (target.size() == 1 && (target[0] == -1 || target[0] == static_cast<int64_t>(v.size()))) {
      c.out.push_back(make_sym(x.elem, v, false));
      return true;
    }
    return false;
  }
  if (op == "Concat") {
    // Symbolic values are vectors (rank 1, or scalars joined as such): axis 0 or -1 only.
    PLANRT_ASSIGN_OR_RETURN(int64_t axis, c.attr_int("axis", std::nullopt));
    if (axis != 0 && axis != -1) return c.error(fmt::format("axis {} is out of range for rank 1", axis));
    std::vector<SymInt> out;
    for (const Value* v : c.in) {
      std::vector<SymInt> part = sym_of(*v);
      out.insert(out.end(), part.begin(), part.end());
    }
    c.out.push_back(make_sym(x.elem, std::move(out), false));
    return true;
  }
  if (op == "Gather") {
    if (!c.input(1).known) return c.error("the indices of Gather over a shape must be known");
    std::vector<SymInt> v = sym_of(x);
    std::vector<SymInt> out;
    for (int64_t i : c.input(1).known->to_i64()) {
      const int64_t n = static_cast<int64_t>(v.size());
      if (i < -n || i >= n) return c.error(fmt::format("index {} is out of range for {} entries", i, n));
      out.push_back(v[i < 0 ? i + n : i]);
    }
    c.out.push_back(make_sym(x.elem, std::move(out), c.input(1).rank() == 0));
    return true;
  }
  if (op == "Slice") {
    std::vector<SymInt> v = sym_of(x);
    const int64_t n = static_cast<int64_t>(v.size());
    PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> starts, c.known_ints(1, "starts"));
    PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> ends, c.known_ints(2, "ends"));
    std::vector<int64_t> steps{1};
    if (c.has(4)) {
      PLANRT_ASSIGN_OR_RETURN(steps, c.known_ints(4, "steps"));
    }
    if (starts.size() != 1 || ends.size() != 1 || steps.size() != 1 || steps[0] != 1) return false;
    const int64_t b = std::clamp(starts[0] < 0 ? starts[0] + n : starts[0], int64_t{0}, n);
    const int64_t e = std::clamp(ends[0] < 0 ? ends[0] + n : ends[0], int64_t{0}, n);
    std::vector<SymInt> out;
    for (int64_t i = b; i < e; ++i) out.push_back(v[i]);
    c.out.push_back(make_sym(x.elem, std::move(out), false));
    return true;
  }
  return false;
}

// Range(0, n, 1) with n a dim expression: the values are not known, but their pattern is.
Result<bool> fold_symbolic_range(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(std::vector<SymInt> start, c.sym_ints(0, "start"));
  PLANRT_ASSIGN_OR_RETURN(std::vector<SymInt> limit, c.sym_ints(1, "limit"));
  PLANRT_ASSIGN_OR_RETURN(std::vector<SymInt> delta, c.sym_ints(2, "delta"));
  if (start.size() != 1 || limit.size() != 1 || delta.size() != 1 || start[0] != sym_const(0) ||
      delta[0] != sym_const(1)) {
    return c.error("a Range over the dims must be Range(0, n, 1)");
  }
  Value v;
  v.elem = c.input(0).elem;
  v.shape = {limit[0]};
  v.iota = limit[0];
  c.out.push_back(std::move(v));
  return true;
}

// What may happen to a range before it indexes a table: a new type, unit dims.
Result<bool> fold_iota(OpContext& c) {
  const std::string& op = c.node.op_type();
  const Value& x = c.input(0);
  Value v = x;
  v.ir.clear();
  if (op == "Cast") {
    PLANRT_ASSIGN_OR_RETURN(int64_t to, c.attr_int("to", std::nullopt));
    if (!elem_is_integer(static_cast<Elem>(to))) return false;
    v.elem = static_cast<Elem>(to);
  } else if (op == "Unsqueeze") {
    std::vector<int64_t> axes;
    PLANRT_ASSIGN_OR_RETURN(auto attr_axes, c.attr_ints("axes"));
    if (attr_axes) {
      axes = *attr_axes;
    } else {
      PLANRT_ASSIGN_OR_RETURN(axes, c.known_ints(1, "axes"));
    }
    const int64_t out_rank = x.rank() + static_cast<int64_t>(axes.size());
    std::vector<bool> inserted(out_rank, false);
    for (int64_t a : axes) {
      PLANRT_ASSIGN_OR_RETURN(int64_t ax, norm_axis(c, a, out_rank));
      inserted[ax] = true;
    }
    v.shape.clear();
    size_t next = 0;
    for (int64_t d = 0; d < out_rank; ++d) v.shape.push_back(inserted[d] ? sym_const(1) : x.shape[next++]);
  } else if (op != "Identity") {
    return false;
  }
  c.out.push_back(std::move(v));
  return true;
}

// ---- windows of known tensors ------------------------------------------------------------

// A prefix slice of a known tensor (or of a window) whose ends are dims: a window.
Result<bool> fold_window_slice(OpContext& c) {
  const Value& x = c.input(0);
  const Tensor& base = x.window_base ? *x.window_base : *x.known;
  PLANRT_ASSIGN_OR_RETURN(OpContext::SliceArgs a, c.slice_args());
  Value v = x;
  v.ir.clear();
  if (!v.window_base) {
    v.window_base = *x.known;
    v.known.reset();
  }
  for (size_t i = 0; i < a.starts.size(); ++i) {
    PLANRT_ASSIGN_OR_RETURN(int64_t ax, norm_axis(c, a.axes[i], x.rank()));
    const SymInt& end = a.ends[i];
    const int64_t size = base.shape[ax];
    if (a.steps[i] != 1 || a.starts[i] != sym_const(0)) return false;
    if (sym_is_const(end)) {
      if (end.coeff < size && end.coeff >= 0 && sym_is_const(v.shape[ax])) return false;  // a static slice
      continue;  // to the end: the window keeps its size along ax
    }
    if (end == v.shape[ax]) continue;
    if (end.coeff != 1 || end.dims.size() != 1 || c.im.dims()[end.dims[0]].max > size) return false;
    v.shape[ax] = end;
  }
  c.out.push_back(std::move(v));
  return true;
}

// Elementwise ops, Cast, Where and Trilu over windows and known scalars: the op on the
// bases, seen through the broadcast window.
Result<bool> fold_window_op(OpContext& c) {
  static const std::set<std::string, std::less<>> kOps = {
      "Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
      "And", "Or", "Xor", "Not", "Neg", "Cast", "Where", "Trilu", "Identity", "Max", "Min"};
  const std::string& op = c.node.op_type();
  if (!kOps.contains(op)) return false;
  std::vector<Value> bases;
  std::vector<std::vector<SymInt>> shapes;
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (!c.has(i)) {
      bases.emplace_back();
      continue;
    }
    const Value& v = c.input(i);
    if (op == "Trilu" && i == 1) {
      bases.push_back(v);
      continue;
    }
    if (v.window_base) {
      bases.push_back(make_known(*v.window_base));
      shapes.push_back(v.shape);
    } else if (v.known && v.known->numel() == 1) {
      bases.push_back(v);
    } else {
      return false;  // a non-scalar constant beside a window: computed at run time instead
    }
  }
  // Windows must agree where they are not broadcast.
  std::vector<SymInt> shape = shapes.at(0);
  for (const auto& s : shapes) {
    if (s.size() != shape.size()) return false;
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] == shape[d] || s[d] == sym_const(1)) continue;
      if (shape[d] != sym_const(1)) return false;
      shape[d] = s[d];
    }
  }
  OpContext inner{c.im, c.node, {}, {}};
  for (size_t i = 0; i < bases.size(); ++i) inner.in.push_back(c.has(i) ? &bases[i] : nullptr);
  PLANRT_ASSIGN_OR_RETURN(bool folded, fold_known(inner));
  if (!folded || inner.out.size() != 1 || !inner.out[0].known) return false;
  Value v;
  v.elem = inner.out[0].elem;
  v.shape = shape;
  v.window_base = *inner.out[0].known;
  if (v.window_base->shape.size() != shape.size()) return false;
  c.out.push_back(std::move(v));
  return true;
}

// ConstantOfShape of a shape over the dims: the fill at the dims' largest sizes, windowed.
Result<bool> fold_window_fill(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(std::vector<SymInt> shape, c.sym_ints(0, "shape"));
  std::vector<int64_t> at_max;
  for (const SymInt& d : shape) {
    int64_t n = d.coeff;
    for (int32_t dim : d.dims) n *= c.im.dims()[dim].max;
    if (n < 1) return c.error("a dim of the shape is not positive");
    at_max.push_back(n);
  }
  Tensor fill = Tensor::from_f64(Elem::Float, {1}, {0.0});
  if (const auto* a = c.attr("value")) {
    ExternalDataContext none{".", {}};
    PLANRT_ASSIGN_OR_RETURN(fill, read_tensor(a->t(), none, nullptr));
    if (fill.numel() != 1) return c.error("attribute 'value' must hold one element");
  }
  if (numel_of(at_max) > kMaxFoldElements) return too_large(c, numel_of(at_max));
  Value v;
  v.elem = fill.elem;
  v.shape = shape;
  v.window_base = gather_bytes(fill, at_max, [](int64_t) { return int64_t{0}; });
  c.out.push_back(std::move(v));
  return true;
}

}  // namespace

Result<bool> try_fold(OpContext& c) {
  const std::string& op = c.node.op_type();
  if (op == "Constant") {
    PLANRT_ASSIGN_OR_RETURN(Value v, fold_constant(c));
    c.out.push_back(std::move(v));
    return true;
  }
  if (op == "Shape" || op == "Size") {
    if (!c.has(0)) return c.error("input 0 is missing");
    const Value& x = c.input(0);
    std::vector<SymInt> dims = x.shape;
    if (op == "Size") {
      SymInt n = sym_const(1);
      for (const SymInt& d : dims) {
        n.coeff *= d.coeff;
        n.dims.insert(n.dims.end(), d.dims.begin(), d.dims.end());
      }
      std::sort(n.dims.begin(), n.dims.end());
      c.out.push_back(make_sym(Elem::Int64, {n}, true));
      return true;
    }
    const int64_t rank = x.rank();
    PLANRT_ASSIGN_OR_RETURN(int64_t start, c.attr_int("start", 0));
    PLANRT_ASSIGN_OR_RETURN(int64_t end, c.attr_int("end", rank));
    start = std::clamp(start < 0 ? start + rank : start, int64_t{0}, rank);
    end = std::clamp(end < 0 ? end + rank : end, int64_t{0}, rank);
    std::vector<SymInt> part;
    for (int64_t i = start; i < end; ++i) part.push_back(dims[i]);
    c.out.push_back(make_sym(Elem::Int64, std::move(part), false));
    return true;
  }
  if (c.in.empty() || !all_build_time(c)) return false;
  if (!c.has(0)) return false;
  if (op == "Range" && !all_known(c)) return fold_symbolic_range(c);
  if (c.input(0).iota) return fold_iota(c);
  if (op == "ConstantOfShape" && c.input(0).sym) return fold_window_fill(c);
  if (op == "Slice" && (c.input(0).known || c.input(0).window_base) && !all_known(c)) {
    return fold_window_slice(c);
  }
  for (const Value* v : c.in) {
    if (v != nullptr && v->window_base) return fold_window_op(c);
  }
  if (all_known(c)) return fold_known(c);
  return fold_symbolic(c);
}

}  // namespace planrt::importers::onnx
