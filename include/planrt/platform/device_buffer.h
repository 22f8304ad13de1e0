// DeviceBuffer: the owner of one allocation on a device; DeviceBufferView: a view of one.
//
// Ownership: a DeviceBuffer is move-only and gives its memory back to the allocator that
// produced it when destroyed or reset. It keeps a raw pointer to that allocator, so the
// allocator must outlive the buffer (see device_allocator.h). A view owns nothing and is
// valid while its buffer lives.
// Thread safety: a buffer is not synchronized: its const members may be called from several
// threads at once, but reset(), moving and destroying must not race with any other use of
// it. Share views, not owners, across threads; the bytes themselves are the caller's to
// order.
// Errors: allocate() returns the allocator's error with the device and byte count, or
// NotSupported naming the device when no allocator is registered for its type.
#pragma once

#include <cstddef>

#include "planrt/core/device.h"
#include "planrt/core/result.h"
#include "planrt/platform/device_allocator.h"

namespace planrt {

struct DeviceBufferView {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device = Device::cpu();
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Through the allocator registered for device.type. Zero bytes: an empty buffer, no call
  // to the allocator.
  static Result<DeviceBuffer> allocate(size_t nbytes, Device device);
  static Result<DeviceBuffer> allocate(DeviceAllocator& allocator, size_t nbytes, Device device);

  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  void* data() const { return ptr_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool empty() const { return ptr_ == nullptr; }
  DeviceBufferView view() const { return {ptr_, nbytes_, device_}; }

  // Gives the memory back now; the buffer becomes empty.
  void reset();

 private:
  void* ptr_ = nullptr;
  size_t nbytes_ = 0;
  Device device_ = Device::cpu();
  DeviceAllocator* allocator_ = nullptr;
};

}  // namespace planrt
