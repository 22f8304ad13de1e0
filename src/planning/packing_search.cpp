#include "planning/packing_search.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace planrt::planning {
namespace {

using Clock = std::chrono::steady_clock;

// The tensors the search places (those with a size), in their own index order.
struct Problem {
  std::vector<uint32_t> ids;          // the tensor's index in the caller's list
  std::vector<uint64_t> size;         // aligned
  std::vector<uint64_t> span;         // lifetime length, for the candidate order
  std::vector<uint32_t> section_begin;  // sections [begin, end) the lifetime covers
  std::vector<uint32_t> section_end;
  std::vector<std::vector<uint32_t>> conflicts;  // the others whose lifetimes meet it
  std::vector<uint64_t> load;  // the largest sum of sizes in any section it covers
  std::vector<std::vector<uint32_t>> members;  // per section, the tensors alive in it
  uint32_t sections = 0;
};

// Static orders that rank the tensors for the search's tie-breaks, most constrained first,
// each a precedence of keys, all descending: L the largest section load the tensor is part
// of, A its area (size x lifetime), C the sections its lifetime spans, W its lifetime. A
// `dynamic` order ranks each group again when the search splits (decomposition), with L
// taken over the bytes still unplaced there. The search tries the orders in turn under a
// node limit that doubles every round (restarts): which order finds a packing first differs
// by orders of magnitude from case to case (on the MiniMalloc cases one order packs H in
// 353 nodes where another has not in millions; bench/results/planner_cases.jsonl), so a
// portfolio under doubling limits costs about the order count times the best order's time.
struct Preorder {
  const char* keys;
  bool dynamic;
};
constexpr Preorder kPreorders[] = {
    {"WAL", true},  {"AL", false}, {"LCA", true},  {"LAW", false}, {"CAL", true},  {"LWA", false},
    {"WAL", false}, {"AL", true},  {"LCA", false}, {"LAW", true},  {"CAL", false}, {"LWA", true},
};

Problem make_problem(std::span<const TensorLifetime> tensors, uint64_t alignment) {
  Problem p;
  std::vector<int64_t> bounds;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorLifetime& t = tensors[i];
    if (t.size_bytes == 0) continue;
    p.ids.push_back(static_cast<uint32_t>(i));
    p.size.push_back((t.size_bytes + alignment - 1) & ~(alignment - 1));  // checked by the caller
    p.span.push_back(static_cast<uint64_t>(t.last_use) - static_cast<uint64_t>(t.first_use));
    bounds.push_back(t.first_use);
    bounds.push_back(t.last_use + 1);  // lifetimes are inclusive; sections half-open
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  p.sections = bounds.empty() ? 0 : static_cast<uint32_t>(bounds.size() - 1);
  auto index = [&](int64_t x) {
    return static_cast<uint32_t>(std::lower_bound(bounds.begin(), bounds.end(), x) - bounds.begin());
  };
  const size_t n = p.ids.size();
  p.conflicts.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const TensorLifetime& t = tensors[p.ids[i]];
    p.section_begin.push_back(index(t.first_use));
    p.section_end.push_back(index(t.last_use + 1));
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      if (p.section_begin[i] < p.section_end[j] && p.section_begin[j] < p.section_end[i]) {
        p.conflicts[i].push_back(static_cast<uint32_t>(j));
        p.conflicts[j].push_back(static_cast<uint32_t>(i));
      }
    }
  }
  std::vector<uint64_t> section_load(p.sections, 0);
  p.members.resize(p.sections);
  for (size_t i = 0; i < n; ++i) {
    for (uint32_t s = p.section_begin[i]; s < p.section_end[i]; ++s) {
      section_load[s] += p.size[i];
      p.members[s].push_back(static_cast<uint32_t>(i));
    }
  }
  p.load.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (uint32_t s = p.section_begin[i]; s < p.section_end[i]; ++s) {
      p.load[i] = std::max(p.load[i], section_load[s]);
    }
  }
  return p;
}

