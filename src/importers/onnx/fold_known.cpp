// Build-time evaluation of ONNX ops over known tensors (constants): elementwise arithmetic
// and comparisons with broadcasting, casts, and data movement (reshapes, transposes, slices,
// gathers, concatenation, Expand, Range, ConstantOfShape, Trilu, Where). Elementwise folds
// widen to 64-bit values and stop at kMaxFoldElements; data movement copies bytes.
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

namespace planrt::importers::onnx::fold {

std::vector<SymInt> sym_of(const Value& v) {
  if (v.sym) return *v.sym;
  std::vector<SymInt> out;
  for (int64_t x : v.known->to_i64()) out.push_back(sym_const(x));
  return out;
}

// A known value, or (when every entry is a constant) a symbolic vector made known.
Value make_known(Tensor t) {
  Value v;
  v.elem = t.elem;
  for (int64_t d : t.shape) v.shape.push_back(sym_const(d));
  v.known = std::move(t);
  return v;
}

Value make_sym(Elem elem, std::vector<SymInt> entries, bool scalar) {
  const bool all_const = std::all_of(entries.begin(), entries.end(), sym_is_const);
  if (all_const) {
    std::vector<int64_t> ints;
    for (const SymInt& s : entries) ints.push_back(s.coeff);
    std::vector<int64_t> shape;
    if (!scalar) shape.push_back(static_cast<int64_t>(ints.size()));
    return make_known(Tensor::from_i64(elem, shape, ints));
  }
  Value v;
  v.elem = elem;
  if (!scalar) v.shape.push_back(sym_const(static_cast<int64_t>(entries.size())));
  v.sym = std::move(entries);
  return v;
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

Result<std::vector<int64_t>> broadcast(const std::vector<std::vector<int64_t>>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      if (s[i] == o || s[i] == 1) continue;
      if (o != 1) {
        return make_error(ErrorCode::InvalidArgument, "shapes [{}] do not broadcast",
                          fmt::join(s, ", "));
      }
      o = s[i];
    }
  }
  return out;
}

// Offset into a tensor of `shape` broadcast to `out` for the flat output index i.
int64_t broadcast_offset(int64_t i, const std::vector<int64_t>& out, const std::vector<int64_t>& shape) {
  int64_t offset = 0, stride = 1;
  for (int d = static_cast<int>(out.size()) - 1, s = static_cast<int>(shape.size()) - 1; d >= 0; --d, --s) {
    const int64_t idx = i % out[d];
    i /= out[d];
    if (s >= 0) {
      if (shape[s] != 1) offset += idx * stride;
      stride *= shape[s];
    }
  }
  return offset;
}

bool all_known(const OpContext& c) {
  for (const Value* v : c.in) {
    if (v != nullptr && !v->known) return false;
  }
  return true;
}

bool all_build_time(const OpContext& c) {
  for (const Value* v : c.in) {
    if (v != nullptr && v->is_runtime()) return false;
  }
  return true;
}

Status too_large(const OpContext& c, int64_t n) {
  return c.error(fmt::format("folding {} at build time would take {} elements (the limit is {})",
                             c.node.op_type(), n, kMaxFoldElements));
}

// ---- elementwise over known tensors ------------------------------------------------------

using F64Fn = std::function<double(const std::vector<double>&)>;
using I64Fn = std::function<int64_t(const std::vector<int64_t>&)>;

Result<Value> elementwise(const OpContext& c, Elem out_elem, const F64Fn& ff, const I64Fn& fi,
                          bool compute_in_float) {
  std::vector<std::vector<int64_t>> shapes;
  for (const Value* v : c.in) shapes.push_back(v->known->shape);
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> out, broadcast(shapes));
  const int64_t n = numel_of(out);
  if (n > kMaxFoldElements) return too_large(c, n);
  auto apply = [&](auto widen, const auto& fn) {
    using T = typename decltype(widen(Tensor{}))::value_type;
    std::vector<std::vector<T>> ins;
    for (const Value* v : c.in) ins.push_back(widen(*v->known));
    std::vector<T> args(ins.size()), res(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < ins.size(); ++j) args[j] = ins[j][broadcast_offset(i, out, shapes[j])];
      res[i] = fn(args);
    }
    return res;
  };
  if (compute_in_float) {
    return make_known(Tensor::from_f64(out_elem, out, apply([](const Tensor& t) { return t.to_f64(); }, ff)));
  }
  return make_known(Tensor::from_i64(out_elem, out, apply([](const Tensor& t) { return t.to_i64(); }, fi)));
}

