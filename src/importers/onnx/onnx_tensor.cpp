#include "importers/onnx/onnx_tensor.h"

#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "format/mapped_file.h"

namespace planrt::importers::onnx {
namespace {

Status bad_tensor(const std::string& name, std::string what) {
  return Status(ErrorCode::InvalidArgument,
                fmt::format("tensor '{}': {}", name.empty() ? "(unnamed)" : name, what));
}

template <typename T>
void store(uint8_t* out, Elem elem, int64_t i, T v) {
  switch (elem) {
    case Elem::Float: { float f = static_cast<float>(v); std::memcpy(out + 4 * i, &f, 4); break; }
    case Elem::Double: { double d = static_cast<double>(v); std::memcpy(out + 8 * i, &d, 8); break; }
    case Elem::Float16: { uint16_t b = f32_to_f16_bits(static_cast<float>(v)); std::memcpy(out + 2 * i, &b, 2); break; }
    case Elem::Bfloat16: { uint16_t b = f32_to_bf16_bits(static_cast<float>(v)); std::memcpy(out + 2 * i, &b, 2); break; }
    case Elem::Int64: { int64_t x = static_cast<int64_t>(v); std::memcpy(out + 8 * i, &x, 8); break; }
    case Elem::Uint64: { uint64_t x = static_cast<uint64_t>(v); std::memcpy(out + 8 * i, &x, 8); break; }
    case Elem::Int32: { int32_t x = static_cast<int32_t>(v); std::memcpy(out + 4 * i, &x, 4); break; }
    case Elem::Uint32: { uint32_t x = static_cast<uint32_t>(v); std::memcpy(out + 4 * i, &x, 4); break; }
    case Elem::Int16: { int16_t x = static_cast<int16_t>(v); std::memcpy(out + 2 * i, &x, 2); break; }
    case Elem::Uint16: { uint16_t x = static_cast<uint16_t>(v); std::memcpy(out + 2 * i, &x, 2); break; }
    case Elem::Int8: { int8_t x = static_cast<int8_t>(v); out[i] = static_cast<uint8_t>(x); break; }
    case Elem::Uint8: out[i] = static_cast<uint8_t>(v); break;
    case Elem::Bool: out[i] = v != 0 ? 1 : 0; break;
    default: break;
  }
}


// Truncation toward zero; NaN is 0 and out-of-range values saturate (a C++ cast of those
// is undefined).
int64_t saturate_to_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2e18) return INT64_MAX;
  if (v <= -9.2e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The context's mapping of `path`, made on first use and shared by the tensors read from it.
Result<std::shared_ptr<const format::MappedFile>> map_shared(const ExternalDataContext& context,
                                                             const std::string& path) {
  auto it = context.mapped.find(path);
  if (it != context.mapped.end()) return std::static_pointer_cast<const format::MappedFile>(it->second);
  PLANRT_ASSIGN_OR_RETURN(format::MappedFile file, format::MappedFile::open(path));
  auto shared = std::make_shared<const format::MappedFile>(std::move(file));
  context.mapped[path] = shared;
  return shared;
}

Result<Tensor> read_external(const ::onnx::TensorProto& proto, const ExternalDataContext& context,
                             Tensor t, uint64_t nbytes) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto& kv : proto.external_data()) {
    auto parse_u64 = [&](const std::string& text, uint64_t* out) -> Status {
      size_t used = 0;
      try {
        if (text.empty() || text[0] == '-') throw std::invalid_argument("negative");
        *out = std::stoull(text, &used);
      } catch (...) {
        used = 0;
      }
      if (used == 0 || used != text.size()) {
        return bad_tensor(proto.name(), fmt::format("external data {} '{}' is not a byte count",
                                                    kv.key(), text));
      }
      return {};
    };
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      PLANRT_RETURN_IF_ERROR(parse_u64(kv.value(), &offset));
    } else if (kv.key() == "length") {
      uint64_t l = 0;
      PLANRT_RETURN_IF_ERROR(parse_u64(kv.value(), &l));
      length = l;
    }
  }
  if (location.empty()) return bad_tensor(proto.name(), "external data has no location");
  namespace fs = std::filesystem;
  const fs::path rel(location);
  if (rel.is_absolute()) {
    return bad_tensor(proto.name(), fmt::format("external data location '{}' is an absolute path; "
                                                "it must be relative to the model's folder",
                                                location));
  }
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(context.model_dir, ec);
  const fs::path file = fs::weakly_canonical(context.model_dir / rel, ec);
  auto [dir_end, file_it] = std::mismatch(dir.begin(), dir.end(), file.begin(), file.end());
  if (ec || dir_end != dir.end()) {
    return bad_tensor(proto.name(), fmt::format("external data location '{}' lies outside the "
                                                "model's folder {}", location, dir.string()));
  }
  if (length && *length != nbytes) {
    return bad_tensor(proto.name(), fmt::format("external data length {} disagrees with its shape "
                                                "and type ({} bytes)", *length, nbytes));
  }
  Result<std::shared_ptr<const format::MappedFile>> opened = map_shared(context, file.string());
  if (!opened.ok()) return opened.status().with_context(fmt::format("tensor '{}'", proto.name()));
  std::shared_ptr<const format::MappedFile> mapped = std::move(opened).value();
  const uint64_t size = mapped->bytes().size();
  if (offset > size || nbytes > size - offset) {
    return bad_tensor(proto.name(), fmt::format("external data [{}, {}) runs past the end of '{}' "
                                                "({} bytes)", offset, offset + nbytes, location,
                                                size));
  }
  t.bytes = mapped->bytes().subspan(offset, nbytes);
  t.owner = std::move(mapped);
  return t;
}

}  // namespace

