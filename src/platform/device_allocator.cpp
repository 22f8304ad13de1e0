// The stream defaults of DeviceAllocator: a device without queues, where every copy is
// synchronous and there is nothing to wait for.
#include "planrt/platform/device_allocator.h"

namespace planrt {

Result<void*> DeviceAllocator::create_stream(Device) { return static_cast<void*>(nullptr); }

void DeviceAllocator::destroy_stream(void*, Device) {}

Status DeviceAllocator::synchronize(void*, Device) { return {}; }

Status DeviceAllocator::wait_for_caller(void*, Device) { return {}; }

Result<bool> DeviceAllocator::pin_host_memory(void*, size_t, Device) { return false; }

void DeviceAllocator::unpin_host_memory(void*, size_t, Device) {}

uint64_t DeviceAllocator::total_memory(Device) { return 0; }

Status DeviceAllocator::copy_host_to_device_async(void* dst, const void* src, size_t nbytes,
                                                  Device device, void*) {
  return copy_host_to_device(dst, src, nbytes, device);
}

Status DeviceAllocator::copy_device_to_host_async(void* dst, const void* src, size_t nbytes,
                                                  Device device, void*) {
  return copy_device_to_host(dst, src, nbytes, device);
}

Status DeviceAllocator::copy_device_to_device_async(void* dst, const void* src, size_t nbytes,
                                                    Device device, void*) {
  return copy_device_to_device(dst, src, nbytes, device);
}

}  // namespace planrt
