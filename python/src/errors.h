// planrt Status values on their way to Python.
//
// The C++ library never throws; the bindings do, because Python reports errors as
// exceptions. Binding code turns a failed Status into a thrown StatusError (check, unwrap),
// and the translator that register_errors installs raises it as the planrt.Error subclass
// named after the Status's code (python/planrt/_errors.py), with the C++ message unchanged.
#pragma once

#include <string>
#include <utility>

#include <pybind11/pybind11.h>

#include "planrt/core/result.h"

namespace planrt::python {

struct StatusError {
  Status status;
};

void register_errors(pybind11::module_& m);

inline void check(const Status& status) {
  if (!status.ok()) throw StatusError{status};
}

template <typename T>
T unwrap(Result<T> result) {
  if (!result.ok()) throw StatusError{result.status()};
  return std::move(result).value();
}

// Throws the error of `code` with `message` (for checks the bindings make themselves).
[[noreturn]] inline void fail(ErrorCode code, std::string message) {
  throw StatusError{Status(code, std::move(message))};
}

}  // namespace planrt::python