// Sorts `tensors` by the order's keys (descending; ties by index), `load` giving key L.
template <typename Load>
void sort_by_keys(const Problem& p, const char* keys, Load load, std::vector<uint32_t>& tensors) {
  auto key = [&](uint32_t i, char k) -> uint64_t {
    switch (k) {
      case 'L': return load(i);
      case 'W': return p.span[i];
      case 'C': return p.section_end[i] - p.section_begin[i];
      default: return p.size[i] * (p.span[i] + 1);  // area
    }
  };
  std::sort(tensors.begin(), tensors.end(), [&](uint32_t a, uint32_t b) {
    for (const char* k = keys; *k != 0; ++k) {
      const uint64_t ka = key(a, *k), kb = key(b, *k);
      if (ka != kb) return ka > kb;
    }
    return a < b;
  });
}

std::vector<uint32_t> preorder_rank(const Problem& p, const char* keys) {
  std::vector<uint32_t> by(p.ids.size());
  for (uint32_t i = 0; i < by.size(); ++i) by[i] = i;
  sort_by_keys(p, keys, [&](uint32_t i) { return p.load[i]; }, by);
  std::vector<uint32_t> rank(by.size());
  for (uint32_t r = 0; r < by.size(); ++r) rank[by[r]] = r;
  return rank;
}

// Group states proven to have no packing within the capacity (see Search::solve_groups),
// kept across the restarts of one decision: a 128-bit key per state in an open-addressing
// table that doubles up to kMaxSlots and then stops taking entries (a refutation forgotten
// costs time, never a wrong answer). Two states share a key with probability ~2^-128.
class RefutationTable {
 public:
  struct Key {
    uint64_t a = 0, b = 0;
  };
  bool contains(Key k) const {
    if (slots_.empty()) return false;
    for (size_t i = k.a & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].a == 0 && slots_[i].b == 0) return false;
      if (slots_[i].a == k.a && slots_[i].b == k.b) return true;
    }
  }
  void insert(Key k) {
    if (k.a == 0 && k.b == 0) k.a = 1;  // (0, 0) marks an empty slot
    if ((used_ + 1) * 2 > slots_.size()) {
      if (slots_.size() >= kMaxSlots) return;
      grow();
    }
    for (size_t i = k.a & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].a == k.a && slots_[i].b == k.b) return;
      if (slots_[i].a == 0 && slots_[i].b == 0) {
        slots_[i] = k;
        ++used_;
        return;
      }
    }
  }

 private:
  static constexpr size_t kMaxSlots = size_t{1} << 21;  // 32 MiB
  void grow() {
    std::vector<Key> old = std::move(slots_);
    slots_.assign(old.empty() ? 4096 : old.size() * 2, Key{});
    mask_ = slots_.size() - 1;
    used_ = 0;
    for (const Key& k : old) {
      if (k.a != 0 || k.b != 0) insert(k);
    }
  }
  std::vector<Key> slots_;
  size_t mask_ = 0;
  size_t used_ = 0;
};

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

enum class Outcome { Found, Impossible, OutOfTime, NodeLimit };

