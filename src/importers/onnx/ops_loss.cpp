// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (ONNX's losses, as exported models
// that score their own outputs carry them), built from planrt's ops as ONNX defines them:
//
//   loss[n, d...] = -x[n, t[n, d...], d...] * w[t[n, d...]]     (0 where t == ignore_index)
//   reduction "none": loss; "sum": sum(loss); "mean": sum(loss) / sum(w[t]) over the kept
//   positions (without weights: their count);
//   SoftmaxCrossEntropyLoss: the same over x = log_softmax(scores) along the classes (its
//   second output, when asked for).
//
// The class of each position is read with gather_elements along dim 1; a target equal to
// ignore_index is replaced by class 0 before the lookup (any class would do: its weight is 0).
#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "importers/onnx/ops_support.h"

namespace planrt::importers::onnx {
namespace {

Result<Value> emit1(OpContext& c, const std::string& op, std::vector<std::string> inputs, const std::string& name,
                    ir::Attrs attrs = {}) {
  return c.im.emit(op, std::move(inputs), std::move(attrs), name);
}

// The loss of log-probabilities `x` [N, C, d...] against targets `t` [N, d...], into
// c.out[0]. `weight`: input index of the class weights, or -1.
Status emit_nll(OpContext& c, const Value& x, const Value& t, int weight_input, const std::string& name) {
  PLANRT_ASSIGN_OR_RETURN(std::string reduction, c.attr_string("reduction", std::string("mean")));
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    return c.error(fmt::format("reduction is '{}'; expected \"none\", \"sum\" or \"mean\"", reduction));
  }
  if (x.rank() < 2 || t.rank() != x.rank() - 1) {
    return c.error(fmt::format("takes input [N, C, d...] and target [N, d...]; got ranks {} and {}", x.rank(),
                               t.rank()));
  }
  if (t.elem != Elem::Int64 && t.elem != Elem::Int32) {
    return c.error(fmt::format("target is {}; expected int64 or int32", elem_name(t.elem)));
  }
  PLANRT_ASSIGN_OR_RETURN(DType dtype, to_dtype(x.elem));
  const std::string dtype_attr(dtype_name(dtype));
  PLANRT_ASSIGN_OR_RETURN(std::string xi, c.im.ir_of(x));
  PLANRT_ASSIGN_OR_RETURN(std::string ti, c.im.ir_of(t));
  // Kept positions (a bool mask) and targets safe to look up, when an ignore_index is given.
  const bool ignores = c.node.attribute().end() !=
                       std::find_if(c.node.attribute().begin(), c.node.attribute().end(),
                                    [](const ::onnx::AttributeProto& a) { return a.name() == "ignore_index"; });
  std::string keep, safe = ti;
  if (ignores) {
    PLANRT_ASSIGN_OR_RETURN(int64_t ii, c.attr_int("ignore_index", std::nullopt));
    PLANRT_ASSIGN_OR_RETURN(std::string ii_const, c.im.constant(Tensor::from_i64(t.elem, {}, {ii}), name + ".ignore_index"));
    PLANRT_ASSIGN_OR_RETURN(std::string zero, c.im.constant(Tensor::from_i64(t.elem, {}, {0}), name + ".class0"));
    PLANRT_ASSIGN_OR_RETURN(Value ignored, emit1(c, "equal", {ti, ii_const}, name + ".ignored"));
    PLANRT_ASSIGN_OR_RETURN(Value kept, emit1(c, "logical_not", {ignored.ir}, name + ".kept"));
    keep = kept.ir;
    PLANRT_ASSIGN_OR_RETURN(Value s, emit1(c, "where", {keep, ti, zero}, name + ".target"));
    safe = s.ir;
  }
  // x at each position's class: gather_elements along the classes, [N, 1, d...] -> [N, d...].
  std::vector<SymInt> with_class = t.shape;
  with_class.insert(with_class.begin() + 1, sym_const(1));
  Value safe_value = t;
  if (safe != ti) {  // the run-time value made above, of t's shape
    safe_value = Value{};
    safe_value.elem = t.elem;
    safe_value.shape = t.shape;
    safe_value.ir = safe;
    safe_value.ir_shape = t.ir_shape;
  }
  PLANRT_ASSIGN_OR_RETURN(Value index, reshape_to_shape(c, safe_value, with_class, name + ".index"));
  PLANRT_ASSIGN_OR_RETURN(Value picked, emit1(c, "gather_elements", {xi, index.ir}, name + ".picked", {{"dim", int64_t{1}}}));
  PLANRT_ASSIGN_OR_RETURN(Value at_class, reshape_to_shape(c, picked, t.shape, name + ".at_class"));
  // Each position's weight: the class weight, 0 where ignored; none at all without either.
  std::string w;
  if (weight_input >= 0 && c.has(static_cast<size_t>(weight_input))) {
    const Value& wv = c.input(static_cast<size_t>(weight_input));
    if (wv.rank() != 1) return c.error(fmt::format("weight has rank {}; expected [C]", wv.rank()));
    PLANRT_ASSIGN_OR_RETURN(std::string wi, c.im.ir_of(wv));
    PLANRT_ASSIGN_OR_RETURN(Value taken, emit1(c, "take", {wi, safe}, name + ".class_weight"));
    w = taken.ir;
  }
  if (!keep.empty()) {
    PLANRT_ASSIGN_OR_RETURN(Value k, emit1(c, "cast", {keep}, name + ".kept_weight", {{"dtype", dtype_attr}}));
    if (w.empty()) {
      w = k.ir;
    } else {
      PLANRT_ASSIGN_OR_RETURN(Value m, emit1(c, "mul", {w, k.ir}, name + ".weight"));
      w = m.ir;
    }
  }
  PLANRT_ASSIGN_OR_RETURN(Value neg, emit1(c, "neg", {at_class.ir}, reduction == "none" && w.empty() ? name : name + ".neg"));
  Value loss = neg;
  if (!w.empty()) {
    PLANRT_ASSIGN_OR_RETURN(loss, emit1(c, "mul", {neg.ir, w}, reduction == "none" ? name : name + ".weighted"));
  }
  if (reduction == "none") {
    c.out.push_back(std::move(loss));
    return {};
  }
  std::vector<int64_t> all(static_cast<size_t>(t.rank()));
  std::iota(all.begin(), all.end(), int64_t{0});
  const ir::Attrs over_all{{"dims", all}, {"keepdim", false}};
  if (reduction == "mean" && w.empty()) {
    PLANRT_ASSIGN_OR_RETURN(Value mean, emit1(c, "reduce_mean", {loss.ir}, name, over_all));
    c.out.push_back(std::move(mean));
    return {};
  }
  PLANRT_ASSIGN_OR_RETURN(Value sum, emit1(c, "reduce_sum", {loss.ir}, reduction == "sum" ? name : name + ".sum", over_all));
  if (reduction == "sum") {
    c.out.push_back(std::move(sum));
    return {};
  }
  PLANRT_ASSIGN_OR_RETURN(Value total, emit1(c, "reduce_sum", {w}, name + ".total_weight", over_all));
  PLANRT_ASSIGN_OR_RETURN(Value mean, emit1(c, "div", {sum.ir, total.ir}, name));
  c.out.push_back(std::move(mean));
  return {};
}

Status handle_nll_loss(OpContext& c) {
  PLANRT_RETURN_IF_ERROR(require_float_input(c, 0));
  return emit_nll(c, c.input(0), c.input(1), 2, c.node.output(0));
}

Status handle_softmax_cross_entropy(OpContext& c) {
  PLANRT_RETURN_IF_ERROR(require_float_input(c, 0));
  const Value& scores = c.input(0);
  if (scores.rank() < 2) return c.error(fmt::format("takes scores [N, C, d...]; got rank {}", scores.rank()));
  const bool log_prob_asked = c.node.output_size() > 1 && !c.node.output(1).empty();
  PLANRT_ASSIGN_OR_RETURN(std::string si, c.im.ir_of(scores));
  PLANRT_ASSIGN_OR_RETURN(Value log_prob, emit1(c, "log_softmax", {si},
                                                log_prob_asked ? c.node.output(1) : c.node.output(0) + ".log_prob",
                                                {{"dim", int64_t{1}}}));
  PLANRT_RETURN_IF_ERROR(emit_nll(c, log_prob, c.input(1), 2, c.node.output(0)));
  if (log_prob_asked) c.out.push_back(std::move(log_prob));
  return {};
}

// clang-format off
const OpSpec kLossOps[] = {
    // op                          min max outs attributes                            handler
    {"NegativeLogLikelihoodLoss",   2, 3, 1, {"ignore_index", "reduction"},           handle_nll_loss},
    {"SoftmaxCrossEntropyLoss",     2, 3, 2, {"ignore_index", "reduction"},           handle_softmax_cross_entropy},
};
// clang-format on

}  // namespace

const std::span<const OpSpec> loss_ops = kLossOps;

}  // namespace planrt::importers::onnx
