// The run-time side of ONNX's math functions, comparisons, logic, selection and casts (the
// typed elementwise family of planrt, kernels/elementwise_ops.h) and GatherElements, over
// floating, integer and bool tensors. Values known when building never get here (fold.cpp evaluates them).
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "importers/onnx/ops_support.h"

namespace planrt::importers::onnx {
namespace {

Status not_supported(const OpContext& c, std::string what) {
  return Status(ErrorCode::NotSupported, fmt::format("{} {}", c.node.op_type(), what));
}

// The IR operand for input `v` read as `elem` (a known value converted; ONNX gives the
// operands of these ops one type, so a run-time value already has it).
Result<std::string> operand(OpContext& c, const Value& v, Elem elem) {
  if (v.known && v.known->elem != elem) {
    Tensor t = Tensor::from_f64(elem, v.known->shape, v.known->to_f64());
    return c.im.constant(t, v.ir.empty() ? "const" : v.ir);
  }
  return c.im.ir_of(v);
}

// The elem the operands are read as: the first run-time input's (else input `first`'s).
Elem common_elem(const OpContext& c, size_t first) {
  for (size_t i = first; i < c.in.size(); ++i) {
    if (c.has(i) && c.input(i).is_runtime()) return c.input(i).elem;
  }
  return c.input(first).elem;
}

Status emit_typed(OpContext& c, const std::string& op, const std::vector<const Value*>& inputs,
                  const std::vector<Elem>& elems, ir::Attrs attrs, const std::string& name) {
  std::vector<std::string> ir_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    PLANRT_ASSIGN_OR_RETURN(std::string in, operand(c, *inputs[i], elems[i]));
    ir_inputs.push_back(std::move(in));
  }
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit(op, std::move(ir_inputs), std::move(attrs), name));
  c.out.push_back(std::move(y));
  return {};
}

Status check_dtype(const OpContext& c, size_t i) {
  Result<DType> d = to_dtype(c.input(i).elem);
  if (!d.ok()) return not_supported(c, fmt::format("at run time on input {}: {}", i, d.status().message()));
  return {};
}

// One input, one output of the same elem (or bool for the predicates).
Status unary(OpContext& c, const std::string& op, ir::Attrs attrs = {}) {
  PLANRT_RETURN_IF_ERROR(check_dtype(c, 0));
  return emit_typed(c, op, {&c.input(0)}, {c.input(0).elem}, std::move(attrs), c.node.output(0));
}

// Two inputs of one elem.
Status binary(OpContext& c, const std::string& op) {
  const Elem elem = common_elem(c, 0);
  for (size_t i = 0; i < 2; ++i) {
    PLANRT_RETURN_IF_ERROR(check_dtype(c, i));
    if (c.input(i).elem != elem) {
      return c.error(fmt::format("input {} is {} and the other {}; {} takes one type", i,
                                 elem_name(c.input(i).elem), elem_name(elem), c.node.op_type()));
    }
  }
  return emit_typed(c, op, {&c.input(0), &c.input(1)}, {elem, elem}, {}, c.node.output(0));
}

Status handle_cos(OpContext& c) { return unary(c, "cos"); }
Status handle_sin(OpContext& c) { return unary(c, "sin"); }
Status handle_log(OpContext& c) { return unary(c, "log"); }
Status handle_floor(OpContext& c) { return unary(c, "floor"); }
Status handle_ceil(OpContext& c) { return unary(c, "ceil"); }
Status handle_round(OpContext& c) { return unary(c, "round"); }
Status handle_reciprocal(OpContext& c) { return unary(c, "reciprocal"); }
Status handle_abs(OpContext& c) { return unary(c, "abs"); }
Status handle_sign(OpContext& c) { return unary(c, "sign"); }
Status handle_isnan(OpContext& c) { return unary(c, "isnan"); }
Status handle_not(OpContext& c) { return unary(c, "logical_not"); }

Status handle_isinf(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(int64_t negative, c.attr_int("detect_negative", 1));
  PLANRT_ASSIGN_OR_RETURN(int64_t positive, c.attr_int("detect_positive", 1));
  return unary(c, "isinf", {{"negative", negative != 0}, {"positive", positive != 0}});
}

