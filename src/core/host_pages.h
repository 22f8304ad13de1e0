// Host memory mapped in whole pages and, from kHugePageBytes up, aligned to and advised for
// transparent huge pages (madvise MADV_HUGEPAGE). Why: a kernel that streams a large buffer
// once per call (a one-row product reading every weight byte, a convolution's activations at
// batch 8) is bound by TLB misses on 4 KiB pages. Measured on the 2-core AMD EPYC development
// machine: one core reading 170 MiB ran at 31 GB/s on 4 KiB pages and 45 GB/s on 2 MiB pages
// (docs/performance.md, "Huge pages for packed weights and planned buffers").
//
// The advice is a hint: a kernel with THP off ("never") or without free huge pages maps
// 4 KiB pages and nothing else changes. Pages are faulted in on first touch, but a touch
// makes a whole huge page resident: a mapping of 2 MiB + 1 bytes whose last byte is written
// holds 4 MiB, and every fresh mapping is zeroed page by page when first touched (so not for
// buffers made per call). Below kHugePageBytes the mapping is plain pages.
//
// Ownership: HostPages is a move-only owner; destruction unmaps. Thread safety: distinct
// objects may be used from any thread; one object is not synchronized.
#pragma once

#include <cstddef>
#include <cstdint>

#include "planrt/core/result.h"

namespace planrt {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

class HostPages {
 public:
  // `bytes` of zeroed read-write memory (rounded up to whole pages); OutOfMemory when the
  // system cannot map it, InvalidArgument for 0.
  static Result<HostPages> map(size_t bytes);

  HostPages() = default;
  HostPages(HostPages&& other) noexcept;
  HostPages& operator=(HostPages&& other) noexcept;
  HostPages(const HostPages&) = delete;
  HostPages& operator=(const HostPages&) = delete;
  ~HostPages();

  void* data() const { return data_; }
  size_t size() const { return size_; }  // mapped bytes, >= the request
  bool huge_page_advised() const { return advised_; }

  // Gives up ownership: the caller unmaps with unmap(data, size).
  void* release();
  static void unmap(void* data, size_t size);

 private:
  HostPages(void* data, size_t size, bool advised) : data_(data), size_(size), advised_(advised) {}
  void* data_ = nullptr;
  size_t size_ = 0;
  bool advised_ = false;
};

}  // namespace planrt
