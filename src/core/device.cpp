#include "planrt/core/device.h"

#include <charconv>

namespace planrt {

std::string_view device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::CUDA: return "cuda";
  }
  return "unknown";
}

std::string to_string(Device device) {
  if (device.type == DeviceType::CPU) return "cpu";
  return fmt::format("{}:{}", device_type_name(device.type), device.index);
}

Result<Device> parse_device(std::string_view text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  constexpr std::string_view prefix = "cuda:";
  if (text.starts_with(prefix)) {
    std::string_view digits = text.substr(prefix.size());
    int index = -1;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && ptr == digits.data() + digits.size() && !digits.empty() &&
        index >= 0 && index < 256) {
      return Device::cuda(index);
    }
  }
  return make_error(ErrorCode::InvalidArgument,
                    "unknown device '{}' (expected cpu, cuda or cuda:N with N in 0..255)", text);
}

}  // namespace planrt
