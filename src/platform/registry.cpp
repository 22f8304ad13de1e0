#include <array>
#include <mutex>

#include "planrt/platform/device_allocator.h"

namespace planrt {
namespace {

struct Registry {
  std::mutex mu;
  // Only what callers registered; the CPU default is supplied on lookup.
  std::array<DeviceAllocator*, kNumDeviceTypes> slots{};
};

Registry& registry() {
  static Registry r;
  return r;
}

Result<size_t> slot_of(DeviceType type) {
  auto i = static_cast<size_t>(type);
  if (i >= static_cast<size_t>(kNumDeviceTypes)) {
    return make_error(ErrorCode::InvalidArgument, "device type {} is not known", i);
  }
  return i;
}

}  // namespace

Status register_device_allocator(DeviceType type, DeviceAllocator* allocator) {
  PLANRT_ASSIGN_OR_RETURN(size_t slot, slot_of(type));
  if (allocator == nullptr) {
    return make_error(ErrorCode::InvalidArgument, "cannot register a null allocator for {}",
                      device_type_name(type));
  }
  if (allocator->device_type() != type) {
    return make_error(ErrorCode::InvalidArgument,
                      "cannot register an allocator for {} under device type {}",
                      device_type_name(allocator->device_type()), device_type_name(type));
  }
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (r.slots[slot] != nullptr) {
    return make_error(ErrorCode::InvalidArgument,
                      "an allocator is already registered for {}; unregister it first",
                      device_type_name(type));
  }
  r.slots[slot] = allocator;
  return {};
}

Status unregister_device_allocator(DeviceType type) {
  PLANRT_ASSIGN_OR_RETURN(size_t slot, slot_of(type));
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (r.slots[slot] == nullptr) {
    return make_error(ErrorCode::NotFound, "no allocator is registered for {}",
                      device_type_name(type));
  }
  r.slots[slot] = nullptr;
  return {};
}

DeviceAllocator* get_device_allocator(DeviceType type) {
  auto slot = slot_of(type);
  if (!slot.ok()) return nullptr;
  Registry& r = registry();
  DeviceAllocator* found = nullptr;
  {
    std::lock_guard lock(r.mu);
    found = r.slots[*slot];
  }
  if (found == nullptr && type == DeviceType::CPU) return &host_allocator();
  return found;
}

}  // namespace planrt
