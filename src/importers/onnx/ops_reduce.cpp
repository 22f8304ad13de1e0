// The run-time side of ONNX's reductions (ReduceSum, ReduceMean, ReduceMax, ReduceMin,
// ReduceProd, and ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp as
// ONNX defines them from those), ArgMax, ArgMin, Hardmax and CumSum. planrt's reductions
// take one run of adjacent dims (kernels/op_plans.h); any other set of axes is permuted to
// the end first.
#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "importers/onnx/ops_support.h"

namespace planrt::importers::onnx {
namespace {

Status not_supported(const OpContext& c, std::string what) {
  return Status(ErrorCode::NotSupported, fmt::format("{} {}", c.node.op_type(), what));
}

Result<int64_t> norm_axis(const OpContext& c, int64_t axis, int64_t rank) {
  // A scalar reduces over its one (implicit) element: axis 0 and -1 name it.
  if (rank == 0 && (axis == 0 || axis == -1)) return 0;
  if (axis < -rank || axis >= rank) {
    return c.error(fmt::format("axis {} is out of range for rank {}", axis, rank));
  }
  return axis < 0 ? axis + rank : axis;
}

// The axes a Reduce* node reduces, normalized, sorted and distinct: the attribute `axes`
// (ReduceSum before opset 13, the others before 18) or input 1, known at build time. None
// given: every axis, or none at all with noop_with_empty_axes (then nullopt: y = x).
Result<std::optional<std::vector<int64_t>>> reduce_axes(OpContext& c) {
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(int64_t noop, c.attr_int("noop_with_empty_axes", 0));
  PLANRT_ASSIGN_OR_RETURN(auto attr_axes, c.attr_ints("axes"));
  std::vector<int64_t> axes;
  if (attr_axes) {
    axes = *attr_axes;
  } else if (c.has(1)) {
    // Known at build time (planrt plans each reduction's shape); known_ints says so otherwise.
    PLANRT_ASSIGN_OR_RETURN(axes, c.known_ints(1, "axes"));
  }
  if (axes.empty()) {
    if (noop != 0) return std::optional<std::vector<int64_t>>();
    axes.resize(static_cast<size_t>(x.rank()));
    std::iota(axes.begin(), axes.end(), int64_t{0});
  }
  for (int64_t& a : axes) {
    PLANRT_ASSIGN_OR_RETURN(a, norm_axis(c, a, x.rank()));
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) {
    return c.error("axes name one axis twice");
  }
  if (x.rank() == 0) axes.clear();  // a scalar: nothing to reduce over
  return std::optional<std::vector<int64_t>>(std::move(axes));
}

// y = `op` (reduce_sum ... reduce_prod) of x over `axes` (sorted, distinct), those axes kept
// as 1 or dropped. No axes (a scalar x): y is x.
Result<Value> emit_reduce(OpContext& c, const std::string& op, const Value& x,
                          const std::vector<int64_t>& axes, bool keepdims, const std::string& name) {
  if (axes.empty()) return x;
  const bool adjacent = axes.back() - axes.front() + 1 == static_cast<int64_t>(axes.size());
  if (adjacent) {
    // A folded x (importer.h, Value::folded) stays folded when its leading dim is kept.
    const bool keep = x.folded != 0 && axes.front() != 0 && keepdims;
    std::vector<int64_t> dims = axes;
    if (keep) {
      for (int64_t& a : dims) a += x.folded - 1;
    }
    PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x, !keep));
    PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit(op, {in}, {{"dims", dims}, {"keepdim", keepdims}}, name));
    if (keep) keep_folded_like(y, x);
    return y;
  }
  // The kept axes first, in order, then the reduced ones: one trailing run to reduce.
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (!std::binary_search(axes.begin(), axes.end(), d)) perm.push_back(d);
  }
  const auto kept = static_cast<int64_t>(perm.size());
  perm.insert(perm.end(), axes.begin(), axes.end());
  std::vector<int64_t> trailing(axes.size());
  std::iota(trailing.begin(), trailing.end(), kept);
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x));
  PLANRT_ASSIGN_OR_RETURN(Value moved, c.im.emit("permute", {in}, {{"dims", perm}}, name + ".moved"));
  if (!keepdims) {
    return c.im.emit(op, {moved.ir}, {{"dims", trailing}, {"keepdim", false}}, name);
  }
  PLANRT_ASSIGN_OR_RETURN(Value reduced, c.im.emit(op, {moved.ir}, {{"dims", trailing}, {"keepdim", false}},
                                                   name + ".reduced"));
  std::vector<SymInt> target = x.shape;
  for (int64_t a : axes) target[static_cast<size_t>(a)] = sym_const(1);
  return reshape_to_shape(c, reduced, target, name);
}

