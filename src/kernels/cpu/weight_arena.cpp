#include "kernels/cpu/weight_arena.h"

#include <algorithm>
#include <new>

namespace planrt::kernels::cpu {

Result<void*> PackedWeightArena::allocate(size_t bytes) {
  if (bytes == 0) return make_error(ErrorCode::InvalidArgument, "packed weight arena: an allocation of 0 bytes");
  const size_t need = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (need < bytes) return make_error(ErrorCode::OutOfMemory, "packed weight arena: {} bytes cannot be allocated", bytes);
  std::lock_guard lock(mu_);
  if (chunks_.empty() || chunks_.back().pages.size() - chunks_.back().used < need) {
    PLANRT_ASSIGN_OR_RETURN(HostPages pages, HostPages::map(std::max(need, kChunkBytes)));
    try {
      chunks_.push_back({std::move(pages), 0});
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::OutOfMemory, "packed weight arena: cannot record a chunk of {} bytes", need);
    }
  }
  Chunk& chunk = chunks_.back();
  void* p = static_cast<uint8_t*>(chunk.pages.data()) + chunk.used;
  chunk.used += need;
  allocated_ += need;
  return p;
}

uint64_t PackedWeightArena::allocated_bytes() const {
  std::lock_guard lock(mu_);
  return allocated_;
}

uint64_t PackedWeightArena::mapped_bytes() const {
  std::lock_guard lock(mu_);
  uint64_t total = 0;
  for (const Chunk& c : chunks_) total += c.pages.size();
  return total;
}

Result<void*> packed_weight_storage(PackedWeightArena* arena, size_t bytes) {
  if (arena == nullptr) return static_cast<void*>(nullptr);
  return arena->allocate(bytes);
}

}  // namespace planrt::kernels::cpu
