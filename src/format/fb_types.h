// Conversions between the FlatBuffers enums/structs of program.fbs and the core types.
//
// The fb enums are untrusted bytes: the checked conversions return nullopt for a value
// outside the enum rather than producing an invalid core enum. Thread-safe, no state.
#pragma once

#include <cstdint>
#include <optional>

#include "planrt/core/device.h"
#include "planrt/core/dtype.h"
#include "planrt/core/tensor_view.h"
#include "planrt/format/program_generated.h"

namespace planrt::format {

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
