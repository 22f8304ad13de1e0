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
// - Streams (optional): an allocator for a device that runs work asynchronously hands the
//   runtime queues. create_stream() returns an opaque handle (nullptr: the device has no
//   queues and everything on it is synchronous, the default); work enqueued on one stream
//   runs in order. The *_async copies are ordered on `stream` and may return before the
//   bytes arrive, with two guarantees the runtime relies on: the host source of a
//   host-to-device copy may be overwritten as soon as the call returns (unless the
//   allocator pinned that memory, below), and host memory written by a device-to-host copy
//   may be read only after synchronize(stream). With a null stream the *_async copies are
//   the synchronous ones (the defaults do exactly that). destroy_stream() lets queued work
//   finish and never throws.
// - Caller's work (optional): wait_for_caller(stream) orders `stream` after the work a
//   caller enqueued on the device before the call, outside planrt's streams (CUDA: on the
//   legacy default stream, where DLPack producers asked for stream 1 make their work
//   visible). The runtime calls it before it reads an input that is already in device
//   memory. The default has nothing to wait for (a device without queues).
// - Pinning (optional): pin_host_memory() page-locks host memory the runtime copies to or
//   from the device, so those copies run as DMA without the driver's staging (what that saves:
//   docs/placement.md). Copies from pinned host
//   memory may still read it after the call returns: the runtime writes such memory only
//   after synchronize(). true: pinned, and unpin_host_memory() gets the same arguments
//   before the memory is freed; false: not pinned (the default), nothing to undo.
// - Total memory (optional): total_memory() is the device's whole memory in bytes, or 0 when
//   the allocator does not know it (the default). The loader bounds a method's planned
//   bytes on a device other than the CPU by it unless told otherwise (LoadMethodOptions::
//   max_planned_bytes_per_device; the CPU's bound is the machine's physical memory,
//   whatever allocator is registered). Never fails: an error reads as "unknown".
// - An allocator is owned by whoever registers it. It must outlive its registration and
//   every buffer it handed out (DeviceBuffer keeps a raw pointer to it).
//
// Registry: one allocator per DeviceType. The CPU slot always holds the built-in host
// allocator (64-byte aligned) unless a caller registered its own for CPU, which replaces
// it until unregistered (tests count host allocations this way). For other types the slot
// is empty until registered; get_device_allocator() then returns nullptr and callers
// report that the device has no allocator.
//
// Thread safety:
// - The registry functions may be called from any thread (one lock guards the slots). A
//   pointer returned by get_device_allocator() stays valid only while that allocator is
//   registered and alive, so unregister only when nothing can still be using it.
// - What an allocator must allow: the runtime calls it from every thread that loads, runs or
//   destroys methods, so allocate(), deallocate(), the synchronous copies, create_stream(),
//   destroy_stream() and total_memory() may be called concurrently and must be thread-safe
//   (the built-in host allocator and planrt's CUDA allocator are). A stream is used by one thread at a
//   time: the runtime's work on one method stream (async copies, synchronize, destroy)
//   comes from runs of one Method, which its lock serializes; distinct streams may be used
//   concurrently.
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

  // Streams (see above). The defaults describe a synchronous device.
  virtual Result<void*> create_stream(Device device);
  virtual void destroy_stream(void* stream, Device device);
  // Blocks until the work queued on `stream` has finished; a null stream returns at once.
  virtual Status synchronize(void* stream, Device device);
  virtual Status copy_host_to_device_async(void* dst, const void* src, size_t nbytes,
                                           Device device, void* stream);
  virtual Status copy_device_to_host_async(void* dst, const void* src, size_t nbytes,
                                           Device device, void* stream);
  virtual Status copy_device_to_device_async(void* dst, const void* src, size_t nbytes,
                                             Device device, void* stream);
  // Caller's work (see above). The default: ok, nothing to wait for.
  virtual Status wait_for_caller(void* stream, Device device);
  // Pinning (see above). The defaults pin nothing.
  virtual Result<bool> pin_host_memory(void* ptr, size_t nbytes, Device device);
  virtual void unpin_host_memory(void* ptr, size_t nbytes, Device device);
  // Total memory (see above). The default: 0, unknown.
  virtual uint64_t total_memory(Device device);
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

// The built-in host allocator: at least 64-byte aligned memory, failures returned as
// OutOfMemory. Allocations of 32 MiB and more are whole pages mapped for them, aligned to and
// advised for transparent huge pages (large planned arenas, which host kernels stream
// through: fewer TLB misses); smaller ones come from the C++ runtime's heap. deallocate() must get the
// size allocate() was given (the contract above). Always available, whatever is registered
// for CPU.
inline constexpr size_t kHostAlignment = 64;
DeviceAllocator& host_allocator();

}  // namespace planrt
