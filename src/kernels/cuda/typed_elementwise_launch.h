// Launchers of the typed elementwise family's device code (typed_elementwise_kernels.cu),
// called by typed_elementwise.cpp after the shared plan (kernels/elementwise_ops.h) has
// checked every dtype and shape. Plain types only, as launch.h, so that the .cu file needs
// neither fmt nor the planrt headers; the element types are named here rather than taken
// from DType for the same reason.
//
// Each launcher enqueues on `stream`, never synchronizes, and returns the launch's error
// (cudaGetLastError). n is the output's element count; n == 0 launches nothing. A
// combination of function and element types the device code does not have (the
// *_implemented predicates below say which it has) launches nothing and returns
// cudaErrorInvalidValue: the host checks first, so that is a broken invariant, not a user
// error.
//
// Numerics: F16 and BF16 elements are storage only, widened to f32, computed in f32 and
// rounded to nearest even on store. Bool elements are bytes: written 0 or 1, read as true
// when non-zero. Integer arithmetic wraps (two's complement) and never traps.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace planrt::kernels::cuda::launch::typed {

// The most dims a broadcast walks (planrt::kMaxRank; typed_elementwise.cpp asserts it).
inline constexpr int kMaxDims = 8;

enum class ElementType : int { F32, F16, BF16, I32, I64, U8, Bool };

// One input -> one output of the same shape.
enum class UnaryFn : int {
  Cos, Sin, Log, Floor, Ceil, Round, Reciprocal,  // floating -> same
  Tan, Acos, Asin, Atan, Sinh, Cosh, Asinh, Acosh, Atanh,
  Softplus, Softsign, Mish,
  LeakyRelu, Elu, Celu, Selu, ThresholdedRelu, Shrink,  // floating -> same; UnaryParams
  Abs, Sign,                                      // any but bool -> same
  Neg,                                            // i32, i64, u8 -> same (floats: launch.h)
  IsNan, IsInf,                                   // floating -> bool
  LogicalNot,                                     // bool -> bool
};
// The floating functions are kernels/elementwise_ops.h's, operation for operation as the
// CPU kernel (kernels/cpu/typed_elementwise.cpp) computes them in f32: softplus is
// max(x, 0) + log1pf(expf(-|x|)), mish x * tanhf(softplus(x)), elu, celu and selu use
// expm1f, and the max and min of softplus and celu pick as std::max / std::min do (not as
// fmaxf / fminf), so that NaN inputs give what the CPU gives.

// Two inputs of one element type, broadcast -> one output.
enum class BinaryFn : int {
  Equal, Less, LessEqual, Greater, GreaterEqual,  // any -> bool
  LogicalAnd, LogicalOr, LogicalXor,              // bool -> bool
  Minimum, Maximum,                               // any but bool -> same; NaN wins
  Mod, FMod,                                      // any but bool -> same (see below)
  Add, Sub, Mul, Div, Pow,                        // i32, i64, u8 -> same (floats: launch.h)
  PRelu,                                          // any but bool -> same: a < 0 ? b * a : a
};
// Mod takes the divisor's sign (Python's %, torch.remainder), FMod the dividend's (C's fmod,
// torch.fmod): floats are fmodf (exact), then for Mod a non-zero remainder of the other sign
// than the divisor gets the divisor added; x mod 0 is NaN for floats and 0 for integers, and
// INT_MIN mod -1 is 0 (no trap). The CPU kernel's mod_of, operation for operation.

// PRelu (x, slope): integers wrap on the multiply (two's complement); u8 is never negative.

// unary's flags: which infinities IsInf counts (ONNX IsInf's detect_positive/negative).
inline constexpr uint32_t kIsInfPositive = 1u;
inline constexpr uint32_t kIsInfNegative = 2u;

// unary's attributes: ElementwisePlan's flags for IsInf, and its alpha and beta for the
// parametric functions (LeakyRelu, Elu, Celu, ThresholdedRelu: alpha; Selu: alpha, gamma in
// beta; Shrink: lambd in alpha, bias in beta). The others ignore them.
struct UnaryParams {
  uint32_t flags = 0;
  float alpha = 0.0f;
  float beta = 0.0f;
};

constexpr bool is_floating(ElementType t) {
  return t == ElementType::F32 || t == ElementType::F16 || t == ElementType::BF16;
}
constexpr bool is_integer(ElementType t) {
  return t == ElementType::I32 || t == ElementType::I64 || t == ElementType::U8;
}

