#include "module.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/stl.h>

#include "errors.h"
#include "memory.h"
#include "meta.h"
#include "planrt/runtime/program.h"
#include "tensor_io.h"

namespace py = pybind11;

namespace planrt::python {
namespace {

std::string option_value(py::handle value, const std::string& key) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (py::isinstance<py::int_>(value) || py::isinstance<py::float_>(value)) {
    return py::str(value).cast<std::string>();
  }
  fail(ErrorCode::InvalidArgument,
       fmt::format("backend option '{}': the value must be a str, bool or number, not {}", key,
                   py::str(py::type::of(value).attr("__name__")).cast<std::string>()));
}

// {"cuda": {"use_cuda_graphs": True}} or {"cuda.use_cuda_graphs": "true"}.
BackendOptions backend_options(py::handle options) {
  BackendOptions out;
  if (options.is_none()) return out;
  if (!py::isinstance<py::dict>(options)) {
    fail(ErrorCode::InvalidArgument,
         "backend_options must be a dict: {'cuda': {'use_cuda_graphs': True}} or "
         "{'cuda.use_cuda_graphs': True}");
  }
  for (auto [k, v] : py::reinterpret_borrow<py::dict>(options)) {
    const std::string key = py::str(k).cast<std::string>();
    if (py::isinstance<py::dict>(v)) {
      for (auto [k2, v2] : py::reinterpret_borrow<py::dict>(v)) {
        const std::string name = py::str(k2).cast<std::string>();
        out[key].push_back({name, option_value(v2, key + "." + name)});
      }
      continue;
    }
    const size_t dot = key.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == key.size()) {
      fail(ErrorCode::InvalidArgument,
           fmt::format("backend option '{}' is not BACKEND.KEY (e.g. 'cuda.use_cuda_graphs')", key));
    }
    out[key.substr(0, dot)].push_back({key.substr(dot + 1), option_value(v, key)});
  }
  return out;
}

std::vector<uint8_t> bytes_of(py::handle source) {
  py::bytes b = py::isinstance<py::bytes>(source) ? py::reinterpret_borrow<py::bytes>(source)
                                                  : py::bytes(py::module_::import("builtins").attr("bytes")(source));
  std::string_view view = b;
  return {view.begin(), view.end()};
}

class PyModule {
 public:
  PyModule(py::object source, py::object options, bool share_memory_arenas,
           uint64_t max_planned_bytes_per_device, bool synchronize_each_step,
           bool share_device_arenas, bool profile_steps) {
    options_.backend_options = backend_options(options);
    options_.share_memory_arenas = share_memory_arenas;
    options_.max_planned_bytes_per_device = max_planned_bytes_per_device;
    options_.synchronize_each_step = synchronize_each_step;
    options_.share_device_arenas = share_device_arenas;
    options_.profile_steps = profile_steps;
    if (py::isinstance(source, py::module_::import("planrt._planrt").attr("BuiltProgram"))) {
      source = source.attr("to_bytes")();
    }
    Result<Program> program = Status(ErrorCode::Internal, "no program");
    if (py::isinstance<py::str>(source) || py::hasattr(source, "__fspath__")) {
      const std::string path = py::module_::import("os").attr("fspath")(source).cast<std::string>();
      py::gil_scoped_release release;
      program = Program::load(path);
    } else if (py::isinstance<py::bytes>(source) || py::isinstance<py::bytearray>(source) ||
               py::isinstance<py::memoryview>(source)) {
      std::vector<uint8_t> bytes = bytes_of(source);
      py::gil_scoped_release release;
      program = Program::load_bytes(std::move(bytes));
    } else {
      fail(ErrorCode::InvalidArgument,
           fmt::format("Module() takes a path, bytes or a BuiltProgram, not {}",
                       py::str(py::type::of(source).attr("__name__")).cast<std::string>()));
    }
    program_ = std::make_unique<Program>(unwrap(std::move(program)));
  }

  std::vector<std::string> method_names() const { return program_->method_names(); }

  py::object method_meta(const std::string& name) const {
    return meta_to_python(unwrap(program_->method_meta(name)));
  }

  void load_method(const std::string& name) {
    py::gil_scoped_release release;
    (void)get(name);
  }

  bool is_method_loaded(const std::string& name) const {
    py::gil_scoped_release release;
    std::lock_guard lock(mu_);
    return methods_.count(name) != 0;
  }

