// The planrt Python module (_planrt, re-exported by planrt/__init__.py): docs/python.md.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "build.h"
#include "errors.h"
#include "memory.h"
#include "meta.h"
#include "module.h"
#include "planrt/backends/engine.h"
#include "planrt/runtime/backend.h"
#include "tensor_io.h"
#ifdef PLANRT_HAVE_CUDA
#include "planrt/backends/cuda.h"
#endif

namespace py = pybind11;

PYBIND11_MODULE(_planrt, m) {
  using namespace planrt::python;
  m.doc() = "planrt: memory-planned inference on NVIDIA GPUs and the CPU.";
  m.attr("__version__") = PLANRT_VERSION;
#ifdef PLANRT_HAVE_CUDA
  m.attr("has_cuda") = true;
#else
  m.attr("has_cuda") = false;
#endif
  register_errors(m);
  // The backends a program may name, registered once per process as the CLI does. Without a
  // GPU the CUDA one still registers; loading a CUDA method then fails naming the device.
  check(planrt::register_engine_backend());
#ifdef PLANRT_HAVE_CUDA
  check(planrt::register_cuda_backend());
#endif
  register_tensor(m);
  register_meta(m);
  register_module(m);
  register_build(m);
  register_memory(m);
  m.def("set_backend_option", [](const std::string& backend, const std::string& key, const std::string& value) {
    check(planrt::set_backend_option(backend, key, value));
  }, py::arg("backend"), py::arg("key"), py::arg("value"),
        "A process-wide backend option, e.g. set_backend_option('engine', "
        "'use_shared_activation_scratch', 'true').");
  m.def("registered_backends", &planrt::registered_backends);
}
