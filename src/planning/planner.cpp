#include "planning/planner.h"

#include <algorithm>
#include <limits>
#include <span>
#include <vector>
#include <numeric>
#include <optional>

namespace planrt::planning {
namespace {

constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();

bool is_power_of_two(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// Rounds up to a power-of-two alignment; false when the result would not fit in 64 bits.
bool align_up(uint64_t x, uint64_t alignment, uint64_t* out) {
  if (x > kMaxU64 - (alignment - 1)) return false;
  *out = (x + alignment - 1) & ~(alignment - 1);
  return true;
}

bool lifetimes_intersect(const TensorLifetime& a, const TensorLifetime& b) {
  return a.first_use <= b.last_use && b.first_use <= a.last_use;
}

Status check_inputs(std::span<const TensorLifetime> tensors, uint64_t alignment) {
  if (!is_power_of_two(alignment)) {
    return make_error(ErrorCode::InvalidArgument,
                      "memory plan alignment {} is not a power of two", alignment);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorLifetime& t = tensors[i];
    if (t.last_use < t.first_use) {
      return make_error(ErrorCode::InvalidArgument,
                        "tensor {} has last_use {} before its first_use {}", i, t.last_use,
                        t.first_use);
    }
    uint64_t aligned = 0;
    if (!align_up(t.size_bytes, alignment, &aligned)) {
      return make_error(ErrorCode::InvalidArgument,
                        "tensor {} of {} bytes overflows 64 bits at alignment {}", i,
                        t.size_bytes, alignment);
    }
  }
  return Status();
}

Status arena_overflow(size_t id, uint64_t size, uint64_t offset, uint64_t alignment) {
  return make_error(ErrorCode::InvalidArgument,
                    "tensor {} of {} bytes placed at offset {} overflows a 64-bit arena "
                    "(alignment {})",
                    id, size, offset, alignment);
}

Result<MemoryPlan> plan_no_reuse(std::span<const TensorLifetime> tensors, uint64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(tensors.size(), 0);
  uint64_t end = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t size = tensors[i].size_bytes;
    if (size == 0) continue;
    uint64_t aligned = 0;
    align_up(size, alignment, &aligned);  // checked by check_inputs
    if (aligned > kMaxU64 - end) return arena_overflow(i, size, end, alignment);
    plan.offsets[i] = end;
    end += aligned;
  }
  plan.arena_bytes = end;
  return plan;
}

// Lifetimes are validated, so the difference is non-negative; unsigned keeps the full
// int64 range representable.
uint64_t span_of(const TensorLifetime& t) {
  return static_cast<uint64_t>(t.last_use) - static_cast<uint64_t>(t.first_use);
}

// Placement order for one ordering (planner.h lists the keys). Every key ends in the id, so
// the order is total and the plan deterministic.
std::vector<size_t> greedy_order(std::span<const TensorLifetime> tensors, GreedyOrder kind) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const TensorLifetime& x = tensors[a];
    const TensorLifetime& y = tensors[b];
    switch (kind) {
      case GreedyOrder::SizeThenLongerLifetime:
        if (x.size_bytes != y.size_bytes) return x.size_bytes > y.size_bytes;
        if (span_of(x) != span_of(y)) return span_of(x) > span_of(y);
        break;
      case GreedyOrder::SizeThenLaterLastUse:
        if (x.size_bytes != y.size_bytes) return x.size_bytes > y.size_bytes;
        if (x.last_use != y.last_use) return x.last_use > y.last_use;
        if (span_of(x) != span_of(y)) return span_of(x) > span_of(y);
        break;
      case GreedyOrder::LongerLifetimeThenSize:
        if (span_of(x) != span_of(y)) return span_of(x) > span_of(y);
        if (x.size_bytes != y.size_bytes) return x.size_bytes > y.size_bytes;
        break;
    }
    return a < b;
  });
  return order;
}

