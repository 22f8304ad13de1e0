// Memory planning (docs/design.md §4): place tensors with known lifetimes and sizes into one arena
// so that no two tensors alive at the same time overlap, using as few bytes as possible.
//
// Lifetimes are inclusive instruction indices [first_use, last_use] on the method's
// instruction order. Two tensors conflict when their lifetimes intersect.
//
// Greedy by size, best of several orderings. One greedy placement takes the tensors in a
// fixed order; each goes into the smallest gap between already-placed tensors whose
// lifetimes intersect its own that fits it at the required alignment (ties: the lowest
// gap), else above the highest of them. GreedyBySize runs that placement under each
// ordering of greedy_orders(), in this list order, and keeps the plan with the smallest
// arena (ties: the earliest ordering):
//   1. longer-lifetime-then-size  longer lifetime first; then larger size; then lower id.
//                                 Fixes nested long-lived tensors of different sizes
//                                 (U-Net skips), where size-first orders fragment the arena.
//                                 First because it is the cheap one (see cost below)
//   2. size-then-longer-lifetime  larger size first; then longer lifetime; then lower id
//                                 (the planner's original and only order)
//   3. size-then-later-last-use   larger size first; then later last_use; then longer
//                                 lifetime; then lower id. Fixes equal-size chains that end
//                                 in a long-lived tensor, which order 2 places first and so
//                                 costs a slot
// It stops early at a plan that reaches the lower bound. Plans are deterministic.
//
// Guarantees: every plan satisfies verify_plan; the arena is at least the lower bound (the
// largest sum of sizes live at any one instruction, each rounded up to the alignment), at
// most the arena of ordering 2 alone (the planner before best-of) and at most the no-reuse
// arena. Not guaranteed: optimality (the problem is NP-hard, and the lower bound is not
// always reachable) or any ratio bound on arbitrary input. The ratio arena / lower bound is
// reported for every plan and checked by the tests (tests/planning) and a benchmark
// (bench/planner_bench over the case families of tests/support/plan_cases, each ordering
// alone and best of three; its figures are in bench/results/planner.jsonl).
//
// The no-reuse planner puts every tensor after the previous one (arena = sum of sizes):
// for debugging a suspected aliasing bug.
//
// plan_memory itself never searches further; the builder follows the greedy with the
// branch-and-bound search of planning/packing_search.h where a plan is above its bound.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "planrt/core/result.h"

namespace planrt::planning {

struct TensorLifetime {
  uint64_t size_bytes = 0;  // 0: takes no space, offset 0
  int64_t first_use = 0;    // instruction index that defines it (or first reads it)
  int64_t last_use = 0;     // last instruction that reads it; >= first_use
};

enum class PlannerKind { GreedyBySize, NoReuse };

// The orderings GreedyBySize tries (see the comment at the top of this file).
enum class GreedyOrder { SizeThenLongerLifetime, SizeThenLaterLastUse, LongerLifetimeThenSize };

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

std::string_view greedy_order_name(GreedyOrder order);  // "size-then-longer-lifetime", ...

// The orderings GreedyBySize tries, in tie-break order (earliest wins a tie).
std::span<const GreedyOrder> greedy_orders();

// alignment: a power of two (256 for CUDA buffers, 64 on the host). Errors
// (InvalidArgument, naming the tensor): a lifetime with last_use < first_use, a
// non-power-of-two alignment, a size or arena end that overflows 64 bits (GreedyBySize:
// under every ordering; the first ordering's error is returned). Cost per ordering (3 at
// most): O(n log^2 n + sum over tensors of r log log n), r the byte ranges it reads: its
// conflicts (the placed tensors whose lifetimes meet its own) come from two segment trees
// over first uses, as the union of their byte ranges per tree node (tensors stacked on one
// another merge into one range), not as a scan of every placed tensor. Near linear on model
// graphs; r approaches the conflict count only where the conflicts' ranges are scattered
// (O(n^2) at worst), as under the size-first orders on nested lifetimes (U-Net: hundreds of
// ranges per tensor, against under ten for ordering 1, which is why it runs first).
// O(n log n) memory at worst. Timings: bench/results/planner_scaling.jsonl.
Result<MemoryPlan> plan_memory(std::span<const TensorLifetime> tensors, uint64_t alignment,
                               PlannerKind kind = PlannerKind::GreedyBySize);

// One greedy placement under one ordering, without best-of: for tests and benchmarks that
// compare orderings. Same errors and cost as one ordering of plan_memory.
Result<MemoryPlan> plan_memory_greedy(std::span<const TensorLifetime> tensors,
                                      uint64_t alignment, GreedyOrder order);

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

}  // namespace planrt::planning
