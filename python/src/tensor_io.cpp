#include "tensor_io.h"

#include <cstring>
#include <vector>

#include <dlpack/dlpack.h>
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "errors.h"

namespace py = pybind11;

namespace planrt::python {
namespace {

std::optional<DType> numpy_dtype(const py::dtype& d) {
  const char kind = d.kind();
  const auto size = d.itemsize();
  // Byte order: native ('=') or not applicable ('|'); '<' is native on every host planrt
  // supports (little-endian), '>' is not.
  if (d.attr("byteorder").cast<std::string>() == ">") return std::nullopt;
  if (kind == 'f' && size == 4) return DType::F32;
  if (kind == 'f' && size == 2) return DType::F16;
  if (kind == 'i' && size == 4) return DType::I32;
  if (kind == 'i' && size == 8) return DType::I64;
  if (kind == 'u' && size == 1) return DType::U8;
  if (kind == 'b' && size == 1) return DType::Bool;
  return std::nullopt;
}

// The NumPy dtype that holds `dtype` (bf16: f32, widened exactly).
const char* numpy_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "float32";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::U8: return "uint8";
    case DType::Bool: return "bool";
  }
  return "float32";
}

Shape shape_of(std::span<const int64_t> dims, const std::string& what) {
  Result<Shape> shape = Shape::from(dims);
  if (!shape.ok()) fail(ErrorCode::InvalidArgument, fmt::format("{}: {}", what, shape.status().message()));
  return *shape;
}

// f32 values rounded to nearest even into a new bf16 tensor (as `planrt run` does with an
// f32 .npy for a bf16 input).
Tensor round_to_bf16(const float* src, const Shape& shape) {
  Tensor t = unwrap(Tensor::zeros(DType::BF16, shape));
  auto* dst = static_cast<uint16_t*>(t.data());
  for (int64_t i = 0; i < shape.numel(); ++i) dst[i] = f32_to_bf16_bits(src[i]);
  return t;
}

// DLPack's bool code (kDLBool, DLPack 0.8); Debian 12's dlpack.h predates it.
constexpr uint8_t kDLBoolCode = 6;

std::string describe_dl_dtype(const DLDataType& t) {
  const char* code = t.code == kDLFloat ? "float" : t.code == kDLInt ? "int" : t.code == kDLUInt ? "uint"
                     : t.code == kDLBfloat ? "bfloat" : t.code == kDLBoolCode ? "bool" : "code";
  return t.lanes == 1 ? fmt::format("{}{}", code, t.bits) : fmt::format("{}{}x{}", code, t.bits, t.lanes);
}

std::optional<DType> dl_dtype(const DLDataType& t) {
  if (t.lanes != 1) return std::nullopt;
  if (t.code == kDLFloat && t.bits == 32) return DType::F32;
  if (t.code == kDLFloat && t.bits == 16) return DType::F16;
  if (t.code == kDLBfloat && t.bits == 16) return DType::BF16;
  if (t.code == kDLInt && t.bits == 32) return DType::I32;
  if (t.code == kDLInt && t.bits == 64) return DType::I64;
  if (t.code == kDLUInt && t.bits == 8) return DType::U8;
  if (t.code == kDLBoolCode && t.bits == 8) return DType::Bool;
  return std::nullopt;
}

DLDataType to_dl_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32: return {kDLFloat, 32, 1};
    case DType::F16: return {kDLFloat, 16, 1};
    case DType::BF16: return {kDLBfloat, 16, 1};
    case DType::I32: return {kDLInt, 32, 1};
    case DType::I64: return {kDLInt, 64, 1};
    case DType::U8: return {kDLUInt, 8, 1};
    case DType::Bool: return {kDLBoolCode, 8, 1};
  }
  return {kDLFloat, 32, 1};
}

// Row-major, ignoring the strides of size-1 dims (which DLPack producers set freely).
bool dl_is_contiguous(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t expected = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

}  // namespace

InputHolder::InputHolder(InputHolder&& other) noexcept
    : view_(other.view_),
      keep_(std::move(other.keep_)),
      converted_(std::move(other.converted_)),
      managed_(std::exchange(other.managed_, nullptr)) {}

InputHolder& InputHolder::operator=(InputHolder&& other) noexcept {
  if (this != &other) {
    release();
    view_ = other.view_;
    keep_ = std::move(other.keep_);
    converted_ = std::move(other.converted_);
    managed_ = std::exchange(other.managed_, nullptr);
  }
  return *this;
}