// Byte ranges [offset, end) of placed tensors, kept as their union: disjoint, ascending,
// touching ranges merged. The greedy's gap scan depends only on the union of its conflicts'
// ranges, and tensors stacked on one another (the many long-lived ones of a dense graph)
// merge into a few ranges, so a query reads far fewer ranges than it has conflicts.
class RangeUnion {
 public:
  void insert(uint64_t begin, uint64_t end) {
    // The first range that ends at or after `begin` (the ranges are disjoint and ascending,
    // so their ends ascend too): it and those after it that start at or before `end` merge.
    auto first = std::lower_bound(ranges_.begin(), ranges_.end(), begin,
                                  [](const Range& r, uint64_t b) { return r.end < b; });
    auto last = first;
    while (last != ranges_.end() && last->begin <= end) {
      begin = std::min(begin, last->begin);
      end = std::max(end, last->end);
      ++last;
    }
    if (first == last) {
      ranges_.insert(first, Range{begin, end});
    } else {
      *first = Range{begin, end};
      ranges_.erase(first + 1, last);
    }
  }
  template <typename F>
  void for_each(F&& f) const {
    for (const Range& r : ranges_) f(r.begin, r.end);
  }
  bool empty() const { return ranges_.empty(); }

 private:
  struct Range {
    uint64_t begin, end;
  };
  std::vector<Range> ranges_;
};

struct ByteRange {
  uint64_t offset, end;
};

// The byte ranges of the placed tensors whose lifetimes intersect a query lifetime, found
// without scanning every placed tensor, as the union of two parts over the first-use
// coordinates: those alive at the query's first use (a stabbing query on a segment tree,
// each placed lifetime's range stored in the O(log n) nodes that cover it) and those first
// used later within the query's lifetime (a segment tree by first use, each range stored in
// the O(log n) nodes above its first use, read over the O(log n) nodes that cover the
// query's later coordinates). Each node keeps the union of its ranges. O(log n + r) per
// query, r the ranges read (at most the conflicts, far fewer where tensors stack), O(log^2
// n) per insertion, O(n log n) memory at worst.
class PlacedLifetimes {
 public:
  explicit PlacedLifetimes(std::span<const TensorLifetime> tensors) : tensors_(tensors) {
    points_.reserve(tensors.size());
    for (const TensorLifetime& t : tensors) {
      if (t.size_bytes != 0) points_.push_back(t.first_use);
    }
    std::sort(points_.begin(), points_.end());
    points_.erase(std::unique(points_.begin(), points_.end()), points_.end());
    alive_.resize(points_.empty() ? 0 : 4 * points_.size());
    started_.resize(alive_.size());
  }

  void insert(uint32_t id, uint64_t offset, uint64_t end) {
    const TensorLifetime& t = tensors_[id];
    const size_t lo = index_of(t.first_use);
    insert_alive(1, 0, points_.size() - 1, lo, last_index_within(t.last_use), offset, end);
    for_each_on_path(lo, [&](size_t node) { started_[node].insert(offset, end); });
  }

  // Appends to `out` byte ranges whose union is that of every placed tensor whose lifetime
  // intersects `t`'s, as runs each in ascending order; `runs` gets each run's end.
  void conflict_ranges(const TensorLifetime& t, std::vector<ByteRange>& out,
                       std::vector<size_t>& runs) const {
    auto take = [&](const RangeUnion& u) {
      if (u.empty()) return;
      u.for_each([&](uint64_t b, uint64_t e) { out.push_back({b, e}); });
      runs.push_back(out.size());
    };
    const size_t at = index_of(t.first_use);
    for_each_on_path(at, [&](size_t node) { take(alive_[node]); });
    const size_t last = last_index_within(t.last_use);
    if (at + 1 <= last) read_started(1, 0, points_.size() - 1, at + 1, last, take);
  }

 private:
  // Every queried or inserted first use is a coordinate (tensors of size 0 are neither).
  size_t index_of(int64_t first_use) const {
    return static_cast<size_t>(std::lower_bound(points_.begin(), points_.end(), first_use) -
                               points_.begin());
  }
  // The last coordinate at or before `last_use` (there is one: the tensor's own first use).
  size_t last_index_within(int64_t last_use) const {
    return static_cast<size_t>(
        std::upper_bound(points_.begin(), points_.end(), last_use) - points_.begin() - 1);
  }