Result<Value> binary_known(const OpContext& c, const std::string& op) {
  const Elem e = c.input(0).elem;
  const bool fl = elem_is_float(e);
  F64Fn ff;
  I64Fn fi;
  if (op == "Add") { ff = [](auto& v) { return v[0] + v[1]; }; fi = [](auto& v) { return v[0] + v[1]; }; }
  if (op == "Sub") { ff = [](auto& v) { return v[0] - v[1]; }; fi = [](auto& v) { return v[0] - v[1]; }; }
  if (op == "Mul") { ff = [](auto& v) { return v[0] * v[1]; }; fi = [](auto& v) { return v[0] * v[1]; }; }
  if (op == "Div") {
    ff = [](auto& v) { return v[0] / v[1]; };
    // x / 0 is 0 and min / -1 wraps, as the kernels give (elementwise_ops.h): no trap.
    fi = [](auto& v) {
      if (v[1] == 0) return int64_t{0};
      if (v[1] == -1) return static_cast<int64_t>(0ull - static_cast<uint64_t>(v[0]));
      return v[0] / v[1];
    };
  }
  if (op == "Pow") {
    ff = [](auto& v) { return std::pow(v[0], v[1]); };
    fi = [](auto& v) { return static_cast<int64_t>(std::pow(double(v[0]), double(v[1]))); };
    return elementwise(c, e, ff, fi, true);
  }
  if (op == "Max") { ff = [](auto& v) { return std::max(v[0], v[1]); }; fi = [](auto& v) { return std::max(v[0], v[1]); }; }
  if (op == "Min") { ff = [](auto& v) { return std::min(v[0], v[1]); }; fi = [](auto& v) { return std::min(v[0], v[1]); }; }
  if (op == "Mod") {
    ff = [](auto& v) { return std::fmod(v[0], v[1]); };
    fi = [](auto& v) {
      if (v[1] == 0) return int64_t{0};
      int64_t r = v[0] % v[1];
      return (r != 0 && ((r < 0) != (v[1] < 0))) ? r + v[1] : r;  // the divisor's sign
    };
  }
  auto cmp = [&](auto pred) -> Result<Value> {
    return elementwise(c, Elem::Bool, [pred](auto& v) { return pred(v[0], v[1]) ? 1.0 : 0.0; },
                       [pred](auto& v) { return pred(v[0], v[1]) ? int64_t{1} : int64_t{0}; }, fl);
  };
  if (op == "Equal") return cmp([](auto a, auto b) { return a == b; });
  if (op == "Less") return cmp([](auto a, auto b) { return a < b; });
  if (op == "LessOrEqual") return cmp([](auto a, auto b) { return a <= b; });
  if (op == "Greater") return cmp([](auto a, auto b) { return a > b; });
  if (op == "GreaterOrEqual") return cmp([](auto a, auto b) { return a >= b; });
  if (op == "And") return cmp([](auto a, auto b) { return a != 0 && b != 0; });
  if (op == "Or") return cmp([](auto a, auto b) { return a != 0 || b != 0; });
  if (op == "Xor") return cmp([](auto a, auto b) { return (a != 0) != (b != 0); });
  return elementwise(c, e, ff, fi, fl);
}