InputHolder::~InputHolder() { release(); }

void InputHolder::release() {
  if (managed_ != nullptr && managed_->deleter != nullptr) managed_->deleter(managed_);
  managed_ = nullptr;
}

InputHolder InputHolder::from_object(py::handle object, std::optional<DType> expected,
                                     const std::string& what) {
  InputHolder h;
  const bool is_array = py::isinstance<py::array>(object);
  if (!is_array && py::hasattr(object, "__dlpack__")) {
    py::tuple device = object.attr("__dlpack_device__")();
    const int device_type = device[0].cast<int>();
    // CUDA: stream 1 is the legacy default stream, which the producer makes wait for its
    // own work and which planrt orders its reads after.
    py::object capsule = device_type == kDLCUDA ? object.attr("__dlpack__")(py::arg("stream") = 1)
                                                : object.attr("__dlpack__")();
    if (!PyCapsule_IsValid(capsule.ptr(), "dltensor")) {
      fail(ErrorCode::InvalidArgument,
           fmt::format("{}: __dlpack__ returned no unused DLPack capsule", what));
    }
    h.managed_ = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");  // ours to release now
    const DLTensor& t = h.managed_->dl_tensor;
    Device where = Device::cpu();
    if (t.device.device_type == kDLCUDA) {
      where = Device::cuda(t.device.device_id);
    } else if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) {
      fail(ErrorCode::NotSupported,
           fmt::format("{}: DLPack device type {} is neither the CPU nor CUDA", what,
                       static_cast<int>(t.device.device_type)));
    }
    std::optional<DType> dtype = dl_dtype(t.dtype);
    if (!dtype) {
      fail(ErrorCode::InvalidArgument,
           fmt::format("{} is {}, which planrt has no dtype for (f32, f16, bf16, i32, i64)", what,
                       describe_dl_dtype(t.dtype)));
    }
    if (!dl_is_contiguous(t)) {
      fail(ErrorCode::InvalidArgument,
           fmt::format("{} is not contiguous: pass a contiguous copy (.contiguous())", what));
    }
    const Shape shape = shape_of({t.shape, static_cast<size_t>(t.ndim)}, what);
    void* data = static_cast<uint8_t*>(t.data) + t.byte_offset;
    if (expected == DType::BF16 && *dtype == DType::F32 && where.is_cpu()) {
      h.converted_ = round_to_bf16(static_cast<const float*>(data), shape);
      h.view_ = h.converted_.view();
      h.release();  // the copy is all the run reads
      return h;
    }
    h.view_ = TensorView::contiguous(data, *dtype, shape, where);
    return h;
  }

  py::array array;
  if (is_array) {
    array = py::reinterpret_borrow<py::array>(object);
  } else {
    // A list, a scalar, an object with __array__: NumPy makes it an array of the dtype the
    // method takes.
    py::object np = py::module_::import("numpy");
    py::object dtype = expected ? py::object(py::str(numpy_name(*expected))) : py::object(py::none());
    array = np.attr("asarray")(object, dtype);
  }
  if (!(array.flags() & py::array::c_style)) {
    array = py::module_::import("numpy").attr("ascontiguousarray")(array);
  }
  std::optional<DType> dtype = numpy_dtype(array.dtype());
  if (!dtype) {
    fail(ErrorCode::InvalidArgument,
         fmt::format("{} is a NumPy {} array, which planrt has no dtype for (float32, float16, "
                     "int32, int64; bf16 inputs take float32)",
                     what, py::str(array.dtype()).cast<std::string>()));
  }
  std::vector<int64_t> dims(array.shape(), array.shape() + array.ndim());
  const Shape shape = shape_of(dims, what);
  if (expected == DType::BF16 && *dtype == DType::F32) {
    h.converted_ = round_to_bf16(static_cast<const float*>(array.data()), shape);
    h.view_ = h.converted_.view();
    return h;
  }
  h.view_ = TensorView::contiguous(const_cast<void*>(array.data()), *dtype, shape);
  h.keep_ = std::move(array);
  return h;
}