  // Calls f(node) for every node from the root to the leaf of coordinate `at`.
  template <typename F>
  void for_each_on_path(size_t at, F&& f) const {
    size_t node = 1, lo = 0, hi = points_.size() - 1;
    while (true) {
      f(node);
      if (lo == hi) return;
      const size_t mid = lo + (hi - lo) / 2;
      if (at <= mid) {
        node = 2 * node;
        hi = mid;
      } else {
        node = 2 * node + 1;
        lo = mid + 1;
      }
    }
  }

  void insert_alive(size_t node, size_t lo, size_t hi, size_t from, size_t to, uint64_t offset,
                    uint64_t end) {
    if (to < lo || hi < from) return;
    if (from <= lo && hi <= to) {
      alive_[node].insert(offset, end);
      return;
    }
    const size_t mid = lo + (hi - lo) / 2;
    insert_alive(2 * node, lo, mid, from, to, offset, end);
    insert_alive(2 * node + 1, mid + 1, hi, from, to, offset, end);
  }

  template <typename F>
  void read_started(size_t node, size_t lo, size_t hi, size_t from, size_t to, F& take) const {
    if (to < lo || hi < from) return;
    if (from <= lo && hi <= to) {
      take(started_[node]);
      return;
    }
    const size_t mid = lo + (hi - lo) / 2;
    read_started(2 * node, lo, mid, from, to, take);
    read_started(2 * node + 1, mid + 1, hi, from, to, take);
  }

  std::span<const TensorLifetime> tensors_;
  std::vector<int64_t> points_;       // distinct first uses, ascending
  std::vector<RangeUnion> alive_;     // segment tree over points_, root 1: lifetimes covering a node
  std::vector<RangeUnion> started_;   // segment tree over points_: lifetimes first used in a node
};

// Sorts `ranges` by offset, given as ascending runs ending at runs[1..] (runs[0] = 0):
// pairs of runs merged in rounds, O(r log k) for r ranges in k runs. `buffer` is scratch.
void merge_runs(std::vector<ByteRange>& ranges, std::vector<size_t>& runs, std::vector<ByteRange>& buffer) {
  auto by_offset = [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; };
  while (runs.size() > 2) {
    buffer.resize(ranges.size());
    size_t kept = 1;
    for (size_t k = 0; k + 1 < runs.size(); k += 2) {
      const size_t begin = runs[k], mid = runs[k + 1];
      const size_t end = k + 2 < runs.size() ? runs[k + 2] : mid;
      std::merge(ranges.begin() + begin, ranges.begin() + mid, ranges.begin() + mid,
                 ranges.begin() + end, buffer.begin() + begin, by_offset);
      runs[kept++] = end;
    }
    runs.resize(kept);
    ranges.swap(buffer);
  }
}

// One greedy placement in the given order; arena_bytes set, lower_bound_bytes left 0.
// Each tensor's conflicts (placed tensors alive at the same time) are taken in offset order
// and it goes into the smallest gap between them that holds it, else above the highest.
// Ends are aligned, so every gap starts aligned, and a gap fits exactly when it holds the
// aligned size. Ranges at one offset may come in any order: the first of them closes the
// gap below, the others start at the same offset, so the scan's result is the same; and it
// depends only on the union of the ranges, which is what PlacedLifetimes returns.
// O(n log n + sum of r log r) for r ranges read per tensor.
Result<MemoryPlan> place_greedy(std::span<const TensorLifetime> tensors, uint64_t alignment,
                                GreedyOrder kind) {
  MemoryPlan plan;
  plan.offsets.assign(tensors.size(), 0);
  PlacedLifetimes placed(tensors);
  std::vector<ByteRange> ranges, merged;
  std::vector<size_t> runs;

  for (size_t id : greedy_order(tensors, kind)) {
    const TensorLifetime& t = tensors[id];
    if (t.size_bytes == 0) continue;  // takes no space; the header fixes its offset at 0
    uint64_t size = 0;
    align_up(t.size_bytes, alignment, &size);  // checked by check_inputs

    ranges.clear();
    runs.assign(1, 0);
    placed.conflict_ranges(t, ranges, runs);
    merge_runs(ranges, runs, merged);
    uint64_t best_offset = 0;
    uint64_t best_gap = 0;     // 0: no gap found yet (a fitting gap is never empty)
    uint64_t covered_end = 0;  // highest end among conflicting tensors seen so far
    for (const ByteRange& r : ranges) {
      if (r.offset > covered_end) {
        const uint64_t gap = r.offset - covered_end;
        if (gap >= size && (best_gap == 0 || gap < best_gap)) {
          best_gap = gap;
          best_offset = covered_end;
        }
      }
      covered_end = std::max(covered_end, r.end);
    }
    if (best_gap == 0) best_offset = covered_end;
    if (size > kMaxU64 - best_offset) return arena_overflow(id, t.size_bytes, best_offset, alignment);

    plan.offsets[id] = best_offset;
    placed.insert(static_cast<uint32_t>(id), best_offset, best_offset + size);
    plan.arena_bytes = std::max(plan.arena_bytes, best_offset + size);
  }
  return plan;
}