Status handle_equal(OpContext& c) { return binary(c, "equal"); }
Status handle_less(OpContext& c) { return binary(c, "less"); }
Status handle_less_equal(OpContext& c) { return binary(c, "less_equal"); }
Status handle_greater(OpContext& c) { return binary(c, "greater"); }
Status handle_greater_equal(OpContext& c) { return binary(c, "greater_equal"); }
Status handle_and(OpContext& c) { return binary(c, "logical_and"); }
Status handle_or(OpContext& c) { return binary(c, "logical_or"); }
Status handle_xor(OpContext& c) { return binary(c, "logical_xor"); }

// Max, Min, Sum, Mean over one or more inputs, broadcast together: a chain of binary ops
// (Mean divides the sum by the count).
Status variadic(OpContext& c, const std::string& op, bool mean) {
  const Elem elem = common_elem(c, 0);
  for (size_t i = 0; i < c.in.size(); ++i) {
    PLANRT_RETURN_IF_ERROR(check_dtype(c, i));
    if (c.input(i).elem != elem) {
      return c.error(fmt::format("input {} is {} and input 0 {}; {} takes one type", i,
                                 elem_name(c.input(i).elem), elem_name(elem), c.node.op_type()));
    }
  }
  const std::string& name = c.node.output(0);
  const size_t n = c.in.size();
  if (mean && !elem_is_float(elem)) return not_supported(c, "on integers at run time");
  if (n == 1 && !mean) {
    // One input: the output is that input as a value of its own.
    PLANRT_ASSIGN_OR_RETURN(std::string in, operand(c, c.input(0), elem));
    PLANRT_ASSIGN_OR_RETURN(ir::ShapeSpec spec, c.im.reshape_spec(c.im.ir_type(in)->shape));
    PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("reshape", {in}, {{"shape", spec}}, name));
    c.out.push_back(std::move(y));
    return {};
  }
  PLANRT_ASSIGN_OR_RETURN(std::string acc, operand(c, c.input(0), elem));
  for (size_t i = 1; i < n; ++i) {
    PLANRT_ASSIGN_OR_RETURN(std::string next, operand(c, c.input(i), elem));
    const bool last = i + 1 == n && !mean;
    PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit(op, {acc, next}, {}, last ? name : name + ".part"));
    acc = y.ir;
    if (last) c.out.push_back(std::move(y));
  }
  if (mean) {
    Tensor count = Tensor::from_f64(elem, {}, {static_cast<double>(n)});
    PLANRT_ASSIGN_OR_RETURN(std::string k, c.im.constant(count, name + ".count"));
    PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("div", {acc, k}, {}, name));
    c.out.push_back(std::move(y));
  }
  return {};
}

Status handle_max(OpContext& c) { return variadic(c, "maximum", false); }
Status handle_min(OpContext& c) { return variadic(c, "minimum", false); }
Status handle_sum(OpContext& c) { return variadic(c, "add", false); }
Status handle_mean(OpContext& c) { return variadic(c, "add", true); }

// GatherElements (torch.gather): planrt's gather_elements; data may be a constant (BERT's
// token-type buffer read at the position ids).
Status handle_gather_elements(OpContext& c) {
  const Value& x = c.input(0);
  const Value& idx = c.input(1);
  PLANRT_RETURN_IF_ERROR(check_dtype(c, 0));
  if (idx.elem != Elem::Int32 && idx.elem != Elem::Int64) {
    return c.error(fmt::format("indices are {}, not int32 or int64", elem_name(idx.elem)));
  }
  PLANRT_ASSIGN_OR_RETURN(int64_t axis, c.attr_int("axis", 0));
  const auto rank = static_cast<int64_t>(x.shape.size());
  if (axis < -rank || axis >= rank) return c.error(fmt::format("axis {} is out of range for rank {}", axis, rank));
  if (axis < 0) axis += rank;
  return emit_typed(c, "gather_elements", {&x, &idx}, {x.elem, idx.elem}, {{"dim", axis}}, c.node.output(0));
}

Status handle_mod(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(int64_t fmod, c.attr_int("fmod", 0));
  const Elem elem = common_elem(c, 0);
  if (fmod == 0 && elem_is_float(elem)) return c.error("fmod must be 1 for floating-point inputs");
  for (size_t i = 0; i < 2; ++i) {
    PLANRT_RETURN_IF_ERROR(check_dtype(c, i));
    if (c.input(i).elem != elem) {
      return c.error(fmt::format("input {} is {} and the other {}; Mod takes one type", i,
                                 elem_name(c.input(i).elem), elem_name(elem)));
    }
  }
  return emit_typed(c, "mod", {&c.input(0), &c.input(1)}, {elem, elem}, {{"fmod", fmod != 0}}, c.node.output(0));
}