Result<Value> unary_known(const OpContext& c, const std::string& op) {
  const Elem e = c.input(0).elem;
  std::function<double(double)> g;
  if (op == "Neg") g = [](double x) { return -x; };
  if (op == "Abs") g = [](double x) { return std::fabs(x); };
  if (op == "Sqrt") g = [](double x) { return std::sqrt(x); };
  if (op == "Exp") g = [](double x) { return std::exp(x); };
  if (op == "Log") g = [](double x) { return std::log(x); };
  if (op == "Erf") g = [](double x) { return std::erf(x); };
  if (op == "Tanh") g = [](double x) { return std::tanh(x); };
  if (op == "Sigmoid") g = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  if (op == "Relu") g = [](double x) { return x < 0 ? 0.0 : x; };
  if (op == "Reciprocal") g = [](double x) { return 1.0 / x; };
  if (op == "Floor") g = [](double x) { return std::floor(x); };
  if (op == "Ceil") g = [](double x) { return std::ceil(x); };
  if (op == "Cos") g = [](double x) { return std::cos(x); };
  if (op == "Sin") g = [](double x) { return std::sin(x); };
  if (op == "Round") g = [](double x) { return std::nearbyint(x); };  // half to even
  if (op == "Sign") g = [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; };
  if (op == "IsNaN" || op == "IsInf") {
    if (!elem_is_float(e)) return c.error(fmt::format("{} of {}", op, elem_name(e)));
    PLANRT_ASSIGN_OR_RETURN(int64_t neg, c.attr_int("detect_negative", 1));
    PLANRT_ASSIGN_OR_RETURN(int64_t pos, c.attr_int("detect_positive", 1));
    const bool nan = op == "IsNaN";
    return elementwise(c, Elem::Bool,
                       [=](auto& v) {
                         const double x = v[0];
                         const bool hit = nan ? std::isnan(x) : std::isinf(x) && (x > 0 ? pos != 0 : neg != 0);
                         return hit ? 1.0 : 0.0;
                       },
                       nullptr, true);
  }
  if (op == "Not") {
    return elementwise(c, Elem::Bool, [](auto& v) { return v[0] == 0 ? 1.0 : 0.0; },
                       [](auto& v) { return v[0] == 0 ? int64_t{1} : int64_t{0}; }, false);
  }
  if (!elem_is_float(e) && (op == "Neg" || op == "Abs" || op == "Relu" || op == "Sign")) {
    std::function<int64_t(int64_t)> gi = op == "Neg" ? [](int64_t x) { return -x; }
                                       : op == "Abs" ? [](int64_t x) { return x < 0 ? -x : x; }
                                       : op == "Sign" ? [](int64_t x) { return int64_t{x > 0} - int64_t{x < 0}; }
                                                     : [](int64_t x) { return x < 0 ? int64_t{0} : x; };
    return elementwise(c, e, nullptr, [gi](auto& v) { return gi(v[0]); }, false);
  }
  return elementwise(c, e, [g](auto& v) { return g(v[0]); }, nullptr, true);
}

// ---- data movement over known tensors ----------------------------------------------------

Tensor gather_bytes(const Tensor& x, std::vector<int64_t> out_shape,
                    const std::function<int64_t(int64_t)>& source_of) {
  const size_t es = elem_size(x.elem);
  const int64_t n = numel_of(out_shape);
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * es);
  for (int64_t i = 0; i < n; ++i) std::memcpy(bytes.data() + i * es, x.bytes.data() + source_of(i) * es, es);
  return Tensor::owning(x.elem, std::move(out_shape), std::move(bytes));
}

Tensor transpose_known(const Tensor& x, const std::vector<int64_t>& perm) {
  std::vector<int64_t> out_shape;
  for (int64_t p : perm) out_shape.push_back(x.shape[p]);
  const std::vector<int64_t> in_strides = strides_of(x.shape);
  return gather_bytes(x, out_shape, [&](int64_t i) {
    int64_t src = 0;
    for (int d = static_cast<int>(out_shape.size()) - 1; d >= 0; --d) {
      src += (i % out_shape[d]) * in_strides[perm[d]];
      i /= out_shape[d];
    }
    return src;
  });
}

Tensor reshape_known(const Tensor& x, std::vector<int64_t> shape) {
  Tensor t = x;
  t.shape = std::move(shape);
  return t;
}

Result<int64_t> norm_axis(const OpContext& c, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return c.error(fmt::format("axis {} is out of range for rank {}", axis, rank));
  }
  return axis < 0 ? axis + rank : axis;
}

Result<Value> fold_constant(const OpContext& c) {
  if (const auto* a = c.attr("value")) {
    ExternalDataContext none{".", {}};
    PLANRT_ASSIGN_OR_RETURN(Tensor t, read_tensor(a->t(), none, nullptr));
    // read_tensor borrows raw_data from the node, which lives as long as the model does;
    // copy it so the value does not depend on that.
    std::vector<uint8_t> bytes(t.bytes.begin(), t.bytes.end());
    return make_known(Tensor::owning(t.elem, t.shape, std::move(bytes)));
  }
  if (const auto* a = c.attr("value_float")) return make_known(Tensor::from_f64(Elem::Float, {}, {a->f()}));
  if (const auto* a = c.attr("value_int")) return make_known(Tensor::from_i64(Elem::Int64, {}, {a->i()}));
  if (const auto* a = c.attr("value_floats")) {
    std::vector<double> v(a->floats().begin(), a->floats().end());
    return make_known(Tensor::from_f64(Elem::Float, {static_cast<int64_t>(v.size())}, v));
  }
  if (const auto* a = c.attr("value_ints")) {
    std::vector<int64_t> v(a->ints().begin(), a->ints().end());
    return make_known(Tensor::from_i64(Elem::Int64, {static_cast<int64_t>(v.size())}, v));
  }
  return c.error("Constant has none of value, value_float(s), value_int(s) (sparse and string "
                 "values are not supported)");
}

