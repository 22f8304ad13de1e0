// Helpers the op handlers of ops.cpp and ops_vision.cpp share.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "importers/onnx/importer.h"

namespace planrt::importers::onnx {

// NotSupported unless input i is a floating-point tensor (planrt computes in floating point).
Status require_float_input(const OpContext& c, size_t i);
// The IR operand for `v`, a known value converted to the run-time operand's float type.
Result<std::string> operand_of_type(OpContext& c, const Value& v, Elem elem);
// An elementwise output keeps its input's folded leading dims (importer.h, Value::folded).
void keep_folded_like(Value& out, const Value& like);
// x (run time) as the logical shape `target`: an IR reshape (or a fold, importer.h).
Result<Value> reshape_to_shape(OpContext& c, const Value& x, const std::vector<SymInt>& target,
                               const std::string& name);
// x broadcast to `target` (ONNX's bidirectional Expand), as planrt's expand.
Result<Value> expand_to(OpContext& c, const Value& x, const std::vector<SymInt>& target, const std::string& name);
// The product of shape[begin:end] (1 when empty).
SymInt shape_product(const std::vector<SymInt>& shape, size_t begin, size_t end);

// The convolutional networks' ops (ops_vision.cpp).
extern const std::span<const OpSpec> vision_ops;

// Reductions, ArgMax/ArgMin, Hardmax and CumSum (ops_reduce.cpp).
extern const std::span<const OpSpec> reduce_ops;
// DepthToSpace, SpaceToDepth, Tile, OneHot, EyeLike, InstanceNormalization and
// GlobalMaxPool from planrt's layout and other ops (ops_layout.cpp).
extern const std::span<const OpSpec> layout_ops;
// Einsum as permutes, reshapes, reductions and matmuls (ops_einsum.cpp).
extern const std::span<const OpSpec> einsum_ops;
// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (ops_loss.cpp).
extern const std::span<const OpSpec> loss_ops;
// Math functions, comparisons, logic and variadic Max/Min/Sum/Mean at run time (ops_typed.cpp).
extern const std::span<const OpSpec> typed_ops;
// The run-time forms that handlers of ops.cpp fall back to (ops_typed.cpp): Where on a
// bool condition, Cast to `to`, and integer arithmetic (`op` is planrt's add, sub, mul,
// div or pow; neg for emit_integer_unary).
Status emit_where(OpContext& c);
Status emit_cast(OpContext& c, Elem to);
Status emit_integer_arithmetic(OpContext& c, const std::string& op);
Status emit_integer_unary(OpContext& c, const std::string& op);
// Pow with base and exponent of different types: computed in the float type of either (the
// exponent cast to a float base's type; an integer base cast to the float exponent's type
// and the result cast back, truncating, as ONNX's reference does).
Status emit_mixed_pow(OpContext& c);

}  // namespace planrt::importers::onnx