py::object to_numpy(std::shared_ptr<const Tensor> tensor) {
  const Shape& shape = tensor->shape();
  std::vector<py::ssize_t> dims(shape.dims().begin(), shape.dims().end());
  if (tensor->dtype() == DType::BF16) {
    py::array_t<float> out(dims);
    const auto* src = static_cast<const uint16_t*>(tensor->data());
    float* dst = out.mutable_data();
    for (int64_t i = 0; i < tensor->numel(); ++i) dst[i] = bf16_bits_to_f32(src[i]);
    return out;
  }
  std::vector<py::ssize_t> strides(dims.size());
  py::ssize_t stride = static_cast<py::ssize_t>(element_size(tensor->dtype()));
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i];
  }
  if (tensor->data() == nullptr) {  // no elements: NumPy allocates its own (empty) array
    return py::array(py::dtype(numpy_name(tensor->dtype())), dims, strides);
  }
  auto* owner = new std::shared_ptr<const Tensor>(tensor);
  py::capsule base(owner, [](void* p) { delete static_cast<std::shared_ptr<const Tensor>*>(p); });
  return py::array(py::dtype(numpy_name(tensor->dtype())), dims, strides, tensor->data(), base);
}

namespace {

// A DLPack export of a planrt.Tensor: the managed tensor and what keeps its bytes alive.
struct Export {
  DLManagedTensor managed{};
  std::shared_ptr<const Tensor> owner;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

void delete_export(DLManagedTensor* self) { delete static_cast<Export*>(self->manager_ctx); }

// Runs when the capsule goes: a consumer renames it ("used_dltensor") and releases the
// tensor itself; a capsule nobody consumed still owns it.
void capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    m->deleter(m);
  }
}

py::capsule to_dlpack(const PyTensor& t) {
  auto* e = new Export;
  e->owner = t.tensor;
  const Shape& shape = t.tensor->shape();
  e->shape.assign(shape.dims().begin(), shape.dims().end());
  e->strides.resize(e->shape.size());
  int64_t stride = 1;
  for (size_t i = e->shape.size(); i-- > 0;) {
    e->strides[i] = stride;
    stride *= e->shape[i];
  }
  DLTensor& dl = e->managed.dl_tensor;
  dl.data = t.tensor->data();
  dl.device = {kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(e->shape.size());
  dl.dtype = to_dl_dtype(t.tensor->dtype());
  dl.shape = e->shape.data();
  dl.strides = e->strides.data();
  dl.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = delete_export;
  PyObject* capsule = PyCapsule_New(&e->managed, "dltensor", capsule_destructor);
  if (capsule == nullptr) {
    delete e;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

}  // namespace

void register_tensor(py::module_& m) {
  py::class_<PyTensor>(m, "Tensor", R"doc(
An output of a run, held in planrt's own host memory (``Module.run(..., outputs="dlpack")``).

It exports DLPack, so ``torch.from_dlpack(t)`` and ``numpy.from_dlpack(t)`` take its bytes
without a copy; ``numpy()`` (or ``numpy.asarray(t)``) gives a NumPy view of them (bf16 is
widened to float32, as NumPy has no bf16). The bytes live as long as any of these does.)doc")
      .def_property_readonly("shape", [](const PyTensor& t) {
        const Shape& s = t.tensor->shape();
        return py::tuple(py::cast(std::vector<int64_t>(s.dims().begin(), s.dims().end())));
      }, "The tensor's dims.")
      .def_property_readonly("dtype", [](const PyTensor& t) { return std::string(dtype_name(t.tensor->dtype())); },
                             "planrt's dtype name: 'f32', 'f16', 'bf16', 'i32' or 'i64'.")
      .def_property_readonly("device", [](const PyTensor&) { return std::string("cpu"); },
                             "Where the bytes are: always 'cpu' (outputs are copied to the host).")
      .def_property_readonly("nbytes", [](const PyTensor& t) { return t.tensor->nbytes(); })
      .def("numpy", [](const PyTensor& t) { return to_numpy(t.tensor); },
           "A NumPy array over the same bytes (bf16: a float32 copy).")
      .def("__array__", [](const PyTensor& t, py::object dtype) {
        py::object a = to_numpy(t.tensor);
        return dtype.is_none() ? a : a.attr("astype")(dtype);
      }, py::arg("dtype") = py::none())
      .def("__dlpack__", [](const PyTensor& t, py::object /*stream*/) { return to_dlpack(t); },
           py::arg("stream") = py::none(),
           "A DLPack capsule over the tensor's bytes (host memory: the stream is not used).")
      .def("__dlpack_device__", [](const PyTensor&) { return py::make_tuple(static_cast<int>(kDLCPU), 0); })
      .def("__repr__", [](const PyTensor& t) {
        return fmt::format("planrt.Tensor(shape={}, dtype={})", t.tensor->shape().to_string(),
                           dtype_name(t.tensor->dtype()));
      });
}

}  // namespace planrt::python
