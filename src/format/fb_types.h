// Conversions between the FlatBuffers enums/structs of program.fbs and the core types,
// and null-safe access to its vectors.
//
// A FlatBuffers vector that was empty when packed is absent: its accessor returns nullptr,
// even in a verified program. Iterate with `items(v)` and size with `count(v)`.
//
// The fb enums are untrusted bytes: the checked conversions return nullopt for a value
// outside the enum rather than producing an invalid core enum. Thread-safe, no state.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "planrt/core/device.h"
#include "planrt/core/dtype.h"
#include "planrt/core/tensor_view.h"
#include "planrt/format/program_generated.h"

namespace planrt::format {

// A FlatBuffers string as a view; an absent one is empty.
inline std::string_view str(const flatbuffers::String* s) {
  return s == nullptr ? std::string_view() : std::string_view(s->c_str(), s->size());
}

template <typename T>
uint32_t count(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

// A range over `v` that is empty when `v` is absent: for (const fb::Value* v : items(m.values())).
template <typename T>
class VectorItems {
 public:
  using iterator = typename flatbuffers::Vector<T>::const_iterator;
  explicit VectorItems(const flatbuffers::Vector<T>* v) : v_(v) {}
  iterator begin() const { return v_ ? v_->begin() : iterator(nullptr, 0); }
  iterator end() const { return v_ ? v_->end() : iterator(nullptr, 0); }

 private:
  const flatbuffers::Vector<T>* v_;
};

template <typename T>
VectorItems<T> items(const flatbuffers::Vector<T>* v) {
  return VectorItems<T>(v);
}

// flatbuffers::Verifier (2.0.x) checks a vector's length field alignment but not its
// elements': a crafted file can put a vector of 8-byte elements at a 4-byte boundary.
// A vector of structs is a Vector<const S*>: the element's alignment is S's, not the
// pointer's (the same 8 on 64-bit hosts, not on 32-bit ones).
template <typename T>
bool elements_aligned(const flatbuffers::Vector<T>* v) {
  using Element = std::remove_cv_t<std::remove_pointer_t<T>>;
  return v == nullptr || reinterpret_cast<uintptr_t>(v->Data()) % alignof(Element) == 0;
}

inline std::optional<DType> to_dtype(fb::DType d) {
  auto v = static_cast<int>(d);
  if (v < 0 || v >= kNumDTypes) return std::nullopt;
  return static_cast<DType>(v);
}

inline fb::DType to_fb_dtype(DType d) { return static_cast<fb::DType>(static_cast<uint8_t>(d)); }

// An absent DeviceRef (the table field is optional) means the CPU.
inline std::optional<Device> to_device(const fb::DeviceRef* ref) {
  if (ref == nullptr) return Device::cpu();
  auto t = static_cast<int>(ref->type());
  if (t < 0 || t >= kNumDeviceTypes) return std::nullopt;
  return Device{static_cast<DeviceType>(t), static_cast<int>(ref->index())};
}

inline fb::DeviceRef to_fb_device(Device d) {
  return fb::DeviceRef(static_cast<fb::DeviceType>(static_cast<uint8_t>(d.type)),
                       static_cast<uint8_t>(d.index));
}

}  // namespace planrt::format