// One decision search: a canonical placement whose arena is at most `capacity`.
//
// Decomposition: once the unplaced tensors of a scope split into groups whose lifetimes do
// not meet (no unplaced lifetime crosses some point in time), the groups are independent:
// each is searched on its own and the scope fails as soon as one group does. Without it the
// search would interleave the groups' choices and revisit each group's failures once per
// arrangement of the others. A group after a split starts its own canonical order (offsets
// from 0, as MiniMalloc's sub-problems do): its tensors meet none of the other groups'.
//
// Refutations: a group that fails with its search complete is recorded by its state (its
// tensors and their floors, plus the last offset and the ranks where those constrain it);
// the same state met again, under any later choice or restart, fails at once. A group
// started afresh after a split has a state that does not depend on the order, so its
// refutation holds for every order of the portfolio.
class Search {
 public:
  Search(const Problem& p, uint64_t capacity, std::vector<uint32_t> rank, const Preorder& order,
         Clock::time_point deadline, int64_t node_limit, RefutationTable& refuted)
      : p_(p), capacity_(capacity), rank_(std::move(rank)), order_(order), deadline_(deadline),
        node_limit_(node_limit), refuted_(refuted) {
    const size_t n = p.ids.size();
    floor_.assign(n, 0);
    offset_.assign(n, 0);
    section_floor_.assign(p.sections, 0);
    section_unplaced_.assign(p.sections, 0);
    section_stamp_.assign(p.sections, 0);
    group_pool_.resize(n + 1);
    cand_pool_.resize(n + 1);
    rest_pool_.resize(n + 1);
    reach_pool_.resize(n + 1);
    unplaced_load_.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      for (uint32_t s = p.section_begin[i]; s < p.section_end[i]; ++s) section_unplaced_[s] += p.size[i];
    }
  }

  Outcome run() {
    stopped_ = Outcome::Impossible;
    std::vector<uint32_t> all(p_.ids.size());
    for (uint32_t i = 0; i < all.size(); ++i) all[i] = i;
    std::sort(all.begin(), all.end(), [&](uint32_t a, uint32_t b) {
      return p_.section_begin[a] != p_.section_begin[b] ? p_.section_begin[a] < p_.section_begin[b] : a < b;
    });
    if (solve_groups(all, member_sum(all))) return Outcome::Found;
    return stopped_;
  }

  const std::vector<uint64_t>& offsets() const { return offset_; }
  // Whether its twin (the same keys, re-ranked where this one is static or the reverse)
  // would have ranked some group this search split off differently; if not, the twin's
  // search under the same node limit would walk the same tree.
  bool twin_differs() const { return twin_differs_; }
  int64_t nodes() const { return nodes_; }

 private:
  struct Placement {
    uint32_t tensor;
    size_t floors_mark;    // floor_undo_ size before it
    size_t sections_mark;  // section_undo_ size before it
  };

  // Splits `scope` (unplaced, sorted by first section) into groups whose lifetimes do not
  // meet and solves each in turn from the current state; on failure, undoes what the
  // groups solved before it. `sum`: member_sum(scope), used when it does not split (the
  // whole problem in one piece).
  bool solve_groups(const std::vector<uint32_t>& scope, RefutationTable::Key sum) {
    if (scope.empty()) return true;
    const size_t trail_mark = trail_.size();
    const size_t rank_mark = rank_undo_.size();
    const uint64_t saved_offset = last_offset_;
    const int64_t saved_rank = last_rank_;
    size_t begin = 0;
    uint32_t reach = p_.section_end[scope[0]];
    // Scratch lists per depth (the placements made so far): the frames alive at once are at
    // distinct depths, so none shares one, and the search allocates nothing per node.
    std::vector<uint32_t>& group = group_pool_[trail_.size()];
    for (size_t k = 1; k <= scope.size(); ++k) {
      if (k < scope.size() && p_.section_begin[scope[k]] < reach) {
        reach = std::max(reach, p_.section_end[scope[k]]);
        continue;
      }
      const bool split = begin != 0 || k != scope.size();
      group.assign(scope.begin() + static_cast<std::ptrdiff_t>(begin),
                   scope.begin() + static_cast<std::ptrdiff_t>(k));
      if (!solve_group(group, sum, split)) {
        restore_ranks(rank_mark);
        undo_to(trail_mark);
        last_offset_ = saved_offset;
        last_rank_ = saved_rank;
        return false;
      }
      if (k < scope.size()) {
        begin = k;
        reach = p_.section_end[scope[k]];
      }
    }
    return true;
  }

  // One group, with the state key for its refutation. `fresh`: it came out of a split and
  // starts its own canonical order from offset 0 (re-ranked under a dynamic order); else
  // it continues its scope's order and `sum` is member_sum(group).
  bool solve_group(const std::vector<uint32_t>& group, RefutationTable::Key sum, bool fresh) {
    const size_t rank_mark = rank_undo_.size();
    if (fresh) {
      last_offset_ = 0;
      last_rank_ = -1;
      if (order_.dynamic || !twin_differs_) rerank(group, order_.dynamic);
      sum = member_sum(group);
    }
    const RefutationTable::Key key = fresh ? fresh_key(group) : continued_key(sum);
    bool solved = false;
    if (!refuted_.contains(key)) {
      solved = solve(group, sum);
      if (!solved && stopped_ == Outcome::Impossible) refuted_.insert(key);
    }
    if (!solved) restore_ranks(rank_mark);
    return solved;
  }

  void restore_ranks(size_t mark) {
    while (rank_undo_.size() > mark) {
      rank_[rank_undo_.back().first] = rank_undo_.back().second;
      rank_undo_.pop_back();
    }
  }

  // What a group's search depends on: its tensors and their floors (a section's floor is the
  // lowest floor among its unplaced tensors, see place()), and, unless it starts afresh, the
  // last offset and the ranks that break ties at it. A continued group's key is the sum of
  // its members' terms (with ranks), updated per placement for the few tensors it changes
  // rather than rehashed; a fresh group's is summed without ranks.
  static RefutationTable::Key term(uint32_t i, uint64_t floor, uint64_t rank_plus_one) {
    const uint64_t x = mix((static_cast<uint64_t>(i) << 32 | rank_plus_one) ^ mix(floor));
    return {x, mix(x ^ 0xd6e8feb86659fd93ull)};
  }
  static void add(RefutationTable::Key& sum, RefutationTable::Key t) {
    sum.a += t.a;
    sum.b += t.b;
  }
  static void subtract(RefutationTable::Key& sum, RefutationTable::Key t) {
    sum.a -= t.a;
    sum.b -= t.b;
  }
  RefutationTable::Key member_term(uint32_t i, uint64_t floor) const { return term(i, floor, rank_[i] + 1); }
  RefutationTable::Key member_sum(const std::vector<uint32_t>& group) const {
    RefutationTable::Key sum;
    for (uint32_t i : group) add(sum, member_term(i, floor_[i]));
    return sum;
  }
  RefutationTable::Key fresh_key(const std::vector<uint32_t>& group) const {
    RefutationTable::Key k{0x5bd1e995u, 0x27d4eb2fu};
    for (uint32_t i : group) add(k, term(i, floor_[i], 0));
    return k;
  }
  RefutationTable::Key continued_key(RefutationTable::Key sum) const {
    sum.a += mix(last_offset_ + 1) ^ mix(static_cast<uint64_t>(last_rank_ + 2) << 32);
    sum.b += mix(last_offset_ ^ 0x9e3779b97f4a7c15ull) + static_cast<uint64_t>(last_rank_ + 2);
    return sum;
  }

  // Ranks the group's tensors again by the order's keys over the bytes still unplaced, in
  // the rank slots they held (so their ranks stay distinct from everyone else's), if
  // `apply`; either way, notes in twin_differs_ whether that changes any rank.
  void rerank(const std::vector<uint32_t>& group, bool apply) {
    rerank_by_.assign(group.begin(), group.end());
    rerank_slots_.clear();
    for (uint32_t i : group) rerank_slots_.push_back(rank_[i]);
    std::sort(rerank_slots_.begin(), rerank_slots_.end());
    for (uint32_t i : group) {  // key L, once per tensor rather than per comparison
      uint64_t load = 0;
      for (uint32_t s = p_.section_begin[i]; s < p_.section_end[i]; ++s) load = std::max(load, section_unplaced_[s]);
      unplaced_load_[i] = load;
    }
    sort_by_keys(p_, order_.keys, [&](uint32_t i) { return unplaced_load_[i]; }, rerank_by_);
    for (size_t r = 0; r < rerank_by_.size(); ++r) {
      if (rank_[rerank_by_[r]] == rerank_slots_[r]) continue;
      twin_differs_ = true;
      if (!apply) return;
      rank_undo_.push_back({rerank_by_[r], rank_[rerank_by_[r]]});
      rank_[rerank_by_[r]] = rerank_slots_[r];
    }
  }

  // One group: its lifetimes form one connected stretch of time. `sum`: member_sum(scope).
  bool solve(const std::vector<uint32_t>& scope, RefutationTable::Key sum) {
    ++nodes_;
    if (nodes_ > node_limit_) stopped_ = Outcome::NodeLimit;
    if ((nodes_ & 1023) == 0 && Clock::now() > deadline_) stopped_ = Outcome::OutOfTime;
    if (stopped_ != Outcome::Impossible) return false;
    // One pass over the scope (sorted by first section, and connected: no point in time
    // that none of its lifetimes crosses) for its span of sections, the lowest top any of
    // its tensors could have, the running reach of its lifetimes (for the split test
    // below) and the candidates: at their floor, not below the last offset (at it, after
    // the last one's rank), within the capacity.
    const uint32_t first_section = p_.section_begin[scope[0]];
    uint32_t last_section = 0;
    uint64_t lowest_top = UINT64_MAX;
    std::vector<uint32_t>& reach_before = reach_pool_[trail_.size()];  // of scope[0, k)
    reach_before.resize(scope.size());
    std::vector<uint32_t>& cands = cand_pool_[trail_.size()];  // positions in the scope
    cands.clear();
    for (uint32_t k = 0; k < scope.size(); ++k) {
      const uint32_t i = scope[k];
      reach_before[k] = last_section;
      last_section = std::max(last_section, p_.section_end[i]);
      const uint64_t f = floor_[i];
      lowest_top = std::min(lowest_top, f + p_.size[i]);
      if (f < last_offset_ || (f == last_offset_ && static_cast<int64_t>(rank_[i]) < last_rank_)) continue;
      if (f + p_.size[i] > capacity_) continue;
      cands.push_back(k);
    }
    // Every section's unplaced tensors stack above its floor (see place()) and the last
    // offset: that plus their sizes must fit.
    for (uint32_t s = first_section; s < last_section; ++s) {
      if (section_unplaced_[s] != 0 &&
          std::max(section_floor_[s], last_offset_) + section_unplaced_[s] > capacity_) {
        return false;
      }
    }
    // Dominance: a tensor placed at or above the lowest top any unplaced tensor could have
    // leaves a gap that tensor could fill first; such plans are reached another way.
    std::erase_if(cands, [&](uint32_t k) { return floor_[scope[k]] >= lowest_top; });
    std::sort(cands.begin(), cands.end(), [&](uint32_t a, uint32_t b) {
      const uint32_t x = scope[a], y = scope[b];
      if (floor_[x] != floor_[y]) return floor_[x] < floor_[y];
      return rank_[x] < rank_[y];
    });
    std::vector<uint32_t>& rest = rest_pool_[trail_.size()];
    for (uint32_t k : cands) {
      const uint32_t c = scope[k];
      const size_t mark = trail_.size();
      const uint64_t saved_offset = last_offset_;
      const int64_t saved_rank = last_rank_;
      const size_t floors_before = floor_undo_.size();
      place(c);
      // Nothing unplaced had its floor raised: every tensor that meets `c` already sits
      // above its top. In any packing of this node whose next tensors are the candidates
      // after `c`, `c` can drop to its floor here and go first, so those packings are
      // among the ones just searched (MiniMalloc's "hatless" pruning, for any tensor
      // nothing can come to rest on rather than only one nothing unplaced meets).
      const bool nothing_rests_on_it = floor_undo_.size() == floors_before;
      RefutationTable::Key rest_sum = sum;
      subtract(rest_sum, member_term(c, offset_[c]));
      for (size_t u = floors_before; u < floor_undo_.size(); ++u) {
        const auto [q, old_floor] = floor_undo_[u];
        subtract(rest_sum, member_term(q, old_floor));
        add(rest_sum, member_term(q, floor_[q]));
      }
      // The rest, still in order of first section. It splits where a tensor after `c`
      // starts at or after the reach of all before it but `c`: only where `c` alone bridged
      // the gap, so only tensors starting before c's end need a look.
      rest.assign(scope.begin(), scope.begin() + k);
      rest.insert(rest.end(), scope.begin() + k + 1, scope.end());
      bool splits = false;
      uint32_t reach = reach_before[k];  // 0 while nothing is before (every end is above 0)
      for (size_t j = k + 1; j < scope.size() && p_.section_begin[scope[j]] < p_.section_end[c]; ++j) {
        if (reach != 0 && p_.section_begin[scope[j]] >= reach) {
          splits = true;
          break;
        }
        reach = std::max(reach, p_.section_end[scope[j]]);
      }
      if (rest.empty() || (splits ? solve_groups(rest, rest_sum) : solve_group(rest, rest_sum, false))) {
        return true;
      }
      undo_to(mark);
      last_offset_ = saved_offset;
      last_rank_ = saved_rank;
      if (stopped_ != Outcome::Impossible || nothing_rests_on_it) return false;
    }
    return false;
  }

  // Places `c` at its floor and keeps each section's floor exact: the lowest floor among its
  // unplaced tensors (never below the tops placed there, since every one of those meets
  // them). Every unplaced tensor of c's sections meets c, so their floors rise to c's top at
  // least: such a section's floor becomes that top, unless c held the lowest floor (others
  // may have held it too, or the next lowest may be above the top), when it is recomputed.
  // Elsewhere a section's floor can change only if a tensor raised by c held it. Recomputing
  // only those (rather than every section a raised tensor covers) is what keeps a node cheap.
  void place(uint32_t c) {
    trail_.push_back({c, floor_undo_.size(), section_undo_.size()});
    const uint64_t at = floor_[c];
    const uint64_t top = at + p_.size[c];
    offset_[c] = at;
    floor_[c] = kPlaced;
    last_offset_ = at;
    last_rank_ = rank_[c];
    ++stamp_;
    touched_.clear();
    for (uint32_t s = p_.section_begin[c]; s < p_.section_end[c]; ++s) {
      section_unplaced_[s] -= p_.size[c];
      section_stamp_[s] = stamp_;
      if (section_unplaced_[s] == 0) continue;  // no floor to keep until c comes back
      if (section_floor_[s] == at) {
        touched_.push_back({s, top});
      } else {
        section_undo_.push_back({s, section_floor_[s]});
        section_floor_[s] = top;
      }
    }
    for (uint32_t q : p_.conflicts[c]) {
      const uint64_t old_floor = floor_[q];
      if (old_floor >= top) continue;  // or placed
      floor_undo_.push_back({q, old_floor});
      floor_[q] = top;
      for (uint32_t s = p_.section_begin[q]; s < p_.section_end[q]; ++s) {
        if (section_stamp_[s] == stamp_ || section_floor_[s] != old_floor) continue;
        section_stamp_[s] = stamp_;
        touched_.push_back({s, old_floor});
      }
    }
    // The new floor is at least the bound noted (c's top, or the raised tensor's old floor,
    // which another tensor may still hold): the scan stops when it meets it.
    for (const auto& [s, bound] : touched_) {
      uint64_t low = kPlaced;
      for (uint32_t m : p_.members[s]) {
        low = std::min(low, floor_[m]);
        if (low == bound) break;
      }
      if (low != section_floor_[s]) {
        section_undo_.push_back({s, section_floor_[s]});
        section_floor_[s] = low;
      }
    }
  }

  // Takes back every placement after the first `mark` ones, latest first.
  void undo_to(size_t mark) {
    while (trail_.size() > mark) {
      const Placement& t = trail_.back();
      while (floor_undo_.size() > t.floors_mark) {
        floor_[floor_undo_.back().first] = floor_undo_.back().second;
        floor_undo_.pop_back();
      }
      while (section_undo_.size() > t.sections_mark) {
        section_floor_[section_undo_.back().first] = section_undo_.back().second;
        section_undo_.pop_back();
      }
      for (uint32_t s = p_.section_begin[t.tensor]; s < p_.section_end[t.tensor]; ++s) {
        section_unplaced_[s] += p_.size[t.tensor];
      }
      floor_[t.tensor] = offset_[t.tensor];  // its floor when placed
      trail_.pop_back();
    }
  }

  const Problem& p_;
  const uint64_t capacity_;
  std::vector<uint32_t> rank_;  // the order's ranks; a dynamic order re-ranks groups
  const Preorder order_;
  const Clock::time_point deadline_;
  const int64_t node_limit_;
  RefutationTable& refuted_;
  // Per tensor: the highest top of placed tensors meeting it; kPlaced once placed (its
  // offset is its floor then, restored on undo).
  static constexpr uint64_t kPlaced = UINT64_MAX;
  std::vector<uint64_t> floor_;
  std::vector<uint64_t> offset_;
  std::vector<uint64_t> section_floor_;     // the lowest an unplaced tensor there can go
  std::vector<uint64_t> section_unplaced_;  // bytes of unplaced tensors in the section
  std::vector<uint64_t> section_stamp_;     // place(): sections already refreshed
  std::vector<std::pair<uint32_t, uint64_t>> touched_;  // place(): sections to recompute
  std::vector<uint32_t> rerank_by_, rerank_slots_;
  std::vector<uint64_t> unplaced_load_;  // rerank(): key L per tensor
  uint64_t stamp_ = 0;
  uint64_t last_offset_ = 0;
  int64_t last_rank_ = -1;
  std::vector<Placement> trail_;
  std::vector<std::vector<uint32_t>> group_pool_, cand_pool_, rest_pool_, reach_pool_;
  std::vector<std::pair<uint32_t, uint64_t>> floor_undo_;
  std::vector<std::pair<uint32_t, uint64_t>> section_undo_;
  std::vector<std::pair<uint32_t, uint32_t>> rank_undo_;
  int64_t nodes_ = 0;
  bool twin_differs_ = false;
  Outcome stopped_ = Outcome::Impossible;  // NodeLimit or OutOfTime once the search must stop
};