// CastLike (opset 15): Cast to the second input's type.
Status handle_castlike(OpContext& c) {
  if (c.input(1).elem == c.input(0).elem) {
    c.out.push_back(c.input(0));
    return {};
  }
  return emit_cast(c, c.input(1).elem);
}

// GatherND with batch_dims 0 and whole-element index tuples (transformers' mask lookup,
// attention_mask[batch_idx, kv_idx], as torch 2.11's exporter writes it): the flat position
// sum(idx[..., j] * stride_j), strides from data's dims (a dim's size read at run time where
// it is one), then take.
Status handle_gather_nd(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(int64_t batch_dims, c.attr_int("batch_dims", 0));
  if (batch_dims != 0) return not_supported(c, fmt::format("with batch_dims {} (0 is supported)", batch_dims));
  const Value& data = c.input(0);
  const Value& idx = c.input(1);
  PLANRT_RETURN_IF_ERROR(check_dtype(c, 0));
  if (idx.elem != Elem::Int32 && idx.elem != Elem::Int64) {
    return c.error(fmt::format("indices are {}, not int32 or int64", elem_name(idx.elem)));
  }
  if (idx.rank() < 1 || !sym_is_const(idx.shape.back())) return not_supported(c, "with indices of no fixed last dim");
  const int64_t k = idx.shape.back().coeff;
  if (k < 1 || k > data.rank()) return c.error(fmt::format("index tuples of {} entries into data of rank {}", k, data.rank()));
  for (int64_t d = k; d < data.rank(); ++d) {
    if (data.shape[d] != sym_const(1)) {
      return not_supported(c, "gathering slices of more than one element (index tuples shorter than data's rank)");
    }
  }
  const std::string& name = c.node.output(0);
  PLANRT_ASSIGN_OR_RETURN(std::string ir_idx, c.im.ir_of(idx));
  std::string flat;
  for (int64_t j = 0; j < k; ++j) {
    PLANRT_ASSIGN_OR_RETURN(Value part, c.im.emit("slice", {ir_idx},
                                                  {{"dim", static_cast<int64_t>(idx.rank() - 1)}, {"start", j}, {"end", j + 1}},
                                                  name + ".index"));
    SymInt stride = sym_const(1);
    for (int64_t d = j + 1; d < k; ++d) {
      stride.coeff *= data.shape[d].coeff;
      stride.dims.insert(stride.dims.end(), data.shape[d].dims.begin(), data.shape[d].dims.end());
    }
    std::string term = part.ir;
    if (!(sym_is_const(stride) && stride.coeff == 1)) {
      Value s;
      s.elem = idx.elem;
      s.sym = std::vector<SymInt>{stride};
      s.ir = name + ".stride";
      PLANRT_ASSIGN_OR_RETURN(std::string sv, c.im.ir_of(s));
      PLANRT_ASSIGN_OR_RETURN(Value scaled, c.im.emit("mul", {part.ir, sv}, {}, name + ".offset"));
      term = scaled.ir;
    }
    if (flat.empty()) {
      flat = term;
    } else {
      PLANRT_ASSIGN_OR_RETURN(Value sum, c.im.emit("add", {flat, term}, {}, name + ".flat"));
      flat = sum.ir;
    }
  }
  std::vector<SymInt> out_shape(idx.shape.begin(), idx.shape.end() - 1);
  PLANRT_ASSIGN_OR_RETURN(ir::SymShape ir_rows, c.im.to_ir_shape(out_shape));
  PLANRT_ASSIGN_OR_RETURN(ir::ShapeSpec rows_spec, c.im.reshape_spec(ir_rows));
  PLANRT_ASSIGN_OR_RETURN(Value positions, c.im.emit("reshape", {flat}, {{"shape", rows_spec}}, name + ".positions"));
  PLANRT_ASSIGN_OR_RETURN(std::string x, c.im.ir_of(data, false));
  const bool unit_tail = k < data.rank();
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("take", {x, positions.ir}, {}, unit_tail ? name + ".take" : name));
  if (unit_tail) {
    out_shape.insert(out_shape.end(), data.shape.begin() + k, data.shape.end());
    PLANRT_ASSIGN_OR_RETURN(ir::SymShape ir_out, c.im.to_ir_shape(out_shape));
    PLANRT_ASSIGN_OR_RETURN(ir::ShapeSpec spec, c.im.reshape_spec(ir_out));
    PLANRT_ASSIGN_OR_RETURN(y, c.im.emit("reshape", {y.ir}, {{"shape", spec}}, name));
  }
  c.out.push_back(std::move(y));
  return {};
}

