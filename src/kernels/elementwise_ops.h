// The typed elementwise ops: math functions, comparisons, logic, selection and casts over
// every dtype their rule admits, broadcasting as PyTorch does (kernels/operands.h). One
// table (elementwise_ops()) gives the op table, the builder's shape inference and both back
// ends the same list, the same dtype rules and the same error words; a back end adds only
// the dtypes it implements (cpu: f32, i32, i64, u8, bool, and f16/bf16 for cast; cuda: those
// and f16/bf16 computed in f32).
//
// Semantics (each as ONNX and PyTorch define them; the kernels match at every element):
//   cos sin log floor ceil reciprocal  floating x -> x's dtype; log(0) = -inf, 1/0 = inf
//   tan acos asin atan sinh cosh asinh acosh atanh   floating -> same (C's functions; NaN
//                               outside their domains)
//   softplus                    log(1 + e^x), computed as max(x, 0) + log1p(e^-|x|): no
//                               overflow for large x
//   softsign                    x / (1 + |x|)
//   mish                        x * tanh(softplus(x))
//   leaky_relu                  x < 0 ? alpha * x : x             (alpha, default 0.01)
//   elu                         x < 0 ? alpha * (e^x - 1) : x      (alpha, default 1)
//   celu                        max(0, x) + min(0, alpha * (e^(x / alpha) - 1)) (alpha, 1)
//   selu                        gamma * (x <= 0 ? alpha * (e^x - 1) : x)
//                               (alpha 1.67326..., gamma 1.05070..., ONNX's defaults)
//   thresholded_relu            x > alpha ? x : 0                  (alpha, default 1)
//   shrink                      x < -lambd ? x + bias : x > lambd ? x - bias : 0
//                               (lambd 0.5, bias 0)
//   prelu                       x, slope of one dtype (not bool), broadcast: x < 0 ? slope * x : x
//   round                       half to even (ONNX Round, torch.round)
//   abs sign                    any number (not bool) -> its dtype; sign(0) = 0, sign(NaN) = NaN
//   isnan isinf                 floating -> bool; isinf's attributes `positive`, `negative`
//                               (bools, true) pick which infinities count (ONNX IsInf's
//                               detect_positive / detect_negative)
//   logical_not                 bool -> bool
//   equal less less_equal greater greater_equal   a, b of one dtype (any) -> bool
//   logical_and logical_or logical_xor            bool, bool -> bool
//   minimum maximum             a, b of one numeric dtype -> it; NaN wins, as torch.maximum
//   mod                         a, b of one numeric dtype -> it; attribute `fmod` (bool, false):
//                               false takes the divisor's sign (Python's %, torch.remainder),
//                               true the dividend's (C's fmod, torch.fmod); x mod 0 is 0 for
//                               integers and NaN for floats
//   where                       cond (bool), a, b of one dtype -> a's dtype: cond ? a : b
//   cast                        x -> attribute `dtype` ("f32", "i64", "bool", ...). Float to
//                               integer truncates toward zero and saturates at the integer's
//                               range (NaN gives 0; ONNX leaves both undefined); integer to a
//                               narrower integer wraps (as C, NumPy and PyTorch); to bool is
//                               x != 0 (NaN is true); from bool is 0 or 1; f16 and bf16 round
//                               to nearest even.
// And the arithmetic ops' integer forms (add sub mul div pow neg over i32, i64, u8; the
// float forms are the ops' own kernels): integer division truncates toward zero with x / 0 =
// 0 (ONNX leaves it undefined; planrt must not trap), pow with a negative exponent is 0
// unless the base is 1 or -1, overflow wraps (two's complement), as in PyTorch.
//
// Bool elements are bytes: kernels write 0 or 1 and read any non-zero byte as true.
// Pure functions and constant data; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "kernels/kernel.h"

