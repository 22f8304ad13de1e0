// The typed elementwise family on CUDA (kernels/elementwise_ops.h) and the integer forms of
// add, sub, mul, div, pow and neg: the operand checks, the shared plan (dtype rule,
// broadcast, output, attributes), then one launch of typed_elementwise_kernels.cu in the
// plan's element types. Every dtype the family's rules admit has device code (f16 and bf16
// computed in f32), so NotSupported is only for a dtype planrt may add later.
#include <optional>
#include <string>

#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/typed_elementwise_launch.h"
#include "kernels/elementwise_ops.h"
#include "kernels/operands.h"

namespace planrt::kernels::cuda {
namespace {

namespace typed = launch::typed;

static_assert(typed::kMaxDims == kMaxRank, "a broadcast walks every dim a Shape can have");

using Fn = ElementwiseFn;

bool is_integer_form(const ElementwiseOp& op) {
  switch (op.fn) {
    case Fn::Add:
    case Fn::Sub:
    case Fn::Mul:
    case Fn::Div:
    case Fn::Pow:
    case Fn::Neg:
      return true;
    default:
      return false;
  }
}

// The words plan_elementwise's errors use for input i; the op table's for the arithmetic ops
// (pow: base, exponent), as their float kernels say.
std::string operand_role(const ElementwiseOp& op, size_t i) {
  if (is_integer_form(op)) return input_role(op.name, i);
  if (op.arity == 1) return "x";
  if (op.rule == ElementwiseRule::Where) return i == 0 ? "cond" : i == 1 ? "a" : "b";
  return i == 0 ? "a" : "b";
}

Status not_implemented(const ElementwiseOp& op, std::string_view role, DType dtype) {
  return make_error(ErrorCode::NotSupported, "{}: {} has dtype {}; the CUDA kernel of {} has no {} form",
                    op.name, role, dtype_name(dtype), op.name, dtype_name(dtype));
}

Result<typed::ElementType> element_type(const ElementwiseOp& op, std::string_view role,
                                        DType dtype) {
  switch (dtype) {
    case DType::F32: return typed::ElementType::F32;
    case DType::F16: return typed::ElementType::F16;
    case DType::BF16: return typed::ElementType::BF16;
    case DType::I32: return typed::ElementType::I32;
    case DType::I64: return typed::ElementType::I64;
    case DType::U8: return typed::ElementType::U8;
    case DType::Bool: return typed::ElementType::Bool;
  }
  return not_implemented(op, role, dtype);
}

// The device function of each op (every enumerator listed, no default: a new ElementwiseFn
// must be given its device function here, or a -Wswitch error says it was not). An op of
// the other arity, where, cast, or a value outside the enum has none (nullopt).
std::optional<typed::UnaryFn> unary_fn(Fn fn) {
  switch (fn) {
    case Fn::Cos: return typed::UnaryFn::Cos;
    case Fn::Sin: return typed::UnaryFn::Sin;
    case Fn::Log: return typed::UnaryFn::Log;
    case Fn::Floor: return typed::UnaryFn::Floor;
    case Fn::Ceil: return typed::UnaryFn::Ceil;
    case Fn::Round: return typed::UnaryFn::Round;
    case Fn::Reciprocal: return typed::UnaryFn::Reciprocal;
    case Fn::Tan: return typed::UnaryFn::Tan;
    case Fn::Acos: return typed::UnaryFn::Acos;
    case Fn::Asin: return typed::UnaryFn::Asin;
    case Fn::Atan: return typed::UnaryFn::Atan;
    case Fn::Sinh: return typed::UnaryFn::Sinh;
    case Fn::Cosh: return typed::UnaryFn::Cosh;
    case Fn::Asinh: return typed::UnaryFn::Asinh;
    case Fn::Acosh: return typed::UnaryFn::Acosh;
    case Fn::Atanh: return typed::UnaryFn::Atanh;
    case Fn::Softplus: return typed::UnaryFn::Softplus;
    case Fn::Softsign: return typed::UnaryFn::Softsign;
    case Fn::Mish: return typed::UnaryFn::Mish;
    case Fn::LeakyRelu: return typed::UnaryFn::LeakyRelu;
    case Fn::Elu: return typed::UnaryFn::Elu;
    case Fn::Celu: return typed::UnaryFn::Celu;
    case Fn::Selu: return typed::UnaryFn::Selu;
    case Fn::ThresholdedRelu: return typed::UnaryFn::ThresholdedRelu;
    case Fn::Shrink: return typed::UnaryFn::Shrink;
    case Fn::Abs: return typed::UnaryFn::Abs;
    case Fn::Sign: return typed::UnaryFn::Sign;
    case Fn::IsNan: return typed::UnaryFn::IsNan;
    case Fn::IsInf: return typed::UnaryFn::IsInf;
    case Fn::LogicalNot: return typed::UnaryFn::LogicalNot;
    case Fn::Neg: return typed::UnaryFn::Neg;
    case Fn::Equal:
    case Fn::Less:
    case Fn::LessEqual:
    case Fn::Greater:
    case Fn::GreaterEqual:
    case Fn::LogicalAnd:
    case Fn::LogicalOr:
    case Fn::LogicalXor:
    case Fn::Minimum:
    case Fn::Maximum:
    case Fn::Mod:
    case Fn::PRelu:
    case Fn::Where:
    case Fn::Cast:
    case Fn::Add:
    case Fn::Sub:
    case Fn::Mul:
    case Fn::Div:
    case Fn::Pow:
      return std::nullopt;
  }
  return std::nullopt;
}

// mod's attribute `fmod` picks the dividend's sign (FMod) over the divisor's (Mod).
std::optional<typed::BinaryFn> binary_fn(Fn fn, bool fmod) {
  switch (fn) {
    case Fn::Equal: return typed::BinaryFn::Equal;
    case Fn::Less: return typed::BinaryFn::Less;
    case Fn::LessEqual: return typed::BinaryFn::LessEqual;
    case Fn::Greater: return typed::BinaryFn::Greater;
    case Fn::GreaterEqual: return typed::BinaryFn::GreaterEqual;
    case Fn::LogicalAnd: return typed::BinaryFn::LogicalAnd;
    case Fn::LogicalOr: return typed::BinaryFn::LogicalOr;
    case Fn::LogicalXor: return typed::BinaryFn::LogicalXor;
    case Fn::Minimum: return typed::BinaryFn::Minimum;
    case Fn::Maximum: return typed::BinaryFn::Maximum;
    case Fn::Mod: return fmod ? typed::BinaryFn::FMod : typed::BinaryFn::Mod;
    case Fn::PRelu: return typed::BinaryFn::PRelu;
    case Fn::Add: return typed::BinaryFn::Add;
    case Fn::Sub: return typed::BinaryFn::Sub;
    case Fn::Mul: return typed::BinaryFn::Mul;
    case Fn::Div: return typed::BinaryFn::Div;
    case Fn::Pow: return typed::BinaryFn::Pow;
    case Fn::Cos:
    case Fn::Sin:
    case Fn::Log:
    case Fn::Floor:
    case Fn::Ceil:
    case Fn::Round:
    case Fn::Reciprocal:
    case Fn::Tan:
    case Fn::Acos:
    case Fn::Asin:
    case Fn::Atan:
    case Fn::Sinh:
    case Fn::Cosh:
    case Fn::Asinh:
    case Fn::Acosh:
    case Fn::Atanh:
    case Fn::Softplus:
    case Fn::Softsign:
    case Fn::Mish:
    case Fn::LeakyRelu:
    case Fn::Elu:
    case Fn::Celu:
    case Fn::Selu:
    case Fn::ThresholdedRelu:
    case Fn::Shrink:
    case Fn::Abs:
    case Fn::Sign:
    case Fn::IsNan:
    case Fn::IsInf:
    case Fn::LogicalNot:
    case Fn::Neg:
    case Fn::Where:
    case Fn::Cast:
      return std::nullopt;
  }
  return std::nullopt;
}

// Every input holds n elements: each broadcast dim of an input then has size 1 in the
// output as well, so input element i is output element i (the same-shape path; [3] and
// [1, 3] included).
bool same_layout(std::span<const TensorView> inputs, int64_t n) {
  for (const TensorView& in : inputs) {
    if (in.numel() != n) return false;
  }
  return true;
}

typed::OperandMap operand_map(const Shape& shape, std::span<const TensorView> inputs) {
  typed::OperandMap map;
  map.rank = shape.rank();
  for (int d = 0; d < shape.rank(); ++d) map.size[d] = shape[d];
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Shape strides = broadcast_strides(inputs[k].sizes, shape);
    for (int d = 0; d < shape.rank(); ++d) map.stride[k][d] = strides[d];
  }
  return map;
}

Status run(const ElementwiseOp& op, const CudaKernelContext& ctx, const OpAttrs& attrs,
           std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op.name, inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(ElementwisePlan plan, plan_elementwise(op, attrs, inputs, outputs));
  // The input whose dtype the values are read in (where: a; cond is bool by the rule).
  const size_t value_input = op.rule == ElementwiseRule::Where ? 1 : 0;
  const std::string role = operand_role(op, value_input);
  PLANRT_ASSIGN_OR_RETURN(typed::ElementType in, element_type(op, role, plan.input_dtype));
  PLANRT_ASSIGN_OR_RETURN(typed::ElementType out, element_type(op, "output", plan.output_dtype));
  // The device function: where and cast have their own launchers; any other op must map to
  // one of its arity, or the table and this file disagree (a bug, never another op's code).
  std::optional<typed::UnaryFn> unary;
  std::optional<typed::BinaryFn> binary;
  if (op.fn != Fn::Where && op.fn != Fn::Cast) {
    if (op.arity == 1) {
      unary = unary_fn(op.fn);
    } else if (op.arity == 2) {
      binary = binary_fn(op.fn, plan.fmod);
    }
    if (!unary && !binary) {
      return make_error(ErrorCode::Internal,
                        "{}: the CUDA kernel has no device function for this op (function {}, "
                        "arity {})",
                        op.name, static_cast<int>(op.fn), op.arity);
    }
    const bool implemented = unary ? typed::unary_implemented(*unary, in)
                                   : typed::binary_implemented(*binary, in);
    if (!implemented) return not_implemented(op, role, plan.input_dtype);
  }
  if (plan.shape.rank() > typed::kMaxDims) {
    return make_error(ErrorCode::NotSupported, "{}: rank {} exceeds the CUDA kernel's {}", op.name,
                      plan.shape.rank(), typed::kMaxDims);
  }

  const int64_t n = plan.shape.numel();
  if (n == 0) return {};
  const typed::OperandMap map = operand_map(plan.shape, inputs);
  const typed::OperandMap* walk = same_layout(inputs, n) ? nullptr : &map;
  const TensorView& y = outputs[0];
  cudaError_t err = cudaSuccess;
  if (op.fn == Fn::Where) {
    err = typed::where(in, inputs[0].data, inputs[1].data, inputs[2].data, y.data, n, walk,
                       ctx.stream);
  } else if (op.fn == Fn::Cast) {
    err = typed::cast(in, out, inputs[0].data, y.data, n, ctx.stream);
  } else if (unary) {
    typed::UnaryParams params;
    if (plan.inf.positive) params.flags |= typed::kIsInfPositive;
    if (plan.inf.negative) params.flags |= typed::kIsInfNegative;
    params.alpha = plan.alpha;
    params.beta = plan.beta;
    err = typed::unary(*unary, in, out, inputs[0].data, y.data, n, params, ctx.stream);
  } else {
    err = typed::binary(*binary, in, out, inputs[0].data, inputs[1].data, y.data, n, walk,
                        ctx.stream);
  }
  return cuda_status(op.name, "kernel launch", err);
}

// The op's entry, found once per process (the kernel call itself does no lookup).
Status run_found(const ElementwiseOp* op, std::string_view name, const CudaKernelContext& ctx,
                 const OpAttrs& attrs, std::span<const TensorView> inputs,
                 std::span<const TensorView> outputs) {
  if (op == nullptr) {
    return make_error(ErrorCode::Internal, "{}: the CUDA kernel has no entry in elementwise_ops()",
                      name);
  }
  return run(*op, ctx, attrs, inputs, outputs);
}

}  // namespace