std::string elem_name(Elem elem) {
  switch (elem) {
    case Elem::Float: return "float";
    case Elem::Uint8: return "uint8";
    case Elem::Int8: return "int8";
    case Elem::Uint16: return "uint16";
    case Elem::Int16: return "int16";
    case Elem::Int32: return "int32";
    case Elem::Int64: return "int64";
    case Elem::String: return "string";
    case Elem::Bool: return "bool";
    case Elem::Float16: return "float16";
    case Elem::Double: return "double";
    case Elem::Uint32: return "uint32";
    case Elem::Uint64: return "uint64";
    case Elem::Complex64: return "complex64";
    case Elem::Complex128: return "complex128";
    case Elem::Bfloat16: return "bfloat16";
    case Elem::Undefined: return "undefined";
  }
  return fmt::format("type {}", static_cast<int32_t>(elem));
}

size_t elem_size(Elem elem) {
  switch (elem) {
    case Elem::Float: case Elem::Int32: case Elem::Uint32: return 4;
    case Elem::Uint8: case Elem::Int8: case Elem::Bool: return 1;
    case Elem::Uint16: case Elem::Int16: case Elem::Float16: case Elem::Bfloat16: return 2;
    case Elem::Int64: case Elem::Double: case Elem::Uint64: return 8;
    default: return 0;
  }
}

bool elem_is_integer(Elem elem) {
  switch (elem) {
    case Elem::Uint8: case Elem::Int8: case Elem::Uint16: case Elem::Int16: case Elem::Int32:
    case Elem::Int64: case Elem::Uint32: case Elem::Uint64: case Elem::Bool: return true;
    default: return false;
  }
}

bool elem_is_float(Elem elem) {
  return elem == Elem::Float || elem == Elem::Double || elem == Elem::Float16 ||
         elem == Elem::Bfloat16;
}

Result<DType> to_dtype(Elem elem) {
  switch (elem) {
    case Elem::Float: return DType::F32;
    case Elem::Float16: return DType::F16;
    case Elem::Bfloat16: return DType::BF16;
    case Elem::Int32: return DType::I32;
    case Elem::Int64: return DType::I64;
    case Elem::Uint8: return DType::U8;
    case Elem::Bool: return DType::Bool;
    default:
      return make_error(ErrorCode::NotSupported,
                        "element type {} has no planrt dtype (planrt tensors are f32, f16, bf16, "
                        "i32, i64, u8 or bool)", elem_name(elem));
  }
}