// Longer lifetime first goes first: it places the long-lived tensors low, where they stack
// into few byte ranges, so each later tensor reads few ranges (7-9 per tensor on every
// family of tests/support/plan_cases at 100,000 values), while the size-first orders
// scatter nested long-lived tensors and read hundreds (668 on U-Net); where it reaches the
// lower bound the slow orders never run. The arena does not depend on this order (the
// smallest of the three, or the first at the bound, which none can beat): only which plan
// wins a tie does.
constexpr GreedyOrder kGreedyOrders[] = {GreedyOrder::LongerLifetimeThenSize,
                                         GreedyOrder::SizeThenLongerLifetime,
                                         GreedyOrder::SizeThenLaterLastUse};

// Best of the orderings: the smallest arena, ties to the earliest ordering in the list. An
// ordering whose arena would overflow 64 bits drops out; if all do, the first one's error
// is returned. Stops at the first plan that reaches the lower bound (none can beat it).
Result<MemoryPlan> plan_greedy_best_of(std::span<const TensorLifetime> tensors,
                                       uint64_t alignment, uint64_t lower_bound) {
  std::optional<MemoryPlan> best;
  std::optional<Status> first_error;
  for (GreedyOrder kind : kGreedyOrders) {
    Result<MemoryPlan> plan = place_greedy(tensors, alignment, kind);
    if (!plan.ok()) {
      if (!first_error) first_error = plan.status();
      continue;
    }
    if (!best || plan->arena_bytes < best->arena_bytes) best = std::move(*plan);
    if (best->arena_bytes <= lower_bound) break;
  }
  if (!best) return *first_error;
  return std::move(*best);
}

}  // namespace

std::string_view planner_name(PlannerKind kind) {
  switch (kind) {
    case PlannerKind::GreedyBySize:
      return "greedy-by-size";
    case PlannerKind::NoReuse:
      return "no-reuse";
  }
  return "unknown";
}

std::span<const GreedyOrder> greedy_orders() { return kGreedyOrders; }

std::string_view greedy_order_name(GreedyOrder order) {
  switch (order) {
    case GreedyOrder::SizeThenLongerLifetime:
      return "size-then-longer-lifetime";
    case GreedyOrder::SizeThenLaterLastUse:
      return "size-then-later-last-use";
    case GreedyOrder::LongerLifetimeThenSize:
      return "longer-lifetime-then-size";
  }
  return "unknown";
}

Result<MemoryPlan> plan_memory_greedy(std::span<const TensorLifetime> tensors,
                                      uint64_t alignment, GreedyOrder order) {
  PLANRT_RETURN_IF_ERROR(check_inputs(tensors, alignment));
  PLANRT_ASSIGN_OR_RETURN(MemoryPlan plan, place_greedy(tensors, alignment, order));
  plan.lower_bound_bytes = lower_bound_bytes(tensors, alignment);
  return plan;
}