#define PLANRT_TYPED_ELEMENTWISE(op)                                                              \
  Status elementwise_##op(const CudaKernelContext& ctx, const OpAttrs& attrs,                     \
                          std::span<const TensorView> inputs, std::span<const TensorView> outputs) { \
    static const ElementwiseOp* const entry = find_elementwise_op(#op);                           \
    return run_found(entry, #op, ctx, attrs, inputs, outputs);                                    \
  }
PLANRT_ELEMENTWISE_OPS(PLANRT_TYPED_ELEMENTWISE)
#undef PLANRT_TYPED_ELEMENTWISE

#define PLANRT_INTEGER_ARITHMETIC(op)                                                             \
  Status integer_##op(const CudaKernelContext& ctx, const OpAttrs& attrs,                         \
                      std::span<const TensorView> inputs, std::span<const TensorView> outputs) {  \
    static const ElementwiseOp* const entry = integer_arithmetic_op(#op);                         \
    return run_found(entry, #op, ctx, attrs, inputs, outputs);                                    \
  }
PLANRT_INTEGER_ARITHMETIC(add)
PLANRT_INTEGER_ARITHMETIC(sub)
PLANRT_INTEGER_ARITHMETIC(mul)
PLANRT_INTEGER_ARITHMETIC(div)
PLANRT_INTEGER_ARITHMETIC(pow)
PLANRT_INTEGER_ARITHMETIC(neg)
#undef PLANRT_INTEGER_ARITHMETIC

}  // namespace planrt::kernels::cuda