  std::vector<std::string> loaded_methods() const {
    py::gil_scoped_release release;
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& [name, m] : methods_) out.push_back(name);
    return out;
  }

  void unload_method(const std::string& name) {
    py::gil_scoped_release release;
    std::shared_ptr<Method> gone;  // destroyed after the lock (and by the last runner)
    std::lock_guard lock(mu_);
    auto it = methods_.find(name);
    if (it == methods_.end()) {
      fail(ErrorCode::NotFound, fmt::format("method '{}' is not loaded", name));
    }
    gone = std::move(it->second);
    methods_.erase(it);
  }

  py::list run(const std::string& name, py::object inputs, const std::string& outputs) {
    if (outputs != "numpy" && outputs != "dlpack") {
      fail(ErrorCode::InvalidArgument,
           fmt::format("outputs='{}': expected 'numpy' or 'dlpack'", outputs));
    }
    std::shared_ptr<Method> method;
    {
      py::gil_scoped_release release;
      method = get(name);
    }
    const MethodMeta& meta = method->meta();
    std::vector<py::object> ordered = order_inputs(meta, inputs);
    std::vector<InputHolder> holders;
    std::vector<TensorView> views;
    for (size_t i = 0; i < ordered.size(); ++i) {
      std::optional<DType> expected;
      std::string what = fmt::format("method '{}': input {}", meta.name, i);
      if (i < meta.inputs.size()) {
        expected = meta.inputs[i].dtype;
        what = fmt::format("method '{}': input {} '{}'", meta.name, i, meta.inputs[i].name);
      }
      holders.push_back(InputHolder::from_object(ordered[i], expected, what));
      views.push_back(holders.back().view());
    }
    Result<std::vector<Tensor>> result = Status(ErrorCode::Internal, "not run");
    {
      py::gil_scoped_release release;
      result = method->execute(views);
    }
    std::vector<Tensor> tensors = unwrap(std::move(result));
    py::list out;
    for (Tensor& t : tensors) {
      auto owned = std::make_shared<const Tensor>(std::move(t));
      if (outputs == "numpy") {
        out.append(to_numpy(std::move(owned)));
      } else {
        out.append(py::cast(PyTensor{std::move(owned)}));
      }
    }
    return out;
  }

  py::dict run_stats(const std::string& name) const {
    std::shared_ptr<Method> method = loaded(name);
    MethodRunStats s = method->run_stats();
    py::dict d;
    d["runs"] = s.runs;
    d["synchronizations"] = s.synchronizations;
    d["last_run_synchronizations"] = s.last_run_synchronizations;
    d["streams"] = s.streams;
    d["host_to_device_bytes"] = s.host_to_device_bytes;
    d["device_to_host_bytes"] = s.device_to_host_bytes;
    d["device_to_device_bytes"] = s.device_to_device_bytes;
    d["inputs_from_device"] = s.inputs_from_device;
    return d;
  }

  py::list step_profile(const std::string& name) const {
    std::shared_ptr<Method> method = loaded(name);
    py::list out;
    for (const StepProfile& p : method->step_profile()) {
      py::dict d;
      d["kind"] = p.kind;
      d["op"] = p.op;
      d["node"] = p.node;
      d["calls"] = p.calls;
      d["total_ms"] = p.total_ms;
      out.append(d);
    }
    return out;
  }

  py::dict memory_report() const {
    std::vector<std::shared_ptr<const Method>> all;
    std::map<Device, uint64_t> baselines;
    {
      py::gil_scoped_release release;
      std::lock_guard lock(mu_);
      for (const auto& [name, m] : methods_) all.push_back(m);
      baselines = baselines_;
    }
    return python::memory_report(*program_, all, baselines);
  }

  uint64_t constants_bytes() const { return program_->constants_bytes(); }

 private:
  // Called without the GIL.
  std::shared_ptr<Method> get(const std::string& name) {
    std::lock_guard lock(mu_);
    auto it = methods_.find(name);
    if (it != methods_.end()) return it->second;
    Result<MethodMeta> meta = program_->method_meta(name);
    if (meta.ok()) python::add_device_baselines(*meta, baselines_);  // else load_method says why
    auto method = std::make_shared<Method>(unwrap(program_->load_method(name, options_)));
    methods_.emplace(name, method);
    return method;
  }

  std::shared_ptr<Method> loaded(const std::string& name) const {
    py::gil_scoped_release release;
    std::lock_guard lock(mu_);
    auto it = methods_.find(name);
    if (it == methods_.end()) fail(ErrorCode::NotFound, fmt::format("method '{}' is not loaded", name));
    return it->second;
  }

  // A list or tuple in the method's input order, a dict by input name, or one input alone.
  static std::vector<py::object> order_inputs(const MethodMeta& meta, py::object inputs) {
    std::vector<py::object> out;
    if (py::isinstance<py::dict>(inputs)) {
      py::dict by_name = inputs;
      std::vector<std::string> names;
      for (const TensorSpec& t : meta.inputs) names.push_back(t.name);
      for (auto [k, v] : by_name) {
        const std::string key = py::str(k).cast<std::string>();
        if (std::find(names.begin(), names.end(), key) == names.end()) {
          fail(ErrorCode::NotFound, fmt::format("method '{}' has no input '{}' (its inputs: {})",
                                                meta.name, key, fmt::join(names, ", ")));
        }
      }
      for (const std::string& n : names) {
        if (!by_name.contains(n)) {
          fail(ErrorCode::InvalidArgument, fmt::format("method '{}': input '{}' is missing (its inputs: {})",
                                                       meta.name, n, fmt::join(names, ", ")));
        }
        out.push_back(by_name[py::str(n)]);
      }
      return out;
    }
    if (py::isinstance<py::list>(inputs) || py::isinstance<py::tuple>(inputs)) {
      for (py::handle h : inputs) out.push_back(py::reinterpret_borrow<py::object>(h));
      return out;
    }
    out.push_back(inputs);
    return out;
  }

  std::unique_ptr<Program> program_;
  // Each CUDA device's use just before the first method using it loaded (under mu_).
  std::map<Device, uint64_t> baselines_;
  LoadMethodOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Method>, std::less<>> methods_;
};

}  // namespace