// The functions with no attribute or with number attributes (ONNX's names and defaults):
// planrt's op of the family, its attributes named as in kernels/elementwise_ops.h.
struct Activation {
  std::string_view onnx;
  std::string_view op;
  struct Param {
    std::string_view onnx, planrt;
    double fallback;
  } params[2];
};

constexpr Activation kActivations[] = {
    {"Tan", "tan", {}},
    {"Acos", "acos", {}},
    {"Asin", "asin", {}},
    {"Atan", "atan", {}},
    {"Sinh", "sinh", {}},
    {"Cosh", "cosh", {}},
    {"Asinh", "asinh", {}},
    {"Acosh", "acosh", {}},
    {"Atanh", "atanh", {}},
    {"Softplus", "softplus", {}},
    {"Softsign", "softsign", {}},
    {"Mish", "mish", {}},
    {"LeakyRelu", "leaky_relu", {{"alpha", "alpha", 0.01}}},
    {"Elu", "elu", {{"alpha", "alpha", 1.0}}},
    {"Celu", "celu", {{"alpha", "alpha", 1.0}}},
    {"Selu", "selu", {{"alpha", "alpha", 1.67326319217681884765625}, {"gamma", "gamma", 1.05070102214813232421875}}},
    {"ThresholdedRelu", "thresholded_relu", {{"alpha", "alpha", 1.0}}},
    {"Shrink", "shrink", {{"lambd", "lambd", 0.5}, {"bias", "bias", 0.0}}},
};

Status handle_activation(OpContext& c) {
  for (const Activation& a : kActivations) {
    if (a.onnx != c.node.op_type()) continue;
    if (!elem_is_float(c.input(0).elem)) {
      return not_supported(c, fmt::format("on {} input (a floating-point function)", elem_name(c.input(0).elem)));
    }
    ir::Attrs attrs;
    for (const Activation::Param& p : a.params) {
      if (p.onnx.empty()) continue;
      PLANRT_ASSIGN_OR_RETURN(double v, c.attr_float(p.onnx, p.fallback));
      attrs[std::string(p.planrt)] = v;
    }
    return unary(c, std::string(a.op), std::move(attrs));
  }
  return c.error("is not a function planrt knows");
}

// Trilu on a run-time x: where(keep, x, 0), `keep` a constant bool [rows, cols] (x's last
// two dims, of fixed size; k known at build time, as Trilu's fold reads it).
Status handle_trilu(OpContext& c) {
  const Value& x = c.input(0);
  PLANRT_RETURN_IF_ERROR(check_dtype(c, 0));
  PLANRT_ASSIGN_OR_RETURN(int64_t upper, c.attr_int("upper", 1));
  int64_t k = 0;
  if (c.has(1)) {
    PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> kk, c.known_ints(1, "k"));
    if (kk.size() != 1) return c.error("k must hold one value");
    k = kk[0];
  }
  if (x.rank() < 2) return c.error("input must have rank >= 2");
  const SymInt& r = x.shape[x.shape.size() - 2];
  const SymInt& q = x.shape.back();
  if (!sym_is_const(r) || !sym_is_const(q)) {
    return not_supported(c, fmt::format("at run time over a matrix of run-time size {} (its last two "
                                        "dims must have fixed sizes)", c.im.shape_str(x.shape)));
  }
  const int64_t rows = r.coeff, cols = q.coeff;
  std::vector<uint8_t> keep(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) {
    const int64_t col = i % cols, row = i / cols;
    keep[static_cast<size_t>(i)] = (upper != 0 ? col - row >= k : col - row <= k) ? 1 : 0;
  }
  const std::string& name = c.node.output(0);
  PLANRT_ASSIGN_OR_RETURN(std::string mask, c.im.constant(Tensor::owning(Elem::Bool, {rows, cols}, std::move(keep)),
                                                          name + ".keep"));
  PLANRT_ASSIGN_OR_RETURN(std::string zero, c.im.constant(Tensor::from_f64(x.elem, {}, {0.0}), name + ".zero"));
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("where", {mask, in, zero}, {}, name));
  c.out.push_back(std::move(y));
  return {};
}

