// The search after the greedy (docs/design.md §4): when the greedy plan is above the lower
// bound, look for a smaller arena by branch and bound over canonical placements.
//
// Canonical placements: every tensor rests at offset 0 or directly on top of a tensor whose
// lifetime meets its own. Any valid plan drops to a canonical one that is no larger, and a
// canonical plan, taken in order of offset, places each tensor at its "floor" (the highest
// top of the tensors placed so far whose lifetimes meet its own). The search builds plans
// in that order: each step places one unplaced tensor at its floor, never below the last
// offset placed (tensors at one offset, which cannot meet, go in id order), so each
// canonical plan is reached once.
//
// Pruning: time is cut into sections between lifetime ends; a section's unplaced tensors all
// meet each other, so they stack above max(the section's top, the last offset placed): that
// plus their sizes must fit the capacity searched for. Candidates go lowest floor first,
// then larger size, then longer lifetime, then id: the greedy's order of preference.
//
// The driver (improve_plan) asks for the lower bound first; if that is proven impossible, it
// halves the interval between what is proven impossible and the best arena found, until the
// two meet (the best is then proven optimal) or the time budget is spent. Deterministic:
// the same input and budget give the same plan except where the budget cuts a search short
// (the clock decides how far it got). Cost: exponential in the worst case (the problem is
// NP-hard); memory O(n^2) for the tensors' conflict lists, so it runs only up to
// kMaxSearchTensors tensors with a size. Figures: bench/results/planner_cases.jsonl.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "planning/planner.h"

namespace planrt::planning {

inline constexpr size_t kMaxSearchTensors = 4096;

enum class SearchStop {
  NotRun,         // the greedy plan was already at the lower bound (or the budget was 0)
  LowerBound,     // a plan at the lower bound: optimal
  ProvenOptimal,  // every smaller arena was proven impossible
  TimeBudget,     // the budget ran out first: the best plan found, not proven optimal
  TooLarge,       // more than kMaxSearchTensors tensors with a size: the greedy plan stands
};

std::string_view search_stop_name(SearchStop stop);  // "not-run", "lower-bound", ...

struct SearchReport {
  SearchStop stop = SearchStop::NotRun;
  uint64_t greedy_arena_bytes = 0;
  uint64_t proven_impossible_bytes = 0;  // the largest arena proven impossible (0: none)
  int64_t nodes = 0;                     // search nodes visited
  double elapsed_ms = 0;
};

// Improves `plan` (a valid plan of `tensors` at `alignment`, with its lower bound set) in
// place within `budget_ms` of wall time; `plan` stays valid throughout. The result satisfies
// verify_plan.
SearchReport improve_plan(std::span<const TensorLifetime> tensors, uint64_t alignment,
                          double budget_ms, MemoryPlan& plan);

}  // namespace planrt::planning
