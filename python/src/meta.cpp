#include "meta.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace planrt::python {
namespace {

struct PyDim {
  std::string name;
  int64_t min = 0, max = 0;
};

struct PyTensorSpec {
  std::string name;
  std::string dtype;
  py::list shape;  // ints for static dims, "S" / "2*S" for named ones
};

struct PyPlannedBuffer {
  uint64_t size_bytes = 0;
  std::string device;
};

struct PySegment {
  std::string name, backend, device;
  uint32_t num_nodes = 0;
  uint64_t blob_bytes = 0, scratch_bytes = 0;
  bool shared_scratch = false;
  bool planned_scratch = false;
};

struct PyPlan {
  std::string device, planner;
  uint64_t lower_bound_bytes = 0, planned_bytes = 0;
  uint32_t num_tensors = 0;
};

struct PyEstimate {
  std::string device;
  uint64_t planned_bytes = 0, weights_bytes = 0, engine_scratch_bytes = 0;
  uint64_t library_bytes = 0, page_rounding_bytes = 0;
  bool uses_warm_pool = false;
  uint64_t total_bytes() const { return planned_bytes + weights_bytes + engine_scratch_bytes; }
  uint64_t predicted_bytes() const { return total_bytes() + library_bytes + page_rounding_bytes; }
};

struct PyMethodMeta {
  std::string name;
  std::vector<PyDim> dims;
  std::vector<PyTensorSpec> inputs, outputs;
  std::vector<PyPlannedBuffer> planned_buffers;
  std::vector<PySegment> segments;
  std::vector<std::string> backends;
  std::vector<PyPlan> plan;
  std::vector<PyEstimate> memory;
  size_t num_instructions = 0;
  bool uses_device_memory = false;
};

py::list shape_list(const std::vector<DimRef>& shape, const std::vector<DimSpec>& dims) {
  py::list out;
  for (const DimRef& d : shape) {
    if (d.is_static()) {
      out.append(d.value);
      continue;
    }
    const std::string name = d.dim < static_cast<int32_t>(dims.size()) ? dims[d.dim].name : "?";
    out.append(d.value == 1 ? name : fmt::format("{}*{}", d.value, name));
  }
  return out;
}

PyTensorSpec spec(const TensorSpec& t, const std::vector<DimSpec>& dims) {
  return {t.name, std::string(dtype_name(t.dtype)), shape_list(t.shape, dims)};
}

std::vector<PyEstimate> estimates(const std::vector<MemoryEstimate>& memory) {
  std::vector<PyEstimate> out;
  for (const MemoryEstimate& e : memory) {
    out.push_back({to_string(e.device), e.planned_bytes, e.weights_bytes, e.engine_scratch_bytes,
                   e.library_bytes, e.page_rounding_bytes, e.uses_warm_pool});
  }
  return out;
}

std::string tensor_repr(const PyTensorSpec& t) {
  return fmt::format("TensorSpec(name='{}', dtype='{}', shape={})", t.name, t.dtype,
                     py::repr(t.shape).cast<std::string>());
}

}  // namespace

py::object meta_to_python(const MethodMeta& meta) {
  PyMethodMeta m;
  m.name = meta.name;
  for (const DimSpec& d : meta.dims) m.dims.push_back({d.name, d.min, d.max});
  for (const TensorSpec& t : meta.inputs) m.inputs.push_back(spec(t, meta.dims));
  for (const TensorSpec& t : meta.outputs) m.outputs.push_back(spec(t, meta.dims));
  for (const PlannedBufferInfo& b : meta.planned_buffers) {
    m.planned_buffers.push_back({b.size_bytes, to_string(b.device)});
  }
  for (const SegmentInfo& s : meta.segments) {
    m.segments.push_back({s.name, s.backend, to_string(s.device), s.num_nodes, s.blob_bytes,
                          s.scratch_bytes, s.shared_scratch, s.planned_scratch});
  }
  m.backends = meta.backends;
  for (const PlanStatInfo& p : meta.plan) {
    m.plan.push_back({to_string(p.device), p.planner, p.lower_bound_bytes, p.planned_bytes, p.num_tensors});
  }
  m.memory = estimates(meta.memory);
  m.num_instructions = meta.num_instructions;
  m.uses_device_memory = meta.uses_device_memory();
  return py::cast(std::move(m));
}