void register_module(py::module_& m) {
  py::class_<PyModule>(m, "Module", R"doc(
A program loaded for running: its methods, their metadata and memory, and runs.

``Module(source, backend_options=None, share_memory_arenas=True,
max_planned_bytes_per_device=0, synchronize_each_step=False, share_device_arenas=False,
profile_steps=False)`` loads
and verifies a program
from a path, from bytes, or from a ``BuiltProgram``; no method memory is allocated until a
method is loaded (by ``load_method`` or its first ``run``). ``backend_options`` are load-time
options per backend, ``{"cuda": {"use_cuda_graphs": True}}`` or
``{"cuda.use_cuda_graphs": True}``, as ``planrt run --backend-option`` takes them.

A Module may be shared by Python threads; the GIL is released while methods load and run.)doc")
      .def(py::init<py::object, py::object, bool, uint64_t, bool, bool, bool>(), py::arg("source"),
           py::arg("backend_options") = py::none(), py::arg("share_memory_arenas") = true,
           py::arg("max_planned_bytes_per_device") = 0, py::arg("synchronize_each_step") = false,
           py::arg("share_device_arenas") = false, py::arg("profile_steps") = false)
      .def("method_names", &PyModule::method_names, "The program's methods, in file order.")
      .def("method_meta", &PyModule::method_meta, py::arg("name"),
           "The method's inputs, outputs, dims, planned buffers, segments and per-device memory "
           "estimate, without loading it.")
      .def("load_method", &PyModule::load_method, py::arg("name"),
           "Loads the method now (allocates its arenas, inits its segments); a no-op when loaded.")
      .def("unload_method", &PyModule::unload_method, py::arg("name"),
           "Releases the method's arenas and backend handles (after any run in progress).")
      .def("is_method_loaded", &PyModule::is_method_loaded, py::arg("name"))
      .def("loaded_methods", &PyModule::loaded_methods)
      .def("run", &PyModule::run, py::arg("name"), py::arg("inputs"), py::arg("outputs") = "numpy",
           R"doc(
Runs method ``name`` (loading it first if needed) and returns its outputs as a list.

``inputs``: a list or tuple in the method's input order, a dict by input name, or one input
alone. Each is a NumPy array, any object with ``__dlpack__`` (a torch tensor: a CPU tensor is
read in place, a CUDA tensor on the method's device is copied device to device), or anything
``numpy.asarray`` takes. A bf16 input takes float32 (rounded to nearest even) or bf16 DLPack.

``outputs="numpy"`` gives NumPy arrays (bf16 widened to float32); ``"dlpack"`` gives
``planrt.Tensor`` objects that ``torch.from_dlpack`` takes without a copy.)doc")
      .def("run_stats", &PyModule::run_stats, py::arg("name"),
           "Counters of a loaded method's runs: runs, stream synchronizations, streams, the bytes "
           "its copies moved each way, and the inputs passed in device memory.")
      .def("step_profile", &PyModule::step_profile, py::arg("name"),
           "With profile_steps=True: every step of a loaded method in run order, as dicts of kind "
           "('kernel', 'copy', 'delegate'), op, node, calls and total_ms over all its runs; an "
           "empty list otherwise.")
      .def("memory_report", &PyModule::memory_report, R"doc(
What the program's loaded methods hold, per device: weights, planned arenas (the shared host
arena set once), the engine backend's scratch (private contexts and the shared pool), the
warm CUDA pool (reserved and used, now and highest), and what the device says is in use
(cudaMemGetInfo, every process). Per loaded method, its estimate.)doc")
      .def_property_readonly("constants_bytes", &PyModule::constants_bytes);
}

}  // namespace planrt::python
