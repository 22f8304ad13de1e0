#include "planrt/platform/device_buffer.h"

#include <utility>

namespace planrt {

Result<DeviceBuffer> DeviceBuffer::allocate(size_t nbytes, Device device) {
  DeviceAllocator* allocator = get_device_allocator(device.type);
  if (allocator == nullptr) {
    return make_error(ErrorCode::NotSupported,
                      "cannot allocate {} bytes on {}: no allocator is registered for {}", nbytes,
                      to_string(device), device_type_name(device.type));
  }
  return allocate(*allocator, nbytes, device);
}

Result<DeviceBuffer> DeviceBuffer::allocate(DeviceAllocator& allocator, size_t nbytes,
                                            Device device) {
  DeviceBuffer buffer;
  buffer.device_ = device;
  if (nbytes == 0) return buffer;
  Result<void*> p = allocator.allocate(nbytes, device);
  if (!p.ok()) return p.status();
  if (*p == nullptr) {
    // A broken allocator; an empty buffer here would later be used as if it held memory.
    return make_error(ErrorCode::OutOfMemory, "the {} allocator returned null for {} bytes on {}",
                      device_type_name(allocator.device_type()), nbytes, to_string(device));
  }
  buffer.ptr_ = *p;
  buffer.nbytes_ = nbytes;
  buffer.allocator_ = &allocator;
  return buffer;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)),
      nbytes_(std::exchange(other.nbytes_, 0)),
      device_(other.device_),
      allocator_(std::exchange(other.allocator_, nullptr)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    ptr_ = std::exchange(other.ptr_, nullptr);
    nbytes_ = std::exchange(other.nbytes_, 0);
    device_ = other.device_;
    allocator_ = std::exchange(other.allocator_, nullptr);
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (ptr_ != nullptr && allocator_ != nullptr) allocator_->deallocate(ptr_, nbytes_, device_);
  ptr_ = nullptr;
  nbytes_ = 0;
  allocator_ = nullptr;
}

}  // namespace planrt
