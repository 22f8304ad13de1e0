#include "errors.h"

namespace py = pybind11;

namespace planrt::python {

void register_errors(py::module_& m) {
  // The classes live in Python (planrt/_errors.py) so that each can also derive from the
  // built-in exception of its kind; the module re-exports them.
  py::module_ errors = py::module_::import("planrt._errors");
  for (const char* name : {"Error", "InvalidArgumentError", "InvalidProgramError", "NotFoundError",
                           "OutOfMemoryError", "NotSupportedError", "IoError", "OutOfRangeError",
                           "InternalError"}) {
    m.attr(name) = errors.attr(name);
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object by_code = py::module_::import("planrt._errors").attr("BY_CODE");
      py::str code(std::string(error_code_name(e.status.code())));
      py::object cls = by_code.contains(code) ? by_code[code] : by_code["Internal"];
      py::object error = cls(e.status.message());
      PyErr_SetObject(cls.ptr(), error.ptr());
    }
  });
}

}  // namespace planrt::python