// Unsqueeze, Squeeze, Flatten, Reshape: the output shape, over static shapes.
Result<std::vector<int64_t>> reshaped(const OpContext& c, const std::vector<int64_t>& in) {
  const std::string& op = c.node.op_type();
  const int64_t rank = static_cast<int64_t>(in.size());
  if (op == "Flatten") {
    PLANRT_ASSIGN_OR_RETURN(int64_t axis, c.attr_int("axis", 1));
    if (axis < 0) axis += rank;
    if (axis < 0 || axis > rank) return c.error(fmt::format("axis is out of range for rank {}", rank));
    return std::vector<int64_t>{numel_of({in.begin(), in.begin() + axis}), numel_of({in.begin() + axis, in.end()})};
  }
  std::vector<int64_t> axes;
  PLANRT_ASSIGN_OR_RETURN(auto attr_axes, c.attr_ints("axes"));
  if (attr_axes) {
    axes = *attr_axes;
  } else if (c.has(1) && op != "Reshape") {
    PLANRT_ASSIGN_OR_RETURN(axes, c.known_ints(1, "axes"));
  }
  if (op == "Unsqueeze") {
    const int64_t out_rank = rank + static_cast<int64_t>(axes.size());
    std::vector<bool> inserted(out_rank, false);
    for (int64_t a : axes) {
      PLANRT_ASSIGN_OR_RETURN(int64_t ax, norm_axis(c, a, out_rank));
      if (inserted[ax]) return c.error(fmt::format("axes repeat {}", a));
      inserted[ax] = true;
    }
    std::vector<int64_t> out;
    size_t next = 0;
    for (int64_t d = 0; d < out_rank; ++d) out.push_back(inserted[d] ? 1 : in[next++]);
    return out;
  }
  if (op == "Squeeze") {
    std::vector<bool> removed(rank, false);
    if (axes.empty()) {
      for (int64_t d = 0; d < rank; ++d) removed[d] = in[d] == 1;
    }
    for (int64_t a : axes) {
      PLANRT_ASSIGN_OR_RETURN(int64_t ax, norm_axis(c, a, rank));
      if (in[ax] != 1) return c.error(fmt::format("axis {} has size {}, not 1", a, in[ax]));
      removed[ax] = true;
    }
    std::vector<int64_t> out;
    for (int64_t d = 0; d < rank; ++d) {
      if (!removed[d]) out.push_back(in[d]);
    }
    return out;
  }
  // Reshape
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> target, c.known_ints(1, "shape"));
  PLANRT_ASSIGN_OR_RETURN(int64_t allowzero, c.attr_int("allowzero", 0));
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && allowzero == 0) {
      if (i >= in.size()) return c.error(fmt::format("shape entry {} is 0 but the input has rank {}", i, rank));
      target[i] = in[i];
    }
    if (target[i] == -1) {
      if (infer >= 0) return c.error("shape has more than one -1");
      infer = static_cast<int>(i);
    } else if (target[i] < 0) {
      return c.error(fmt::format("shape entry {} is {}", i, target[i]));
    } else {
      known *= target[i];
    }
  }
  const int64_t total = numel_of(in);
  if (infer >= 0) {
    if (known == 0 || total % known != 0) return c.error("the -1 entry of shape does not divide");
    target[infer] = total / known;
  } else if (known != total) {
    return c.error(fmt::format("reshape of {} elements to [{}]", total, fmt::join(target, ", ")));
  }
  return target;
}

