// Helpers the op handlers of ops.cpp and ops_vision.cpp share.
#pragma once

#include <span>
#include <string>

#include "importers/onnx/importer.h"

namespace planrt::importers::onnx {

// NotSupported unless input i is a floating-point tensor (planrt computes in floating point).
Status require_float_input(const OpContext& c, size_t i);
// The IR operand for `v`, a known value converted to the run-time operand's float type.
Result<std::string> operand_of_type(OpContext& c, const Value& v, Elem elem);
// An elementwise output keeps its input's folded leading dims (importer.h, Value::folded).
void keep_folded_like(Value& out, const Value& like);

// The convolutional networks' ops (ops_vision.cpp).
extern const std::span<const OpSpec> vision_ops;

}  // namespace planrt::importers::onnx
