#include <cstring>
#include <new>

#include "core/host_pages.h"
#include "planrt/platform/device_allocator.h"

namespace planrt {
namespace {

// From here up an allocation is whole pages advised for huge pages (core/host_pages.h): the
// planned arenas host kernels stream through. glibc's malloc maps every block above its
// largest dynamic threshold (32 MiB on 64-bit) afresh anyway, so a mapping costs nothing it
// would not; below it, malloc reuses freed blocks without zeroing them again, which a
// per-call output of a few MiB keeps.
constexpr size_t kMappedAtOrAbove = size_t{32} << 20;

class HostAllocator final : public DeviceAllocator {
 public:
  DeviceType device_type() const override { return DeviceType::CPU; }

  Result<void*> allocate(size_t nbytes, Device device) override {
    if (!device.is_cpu()) {
      return make_error(ErrorCode::NotSupported, "the host allocator cannot allocate on {}",
                        to_string(device));
    }
    if (nbytes == 0) return static_cast<void*>(nullptr);
    if (nbytes >= kMappedAtOrAbove) {
      PLANRT_ASSIGN_OR_RETURN(HostPages pages, HostPages::map(nbytes));
      return pages.release();
    }
    // nothrow + align_val_t: a failed allocation becomes a Status, never bad_alloc.
    void* p = ::operator new(nbytes, std::align_val_t(kHostAlignment), std::nothrow);
    if (p == nullptr) {
      return make_error(ErrorCode::OutOfMemory, "host allocation of {} bytes failed", nbytes);
    }
    return p;
  }

  void deallocate(void* ptr, size_t nbytes, Device) override {
    if (ptr == nullptr) return;
    if (nbytes >= kMappedAtOrAbove) {
      HostPages::unmap(ptr, (nbytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
      return;
    }
    ::operator delete(ptr, std::align_val_t(kHostAlignment));
  }

  Status copy_host_to_device(void* dst, const void* src, size_t nbytes, Device) override {
    return copy(dst, src, nbytes);
  }
  Status copy_device_to_host(void* dst, const void* src, size_t nbytes, Device) override {
    return copy(dst, src, nbytes);
  }
  Status copy_device_to_device(void* dst, const void* src, size_t nbytes, Device) override {
    return copy(dst, src, nbytes);
  }

 private:
  static Status copy(void* dst, const void* src, size_t nbytes) {
    if (nbytes != 0) std::memmove(dst, src, nbytes);
    return {};
  }
};

}  // namespace

DeviceAllocator& host_allocator() {
  static HostAllocator allocator;
  return allocator;
}

}  // namespace planrt