// Whether an arena of at most `capacity` exists: the preorders in turn, each under a node
// limit that doubles every round, until one finds a plan or proves there is none (a search
// that finishes within its limit has seen every canonical plan under its order).
// Refutations are shared by every search of one capacity (they hold for any smaller one too,
// but each decision starts its own table to bound the memory). An order's twin is skipped
// in a round where the order found that re-ranking would change nothing (on some cases,
// every round): it would walk the same tree, only further along by the refutations.
Outcome decide(const Problem& p, const std::vector<std::vector<uint32_t>>& ranks, uint64_t capacity,
               Clock::time_point deadline, std::vector<uint64_t>& offsets, int64_t& nodes) {
  RefutationTable refuted;
  int64_t limit = static_cast<int64_t>(p.ids.size());
  constexpr size_t kTwins = std::size(kPreorders) / 2;  // order o's twin is o + kTwins
  bool twin_repeats[kTwins] = {};
  while (true) {
    limit *= 2;
    for (size_t o = 0; o < ranks.size(); ++o) {
      if (o >= kTwins && twin_repeats[o - kTwins]) continue;
      Search search(p, capacity, ranks[o], kPreorders[o], deadline, limit, refuted);
      const Outcome outcome = search.run();
      nodes += search.nodes();
      if (o < kTwins) twin_repeats[o] = !search.twin_differs();
      if (outcome == Outcome::Found) offsets = search.offsets();
      if (outcome != Outcome::NodeLimit) return outcome;
    }
  }
}

}  // namespace

