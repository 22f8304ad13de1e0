// Host memory for the packed weights of one loaded method (packed_linear.h, packed_conv.h):
// a bump allocator over chunks of core/host_pages.h, so that large packed weights lie on
// transparent huge pages. A one-row product reads every weight byte per call; on 4 KiB pages
// that stream is bound by TLB misses (core/host_pages.h has the figures).
//
// Chunks are kChunkBytes, or one chunk of the request's size rounded to huge pages when it is
// larger; an allocation that does not fit the current chunk starts a new one. Pages are
// faulted in on first touch, so the untouched end of a chunk costs address space only; the
// resident cost above the packed bytes is at most one partly used huge page per chunk.
//
// Ownership: memory lives as long as the arena; each prepared kernel holds a shared_ptr to
// the arena its weight lies in. Thread safety: allocate() is serialized by a lock (a method
// loads on one thread, but distinct methods may share nothing and still be safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/host_pages.h"
#include "planrt/core/result.h"

namespace planrt::kernels::cpu {

class PackedWeightArena {
 public:
  static constexpr size_t kChunkBytes = size_t{32} << 20;
  static constexpr size_t kAlignment = 64;  // any vector load of the packed kernels

  // `bytes` (> 0) aligned to kAlignment, zeroed; OutOfMemory when no chunk can be mapped.
  Result<void*> allocate(size_t bytes);

  uint64_t allocated_bytes() const;  // the sum of the requests, rounded to kAlignment
  uint64_t mapped_bytes() const;     // address space of every chunk

 private:
  struct Chunk {
    HostPages pages;
    size_t used = 0;
  };
  mutable std::mutex mu_;
  std::vector<Chunk> chunks_;
  uint64_t allocated_ = 0;
};

// A packed weight's destination: `bytes` from `arena`, or, with no arena, nullptr (the caller
// lets oneDNN allocate the memory itself: tests and tools that pack one weight on its own).
Result<void*> packed_weight_storage(PackedWeightArena* arena, size_t bytes);

}  // namespace planrt::kernels::cpu