Elem from_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32: return Elem::Float;
    case DType::F16: return Elem::Float16;
    case DType::BF16: return Elem::Bfloat16;
    case DType::I32: return Elem::Int32;
    case DType::I64: return Elem::Int64;
    case DType::U8: return Elem::Uint8;
    case DType::Bool: return Elem::Bool;
  }
  return Elem::Undefined;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> Tensor::to_i64() const {
  const int64_t n = numel();
  std::vector<int64_t> out(static_cast<size_t>(n));
  const uint8_t* p = bytes.data();
  for (int64_t i = 0; i < n; ++i) {
    switch (elem) {
      case Elem::Int64: out[i] = load<int64_t>(p + 8 * i); break;
      case Elem::Uint64: out[i] = static_cast<int64_t>(load<uint64_t>(p + 8 * i)); break;
      case Elem::Int32: out[i] = load<int32_t>(p + 4 * i); break;
      case Elem::Uint32: out[i] = load<uint32_t>(p + 4 * i); break;
      case Elem::Int16: out[i] = load<int16_t>(p + 2 * i); break;
      case Elem::Uint16: out[i] = load<uint16_t>(p + 2 * i); break;
      case Elem::Int8: out[i] = static_cast<int8_t>(p[i]); break;
      case Elem::Uint8: case Elem::Bool: out[i] = p[i]; break;
      default: break;  // floats: below, converted once
    }
  }
  if (elem_is_float(elem)) {
    const std::vector<double> f = to_f64();
    for (int64_t i = 0; i < n; ++i) {
      out[i] = saturate_to_i64(f[i]);
    }
  }
  return out;
}

std::vector<double> Tensor::to_f64() const {
  if (!elem_is_float(elem)) {
    std::vector<int64_t> ints = to_i64();
    return std::vector<double>(ints.begin(), ints.end());
  }
  const int64_t n = numel();
  std::vector<double> out(static_cast<size_t>(n));
  const uint8_t* p = bytes.data();
  for (int64_t i = 0; i < n; ++i) {
    switch (elem) {
      case Elem::Float: out[i] = load<float>(p + 4 * i); break;
      case Elem::Double: out[i] = load<double>(p + 8 * i); break;
      case Elem::Float16: out[i] = f16_bits_to_f32(load<uint16_t>(p + 2 * i)); break;
      default: out[i] = bf16_bits_to_f32(load<uint16_t>(p + 2 * i)); break;
    }
  }
  return out;
}

Tensor Tensor::owning(Elem elem, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  auto storage = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  Tensor t;
  t.elem = elem;
  t.shape = std::move(shape);
  t.bytes = {storage->data(), storage->size()};
  t.owner = std::move(storage);
  return t;
}

Tensor Tensor::from_i64(Elem elem, std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  std::vector<uint8_t> bytes(values.size() * elem_size(elem));
  for (size_t i = 0; i < values.size(); ++i) {
    if (elem_is_float(elem)) {
      store(bytes.data(), elem, static_cast<int64_t>(i), static_cast<double>(values[i]));
    } else {
      store(bytes.data(), elem, static_cast<int64_t>(i), values[i]);
    }
  }
  return owning(elem, std::move(shape), std::move(bytes));
}

Tensor Tensor::from_f64(Elem elem, std::vector<int64_t> shape, const std::vector<double>& values) {
  std::vector<uint8_t> bytes(values.size() * elem_size(elem));
  for (size_t i = 0; i < values.size(); ++i) {
    if (elem_is_float(elem)) {
      store(bytes.data(), elem, static_cast<int64_t>(i), values[i]);
    } else {
      // Float to integer truncates toward zero, as ONNX Cast does for in-range values.
      store(bytes.data(), elem, static_cast<int64_t>(i), saturate_to_i64(values[i]));
    }
  }
  return owning(elem, std::move(shape), std::move(bytes));
}