Result<Value> elementwise(OpContext& c, const std::string& op, std::vector<std::string> inputs,
                          const std::string& name) {
  return c.im.emit(op, std::move(inputs), {}, name);
}

// What a Reduce* op computes around planrt's reduction: `pre` on each element before it,
// `post` on the result (ONNX's definitions of ReduceL1 ... ReduceLogSum).
enum class Around { None, Abs, Square, Sqrt, Log };

struct ReduceSpec {
  std::string_view onnx;
  std::string_view op;  // planrt's reduction
  Around pre;
  Around post;
};

constexpr ReduceSpec kReductions[] = {
    {"ReduceSum", "reduce_sum", Around::None, Around::None},
    {"ReduceMean", "reduce_mean", Around::None, Around::None},
    {"ReduceMax", "reduce_max", Around::None, Around::None},
    {"ReduceMin", "reduce_min", Around::None, Around::None},
    {"ReduceProd", "reduce_prod", Around::None, Around::None},
    {"ReduceL1", "reduce_sum", Around::Abs, Around::None},
    {"ReduceL2", "reduce_sum", Around::Square, Around::Sqrt},
    {"ReduceSumSquare", "reduce_sum", Around::Square, Around::None},
    {"ReduceLogSum", "reduce_sum", Around::None, Around::Log},
};

Result<Value> apply(OpContext& c, Around what, const Value& v, const std::string& name) {
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(v));
  switch (what) {
    case Around::Abs:
      return elementwise(c, "abs", {in}, name);
    case Around::Square:
      return elementwise(c, "mul", {in, in}, name);
    case Around::Sqrt:
      return elementwise(c, "sqrt", {in}, name);
    case Around::Log:
      return elementwise(c, "log", {in}, name);
    case Around::None:
      break;
  }
  return v;
}

Status handle_reduction(OpContext& c) {
  const ReduceSpec* spec = nullptr;
  for (const ReduceSpec& s : kReductions) {
    if (s.onnx == c.node.op_type()) spec = &s;
  }
  if (spec == nullptr) return c.error("is not a reduction planrt knows");
  PLANRT_RETURN_IF_ERROR(require_float_input(c, 0));
  PLANRT_ASSIGN_OR_RETURN(int64_t keepdims, c.attr_int("keepdims", 1));
  PLANRT_ASSIGN_OR_RETURN(auto axes, reduce_axes(c));
  const std::string& name = c.node.output(0);
  Value x = c.input(0);
  if (!axes) {  // noop_with_empty_axes: the reduction is the identity; pre and post still apply
    PLANRT_ASSIGN_OR_RETURN(x, apply(c, spec->pre, x, name + ".pre"));
    PLANRT_ASSIGN_OR_RETURN(Value y, apply(c, spec->post, x, name));
    c.out.push_back(std::move(y));
    return {};
  }
  const bool post = spec->post != Around::None;
  PLANRT_ASSIGN_OR_RETURN(x, apply(c, spec->pre, x, name + ".pre"));
  PLANRT_ASSIGN_OR_RETURN(Value y, emit_reduce(c, std::string(spec->op), x, *axes, keepdims != 0,
                                               post ? name + ".reduced" : name));
  PLANRT_ASSIGN_OR_RETURN(y, apply(c, spec->post, y, name));
  c.out.push_back(std::move(y));
  return {};
}

