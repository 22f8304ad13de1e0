#include "backends/engine/scratch_pool.h"

#include <atomic>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "backends/engine/scratch_device.h"
#include "planrt/platform/device_allocator.h"

namespace planrt::engine {
namespace {

std::atomic<bool> g_fail_next_growth{false};
std::atomic<int64_t> g_record_delay_us{0};

// Host scratch: runs are synchronous and serialized by the device lock, so there is nothing
// to order beyond it. Memory comes from the allocator registered for the CPU (as the
// arenas' does), so a caller that counts or limits host memory sees the pool too. The
// buffer outlives any one call, and the CPU registration may change meanwhile: each buffer
// goes back to the allocator that gave it (which must stay alive until then, the registry's
// rule: trim the pool before unregistering an allocator it drew from).
class HostScratchDevice final : public ScratchDevice {
 public:
  Result<void*> allocate(uint64_t bytes, void*) override {
    if (bytes > std::numeric_limits<size_t>::max()) {
      return make_error(ErrorCode::OutOfMemory, "{} bytes exceed the address space", bytes);
    }
    DeviceAllocator* allocator = get_device_allocator(DeviceType::CPU);
    Result<void*> p = allocator->allocate(static_cast<size_t>(bytes), Device::cpu());
    if (p.ok() && *p != nullptr) owners_[*p] = allocator;
    return p;
  }
  void free(void* ptr, uint64_t bytes, void*) override {
    if (ptr == nullptr) return;
    auto it = owners_.find(ptr);
    DeviceAllocator* allocator = it == owners_.end() ? &host_allocator() : it->second;
    if (it != owners_.end()) owners_.erase(it);
    allocator->deallocate(ptr, static_cast<size_t>(bytes), Device::cpu());
  }
  Status wait_handoff(void*) override { return {}; }
  Status record_handoff(void*) override { return {}; }
  Status synchronize_handoff() override { return {}; }
  Result<bool> capturing(void*) override { return false; }

 private:
  std::map<void*, DeviceAllocator*> owners_;  // under the slot's lock, as every call here
};

struct Slot {
  std::mutex mu;  // the device lock (see scratch_pool.h)
  std::unique_ptr<ScratchDevice> device;
  Status device_error;  // why `device` could not be made
  void* buffer = nullptr;
  uint64_t capacity = 0;
  EngineScratchStats stats;
  std::map<uint64_t, EngineContextInfo> contexts;  // by id: creation order
  uint64_t next_id = 1;
};

struct Registry {
  std::mutex mu;  // find-or-insert only
  std::map<Device, std::unique_ptr<Slot>> slots;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: contexts may outlive statics
  return *r;
}

Slot& slot_of(Device device) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::unique_ptr<Slot>& slot = r.slots[device];
  if (!slot) {
    slot = std::make_unique<Slot>();
    slot->stats.device = device;
  }
  return *slot;  // map nodes never move and slots are never erased
}

// Makes the slot's ScratchDevice on first use; under the slot's lock.
Status ensure_device(Slot& slot, Device device) {
  if (slot.device) return {};
  Result<std::unique_ptr<ScratchDevice>> d = make_scratch_device(device);
  if (!d.ok()) return d.status();
  slot.device = std::move(d).value();
  return {};
}

}  // namespace

Result<std::unique_ptr<ScratchDevice>> make_scratch_device(Device device) {
  if (device.is_cpu()) return std::unique_ptr<ScratchDevice>(std::make_unique<HostScratchDevice>());
  if (device.type == DeviceType::CUDA) return detail::make_cuda_scratch_device(device.index);
  return make_error(ErrorCode::NotSupported, "no activation-scratch pool for {}", to_string(device));
}

#ifndef PLANRT_HAVE_CUDA
namespace detail {
Result<std::unique_ptr<ScratchDevice>> make_cuda_scratch_device(int device) {
  return make_error(ErrorCode::NotSupported,
                    "cuda:{}: this build of planrt has no CUDA support", device);
}
}  // namespace detail
#endif

