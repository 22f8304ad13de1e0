// planrt.Module: a loaded program and its methods, for Python (docs/python.md).
//
// Unlike the C++ Module (used from one thread at a time), this one may be shared by Python
// threads: a mutex guards its table of loaded methods, and run() holds a reference to the
// method it runs, so another thread's unload_method() cannot free it mid-run. The GIL is
// released while a program or method loads and while a method runs; concurrent runs follow
// the C++ contract (planrt/runtime/method.h): runs of one method, and of host methods that
// share arenas, are serialized by the runtime; methods with arenas of their own run in
// parallel.
#pragma once

#include <pybind11/pybind11.h>

namespace planrt::python {

void register_module(pybind11::module_& m);

}  // namespace planrt::python