Result<Tensor> read_tensor(const ::onnx::TensorProto& proto, const ExternalDataContext& context,
                           std::shared_ptr<const void> owner) {
  Tensor t;
  t.elem = static_cast<Elem>(proto.data_type());
  const size_t esize = elem_size(t.elem);
  if (esize == 0) {
    return Status(ErrorCode::NotSupported,
                  fmt::format("tensor '{}': element type {} is not supported", proto.name(),
                              elem_name(t.elem)));
  }
  if (proto.has_segment()) return bad_tensor(proto.name(), "segmented tensors are not supported");
  uint64_t numel = 1;
  for (int64_t d : proto.dims()) {
    if (d < 0) return bad_tensor(proto.name(), fmt::format("dim {} is negative", d));
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel) || numel > (uint64_t{1} << 48)) {
      return bad_tensor(proto.name(), "element count overflows");
    }
    t.shape.push_back(d);
  }
  const uint64_t nbytes = numel * esize;
  if (proto.data_location() == ::onnx::TensorProto::EXTERNAL) {
    return read_external(proto, context, std::move(t), nbytes);
  }
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != nbytes) {
      return bad_tensor(proto.name(), fmt::format("holds {} bytes but its shape and type need {}",
                                                  proto.raw_data().size(), nbytes));
    }
    t.bytes = {reinterpret_cast<const uint8_t*>(proto.raw_data().data()), proto.raw_data().size()};
    t.owner = std::move(owner);
    return t;
  }
  // Typed fields: each holds one element per entry (ONNX's onnx.proto says which). The
  // count is checked before anything is allocated: a dims list costs the file nothing.
  const uint64_t have = t.elem == Elem::Float ? proto.float_data_size()
                        : t.elem == Elem::Double ? proto.double_data_size()
                        : t.elem == Elem::Int64 ? proto.int64_data_size()
                        : (t.elem == Elem::Uint32 || t.elem == Elem::Uint64) ? proto.uint64_data_size()
                                                                             : proto.int32_data_size();
  if (have != numel) {
    return bad_tensor(proto.name(), fmt::format("holds {} values but its shape [{}] needs {}", have,
                                                fmt::join(t.shape, ", "), numel));
  }
  std::vector<uint8_t> bytes(nbytes);
  auto count_error = [&](size_t have) {
    return bad_tensor(proto.name(), fmt::format("holds {} values but its shape {} needs {}", have,
                                                fmt::join(t.shape, "x"), numel));
  };
  switch (t.elem) {
    case Elem::Float:
      if (static_cast<uint64_t>(proto.float_data_size()) != numel) return count_error(proto.float_data_size());
      for (uint64_t i = 0; i < numel; ++i) store(bytes.data(), t.elem, i, proto.float_data(i));
      break;
    case Elem::Double:
      if (static_cast<uint64_t>(proto.double_data_size()) != numel) return count_error(proto.double_data_size());
      for (uint64_t i = 0; i < numel; ++i) store(bytes.data(), t.elem, i, proto.double_data(i));
      break;
    case Elem::Int64:
      if (static_cast<uint64_t>(proto.int64_data_size()) != numel) return count_error(proto.int64_data_size());
      for (uint64_t i = 0; i < numel; ++i) store(bytes.data(), t.elem, i, proto.int64_data(i));
      break;
    case Elem::Uint32: case Elem::Uint64:
      if (static_cast<uint64_t>(proto.uint64_data_size()) != numel) return count_error(proto.uint64_data_size());
      for (uint64_t i = 0; i < numel; ++i) store(bytes.data(), t.elem, i, proto.uint64_data(i));
      break;
    case Elem::Float16: case Elem::Bfloat16:
      // The bits of each value in the low 16 bits of an int32_data entry.
      if (static_cast<uint64_t>(proto.int32_data_size()) != numel) return count_error(proto.int32_data_size());
      for (uint64_t i = 0; i < numel; ++i) {
        const uint16_t bits = static_cast<uint16_t>(proto.int32_data(i));
        std::memcpy(bytes.data() + 2 * i, &bits, 2);
      }
      break;
    default:  // int32, int16, int8, uint16, uint8, bool
      if (static_cast<uint64_t>(proto.int32_data_size()) != numel) return count_error(proto.int32_data_size());
      for (uint64_t i = 0; i < numel; ++i) store(bytes.data(), t.elem, i, proto.int32_data(i));
      break;
  }
  return Tensor::owning(t.elem, std::move(t.shape), std::move(bytes));
}

Result<Tensor> read_tensor_file(const std::string& path) {
  PLANRT_ASSIGN_OR_RETURN(format::MappedFile file, format::MappedFile::open(path));
  auto proto = std::make_shared<::onnx::TensorProto>();
  if (file.bytes().size() > static_cast<size_t>(INT32_MAX) ||
      !proto->ParseFromArray(file.bytes().data(), static_cast<int>(file.bytes().size()))) {
    return make_error(ErrorCode::InvalidArgument, "'{}' is not a serialized ONNX TensorProto",
                      path);
  }
  ExternalDataContext context{std::filesystem::path(path).parent_path(), {}};
  return read_tensor(*proto, context, proto);
}

}  // namespace planrt::importers::onnx