Result<Value> fold_slice(const OpContext& c, const Tensor& x) {
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  PLANRT_ASSIGN_OR_RETURN(OpContext::SliceArgs a, c.slice_args());
  std::vector<int64_t> starts, ends;
  for (size_t i = 0; i < a.starts.size(); ++i) {
    if (!sym_is_const(a.starts[i]) || !sym_is_const(a.ends[i])) return c.error("bounds depend on the dims");
    starts.push_back(a.starts[i].coeff);
    ends.push_back(a.ends[i].coeff);
  }
  const std::vector<int64_t>& axes = a.axes;
  const std::vector<int64_t>& steps = a.steps;
  std::vector<int64_t> begin(rank, 0), step(rank, 1), out_shape = x.shape;
  for (size_t i = 0; i < starts.size(); ++i) {
    PLANRT_ASSIGN_OR_RETURN(int64_t ax, norm_axis(c, axes[i], rank));
    const int64_t dim = x.shape[ax];
    const int64_t s = steps[i];
    if (s == 0) return c.error("a step is 0");
    auto clampi = [&](int64_t v, int64_t lo, int64_t hi) { return std::clamp(v < 0 ? v + dim : v, lo, hi); };
    int64_t b, e;
    if (s > 0) {
      b = clampi(starts[i], 0, dim);
      e = clampi(ends[i], 0, dim);
    } else {
      b = clampi(starts[i], -1, dim - 1);
      e = clampi(ends[i], -1, dim - 1);
    }
    const int64_t len = s > 0 ? std::max<int64_t>(0, (e - b + s - 1) / s)
                              : std::max<int64_t>(0, (b - e + (-s) - 1) / (-s));
    begin[ax] = b;
    step[ax] = s;
    out_shape[ax] = len;
  }
  const std::vector<int64_t> in_strides = strides_of(x.shape);
  return make_known(gather_bytes(x, out_shape, [&](int64_t i) {
    int64_t src = 0;
    for (int d = static_cast<int>(rank) - 1; d >= 0; --d) {
      src += (begin[d] + (i % out_shape[d]) * step[d]) * in_strides[d];
      i /= out_shape[d];
    }
    return src;
  }));
}

