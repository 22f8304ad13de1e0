// Conversions from the FlatBuffers program types to the runtime's public value types.
// The file was verified by format::ProgramFile, so enum values are in range; absent
// optional fields map to their defaults.
#pragma once

#include <string_view>
#include <vector>

#include "planrt/core/device.h"
#include "format/fb_types.h"
#include "planrt/core/dtype.h"
#include "planrt/format/program_generated.h"
#include "planrt/runtime/backend.h"
#include "planrt/runtime/tensor_spec.h"

namespace planrt::runtime_detail {

using format::str;

inline Device to_device(const fb::DeviceRef* d) {
  if (d == nullptr) return Device::cpu();
  return Device{static_cast<DeviceType>(d->type()), d->index()};
}

inline DType to_dtype(fb::DType d) { return static_cast<DType>(d); }

inline std::vector<DimRef> to_dim_refs(const flatbuffers::Vector<const fb::DimRef*>* shape) {
  std::vector<DimRef> out;
  if (shape == nullptr) return out;
  out.reserve(shape->size());
  for (const fb::DimRef* r : *shape) out.push_back(DimRef{r->value(), r->dim()});
  return out;
}

inline std::vector<DimSpec> to_dim_specs(
    const flatbuffers::Vector<flatbuffers::Offset<fb::DimSpec>>* dims) {
  std::vector<DimSpec> out;
  if (dims == nullptr) return out;
  out.reserve(dims->size());
  for (const fb::DimSpec* d : *dims) out.push_back(DimSpec{std::string(str(d->name())), d->min(), d->max()});
  return out;
}

inline std::vector<BackendOption> to_options(
    const flatbuffers::Vector<flatbuffers::Offset<fb::KeyValue>>* kvs) {
  std::vector<BackendOption> out;
  if (kvs == nullptr) return out;
  for (const fb::KeyValue* kv : *kvs) {
    out.push_back(BackendOption{std::string(str(kv->key())), std::string(str(kv->value()))});
  }
  return out;
}

template <typename T>
inline size_t size_of(const flatbuffers::Vector<T>* v) {
  return v == nullptr ? 0 : v->size();
}

// The method named `name`, nullptr when none.
inline const fb::Method* find_method(const fb::Program& program, std::string_view name) {
  if (program.methods() == nullptr) return nullptr;
  for (const fb::Method* m : *program.methods()) {
    if (str(m->name()) == name) return m;
  }
  return nullptr;
}

}  // namespace planrt::runtime_detail