void register_meta(py::module_& m) {
  py::class_<PyDim>(m, "DimSpec", "A named dynamic dim of a method and its inclusive bounds.")
      .def_readonly("name", &PyDim::name)
      .def_readonly("min", &PyDim::min)
      .def_readonly("max", &PyDim::max)
      .def("__repr__", [](const PyDim& d) {
        return fmt::format("DimSpec(name='{}', min={}, max={})", d.name, d.min, d.max);
      });
  py::class_<PyTensorSpec>(m, "TensorSpec",
                           "An input or output: its name, dtype and shape (ints, or dim names "
                           "such as 'S' and '2*S' for the dynamic dims).")
      .def_readonly("name", &PyTensorSpec::name)
      .def_readonly("dtype", &PyTensorSpec::dtype)
      .def_readonly("shape", &PyTensorSpec::shape)
      .def("__repr__", &tensor_repr);
  py::class_<PyPlannedBuffer>(m, "PlannedBuffer", "One planned arena of a method: size and device.")
      .def_readonly("size_bytes", &PyPlannedBuffer::size_bytes)
      .def_readonly("device", &PyPlannedBuffer::device)
      .def("__repr__", [](const PyPlannedBuffer& b) {
        return fmt::format("PlannedBuffer(size_bytes={}, device='{}')", b.size_bytes, b.device);
      });
  py::class_<PySegment>(m, "SegmentInfo", "A delegate segment: its backend, device and scratch.")
      .def_readonly("name", &PySegment::name)
      .def_readonly("backend", &PySegment::backend)
      .def_readonly("device", &PySegment::device)
      .def_readonly("num_nodes", &PySegment::num_nodes)
      .def_readonly("blob_bytes", &PySegment::blob_bytes)
      .def_readonly("scratch_bytes", &PySegment::scratch_bytes)
      .def_readonly("shared_scratch", &PySegment::shared_scratch)
      .def_readonly("planned_scratch", &PySegment::planned_scratch)
      .def("__repr__", [](const PySegment& s) {
        return fmt::format("SegmentInfo(name='{}', backend='{}', device='{}', num_nodes={})", s.name,
                           s.backend, s.device, s.num_nodes);
      });
  py::class_<PyPlan>(m, "PlanStat", "The memory plan of one device: planned bytes against the lower bound.")
      .def_readonly("device", &PyPlan::device)
      .def_readonly("planner", &PyPlan::planner)
      .def_readonly("lower_bound_bytes", &PyPlan::lower_bound_bytes)
      .def_readonly("planned_bytes", &PyPlan::planned_bytes)
      .def_readonly("num_tensors", &PyPlan::num_tensors)
      .def("__repr__", [](const PyPlan& p) {
        return fmt::format("PlanStat(device='{}', planned_bytes={}, lower_bound_bytes={})", p.device,
                           p.planned_bytes, p.lower_bound_bytes);
      });
  py::class_<PyEstimate>(m, "MemoryEstimate",
                         "What loading and running a method costs on one device, known before "
                         "loading: planned arenas, weights, engine scratch.")
      .def_readonly("device", &PyEstimate::device)
      .def_readonly("planned_bytes", &PyEstimate::planned_bytes)
      .def_readonly("weights_bytes", &PyEstimate::weights_bytes)
      .def_readonly("engine_scratch_bytes", &PyEstimate::engine_scratch_bytes)
      .def_property_readonly("total_bytes", &PyEstimate::total_bytes)
      .def_readonly("library_bytes", &PyEstimate::library_bytes)
      .def_readonly("page_rounding_bytes", &PyEstimate::page_rounding_bytes)
      .def_readonly("uses_warm_pool", &PyEstimate::uses_warm_pool)
      .def_property_readonly("predicted_bytes", &PyEstimate::predicted_bytes)
      .def("__repr__", [](const PyEstimate& e) {
        return fmt::format("MemoryEstimate(device='{}', planned_bytes={}, weights_bytes={}, "
                           "engine_scratch_bytes={})",
                           e.device, e.planned_bytes, e.weights_bytes, e.engine_scratch_bytes);
      });
  py::class_<PyMethodMeta>(m, "MethodMeta",
                           "What a method takes, produces and needs, read from the program "
                           "without loading the method.")
      .def_readonly("name", &PyMethodMeta::name)
      .def_readonly("dims", &PyMethodMeta::dims)
      .def_readonly("inputs", &PyMethodMeta::inputs)
      .def_readonly("outputs", &PyMethodMeta::outputs)
      .def_readonly("planned_buffers", &PyMethodMeta::planned_buffers)
      .def_readonly("segments", &PyMethodMeta::segments)
      .def_readonly("backends", &PyMethodMeta::backends)
      .def_readonly("plan", &PyMethodMeta::plan)
      .def_readonly("memory", &PyMethodMeta::memory, "One MemoryEstimate per device the method touches, CPU first.")
      .def_readonly("num_instructions", &PyMethodMeta::num_instructions)
      .def_readonly("uses_device_memory", &PyMethodMeta::uses_device_memory)
      .def("__repr__", [](const PyMethodMeta& m) {
        std::vector<std::string> ins, outs;
        for (const PyTensorSpec& t : m.inputs) ins.push_back(tensor_repr(t));
        for (const PyTensorSpec& t : m.outputs) outs.push_back(tensor_repr(t));
        return fmt::format("MethodMeta(name='{}', inputs=[{}], outputs=[{}])", m.name,
                           fmt::join(ins, ", "), fmt::join(outs, ", "));
      });
}

}  // namespace planrt::python
