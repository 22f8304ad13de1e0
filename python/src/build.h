// planrt.build(): a program from a model JSON, an ONNX file or the transformer template,
// with `planrt build`'s options, as a BuiltProgram that saves, serializes or loads directly.
#pragma once

#include <pybind11/pybind11.h>

namespace planrt::python {

void register_build(pybind11::module_& m);

}  // namespace planrt::python