Result<Value> fold_gather(const OpContext& c, const Tensor& x, const std::vector<int64_t>& idx,
                          const std::vector<int64_t>& idx_shape) {
  PLANRT_ASSIGN_OR_RETURN(int64_t axis, c.attr_int("axis", 0));
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  PLANRT_ASSIGN_OR_RETURN(axis, norm_axis(c, axis, rank));
  std::vector<int64_t> out_shape(x.shape.begin(), x.shape.begin() + axis);
  out_shape.insert(out_shape.end(), idx_shape.begin(), idx_shape.end());
  out_shape.insert(out_shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  const int64_t dim = x.shape[axis];
  const int64_t inner = numel_of({x.shape.begin() + axis + 1, x.shape.end()});
  const int64_t nidx = static_cast<int64_t>(idx.size());
  for (int64_t i : idx) {
    if (i < -dim || i >= dim) return c.error(fmt::format("index {} is out of range for size {}", i, dim));
  }
  return make_known(gather_bytes(x, out_shape, [&](int64_t i) {
    const int64_t in_i = i % inner;
    const int64_t j = (i / inner) % nidx;
    const int64_t o = i / inner / nidx;
    const int64_t k = idx[j] < 0 ? idx[j] + dim : idx[j];
    return (o * dim + k) * inner + in_i;
  }));
}

Result<Value> fold_concat(const OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(int64_t axis, c.attr_int("axis", std::nullopt));
  const Tensor& first = *c.input(0).known;
  const int64_t rank = static_cast<int64_t>(first.shape.size());
  PLANRT_ASSIGN_OR_RETURN(axis, norm_axis(c, axis, rank));
  std::vector<int64_t> out_shape = first.shape;
  out_shape[axis] = 0;
  for (const Value* v : c.in) {
    if (v == nullptr || v->known->shape.size() != first.shape.size() || v->known->elem != first.elem) {
      return c.error("inputs differ in rank or type");
    }
    for (size_t d = 0; d < first.shape.size(); ++d) {
      if (static_cast<int64_t>(d) != axis && v->known->shape[d] != first.shape[d]) {
        return c.error(fmt::format("inputs differ in dim {} ({} vs {})", d, v->known->shape[d], first.shape[d]));
      }
    }
    out_shape[axis] += v->known->shape[axis];
  }
  const size_t es = elem_size(first.elem);
  const int64_t outer = numel_of({first.shape.begin(), first.shape.begin() + axis});
  const int64_t inner = numel_of({first.shape.begin() + axis + 1, first.shape.end()});
  std::vector<uint8_t> bytes;
  bytes.reserve(static_cast<size_t>(numel_of(out_shape)) * es);
  for (int64_t o = 0; o < outer; ++o) {
    for (const Value* v : c.in) {
      const size_t chunk = static_cast<size_t>(v->known->shape[axis] * inner) * es;
      const uint8_t* src = v->known->bytes.data() + o * chunk;
      bytes.insert(bytes.end(), src, src + chunk);
    }
  }
  return make_known(Tensor::owning(first.elem, out_shape, std::move(bytes)));
}

Result<bool> fold_known(OpContext& c) {
  const std::string& op = c.node.op_type();
  static const std::set<std::string, std::less<>> kBinary = {
      "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Equal", "Less", "LessOrEqual",
      "Greater", "GreaterOrEqual", "And", "Or", "Xor"};
  static const std::set<std::string, std::less<>> kUnary = {
      "Neg", "Abs", "Sqrt", "Exp", "Log", "Erf", "Tanh", "Sigmoid", "Relu", "Reciprocal",
      "Floor", "Ceil", "Not", "Cos", "Sin", "Round", "Sign", "IsNaN", "IsInf"};
  if (kBinary.contains(op) && c.in.size() == 2) {
    PLANRT_ASSIGN_OR_RETURN(Value v, binary_known(c, op));
    c.out.push_back(std::move(v));
    return true;
  }
  if ((op == "Max" || op == "Min") && c.in.size() != 2) return false;
  if (kUnary.contains(op)) {
    PLANRT_ASSIGN_OR_RETURN(Value v, unary_known(c, op));
    c.out.push_back(std::move(v));
    return true;
  }
  const Tensor& x = *c.input(0).known;
  if (op == "Cast") {
    PLANRT_ASSIGN_OR_RETURN(int64_t to, c.attr_int("to", std::nullopt));
    const Elem e = static_cast<Elem>(to);
    if (elem_size(e) == 0) return c.error(fmt::format("Cast to {} is not supported", elem_name(e)));
    if (x.numel() > kMaxFoldElements) return too_large(c, x.numel());
    c.out.push_back(make_known(elem_is_float(x.elem) ? Tensor::from_f64(e, x.shape, x.to_f64())
                                                     : Tensor::from_i64(e, x.shape, x.to_i64())));
    return true;
  }
  if (op == "Where") {
    c.out.clear();
    std::vector<std::vector<int64_t>> shapes;
    for (const Value* v : c.in) shapes.push_back(v->known->shape);
    PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> out, broadcast(shapes));
    const int64_t n = numel_of(out);
    if (n > kMaxFoldElements) return too_large(c, n);
    const std::vector<int64_t> cond = c.input(0).known->to_i64();
    const Tensor& a = *c.input(1).known;
    const Tensor& b = *c.input(2).known;
    if (a.elem != b.elem) return c.error("the two branches differ in type");
    const size_t es = elem_size(a.elem);
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * es);
    for (int64_t i = 0; i < n; ++i) {
      const bool pick_a = cond[broadcast_offset(i, out, shapes[0])] != 0;
      const Tensor& src = pick_a ? a : b;
      const int64_t off = broadcast_offset(i, out, pick_a ? shapes[1] : shapes[2]);
      std::memcpy(bytes.data() + i * es, src.bytes.data() + off * es, es);
    }
    c.out.push_back(make_known(Tensor::owning(a.elem, out, std::move(bytes))));
    return true;
  }
  if (op == "Identity" || op == "Dropout") {
    c.out.push_back(c.input(0));
    c.out.back().ir.clear();
    return true;
  }
  if (op == "Unsqueeze" || op == "Squeeze" || op == "Flatten" || op == "Reshape") {
    PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, reshaped(c, x.shape));
    c.out.push_back(make_known(reshape_known(x, shape)));
    return true;
  }
  if (op == "Transpose") {
    PLANRT_ASSIGN_OR_RETURN(auto perm, c.attr_ints("perm"));
    std::vector<int64_t> p;
    if (perm) {
      p = *perm;
    } else {
      for (int64_t d = static_cast<int64_t>(x.shape.size()) - 1; d >= 0; --d) p.push_back(d);
    }
    std::vector<bool> seen(x.shape.size(), false);
    for (int64_t& d : p) {
      PLANRT_ASSIGN_OR_RETURN(d, norm_axis(c, d, static_cast<int64_t>(x.shape.size())));
      if (seen[d]) return c.error("perm repeats a dim");
      seen[d] = true;
    }
    if (p.size() != x.shape.size()) return c.error("perm has the wrong length");
    c.out.push_back(make_known(transpose_known(x, p)));
    return true;
  }
  if (op == "Concat") {
    PLANRT_ASSIGN_OR_RETURN(Value v, fold_concat(c));
    c.out.push_back(std::move(v));
    return true;
  }
  if (op == "Gather") {
    const Tensor& idx = *c.input(1).known;
    PLANRT_ASSIGN_OR_RETURN(Value v, fold_gather(c, x, idx.to_i64(), idx.shape));
    c.out.push_back(std::move(v));
    return true;
  }
  if (op == "Slice") {
    PLANRT_ASSIGN_OR_RETURN(Value v, fold_slice(c, x));
    c.out.push_back(std::move(v));
    return true;
  }
  if (op == "Expand") {
    PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, c.known_ints(1, "shape"));
    PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> out, broadcast({x.shape, shape}));
    if (numel_of(out) > kMaxFoldElements) return too_large(c, numel_of(out));
    c.out.push_back(make_known(gather_bytes(x, out, [&](int64_t i) { return broadcast_offset(i, out, x.shape); })));
    return true;
  }
  if (op == "ConstantOfShape") {
    PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, c.known_ints(0, "shape"));
    Tensor fill = Tensor::from_f64(Elem::Float, {1}, {0.0});
    if (const auto* a = c.attr("value")) {
      ExternalDataContext none{".", {}};
      PLANRT_ASSIGN_OR_RETURN(fill, read_tensor(a->t(), none, nullptr));
      if (fill.numel() != 1) return c.error("attribute 'value' must hold one element");
    }
    for (int64_t d : shape) {
      if (d < 0) return c.error("a dim of the shape is negative");
    }
    if (numel_of(shape) > kMaxFoldElements) return too_large(c, numel_of(shape));
    c.out.push_back(make_known(gather_bytes(fill, shape, [](int64_t) { return int64_t{0}; })));
    return true;
  }
  if (op == "Range") {
    const Elem e = x.elem;
    if (x.numel() != 1 || c.input(1).known->numel() != 1 || c.input(2).known->numel() != 1) {
      return c.error("start, limit and delta must be scalars");
    }
    const double start = x.to_f64()[0], limit = c.input(1).known->to_f64()[0],
                 delta = c.input(2).known->to_f64()[0];
    if (delta == 0) return c.error("delta is 0");
    const double count = std::ceil((limit - start) / delta);
    if (!(count < static_cast<double>(kMaxFoldElements))) return too_large(c, kMaxFoldElements);
    const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
    if (n > kMaxFoldElements) return too_large(c, n);
    std::vector<double> vals;
    for (int64_t i = 0; i < n; ++i) vals.push_back(start + static_cast<double>(i) * delta);
    c.out.push_back(make_known(Tensor::from_f64(e, {n}, vals)));
    return true;
  }
  if (op == "Trilu") {
    PLANRT_ASSIGN_OR_RETURN(int64_t upper, c.attr_int("upper", 1));
    int64_t k = 0;
    if (c.has(1)) {
      PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> kk, c.known_ints(1, "k"));
      if (kk.size() != 1) return c.error("k must hold one value");
      k = kk[0];
    }
    if (x.shape.size() < 2) return c.error("input must have rank >= 2");
    const int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
    std::vector<uint8_t> bytes(x.bytes.begin(), x.bytes.end());
    const size_t es = elem_size(x.elem);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t col = i % cols, row = (i / cols) % rows;
      const bool keep = upper != 0 ? col - row >= k : col - row <= k;
      if (!keep) std::memset(bytes.data() + i * es, 0, es);
    }
    c.out.push_back(make_known(Tensor::owning(x.elem, x.shape, std::move(bytes))));
    return true;
  }
  if (op == "Split") {
    return false;  // run-time handler splits into slices; known splits are rare
  }
  return false;
}

}  // namespace planrt::importers::onnx::fold