// PRelu(x, slope): slope broadcast to x. Before opset 7 a slope [C] is per channel (dim 1
// of x), not broadcast from the right: it is reshaped to [C, 1, ...] first.
Status handle_prelu(OpContext& c) {
  const Value& x = c.input(0);
  const Value& slope = c.input(1);
  if (c.im.opset() < 7 && x.rank() > 2 && slope.rank() == 1 && slope.shape[0] == x.shape[1] &&
      !(slope.shape[0] == x.shape.back())) {
    std::vector<SymInt> per_channel(static_cast<size_t>(x.rank() - 1), sym_const(1));
    per_channel[0] = slope.shape[0];
    PLANRT_ASSIGN_OR_RETURN(Value column, reshape_to_shape(c, slope, per_channel, c.node.output(0) + ".slope"));
    PLANRT_RETURN_IF_ERROR(check_dtype(c, 0));
    if (column.elem != x.elem) return c.error("takes x and slope of one type");
    return emit_typed(c, "prelu", {&x, &column}, {x.elem, x.elem}, {}, c.node.output(0));
  }
  return binary(c, "prelu");
}

// clang-format off
const OpSpec kTypedOps[] = {
    {"Acos", 1, 1, 1, {}, handle_activation},
    {"Acosh", 1, 1, 1, {}, handle_activation},
    {"Asin", 1, 1, 1, {}, handle_activation},
    {"Asinh", 1, 1, 1, {}, handle_activation},
    {"Atan", 1, 1, 1, {}, handle_activation},
    {"Atanh", 1, 1, 1, {}, handle_activation},
    {"Celu", 1, 1, 1, {"alpha"}, handle_activation},
    {"Cosh", 1, 1, 1, {}, handle_activation},
    {"Elu", 1, 1, 1, {"alpha"}, handle_activation},
    {"LeakyRelu", 1, 1, 1, {"alpha"}, handle_activation},
    {"Mish", 1, 1, 1, {}, handle_activation},
    {"PRelu", 2, 2, 1, {}, handle_prelu},
    {"Selu", 1, 1, 1, {"alpha", "gamma"}, handle_activation},
    {"Shrink", 1, 1, 1, {"bias", "lambd"}, handle_activation},
    {"Sinh", 1, 1, 1, {}, handle_activation},
    {"Softplus", 1, 1, 1, {}, handle_activation},
    {"Softsign", 1, 1, 1, {}, handle_activation},
    {"Tan", 1, 1, 1, {}, handle_activation},
    {"ThresholdedRelu", 1, 1, 1, {"alpha"}, handle_activation},
    {"Trilu", 1, 2, 1, {"upper"}, handle_trilu},
    {"Abs", 1, 1, 1, {}, handle_abs},
    {"And", 2, 2, 1, {}, handle_and},
    {"CastLike", 2, 2, 1, {"saturate"}, handle_castlike},
    {"Ceil", 1, 1, 1, {}, handle_ceil},
    {"Cos", 1, 1, 1, {}, handle_cos},
    {"Equal", 2, 2, 1, {}, handle_equal},
    {"Floor", 1, 1, 1, {}, handle_floor},
    {"GatherElements", 2, 2, 1, {"axis"}, handle_gather_elements},
    {"GatherND", 2, 2, 1, {"batch_dims"}, handle_gather_nd},
    {"Greater", 2, 2, 1, {}, handle_greater},
    {"GreaterOrEqual", 2, 2, 1, {}, handle_greater_equal},
    {"IsInf", 1, 1, 1, {"detect_negative", "detect_positive"}, handle_isinf},
    {"IsNaN", 1, 1, 1, {}, handle_isnan},
    {"Less", 2, 2, 1, {}, handle_less},
    {"LessOrEqual", 2, 2, 1, {}, handle_less_equal},
    {"Log", 1, 1, 1, {}, handle_log},
    {"Max", 1, -1, 1, {}, handle_max},
    {"Mean", 1, -1, 1, {}, handle_mean},
    {"Min", 1, -1, 1, {}, handle_min},
    {"Mod", 2, 2, 1, {"fmod"}, handle_mod},
    {"Not", 1, 1, 1, {}, handle_not},
    {"Or", 2, 2, 1, {}, handle_or},
    {"Reciprocal", 1, 1, 1, {}, handle_reciprocal},
    {"Round", 1, 1, 1, {}, handle_round},
    {"Sign", 1, 1, 1, {}, handle_sign},
    {"Sin", 1, 1, 1, {}, handle_sin},
    {"Sum", 1, -1, 1, {}, handle_sum},
    {"Xor", 2, 2, 1, {}, handle_xor},
};
// clang-format on

}  // namespace