namespace planrt::kernels {

enum class ElementwiseFn : uint8_t {
  Cos, Sin, Log, Floor, Ceil, Round, Reciprocal,  // floating -> same
  Tan, Acos, Asin, Atan, Sinh, Cosh, Asinh, Acosh, Atanh,
  Softplus, Softsign, Mish, LeakyRelu, Elu, Celu, Selu, ThresholdedRelu, Shrink,
  Abs, Sign,                                      // numeric -> same
  IsNan, IsInf,                                   // floating -> bool
  LogicalNot,                                     // bool -> bool
  Equal, Less, LessEqual, Greater, GreaterEqual,  // any, any -> bool
  LogicalAnd, LogicalOr, LogicalXor,              // bool, bool -> bool
  Minimum, Maximum, Mod, PRelu,                   // numeric, numeric -> same
  Where,                                          // bool, any, any -> same
  Cast,                                           // any -> attribute dtype
  // The integer forms of the arithmetic ops (their float forms are other kernels').
  Add, Sub, Mul, Div, Pow, Neg,
};

// Which dtypes an op takes and gives.
enum class ElementwiseRule : uint8_t {
  Floating,        // floating x -> x's dtype
  Numeric,         // any but bool -> the same
  FloatingToBool,  // floating -> bool
  Logical,         // bool (each input) -> bool
  Compare,         // a, b of one dtype -> bool
  NumericBinary,   // a, b of one dtype, not bool -> it
  Where,           // bool cond, a, b of one dtype -> it
  Cast,            // any -> the attribute `dtype`
};

// A number attribute of an op of the family and its default (the activations' alpha, ...).
struct ElementwiseParam {
  std::string_view name;  // empty: none
  float fallback = 0.0f;
};

struct ElementwiseOp {
  std::string_view name;  // the op table's name
  ElementwiseFn fn;
  int arity;
  ElementwiseRule rule;
  // Up to two number attributes, read into ElementwisePlan::alpha and ::beta.
  ElementwiseParam params[2] = {};
};

// The family's op names, in the table's order, for the back ends' kernel functions and
// registries: X(name) for each (tests/kernels/cpu/op_table_test.cpp keeps it equal to the
// table).
#define PLANRT_ELEMENTWISE_OPS(X)                                                                  \
  X(cos) X(sin) X(log) X(floor) X(ceil) X(round) X(reciprocal) X(tan) X(acos) X(asin) X(atan)    \
  X(sinh) X(cosh) X(asinh) X(acosh) X(atanh) X(softplus) X(softsign) X(mish) X(leaky_relu) X(elu) \
  X(celu) X(selu) X(thresholded_relu) X(shrink) X(abs) X(sign) X(isnan) X(isinf)                  \
  X(logical_not) X(equal) X(less) X(less_equal) X(greater) X(greater_equal) X(logical_and)       \
  X(logical_or) X(logical_xor) X(minimum) X(maximum) X(mod) X(prelu) X(where) X(cast)

// Every op of the family whose name the op table holds for it alone (not add/sub/mul/div/
// pow/neg, which are the arithmetic ops' and reach the integer forms through
// integer_arithmetic_fn).
std::span<const ElementwiseOp> elementwise_ops();
const ElementwiseOp* find_elementwise_op(std::string_view name);

// add, sub, mul, div, pow, neg -> their integer form's ElementwiseOp; nullptr otherwise.
const ElementwiseOp* integer_arithmetic_op(std::string_view name);

// cast's attribute `dtype` (required: NotFound; an unknown name: InvalidArgument).
Result<DType> cast_target(std::string_view op, const OpAttrs& attrs);

// The output dtype for inputs of `dtypes` (cast: `cast_to`), or InvalidArgument naming the
// op, the input and the rule it breaks ("equal: b has dtype i64, a has f32").
Result<DType> elementwise_output_dtype(const ElementwiseOp& op, std::span<const DType> dtypes,
                                      std::optional<DType> cast_to);

// isinf's attributes: which infinities count.
struct InfPlan {
  bool positive = true;
  bool negative = true;
};

struct ElementwisePlan {
  Shape shape;        // the broadcast shape, which is the output's
  DType input_dtype;  // the dtype the values are read as (where: a's; the rest: input 0's)
  DType output_dtype;
  DType cast_to = DType::F32;  // cast only
  InfPlan inf;                 // isinf only
  bool fmod = false;           // mod only
  float alpha = 0.0f;          // the op's params[0] (leaky_relu's alpha, shrink's lambd, ...)
  float beta = 0.0f;           // its params[1] (selu's gamma, shrink's bias)
};

// The shared plan of every op of the family: the dtype rule, the broadcast of every input,
// the output's dtype and shape, and the attributes. The back end has already run its
// operand checks (counts, placement, readable views).
Result<ElementwisePlan> plan_elementwise(const ElementwiseOp& op, const OpAttrs& attrs,
                                         std::span<const TensorView> inputs,
                                         std::span<const TensorView> outputs);

}  // namespace planrt::kernels