// log(sum(exp(x - m))) + m with m the max over the axes: no overflow for large x.
Status handle_reduce_log_sum_exp(OpContext& c) {
  PLANRT_RETURN_IF_ERROR(require_float_input(c, 0));
  PLANRT_ASSIGN_OR_RETURN(int64_t keepdims, c.attr_int("keepdims", 1));
  PLANRT_ASSIGN_OR_RETURN(auto axes, reduce_axes(c));
  const std::string& name = c.node.output(0);
  const Value& x = c.input(0);
  if (!axes || axes->empty()) {  // log(exp(x)) is x
    c.out.push_back(x);
    return {};
  }
  PLANRT_ASSIGN_OR_RETURN(Value m, emit_reduce(c, "reduce_max", x, *axes, true, name + ".max"));
  PLANRT_ASSIGN_OR_RETURN(std::string xi, c.im.ir_of(x));
  PLANRT_ASSIGN_OR_RETURN(std::string mi, c.im.ir_of(m));
  PLANRT_ASSIGN_OR_RETURN(Value d, elementwise(c, "sub", {xi, mi}, name + ".shifted"));
  PLANRT_ASSIGN_OR_RETURN(Value e, elementwise(c, "exp", {d.ir}, name + ".exp"));
  PLANRT_ASSIGN_OR_RETURN(Value s, emit_reduce(c, "reduce_sum", e, *axes, keepdims != 0, name + ".sum"));
  PLANRT_ASSIGN_OR_RETURN(std::string si, c.im.ir_of(s));
  PLANRT_ASSIGN_OR_RETURN(Value l, elementwise(c, "log", {si}, name + ".log"));
  Value m_out = m;
  if (keepdims == 0) {
    PLANRT_ASSIGN_OR_RETURN(m_out, emit_reduce(c, "reduce_max", x, *axes, false, name + ".max_dropped"));
  }
  PLANRT_ASSIGN_OR_RETURN(std::string mo, c.im.ir_of(m_out));
  PLANRT_ASSIGN_OR_RETURN(Value y, elementwise(c, "add", {l.ir, mo}, name));
  c.out.push_back(std::move(y));
  return {};
}

Status arg_reduce(OpContext& c, const std::string& op) {
  PLANRT_RETURN_IF_ERROR(require_float_input(c, 0));
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(int64_t axis, c.attr_int("axis", 0));
  PLANRT_ASSIGN_OR_RETURN(axis, norm_axis(c, axis, x.rank()));
  PLANRT_ASSIGN_OR_RETURN(int64_t keepdims, c.attr_int("keepdims", 1));
  PLANRT_ASSIGN_OR_RETURN(int64_t last, c.attr_int("select_last_index", 0));
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit(op, {in},
                                             {{"dim", axis}, {"keepdim", keepdims != 0},
                                              {"select_last_index", last != 0}},
                                             c.node.output(0)));
  c.out.push_back(std::move(y));
  return {};
}

Status handle_argmax(OpContext& c) { return arg_reduce(c, "argmax"); }
Status handle_argmin(OpContext& c) { return arg_reduce(c, "argmin"); }

// Hardmax: 1 at each line's first largest element along the axis, 0 elsewhere; before
// opset 13 over x flattened to [prod(:axis), prod(axis:)] (default axis 1), from 13 along
// one axis (default -1). Built as cast(argmax(x, keepdim) == arange(n) along the axis).
Status handle_hardmax(OpContext& c) {
  PLANRT_RETURN_IF_ERROR(require_float_input(c, 0));
  const std::string& name = c.node.output(0);
  Value x = c.input(0);
  const bool coerced = c.im.opset() < 13;
  PLANRT_ASSIGN_OR_RETURN(int64_t axis, c.attr_int("axis", coerced ? 1 : -1));
  if (x.rank() == 0) return c.error("takes a tensor of rank 1 or more");
  PLANRT_ASSIGN_OR_RETURN(axis, norm_axis(c, axis, x.rank()));
  const std::vector<SymInt> shape = x.shape;
  if (coerced) {
    std::vector<SymInt> flat{shape_product(shape, 0, static_cast<size_t>(axis)),
                             shape_product(shape, static_cast<size_t>(axis), shape.size())};
    PLANRT_ASSIGN_OR_RETURN(x, reshape_to_shape(c, x, flat, name + ".2d"));
    axis = 1;
  }
  const SymInt& n = x.shape[static_cast<size_t>(axis)];
  if (!sym_is_const(n)) {
    return not_supported(c, fmt::format("along an axis of run-time size {} (the one-hot row is a "
                                        "constant of the axis' size)", c.im.shape_str({n})));
  }
  std::vector<int64_t> iota_shape(static_cast<size_t>(x.rank() - axis), 1);
  iota_shape[0] = n.coeff;
  std::vector<int64_t> positions(static_cast<size_t>(n.coeff));
  std::iota(positions.begin(), positions.end(), int64_t{0});
  PLANRT_ASSIGN_OR_RETURN(std::string iota,
                          c.im.constant(Tensor::from_i64(Elem::Int64, iota_shape, positions), name + ".positions"));
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x));
  PLANRT_ASSIGN_OR_RETURN(Value best, c.im.emit("argmax", {in},
                                                {{"dim", axis}, {"keepdim", true}, {"select_last_index", false}},
                                                name + ".argmax"));
  PLANRT_ASSIGN_OR_RETURN(Value hot, elementwise(c, "equal", {best.ir, iota}, name + ".hot"));
  PLANRT_ASSIGN_OR_RETURN(DType dtype, to_dtype(x.elem));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("cast", {hot.ir}, {{"dtype", std::string(dtype_name(dtype))}},
                                             coerced ? name + ".flat" : name));
  if (coerced) {
    PLANRT_ASSIGN_OR_RETURN(y, reshape_to_shape(c, y, shape, name));
  }
  c.out.push_back(std::move(y));
  return {};
}

