#include "kernels/elementwise_ops.h"

#include <fmt/format.h>

#include "kernels/operands.h"

namespace planrt::kernels {
namespace {

using Fn = ElementwiseFn;
using Rule = ElementwiseRule;

// clang-format off
constexpr ElementwiseOp kOps[] = {
    {"cos",           Fn::Cos,          1, Rule::Floating},
    {"sin",           Fn::Sin,          1, Rule::Floating},
    {"log",           Fn::Log,          1, Rule::Floating},
    {"floor",         Fn::Floor,        1, Rule::Floating},
    {"ceil",          Fn::Ceil,         1, Rule::Floating},
    {"round",         Fn::Round,        1, Rule::Floating},
    {"reciprocal",    Fn::Reciprocal,   1, Rule::Floating},
    {"tan",           Fn::Tan,          1, Rule::Floating},
    {"acos",          Fn::Acos,         1, Rule::Floating},
    {"asin",          Fn::Asin,         1, Rule::Floating},
    {"atan",          Fn::Atan,         1, Rule::Floating},
    {"sinh",          Fn::Sinh,         1, Rule::Floating},
    {"cosh",          Fn::Cosh,         1, Rule::Floating},
    {"asinh",         Fn::Asinh,        1, Rule::Floating},
    {"acosh",         Fn::Acosh,        1, Rule::Floating},
    {"atanh",         Fn::Atanh,        1, Rule::Floating},
    {"softplus",      Fn::Softplus,     1, Rule::Floating},
    {"softsign",      Fn::Softsign,     1, Rule::Floating},
    {"mish",          Fn::Mish,         1, Rule::Floating},
    {"leaky_relu",    Fn::LeakyRelu,    1, Rule::Floating, {{"alpha", 0.01f}}},
    {"elu",           Fn::Elu,          1, Rule::Floating, {{"alpha", 1.0f}}},
    {"celu",          Fn::Celu,         1, Rule::Floating, {{"alpha", 1.0f}}},
    {"selu",          Fn::Selu,         1, Rule::Floating, {{"alpha", 1.67326319217681884765625f}, {"gamma", 1.05070102214813232421875f}}},
    {"thresholded_relu", Fn::ThresholdedRelu, 1, Rule::Floating, {{"alpha", 1.0f}}},
    {"shrink",        Fn::Shrink,       1, Rule::Floating, {{"lambd", 0.5f}, {"bias", 0.0f}}},
    {"abs",           Fn::Abs,          1, Rule::Numeric},
    {"sign",          Fn::Sign,         1, Rule::Numeric},
    {"isnan",         Fn::IsNan,        1, Rule::FloatingToBool},
    {"isinf",         Fn::IsInf,        1, Rule::FloatingToBool},
    {"logical_not",   Fn::LogicalNot,   1, Rule::Logical},
    {"equal",         Fn::Equal,        2, Rule::Compare},
    {"less",          Fn::Less,         2, Rule::Compare},
    {"less_equal",    Fn::LessEqual,    2, Rule::Compare},
    {"greater",       Fn::Greater,      2, Rule::Compare},
    {"greater_equal", Fn::GreaterEqual, 2, Rule::Compare},
    {"logical_and",   Fn::LogicalAnd,   2, Rule::Logical},
    {"logical_or",    Fn::LogicalOr,    2, Rule::Logical},
    {"logical_xor",   Fn::LogicalXor,   2, Rule::Logical},
    {"minimum",       Fn::Minimum,      2, Rule::NumericBinary},
    {"maximum",       Fn::Maximum,      2, Rule::NumericBinary},
    {"mod",           Fn::Mod,          2, Rule::NumericBinary},
    {"prelu",         Fn::PRelu,        2, Rule::NumericBinary},
    {"where",         Fn::Where,        3, Rule::Where},
    {"cast",          Fn::Cast,         1, Rule::Cast},
};

constexpr ElementwiseOp kIntegerArithmetic[] = {
    {"add", Fn::Add, 2, Rule::NumericBinary},
    {"sub", Fn::Sub, 2, Rule::NumericBinary},
    {"mul", Fn::Mul, 2, Rule::NumericBinary},
    {"div", Fn::Div, 2, Rule::NumericBinary},
    {"pow", Fn::Pow, 2, Rule::NumericBinary},
    {"neg", Fn::Neg, 1, Rule::Numeric},
};
// clang-format on

Status bad(std::string_view op, std::string what) {
  return Status(ErrorCode::InvalidArgument, fmt::format("{}: {}", op, what));
}

std::string role(const ElementwiseOp& op, size_t i) {
  if (op.arity == 1) return "x";
  if (op.rule == Rule::Where) return i == 0 ? "cond" : i == 1 ? "a" : "b";
  return i == 0 ? "a" : "b";
}

}  // namespace

std::span<const ElementwiseOp> elementwise_ops() { return kOps; }

const ElementwiseOp* find_elementwise_op(std::string_view name) {
  for (const ElementwiseOp& op : kOps) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

const ElementwiseOp* integer_arithmetic_op(std::string_view name) {
  for (const ElementwiseOp& op : kIntegerArithmetic) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

Result<DType> cast_target(std::string_view op, const OpAttrs& attrs) {
  Result<std::string> name = with_op(op, attrs.get_string("dtype", ""));
  if (!name.ok()) return name.status();
  if (name->empty()) {
    return make_error(ErrorCode::NotFound, "{}: attribute 'dtype' is required (the dtype to cast to)", op);
  }
  Result<DType> d = parse_dtype(*name);
  if (!d.ok()) return d.status().with_context(fmt::format("{}: attribute 'dtype'", op));
  return *d;
}

Result<DType> elementwise_output_dtype(const ElementwiseOp& op, std::span<const DType> dtypes,
                                      std::optional<DType> cast_to) {
  if (dtypes.size() != static_cast<size_t>(op.arity)) {
    return bad(op.name, fmt::format("takes {} inputs, got {}", op.arity, dtypes.size()));
  }
  auto need = [&](size_t i, bool ok, std::string_view what) -> Status {
    if (ok) return {};
    return bad(op.name, fmt::format("{} has dtype {}; it must be {}", role(op, i),
                                    dtype_name(dtypes[i]), what));
  };
  auto same = [&](size_t i, size_t j) -> Status {
    if (dtypes[i] == dtypes[j]) return {};
    return bad(op.name, fmt::format("{} has dtype {} and {} has {}; they must be one dtype (cast one)",
                                    role(op, i), dtype_name(dtypes[i]), role(op, j),
                                    dtype_name(dtypes[j])));
  };
  switch (op.rule) {
    case Rule::Floating:
      PLANRT_RETURN_IF_ERROR(need(0, is_floating(dtypes[0]), "floating (f32, f16, bf16)"));
      return dtypes[0];
    case Rule::Numeric:
      PLANRT_RETURN_IF_ERROR(need(0, dtypes[0] != DType::Bool, "a number, not bool"));
      return dtypes[0];
    case Rule::FloatingToBool:
      PLANRT_RETURN_IF_ERROR(need(0, is_floating(dtypes[0]), "floating (f32, f16, bf16)"));
      return DType::Bool;
    case Rule::Logical:
      for (size_t i = 0; i < dtypes.size(); ++i) {
        PLANRT_RETURN_IF_ERROR(need(i, dtypes[i] == DType::Bool, "bool"));
      }
      return DType::Bool;
    case Rule::Compare:
      PLANRT_RETURN_IF_ERROR(same(0, 1));
      return DType::Bool;
    case Rule::NumericBinary:
      PLANRT_RETURN_IF_ERROR(same(0, 1));
      PLANRT_RETURN_IF_ERROR(need(0, dtypes[0] != DType::Bool, "a number, not bool"));
      return dtypes[0];
    case Rule::Where:
      PLANRT_RETURN_IF_ERROR(need(0, dtypes[0] == DType::Bool, "bool"));
      PLANRT_RETURN_IF_ERROR(same(1, 2));
      return dtypes[1];
    case Rule::Cast:
      if (!cast_to) return make_error(ErrorCode::NotFound, "{}: attribute 'dtype' is required", op.name);
      return *cast_to;
  }
  return bad(op.name, "unknown rule");
}

Result<ElementwisePlan> plan_elementwise(const ElementwiseOp& op, const OpAttrs& attrs,
                                         std::span<const TensorView> inputs,
                                         std::span<const TensorView> outputs) {
  ElementwisePlan plan;
  std::optional<DType> cast_to;
  if (op.rule == Rule::Cast) {
    PLANRT_ASSIGN_OR_RETURN(DType to, cast_target(op.name, attrs));
    cast_to = to;
    plan.cast_to = to;
  }
  if (op.fn == Fn::IsInf) {
    PLANRT_ASSIGN_OR_RETURN(plan.inf.positive, with_op(op.name, attrs.get_bool("positive", true)));
    PLANRT_ASSIGN_OR_RETURN(plan.inf.negative, with_op(op.name, attrs.get_bool("negative", true)));
  }
  if (op.fn == Fn::Mod) {
    PLANRT_ASSIGN_OR_RETURN(plan.fmod, with_op(op.name, attrs.get_bool("fmod", false)));
  }
  float* params[2] = {&plan.alpha, &plan.beta};
  for (size_t i = 0; i < 2; ++i) {
    const ElementwiseParam& p = op.params[i];
    if (p.name.empty()) continue;
    PLANRT_ASSIGN_OR_RETURN(double v, with_op(op.name, attrs.get_float(p.name, p.fallback)));
    *params[i] = static_cast<float>(v);
  }
  if (op.fn == Fn::Celu && plan.alpha == 0.0f) {
    return bad(op.name, "alpha is 0 (celu divides by it)");
  }
  if (inputs.size() != static_cast<size_t>(op.arity)) {
    return bad(op.name, fmt::format("takes {} inputs, got {}", op.arity, inputs.size()));
  }
  DType dtypes[3] = {};
  for (size_t i = 0; i < inputs.size(); ++i) dtypes[i] = inputs[i].dtype;
  PLANRT_ASSIGN_OR_RETURN(plan.output_dtype,
                          elementwise_output_dtype(op, std::span<const DType>(dtypes, inputs.size()), cast_to));
  plan.input_dtype = op.rule == Rule::Where ? inputs[1].dtype : inputs[0].dtype;
  plan.shape = inputs[0].sizes;
  for (size_t i = 1; i < inputs.size(); ++i) {
    PLANRT_ASSIGN_OR_RETURN(plan.shape, broadcast_shapes(op.name, plan.shape, inputs[i].sizes));
  }
  PLANRT_RETURN_IF_ERROR(check_output(op.name, inputs, outputs[0], plan.output_dtype, plan.shape));
  return plan;
}

}  // namespace planrt::kernels