Result<MemoryPlan> plan_memory(std::span<const TensorLifetime> tensors, uint64_t alignment,
                               PlannerKind kind) {
  PLANRT_RETURN_IF_ERROR(check_inputs(tensors, alignment));
  const uint64_t lower_bound = lower_bound_bytes(tensors, alignment);
  Result<MemoryPlan> plan = make_error(ErrorCode::InvalidArgument,
                                       "unknown planner kind {}", static_cast<int>(kind));
  switch (kind) {
    case PlannerKind::GreedyBySize:
      plan = plan_greedy_best_of(tensors, alignment, lower_bound);
      break;
    case PlannerKind::NoReuse:
      plan = plan_no_reuse(tensors, alignment);
      break;
  }
  if (plan.ok()) plan->lower_bound_bytes = lower_bound;
  return plan;
}

uint64_t lower_bound_bytes(std::span<const TensorLifetime> tensors, uint64_t alignment) {
  if (!is_power_of_two(alignment)) return 0;
  // Sweep over lifetime ends. At one instruction every start is counted before any end,
  // because lifetimes are inclusive.
  struct Event {
    int64_t time;
    bool is_end;
    uint64_t bytes;
  };
  std::vector<Event> events;
  events.reserve(2 * tensors.size());
  for (const TensorLifetime& t : tensors) {
    if (t.size_bytes == 0 || t.last_use < t.first_use) continue;
    uint64_t aligned = kMaxU64;  // an unrepresentable size saturates the bound
    align_up(t.size_bytes, alignment, &aligned);
    events.push_back({t.first_use, false, aligned});
    events.push_back({t.last_use, true, aligned});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.time != b.time ? a.time < b.time : (!a.is_end && b.is_end);
  });
  // 128-bit running sum so saturation happens only in the reported figure.
  unsigned __int128 live = 0;
  unsigned __int128 peak = 0;
  for (const Event& e : events) {
    if (e.is_end) {
      live -= e.bytes;
    } else {
      live += e.bytes;
      peak = std::max(peak, live);
    }
  }
  return peak > kMaxU64 ? kMaxU64 : static_cast<uint64_t>(peak);
}

Status verify_plan(std::span<const TensorLifetime> tensors, const MemoryPlan& plan,
                   uint64_t alignment) {
  PLANRT_RETURN_IF_ERROR(check_inputs(tensors, alignment));
  if (plan.offsets.size() != tensors.size()) {
    return make_error(ErrorCode::Internal, "memory plan has {} offsets for {} tensors",
                      plan.offsets.size(), tensors.size());
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t offset = plan.offsets[i];
    const uint64_t size = tensors[i].size_bytes;
    if (offset % alignment != 0) {
      return make_error(ErrorCode::Internal,
                        "tensor {} offset {} is not a multiple of the alignment {}", i, offset,
                        alignment);
    }
    if (offset > plan.arena_bytes || size > plan.arena_bytes - offset) {
      return make_error(ErrorCode::Internal,
                        "tensor {} bytes [{}, {}+{}) lie outside the arena of {} bytes", i,
                        offset, offset, size, plan.arena_bytes);
    }
  }
  // Pairs in id order so the reported pair is the same for the same plan. Ends cannot
  // overflow: each tensor was just checked to lie inside the arena.
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorLifetime& a = tensors[i];
    if (a.size_bytes == 0) continue;
    const uint64_t a_begin = plan.offsets[i];
    const uint64_t a_end = a_begin + a.size_bytes;
    for (size_t j = i + 1; j < tensors.size(); ++j) {
      const TensorLifetime& b = tensors[j];
      if (b.size_bytes == 0 || !lifetimes_intersect(a, b)) continue;
      const uint64_t b_begin = plan.offsets[j];
      const uint64_t b_end = b_begin + b.size_bytes;
      if (a_begin < b_end && b_begin < a_end) {
        return make_error(ErrorCode::Internal,
                          "tensors {} (live [{}, {}], bytes [{}, {})) and {} (live [{}, {}], "
                          "bytes [{}, {})) are alive together and overlap",
                          i, a.first_use, a.last_use, a_begin, a_end, j, b.first_use,
                          b.last_use, b_begin, b_end);
      }
    }
  }
  return Status();
}

}  // namespace planrt::planning
