// DeviceAllocator: how planrt gets and moves memory on a device, and the registry that
// holds one allocator per DeviceType.
//
// Contract:
// - allocate() returns memory for `nbytes` on `device`, or an error (OutOfMemory, or
//   NotSupported for a device the allocator cannot serve) naming the device and the byte
//   count. It never throws and never aborts. Zero bytes may return nullptr.
// - deallocate() takes back exactly what allocate() gave, with the same nbytes and device.
// - The copy functions are synchronous: when they return, the bytes have arrived. Host
//   pointers are ordinary process memory; device pointers come from this allocator.
// - An allocator is owned by whoever registers it. It must outlive its registration and
//   every buffer it handed out (DeviceBuffer keeps a raw pointer to it).
//
// Registry: one allocator per DeviceType. The CPU slot always holds the built-in host
// allocator (64-byte aligned) unless a caller registered its own for CPU, which replaces
// it until unregistered (tests count host allocations this way). For other types the slot
// is empty until registered; get_device_allocator() then returns nullptr and callers
// report that the device has no allocator. Registration calls are thread-safe; a pointer
// returned by get_device_allocator() stays valid only while that allocator is registered
// and alive, so unregister only when nothing can still be using it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "planrt/core/device.h"
#include "planrt/core/result.h"

namespace planrt {

class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;

  virtual DeviceType device_type() const = 0;
  virtual Result<void*> allocate(size_t nbytes, Device device) = 0;
  virtual void deallocate(void* ptr, size_t nbytes, Device device) = 0;
  virtual Status copy_host_to_device(void* dst, const void* src, size_t nbytes, Device device) = 0;
  virtual Status copy_device_to_host(void* dst, const void* src, size_t nbytes, Device device) = 0;
  virtual Status copy_device_to_device(void* dst, const void* src, size_t nbytes,
                                       Device device) = 0;
};

// Errors: InvalidArgument for a null allocator or one whose device_type() differs from
// `type`; InvalidArgument when an allocator is already registered for `type` (the
// built-in host allocator does not count: registering for CPU replaces it).
Status register_device_allocator(DeviceType type, DeviceAllocator* allocator);
// NotFound when nothing was registered for `type`. For CPU the built-in host allocator
// comes back into the slot.
Status unregister_device_allocator(DeviceType type);
// The registered allocator, nullptr when none (never nullptr for CPU).
DeviceAllocator* get_device_allocator(DeviceType type);

// The built-in host allocator: 64-byte aligned memory from the C++ runtime, failures
// returned as OutOfMemory. Always available, whatever is registered for CPU.
inline constexpr size_t kHostAlignment = 64;
DeviceAllocator& host_allocator();

}  // namespace planrt