Status emit_where(OpContext& c) {
  for (size_t i = 0; i < 3; ++i) PLANRT_RETURN_IF_ERROR(check_dtype(c, i));
  if (c.input(0).elem != Elem::Bool) {
    return c.error(fmt::format("condition is {}, not bool", elem_name(c.input(0).elem)));
  }
  const Elem elem = common_elem(c, 1);
  for (size_t i = 1; i < 3; ++i) {
    if (c.input(i).elem != elem) {
      return c.error(fmt::format("input {} is {} and the other {}; Where takes one type", i,
                                 elem_name(c.input(i).elem), elem_name(elem)));
    }
  }
  return emit_typed(c, "where", {&c.input(0), &c.input(1), &c.input(2)}, {Elem::Bool, elem, elem}, {},
                    c.node.output(0));
}

Status emit_cast(OpContext& c, Elem to) {
  PLANRT_RETURN_IF_ERROR(check_dtype(c, 0));
  Result<DType> target = to_dtype(to);
  if (!target.ok()) return not_supported(c, fmt::format("to {} at run time: {}", elem_name(to), target.status().message()));
  return emit_typed(c, "cast", {&c.input(0)}, {c.input(0).elem}, {{"dtype", std::string(dtype_name(*target))}},
                    c.node.output(0));
}

Status emit_integer_arithmetic(OpContext& c, const std::string& op) { return binary(c, op); }
Status emit_integer_unary(OpContext& c, const std::string& op) { return unary(c, op); }

Status emit_mixed_pow(OpContext& c) {
  const Value& base = c.input(0);
  const Value& exponent = c.input(1);
  for (size_t i = 0; i < 2; ++i) PLANRT_RETURN_IF_ERROR(check_dtype(c, i));
  const std::string& name = c.node.output(0);
  auto cast = [&](const std::string& in, Elem to, const std::string& hint) -> Result<std::string> {
    PLANRT_ASSIGN_OR_RETURN(DType d, to_dtype(to));
    PLANRT_ASSIGN_OR_RETURN(Value v, c.im.emit("cast", {in}, {{"dtype", std::string(dtype_name(d))}}, hint));
    return v.ir;
  };
  PLANRT_ASSIGN_OR_RETURN(std::string b, c.im.ir_of(base));
  PLANRT_ASSIGN_OR_RETURN(std::string e, c.im.ir_of(exponent));
  if (elem_is_float(base.elem)) {
    PLANRT_ASSIGN_OR_RETURN(e, cast(e, base.elem, name + ".exponent"));
    PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("pow", {b, e}, {}, name));
    c.out.push_back(std::move(y));
    return {};
  }
  if (!elem_is_float(exponent.elem)) {
    return c.error(fmt::format("base {} and exponent {}: integers of two types", elem_name(base.elem),
                               elem_name(exponent.elem)));
  }
  PLANRT_ASSIGN_OR_RETURN(b, cast(b, exponent.elem, name + ".base"));
  PLANRT_ASSIGN_OR_RETURN(Value p, c.im.emit("pow", {b, e}, {}, name + ".float"));
  PLANRT_ASSIGN_OR_RETURN(DType d, to_dtype(base.elem));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("cast", {p.ir}, {{"dtype", std::string(dtype_name(d))}}, name));
  c.out.push_back(std::move(y));
  return {};
}

const std::span<const OpSpec> typed_ops{kTypedOps};

}  // namespace planrt::importers::onnx
