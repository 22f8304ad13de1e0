// MethodMeta for Python: plain records with devices and dtypes as the strings the CLI prints
// ("cuda:0", "bf16") and symbolic dims as their names ("S", "2*S").
#pragma once

#include <pybind11/pybind11.h>

#include "planrt/runtime/method_meta.h"

namespace planrt::python {

pybind11::object meta_to_python(const MethodMeta& meta);

void register_meta(pybind11::module_& m);

}  // namespace planrt::python
