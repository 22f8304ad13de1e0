#include "planrt/runtime/memory_manager.h"

#include <cstring>
#include <limits>

namespace planrt {

Result<MemoryManager> MemoryManager::create(std::span<const uint64_t> sizes,
                                            std::span<const Device> devices,
                                            std::string_view owner) {
  // Rule 4: a length mismatch is the caller's bug, but an error here is still catchable.
  if (sizes.size() != devices.size()) {
    return make_error(ErrorCode::InvalidArgument,
                      "method '{}': {} planned buffer sizes but {} devices", owner, sizes.size(),
                      devices.size());
  }
  MemoryManager mm;
  mm.sizes_.assign(sizes.begin(), sizes.end());
  mm.devices_.assign(devices.begin(), devices.end());
  mm.buffers_.resize(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] > std::numeric_limits<size_t>::max()) {
      return make_error(ErrorCode::OutOfMemory,
                        "method '{}': planned buffer {} on {} ({} bytes) exceeds the address space",
                        owner, i, to_string(devices[i]), sizes[i]);
    }
  }
  // Rule 3: device buffers first, so a device failure costs no host allocation or zero-fill.
  for (int pass = 0; pass < 2; ++pass) {
    bool want_host = pass == 1;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (devices[i].is_cpu() != want_host) continue;
      Result<DeviceBuffer> buffer = DeviceBuffer::allocate(static_cast<size_t>(sizes[i]), devices[i]);
      if (!buffer.ok()) {
        // Whatever was allocated so far goes back with `mm`.
        return buffer.status().with_context(fmt::format(
            "method '{}': planned buffer {} on {} ({} bytes)", owner, i, to_string(devices[i]),
            sizes[i]));
      }
      mm.buffers_[i] = std::move(buffer).value();
      if (want_host && sizes[i] != 0) std::memset(mm.buffers_[i].data(), 0, sizes[i]);
    }
  }
  return mm;
}

bool MemoryManager::has_device_memory() const {
  for (const Device& d : devices_) {
    if (!d.is_cpu()) return true;
  }
  return false;
}

uint64_t MemoryManager::bytes_on(Device device) const {
  uint64_t total = 0;
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i] == device) total += sizes_[i];
  }
  return total;
}

}  // namespace planrt
