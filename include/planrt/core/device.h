// Device: where memory lives and code runs, as {type, index} ("cpu", "cuda:1").
//
// Thread safety: Device is a plain value (copy and share it freely); the functions here are
// pure and may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "planrt/core/result.h"

namespace planrt {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
inline constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static constexpr Device cpu() { return Device{DeviceType::CPU, 0}; }
  static constexpr Device cuda(int index = 0) { return Device{DeviceType::CUDA, index}; }

  bool is_cpu() const { return type == DeviceType::CPU; }
  friend bool operator==(const Device&, const Device&) = default;
  friend auto operator<=>(const Device&, const Device&) = default;
};

std::string_view device_type_name(DeviceType type);
// "cpu" for the CPU (its index is always 0), "cuda:N" otherwise.
std::string to_string(Device device);
// Accepts "cpu", "cuda" (= cuda:0) and "cuda:N".
Result<Device> parse_device(std::string_view text);

}  // namespace planrt
