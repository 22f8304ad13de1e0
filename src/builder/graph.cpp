#include "builder/graph.h"

#include <fmt/format.h>

namespace planrt::builder::ir {

std::string_view backend_name(Backend backend) {
  switch (backend) {
    case Backend::Cpu: return "cpu";
    case Backend::Cuda: return "cuda";
    case Backend::Engine: return "engine";
  }
  return "unknown";
}

Result<Backend> parse_backend(std::string_view name) {
  for (Backend b : {Backend::Cpu, Backend::Cuda, Backend::Engine}) {
    if (backend_name(b) == name) return b;
  }
  return make_error(ErrorCode::InvalidArgument,
                    "unknown backend '{}' (accepted: cpu, cuda, engine)", name);
}

Device default_device(Backend backend) {
  return backend == Backend::Cpu ? Device::cpu() : Device::cuda(0);
}

Device node_device(const Method& method, const Node& node) {
  const Backend backend = node.backend.value_or(method.backend);
  if (node.device) return *node.device;
  if (method.device && backend != Backend::Cpu) return *method.device;
  return default_device(backend);
}

uint64_t Constant::nbytes() const {
  uint64_t n = element_size(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

const Constant* Model::find_constant(std::string_view name) const {
  for (const Constant& c : constants) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

const Method* Model::find_method(std::string_view name) const {
  for (const Method& m : methods) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::string shape_to_string(const SymShape& shape, std::span<const DimDecl> dims) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    const Dim& d = shape[i];
    if (d.is_static()) {
      out += std::to_string(d.value);
      continue;
    }
    std::string name = static_cast<size_t>(d.dim) < dims.size() ? dims[d.dim].name
                                                                 : fmt::format("dim#{}", d.dim);
    out += d.value == 1 ? name : fmt::format("{}*{}", d.value, name);
  }
  return out + "]";
}

std::string type_to_string(const TensorType& type, std::span<const DimDecl> dims) {
  return fmt::format("{} {}", dtype_name(type.dtype), shape_to_string(type.shape, dims));
}

Result<uint64_t> max_nbytes(const TensorType& type, std::span<const DimDecl> dims) {
  uint64_t n = element_size(type.dtype);
  for (const Dim& d : type.shape) {
    int64_t size = d.value;
    if (!d.is_static()) {
      if (static_cast<size_t>(d.dim) >= dims.size()) {
        return make_error(ErrorCode::Internal, "shape refers to dim #{} of {}", d.dim, dims.size());
      }
      if (__builtin_mul_overflow(d.value, dims[d.dim].max, &size)) size = -1;
    }
    uint64_t next = 0;
    if (size < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(size), &next)) {
      return make_error(ErrorCode::InvalidArgument, "tensor of shape {} overflows 64-bit byte sizes",
                        shape_to_string(type.shape, dims));
    }
    n = next;
  }
  return n;
}

std::string node_label(const Node& node, size_t index) {
  if (node.outputs.empty() || node.outputs.front().empty()) {
    return fmt::format("node {} (op {})", index, node.op);
  }
  return fmt::format("node {} (op {}, output '{}')", index, node.op, node.outputs.front());
}

}  // namespace planrt::builder::ir
