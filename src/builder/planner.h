// Memory planning (DESIGN §4): place tensors with known lifetimes and sizes into one arena
// so that no two tensors alive at the same time overlap, using as few bytes as possible.
//
// Lifetimes are inclusive instruction indices [first_use, last_use] on the method's
// instruction order. Two tensors conflict when their lifetimes intersect.
//
// Greedy by size with best-fit gaps: tensors are placed largest first (ties: longer
// lifetime first, then lower id, so plans are deterministic). Each goes into the smallest
// gap between already-placed tensors whose lifetimes intersect its own that fits it at the
// required alignment, else above the highest of them. Limits: greedy, not optimal; on
// adversarial lifetime patterns the arena can exceed the lower bound (the largest sum of
// sizes live at any one instruction, each rounded up to the alignment) — the ratio is
// reported for every plan and checked by the tests and a benchmark.
//
// The no-reuse planner puts every tensor after the previous one (arena = sum of sizes):
// for debugging a suspected aliasing bug.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "planrt/core/result.h"

namespace planrt::builder {

struct TensorLifetime {
  uint64_t size_bytes = 0;  // 0: takes no space, offset 0
  int64_t first_use = 0;    // instruction index that defines it (or first reads it)
  int64_t last_use = 0;     // last instruction that reads it; >= first_use
};

enum class PlannerKind { GreedyBySize, NoReuse };

struct MemoryPlan {
  std::vector<uint64_t> offsets;  // one per tensor, multiples of the alignment
  uint64_t arena_bytes = 0;       // highest end, rounded up to the alignment
  uint64_t lower_bound_bytes = 0; // largest live set (aligned sizes)
  double ratio() const {
    return lower_bound_bytes == 0 ? 1.0
                                  : static_cast<double>(arena_bytes) / lower_bound_bytes;
  }
};

std::string_view planner_name(PlannerKind kind);  // "greedy-by-size", "no-reuse"

// alignment: a power of two (256 for CUDA buffers, 64 on the host). Errors
// (InvalidArgument, naming the tensor): a lifetime with last_use < first_use, a
// non-power-of-two alignment, a size or arena end that overflows 64 bits. Cost: O(n^2)
// time in the tensor count (tens of ms at 10k tensors; bench/planner_bench), O(n)
// memory.
Result<MemoryPlan> plan_memory(std::span<const TensorLifetime> tensors, uint64_t alignment,
                               PlannerKind kind = PlannerKind::GreedyBySize);

// The largest sum of aligned sizes live at any one instruction. Total so it can be called
// on unchecked input: a tensor with last_use < first_use counts for nothing, a sum past
// 64 bits saturates at UINT64_MAX, and an alignment that is not a power of two gives 0
// (plan_memory reports all three as errors).
uint64_t lower_bound_bytes(std::span<const TensorLifetime> tensors, uint64_t alignment);

// The invariant checker: every offset aligned, every tensor inside [0, arena_bytes), and
// no two tensors with intersecting lifetimes overlapping in bytes. Returns an error naming
// the first offending tensor (or pair, with their lifetimes and byte ranges), in id order;
// InvalidArgument for inputs plan_memory would refuse, Internal for a broken plan. Run on
// every plan the tests build. O(n^2) in the tensor count, like the planner.
Status verify_plan(std::span<const TensorLifetime> tensors, const MemoryPlan& plan,
                   uint64_t alignment);

}  // namespace planrt::builder