constexpr bool unary_implemented(UnaryFn fn, ElementType in) {
  switch (fn) {
    case UnaryFn::Cos:
    case UnaryFn::Sin:
    case UnaryFn::Log:
    case UnaryFn::Floor:
    case UnaryFn::Ceil:
    case UnaryFn::Round:
    case UnaryFn::Reciprocal:
    case UnaryFn::Tan:
    case UnaryFn::Acos:
    case UnaryFn::Asin:
    case UnaryFn::Atan:
    case UnaryFn::Sinh:
    case UnaryFn::Cosh:
    case UnaryFn::Asinh:
    case UnaryFn::Acosh:
    case UnaryFn::Atanh:
    case UnaryFn::Softplus:
    case UnaryFn::Softsign:
    case UnaryFn::Mish:
    case UnaryFn::LeakyRelu:
    case UnaryFn::Elu:
    case UnaryFn::Celu:
    case UnaryFn::Selu:
    case UnaryFn::ThresholdedRelu:
    case UnaryFn::Shrink:
    case UnaryFn::IsNan:
    case UnaryFn::IsInf:
      return is_floating(in);
    case UnaryFn::Abs:
    case UnaryFn::Sign:
      return in != ElementType::Bool;
    case UnaryFn::Neg:
      return is_integer(in);
    case UnaryFn::LogicalNot:
      return in == ElementType::Bool;
  }
  return false;
}

constexpr ElementType unary_output(UnaryFn fn, ElementType in) {
  return fn == UnaryFn::IsNan || fn == UnaryFn::IsInf || fn == UnaryFn::LogicalNot
             ? ElementType::Bool
             : in;
}

constexpr bool binary_implemented(BinaryFn fn, ElementType in) {
  switch (fn) {
    case BinaryFn::Equal:
    case BinaryFn::Less:
    case BinaryFn::LessEqual:
    case BinaryFn::Greater:
    case BinaryFn::GreaterEqual:
      return true;
    case BinaryFn::LogicalAnd:
    case BinaryFn::LogicalOr:
    case BinaryFn::LogicalXor:
      return in == ElementType::Bool;
    case BinaryFn::Minimum:
    case BinaryFn::Maximum:
    case BinaryFn::Mod:
    case BinaryFn::FMod:
    case BinaryFn::PRelu:
      return in != ElementType::Bool;
    case BinaryFn::Add:
    case BinaryFn::Sub:
    case BinaryFn::Mul:
    case BinaryFn::Div:
    case BinaryFn::Pow:
      return is_integer(in);
  }
  return false;
}

constexpr ElementType binary_output(BinaryFn fn, ElementType in) {
  switch (fn) {
    case BinaryFn::Minimum:
    case BinaryFn::Maximum:
    case BinaryFn::Mod:
    case BinaryFn::FMod:
    case BinaryFn::Add:
    case BinaryFn::Sub:
    case BinaryFn::Mul:
    case BinaryFn::Div:
    case BinaryFn::Pow:
    case BinaryFn::PRelu:
      return in;
    case BinaryFn::Equal:
    case BinaryFn::Less:
    case BinaryFn::LessEqual:
    case BinaryFn::Greater:
    case BinaryFn::GreaterEqual:
    case BinaryFn::LogicalAnd:
    case BinaryFn::LogicalOr:
    case BinaryFn::LogicalXor:
      return ElementType::Bool;
  }
  return ElementType::Bool;
}

// The broadcast walk: output element i, taken row-major over `size`, reads operand k at
// sum over d of index[d] * stride[k][d] (strides in elements, 0 along a dim the operand
// broadcasts). Unused operands' strides are ignored.
struct OperandMap {
  int rank = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[3][kMaxDims] = {};
};

// For the binary and where launchers, map == nullptr is the same-shape fast path: every
// operand holds the output's n elements in the output's order (no index arithmetic).

// y[i] = fn(x[i]); out must be unary_output(fn, in); params: UnaryParams above.
cudaError_t unary(UnaryFn fn, ElementType in, ElementType out, const void* x, void* y, int64_t n,
                  const UnaryParams& params, cudaStream_t stream);

// y[i] = fn(a[map_0(i)], b[map_1(i)]); a and b are of type `in`, out must be
// binary_output(fn, in).
cudaError_t binary(BinaryFn fn, ElementType in, ElementType out, const void* a, const void* b,
                   void* y, int64_t n, const OperandMap* map, cudaStream_t stream);

// y[i] = cond[map_0(i)] ? a[map_1(i)] : b[map_2(i)]: cond is Bool, a, b and y of `type`
// (every type; non-bool elements are copied bit for bit, NaN payloads and -0 included).
cudaError_t where(ElementType type, const void* cond, const void* a, const void* b, void* y,
                  int64_t n, const OperandMap* map, cudaStream_t stream);

// y[i] = x[i] converted from `in` to `out` (every pair): floating to integer truncates toward
// zero and saturates at the integer's range (NaN gives 0); to Bool is x != 0 (NaN is true);
// from Bool is 0 or 1; integer to integer wraps; to F16/BF16 rounds the exact value once, to
// nearest even (integers too: no double rounding through f32); a same-type cast copies the
// bits (Bool normalized to 0/1).
cudaError_t cast(ElementType in, ElementType out, const void* x, void* y, int64_t n,
                 cudaStream_t stream);

}  // namespace planrt::kernels::cuda::launch::typed