std::string_view search_stop_name(SearchStop stop) {
  switch (stop) {
    case SearchStop::NotRun: return "not-run";
    case SearchStop::LowerBound: return "lower-bound";
    case SearchStop::ProvenOptimal: return "proven-optimal";
    case SearchStop::TimeBudget: return "time-budget";
    case SearchStop::TooLarge: return "too-large";
    case SearchStop::Enough: return "good-enough";
  }
  return "?";
}

SearchReport improve_plan(std::span<const TensorLifetime> tensors, uint64_t alignment,
                          double budget_ms, MemoryPlan& plan, uint64_t enough_bytes) {
  const auto start = Clock::now();
  SearchReport report;
  report.greedy_arena_bytes = plan.arena_bytes;
  auto finish = [&](SearchStop stop) {
    report.stop = stop;
    report.elapsed_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    return report;
  };
  if (plan.arena_bytes <= plan.lower_bound_bytes) return finish(SearchStop::LowerBound);
  if (enough_bytes > plan.lower_bound_bytes && plan.arena_bytes <= enough_bytes) {
    return finish(SearchStop::Enough);
  }
  if (budget_ms <= 0) return finish(SearchStop::NotRun);
  size_t sized = 0;
  for (const TensorLifetime& t : tensors) sized += t.size_bytes != 0;
  if (sized > kMaxSearchTensors) return finish(SearchStop::TooLarge);

  const Problem problem = make_problem(tensors, alignment);
  std::vector<std::vector<uint32_t>> ranks;
  for (const Preorder& order : kPreorders) ranks.push_back(preorder_rank(problem, order.keys));
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double, std::milli>(budget_ms));
  // Targets: first the caller's good-enough arena if it gave one above the bound, else the
  // lower bound, with seven eighths of the budget: it is the plan the caller asked for, and
  // most cases that reach it do so within that (a plan at the bound is also good enough, so
  // the bound is not tried after a good-enough target). Then halfway between the lowest
  // target not yet tried and the best arena found, each with half the time left, so a
  // target too hard to decide leaves time for looser ones, which are quick to find. An
  // undecided target is not proven impossible.
  uint64_t proven_impossible = plan.lower_bound_bytes - 1;
  uint64_t next_low = plan.lower_bound_bytes;
  int round = 0;
  while (next_low < plan.arena_bytes) {
    const auto now = Clock::now();
    if (now >= deadline) break;
    uint64_t target = next_low + (plan.arena_bytes - 1 - next_low) / 2;
    auto until = now + (deadline - now) / 2;
    if (round == 0) {
      // enough_bytes is below the greedy arena here, or the search would not run
      target = enough_bytes > next_low ? enough_bytes : next_low;
      until = now + (deadline - now) * 7 / 8;
    }
    ++round;
    std::vector<uint64_t> offsets;
    const Outcome outcome = decide(problem, ranks, target, until, offsets, report.nodes);
    if (outcome != Outcome::Found) {
      if (outcome == Outcome::Impossible) {  // no arena up to target: none below either
        proven_impossible = std::max(proven_impossible, target);
        report.proven_impossible_bytes = proven_impossible;
      }
      next_low = target + 1;
      continue;
    }
    uint64_t arena = 0;
    for (size_t i = 0; i < problem.ids.size(); ++i) {
      plan.offsets[problem.ids[i]] = offsets[i];
      arena = std::max(arena, offsets[i] + problem.size[i]);
    }
    plan.arena_bytes = arena;  // tops are multiples of the alignment: already aligned
    if (arena <= plan.lower_bound_bytes) return finish(SearchStop::LowerBound);
    if (arena <= enough_bytes) return finish(SearchStop::Enough);
  }
  if (proven_impossible + 1 >= plan.arena_bytes) return finish(SearchStop::ProvenOptimal);
  return finish(SearchStop::TimeBudget);
}

}  // namespace planrt::planning
