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
// plus their sizes must fit the capacity searched for. A tensor placed at or above the
// lowest top any unplaced tensor could reach is skipped (that one could fill the gap
// first). When a placed tensor raised no unplaced tensor's floor (nothing can come to rest
// on it) and its subtree failed, the node fails: any packing of it could drop that tensor
// to where it was tried. Once the unplaced tensors split into groups whose lifetimes do not
// meet, each is searched on its own, from offset 0 in its own canonical order. A group that
// fails with its search complete is remembered by its state (its tensors and floors, and
// the last offset and ranks where they constrain it), and the same state met again fails at
// once, under any later choice or restart.
//
// Order: candidates go lowest floor first, then by a static rank; twelve ranks (six key
// orders over section load, area, sections spanned and lifetime, each static or re-ranked at
// every split by the bytes still unplaced) take turns under a node limit that doubles each
// round (restarts), because which one packs a case first varies by orders of magnitude; a
// re-ranked order and its static twin walk the same tree where re-ranking changes nothing,
// and then the second is skipped for the round.
//
// The driver (improve_plan) tries the caller's good-enough arena if it gave one, else the
// lower bound, with 7/8 of the budget; if that is not found, it halves the interval between
// what is proven impossible and the best arena found, until the two meet (the best is then proven optimal)
// or the time budget is spent. Deterministic: the same input and budget give the same plan
// except where the budget cuts a search short (the clock decides how far it got). Cost:
// exponential in the worst case (the problem is NP-hard); memory O(n^2) for the tensors'
// conflict lists, so it runs only up to kMaxSearchTensors tensors with a size, plus at most
// 32 MiB of remembered states. Figures: bench/results/planner_cases.jsonl.
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
  Enough,         // a plan at or below the caller's good-enough arena (not proven optimal)
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
// verify_plan. `enough_bytes` (0: none): an arena the caller is content with, such as a
// memory's capacity; the search aims at it instead of the lower bound and stops at the
// first plan at or below it. Memory: the tensors' conflict lists, O(n^2) at worst, and a table of
// refuted states of at most 32 MiB.
SearchReport improve_plan(std::span<const TensorLifetime> tensors, uint64_t alignment,
                          double budget_ms, MemoryPlan& plan, uint64_t enough_bytes = 0);

}  // namespace planrt::planning