// CumSum(x, axis): the axis known at build time; attributes exclusive and reverse.
Status handle_cumsum(OpContext& c) {
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> axis, c.known_ints(1, "axis"));
  if (axis.size() != 1) return c.error(fmt::format("axis has {} values; expected one", axis.size()));
  if (x.rank() == 0) return c.error("takes a tensor of rank 1 or more");
  PLANRT_ASSIGN_OR_RETURN(int64_t dim, norm_axis(c, axis[0], x.rank()));
  PLANRT_ASSIGN_OR_RETURN(int64_t exclusive, c.attr_int("exclusive", 0));
  PLANRT_ASSIGN_OR_RETURN(int64_t reverse, c.attr_int("reverse", 0));
  Result<DType> dtype = to_dtype(x.elem);
  if (!dtype.ok()) return not_supported(c, fmt::format("at run time: {}", dtype.status().message()));
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("cumsum", {in},
                                             {{"dim", dim}, {"exclusive", exclusive != 0}, {"reverse", reverse != 0}},
                                             c.node.output(0)));
  c.out.push_back(std::move(y));
  return {};
}

// clang-format off
const OpSpec kReduceOps[] = {
    // op                min max outs attributes                                      handler
    {"ArgMax",            1, 1, 1, {"axis", "keepdims", "select_last_index"},           handle_argmax},
    {"ArgMin",            1, 1, 1, {"axis", "keepdims", "select_last_index"},           handle_argmin},
    {"CumSum",            2, 2, 1, {"exclusive", "reverse"},                            handle_cumsum},
    {"Hardmax",           1, 1, 1, {"axis"},                                            handle_hardmax},
    {"ReduceL1",          1, 2, 1, {"axes", "keepdims", "noop_with_empty_axes"},        handle_reduction},
    {"ReduceL2",          1, 2, 1, {"axes", "keepdims", "noop_with_empty_axes"},        handle_reduction},
    {"ReduceLogSum",      1, 2, 1, {"axes", "keepdims", "noop_with_empty_axes"},        handle_reduction},
    {"ReduceLogSumExp",   1, 2, 1, {"axes", "keepdims", "noop_with_empty_axes"},        handle_reduce_log_sum_exp},
    {"ReduceMax",         1, 2, 1, {"axes", "keepdims", "noop_with_empty_axes"},        handle_reduction},
    {"ReduceMean",        1, 2, 1, {"axes", "keepdims", "noop_with_empty_axes"},        handle_reduction},
    {"ReduceMin",         1, 2, 1, {"axes", "keepdims", "noop_with_empty_axes"},        handle_reduction},
    {"ReduceProd",        1, 2, 1, {"axes", "keepdims", "noop_with_empty_axes"},        handle_reduction},
    {"ReduceSum",         1, 2, 1, {"axes", "keepdims", "noop_with_empty_axes"},        handle_reduction},
    {"ReduceSumSquare",   1, 2, 1, {"axes", "keepdims", "noop_with_empty_axes"},        handle_reduction},
};
// clang-format on

}  // namespace

const std::span<const OpSpec> reduce_ops = kReduceOps;

}  // namespace planrt::importers::onnx
