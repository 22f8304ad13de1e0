#include "core/host_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace planrt {
namespace {

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

Result<HostPages> HostPages::map(size_t bytes) {
  if (bytes == 0) return make_error(ErrorCode::InvalidArgument, "host pages: a mapping of 0 bytes");
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const bool huge = bytes >= kHugePageBytes;
  const size_t align = huge ? kHugePageBytes : page;
  const size_t size = round_up(bytes, align);
  if (size < bytes || size + align < size) {
    return make_error(ErrorCode::OutOfMemory, "host pages: {} bytes cannot be mapped", bytes);
  }
  // Over-map by one alignment and trim both ends, so the start lies on a huge-page boundary
  // (the kernel backs only aligned 2 MiB ranges with huge pages).
  const size_t span = huge ? size + align : size;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    return make_error(ErrorCode::OutOfMemory, "host pages: mapping {} bytes failed: {}", bytes,
                      std::strerror(errno));
  }
  auto* base = static_cast<uint8_t*>(raw);
  uint8_t* start = base;
  if (huge) {
    start = reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(base), align));
    if (start > base) munmap(base, static_cast<size_t>(start - base));
    const size_t tail = static_cast<size_t>((base + span) - (start + size));
    if (tail > 0) munmap(start + size, tail);
  }
  bool advised = false;
#ifdef MADV_HUGEPAGE
  if (huge) advised = madvise(start, size, MADV_HUGEPAGE) == 0;
#endif
  return HostPages(start, size, advised);
}

HostPages::HostPages(HostPages&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      advised_(std::exchange(other.advised_, false)) {}

HostPages& HostPages::operator=(HostPages&& other) noexcept {
  if (this != &other) {
    unmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    advised_ = std::exchange(other.advised_, false);
  }
  return *this;
}

HostPages::~HostPages() { unmap(data_, size_); }

void* HostPages::release() {
  size_ = 0;
  advised_ = false;
  return std::exchange(data_, nullptr);
}

void HostPages::unmap(void* data, size_t size) {
  if (data != nullptr && size != 0) munmap(data, size);
}

}  // namespace planrt