Status ScratchPool::run(Device device, uint64_t required, void* stream, const Enqueue& enqueue) {
  Slot& slot = slot_of(device);
  std::string where = fmt::format("shared activation scratch on {}", to_string(device));
  {
    // Capture first: nothing below (the handoff wait, a growth) may touch a capture.
    std::lock_guard lock(slot.mu);
    PLANRT_RETURN_IF_ERROR(ensure_device(slot, device));
  }
  Result<bool> capturing = slot.device->capturing(stream);
  if (!capturing.ok()) return capturing.status().with_context(where);
  if (*capturing) {
    return make_error(ErrorCode::NotSupported,
                      "{}: a pooled engine cannot run on a stream that is capturing a CUDA graph "
                      "(the pool's handoff would invalidate the capture); load the method with "
                      "engine.{}=false to capture it", where, kSharedScratchOption);
  }
  if (required == 0) return enqueue(nullptr, 0);  // nothing installed, nothing grown, no lock
  std::lock_guard lock(slot.mu);
  ScratchDevice& dev = *slot.device;
  PLANRT_RETURN_IF_ERROR(dev.wait_handoff(stream));
  if (slot.capacity < required) {
    // The new buffer first: a failure leaves the old one in place for the next call.
    Result<void*> grown = g_fail_next_growth.exchange(false)
                              ? Result<void*>(make_error(ErrorCode::OutOfMemory,
                                                         "injected failure of a {}-byte growth", required))
                              : dev.allocate(required, stream);
    if (!grown.ok()) {
      return grown.status().with_context(fmt::format("{}: growing from {} to {} bytes", where,
                                                     slot.capacity, required));
    }
    // Ordered after the wait above, so after every run that used the old buffer.
    if (slot.buffer != nullptr) dev.free(slot.buffer, slot.capacity, stream);
    slot.buffer = *grown;
    slot.capacity = required;
    ++slot.stats.pool_growths;
    slot.stats.pool_high_water_bytes = std::max(slot.stats.pool_high_water_bytes, required);
  }
  Status status = enqueue(slot.buffer, slot.capacity);
  if (int64_t us = g_record_delay_us.load(std::memory_order_relaxed); us > 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(us));  // tests only
  }
  // Recorded even after a failed enqueue: whatever it did enqueue is covered.
  Status recorded = dev.record_handoff(stream);
  ++slot.stats.pooled_runs;
  if (!status.ok()) return status;
  if (!recorded.ok()) return recorded.with_context(where);
  return {};
}

Status ScratchPool::trim(Device device) {
  Slot& slot = slot_of(device);
  std::lock_guard lock(slot.mu);
  if (slot.buffer == nullptr) return {};
  std::string where = fmt::format("trimming the shared activation scratch on {}", to_string(device));
  PLANRT_RETURN_IF_ERROR(slot.device->synchronize_handoff().with_context(where));
  slot.device->free(slot.buffer, slot.capacity, nullptr);
  slot.buffer = nullptr;
  slot.capacity = 0;
  ++slot.stats.pool_trims;
  return {};
}

Result<EngineScratchStats> ScratchPool::stats(Device device) {
  Slot& slot = slot_of(device);
  std::lock_guard lock(slot.mu);
  EngineScratchStats s = slot.stats;
  s.pool_capacity_bytes = slot.capacity;
  for (const auto& [id, info] : slot.contexts) s.contexts.push_back(info);
  return s;
}

uint64_t ScratchPool::add_context(Device device, EngineContextInfo info) {
  Slot& slot = slot_of(device);
  std::lock_guard lock(slot.mu);
  if (info.planned) {
    ++slot.stats.planned_contexts;
    slot.stats.planned_scratch_bytes += info.scratch_bytes;
  } else if (info.pooled) {
    ++slot.stats.pooled_contexts;
    slot.stats.pooled_private_equivalent_bytes += info.scratch_bytes;
  } else {
    ++slot.stats.private_contexts;
    slot.stats.private_scratch_bytes += info.scratch_bytes;
  }
  uint64_t id = slot.next_id++;
  slot.contexts.emplace(id, std::move(info));
  return id;
}

void ScratchPool::remove_context(Device device, uint64_t id) {
  Slot& slot = slot_of(device);
  std::lock_guard lock(slot.mu);
  auto it = slot.contexts.find(id);
  if (it == slot.contexts.end()) return;
  const EngineContextInfo& info = it->second;
  if (info.planned) {
    --slot.stats.planned_contexts;
    slot.stats.planned_scratch_bytes -= info.scratch_bytes;
  } else if (info.pooled) {
    --slot.stats.pooled_contexts;
    slot.stats.pooled_private_equivalent_bytes -= info.scratch_bytes;
  } else {
    --slot.stats.private_contexts;
    slot.stats.private_scratch_bytes -= info.scratch_bytes;
  }
  slot.contexts.erase(it);
}

namespace testing {
void fail_next_growth() { g_fail_next_growth = true; }
void set_record_delay(std::chrono::microseconds delay) { g_record_delay_us = delay.count(); }
std::unique_lock<std::mutex> hold_device_lock(Device device) {
  return std::unique_lock<std::mutex>(slot_of(device).mu);
}
}  // namespace testing

}  // namespace planrt::engine
