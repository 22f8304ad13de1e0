// MemoryManager: owns the arenas (planned buffers) of a method, one per buffer index, each
// on its device (docs/design.md §3, placement rules 3 and 4).
//
// create() takes the dense planned-buffer size list and the device list and checks that
// they have the same length, returning InvalidArgument otherwise (rule 4: an error the
// caller can still handle, never an assertion). It allocates every non-CPU buffer first,
// through the allocator registered for its device type, and only then the host buffers,
// which it zero-fills: a device failure (no allocator, out of memory) is reported before
// any host arena was allocated or touched. On failure nothing stays allocated. Errors name
// `owner` (the method), the buffer index, the device and the byte count.
//
// Ownership: move-only; releases every buffer when destroyed, through the allocator that
// produced it (which must still be alive).
// Thread safety: the const members may be called from several threads at once (they read
// what create() fixed); moving or destroying a manager must not race with any other call on
// it. buffer() pointers may be shared; writes to the arenas are the caller's to order (a
// Method's lock does it for the runtime, method.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planrt/core/device.h"
#include "planrt/core/result.h"
#include "planrt/platform/device_buffer.h"

namespace planrt {

class MemoryManager {
 public:
  MemoryManager() = default;
  static Result<MemoryManager> create(std::span<const uint64_t> sizes,
                                      std::span<const Device> devices, std::string_view owner);

  MemoryManager(MemoryManager&&) noexcept = default;
  MemoryManager& operator=(MemoryManager&&) noexcept = default;

  size_t num_buffers() const { return buffers_.size(); }
  void* buffer(size_t index) const { return buffers_[index].data(); }
  uint64_t size(size_t index) const { return sizes_[index]; }
  Device device(size_t index) const { return devices_[index]; }
  bool has_device_memory() const;
  // Sum of buffer sizes on `device`.
  uint64_t bytes_on(Device device) const;

 private:
  std::vector<DeviceBuffer> buffers_;
  std::vector<uint64_t> sizes_;
  std::vector<Device> devices_;
};

}  // namespace planrt
