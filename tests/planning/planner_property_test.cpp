// Properties of the memory planner over many seeded cases from support/plan_cases: every
// plan verifies, greedy (each ordering alone, and the best of them) matches a reference
// written from the header's words, best-of is never worse than the original ordering
// alone, and model-like methods plan within 5% of the lower bound.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "planning/planner.h"
#include "support/plan_cases.h"

namespace planrt::planning {
namespace {

using test::PlanCase;
using test::PlanFamily;

constexpr size_t kCases = 2000;
constexpr size_t kMinTensors = 5;
constexpr size_t kMaxTensors = 200;
constexpr uint64_t kAlignments[] = {64, 256};

uint64_t aligned(uint64_t size, uint64_t alignment) {
  return (size + alignment - 1) / alignment * alignment;
}

bool alive_together(const TensorLifetime& a, const TensorLifetime& b) {
  return a.first_use <= b.last_use && b.first_use <= a.last_use;
}

// The header's ordering keys, restated.
bool placed_before(const std::vector<TensorLifetime>& tensors, GreedyOrder order, size_t a,
                   size_t b) {
  const TensorLifetime& x = tensors[a];
  const TensorLifetime& y = tensors[b];
  const int64_t x_span = x.last_use - x.first_use;
  const int64_t y_span = y.last_use - y.first_use;
  switch (order) {
    case GreedyOrder::SizeThenLongerLifetime:
      if (x.size_bytes != y.size_bytes) return x.size_bytes > y.size_bytes;
      if (x_span != y_span) return x_span > y_span;
      break;
    case GreedyOrder::SizeThenLaterLastUse:
      if (x.size_bytes != y.size_bytes) return x.size_bytes > y.size_bytes;
      if (x.last_use != y.last_use) return x.last_use > y.last_use;
      if (x_span != y_span) return x_span > y_span;
      break;
    case GreedyOrder::LongerLifetimeThenSize:
      if (x_span != y_span) return x_span > y_span;
      if (x.size_bytes != y.size_bytes) return x.size_bytes > y.size_bytes;
      break;
  }
  return a < b;
}

// The header's rule restated without the planner's sorted scan: a gap starts at 0 or at
// an aligned end of a tensor alive together with this one, where no such tensor lies,
// and runs to the nearest such tensor above. Slow and obvious on purpose.
std::vector<uint64_t> reference_greedy(const std::vector<TensorLifetime>& tensors,
                                       uint64_t alignment, GreedyOrder order_kind) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return placed_before(tensors, order_kind, a, b);
  });
  std::vector<uint64_t> offsets(tensors.size(), 0);
  std::vector<size_t> placed;
  for (size_t id : order) {
    const TensorLifetime& t = tensors[id];
    if (t.size_bytes == 0) continue;
    std::vector<size_t> conflicts;
    for (size_t p : placed) {
      if (alive_together(t, tensors[p])) conflicts.push_back(p);
    }
    auto end_of = [&](size_t p) { return offsets[p] + aligned(tensors[p].size_bytes, alignment); };
    std::vector<uint64_t> starts = {0};
    uint64_t top = 0;
    for (size_t p : conflicts) {
      starts.push_back(end_of(p));
      top = std::max(top, end_of(p));
    }
    std::optional<uint64_t> best;
    uint64_t best_gap = 0;
    for (uint64_t start : starts) {
      bool covered = false;
      std::optional<uint64_t> next;
      for (size_t p : conflicts) {
        if (offsets[p] <= start && start < end_of(p)) covered = true;
        if (offsets[p] >= start && (!next || offsets[p] < *next)) next = offsets[p];
      }
      if (covered || !next) continue;
      const uint64_t gap = *next - start;
      if (gap < aligned(t.size_bytes, alignment)) continue;
      if (!best || gap < best_gap || (gap == best_gap && start < *best)) {
        best = start;
        best_gap = gap;
      }
    }
    offsets[id] = best.value_or(top);
    placed.push_back(id);
  }
  return offsets;
}

uint64_t arena_of(const std::vector<TensorLifetime>& tensors, const std::vector<uint64_t>& offsets,
                  uint64_t alignment) {
  uint64_t arena = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].size_bytes == 0) continue;
    arena = std::max(arena, offsets[i] + aligned(tensors[i].size_bytes, alignment));
  }
  return arena;
}

// Best of: the reference under every ordering of the list, the smallest arena kept, ties to
// the earliest ordering.
std::vector<uint64_t> reference_best_of(const std::vector<TensorLifetime>& tensors,
                                        uint64_t alignment) {
  std::optional<std::vector<uint64_t>> best;
  for (GreedyOrder order : greedy_orders()) {
    std::vector<uint64_t> offsets = reference_greedy(tensors, alignment, order);
    if (!best || arena_of(tensors, offsets, alignment) < arena_of(tensors, *best, alignment)) {
      best = std::move(offsets);
    }
  }
  return best.value_or(std::vector<uint64_t>(tensors.size(), 0));
}

MemoryPlan plan_and_verify(const PlanCase& c, uint64_t alignment,
                           PlannerKind kind = PlannerKind::GreedyBySize) {
  Result<MemoryPlan> plan = plan_memory(c.tensors, alignment, kind);
  EXPECT_TRUE(plan.ok()) << test::describe(c) << ": " << plan.status().to_string();
  if (!plan.ok()) return MemoryPlan{};
  Status verified = verify_plan(c.tensors, *plan, alignment);
  EXPECT_TRUE(verified.ok()) << test::describe(c) << " at alignment " << alignment << " ("
                             << planner_name(kind) << "): " << verified.to_string();
  return *plan;
}

MemoryPlan plan_one_order_and_verify(const PlanCase& c, uint64_t alignment, GreedyOrder order) {
  Result<MemoryPlan> plan = plan_memory_greedy(c.tensors, alignment, order);
  EXPECT_TRUE(plan.ok()) << test::describe(c) << ": " << plan.status().to_string();
  if (!plan.ok()) return MemoryPlan{};
  Status verified = verify_plan(c.tensors, *plan, alignment);
  EXPECT_TRUE(verified.ok()) << test::describe(c) << " at alignment " << alignment << " ("
                             << greedy_order_name(order) << "): " << verified.to_string();
  return *plan;
}

// PLANRT_PROPERTY_CASES caps the cases per family: the sanitizer lanes look for memory and
// undefined-behaviour errors in the planner's code, which a few hundred cases reach as well
// as 2000 (scripts/sanitize-test.sh sets it); the normal lane checks the properties on all.
size_t case_cap() {
  const char* text = std::getenv("PLANRT_PROPERTY_CASES");
  const long cap = text ? std::atol(text) : 0;
  return cap > 0 ? static_cast<size_t>(cap) : kCases;
}

std::vector<PlanCase> cases_of(PlanFamily family, size_t count = kCases) {
  return test::make_plan_cases(family, 1, std::min(count, case_cap()), kMinTensors, kMaxTensors);
}

TEST(PlanCasesTest, HaveTheRequestedSizeAndValidLifetimes) {
  for (PlanFamily family : test::all_plan_families()) {
    for (size_t n : {size_t{1}, size_t{5}, size_t{57}, size_t{200}}) {
      const PlanCase c = test::make_plan_case(family, 9, n);
      if (family == PlanFamily::UniformRandom) {
        EXPECT_EQ(c.tensors.size(), n);
      } else {
        EXPECT_GE(c.tensors.size(), n) << test::describe(c);
        EXPECT_LT(c.tensors.size(), n + 70) << test::describe(c);
      }
      for (const TensorLifetime& t : c.tensors) {
        EXPECT_LE(t.first_use, t.last_use) << test::describe(c);
        EXPECT_GT(t.size_bytes, 0u) << test::describe(c);
      }
    }
  }
}

TEST(PlannerPropertyTest, EveryPlanVerifies) {
  for (PlanFamily family : test::all_plan_families()) {
    for (const PlanCase& c : cases_of(family)) {
      for (uint64_t alignment : kAlignments) {
        plan_and_verify(c, alignment, PlannerKind::GreedyBySize);
        plan_and_verify(c, alignment, PlannerKind::NoReuse);
        for (GreedyOrder order : greedy_orders()) plan_one_order_and_verify(c, alignment, order);
      }
    }
  }
}

// Holds on transformer, transformer-kv, resnet and unet (bounded_plan_families). Measured
// max over the 2000 cases: transformer 1.0000, transformer-kv 1.0038 (1.0039 at alignment
// 64), resnet 1.0000, unet 1.0000 (size-then-longer-lifetime alone, the original order:
// transformer-kv 1.0135, unet 1.1292).
TEST(PlannerPropertyTest, ModelLikeMethodsPlanWithinFivePercentOfTheLowerBound) {
  for (PlanFamily family : test::bounded_plan_families()) {
    for (const PlanCase& c : cases_of(family)) {
      for (uint64_t alignment : kAlignments) {
        const MemoryPlan plan = plan_and_verify(c, alignment);
        EXPECT_GE(plan.arena_bytes, plan.lower_bound_bytes) << test::describe(c);
        EXPECT_LE(plan.ratio(), 1.05) << test::describe(c) << " at alignment " << alignment
                                      << ": arena " << plan.arena_bytes << ", lower bound "
                                      << plan.lower_bound_bytes;
      }
    }
  }
}

// The families 5% cannot honestly be asserted on, held to their measured max (2000 cases,
// alignments 64 and 256) so a change cannot lose ground unnoticed:
//   random-chain    1.0833 (1.0781 at alignment 64; only seed 729 is above 1.05;
//                   size-then-longer-lifetime alone: 1.5000)
//   uniform-random  1.2517 (945 of 2000 cases above 1.05; sizes are all distinct, so only
//                   the lifetime-first ordering differs from size-then-longer-lifetime;
//                   it alone: 1.2861)
TEST(PlannerPropertyTest, OtherFamiliesStayWithinTheirMeasuredRatio) {
  struct Limit {
    PlanFamily family;
    double max_ratio;
    size_t max_cases_above_five_percent;
  };
  for (const Limit& limit : {Limit{PlanFamily::RandomChain, 1.0834, 1},
                             Limit{PlanFamily::UniformRandom, 1.2518, 945}}) {
    for (uint64_t alignment : kAlignments) {
      size_t above = 0;
      for (const PlanCase& c : cases_of(limit.family)) {
        const MemoryPlan plan = plan_and_verify(c, alignment);
        EXPECT_GE(plan.arena_bytes, plan.lower_bound_bytes) << test::describe(c);
        EXPECT_LE(plan.ratio(), limit.max_ratio) << test::describe(c) << " at alignment "
                                                 << alignment;
        if (plan.ratio() > 1.05) ++above;
      }
      EXPECT_LE(above, limit.max_cases_above_five_percent)
          << test::plan_family_name(limit.family) << " at alignment " << alignment;
    }
  }
}

TEST(PlannerPropertyTest, BestOfIsNeverWorseThanAnyOrderingAlone) {
  for (PlanFamily family : test::all_plan_families()) {
    for (const PlanCase& c : cases_of(family, 500)) {
      for (uint64_t alignment : kAlignments) {
        const MemoryPlan best = plan_and_verify(c, alignment);
        for (GreedyOrder order : greedy_orders()) {
          const MemoryPlan one = plan_one_order_and_verify(c, alignment, order);
          EXPECT_LE(best.arena_bytes, one.arena_bytes)
              << test::describe(c) << " at alignment " << alignment << " vs "
              << greedy_order_name(order);
          EXPECT_EQ(best.lower_bound_bytes, one.lower_bound_bytes) << test::describe(c);
        }
      }
    }
  }
}

TEST(PlannerPropertyTest, GreedyMatchesTheReferenceOnEveryFamily) {
  for (PlanFamily family : test::all_plan_families()) {
    for (const PlanCase& c : cases_of(family, 150)) {
      for (uint64_t alignment : kAlignments) {
        const MemoryPlan plan = plan_and_verify(c, alignment);
        EXPECT_EQ(plan.offsets, reference_best_of(c.tensors, alignment))
            << test::describe(c) << " at alignment " << alignment;
        for (GreedyOrder order : greedy_orders()) {
          EXPECT_EQ(plan_one_order_and_verify(c, alignment, order).offsets,
                    reference_greedy(c.tensors, alignment, order))
              << test::describe(c) << " at alignment " << alignment << " ("
              << greedy_order_name(order) << ")";
        }
      }
    }
  }
}

TEST(PlannerPropertyTest, GreedyMatchesTheReferenceOnSmallCasesFullOfTies) {
  // Few distinct sizes and short horizons: ties and gaps everywhere. mt19937_64's output
  // is fixed by the standard; only its raw output is used.
  std::mt19937_64 rng(20240611);
  for (int i = 0; i < 3000; ++i) {
    PlanCase c;
    c.family = PlanFamily::UniformRandom;
    c.seed = static_cast<uint64_t>(i);
    const size_t n = 1 + rng() % 12;
    for (size_t k = 0; k < n; ++k) {
      const int64_t first = static_cast<int64_t>(rng() % 6);
      c.tensors.push_back({(rng() % 5) * 40, first, first + static_cast<int64_t>(rng() % 4)});
    }
    const MemoryPlan plan = plan_and_verify(c, 64);
    ASSERT_EQ(plan.offsets, reference_best_of(c.tensors, 64)) << "case " << i;
    for (GreedyOrder order : greedy_orders()) {
      ASSERT_EQ(plan_one_order_and_verify(c, 64, order).offsets,
                reference_greedy(c.tensors, 64, order))
          << "case " << i << " (" << greedy_order_name(order) << ")";
    }
  }
}

TEST(PlannerPropertyTest, NoReuseArenaIsTheSumOfAlignedSizes) {
  for (PlanFamily family : test::all_plan_families()) {
    for (const PlanCase& c : cases_of(family, 100)) {
      uint64_t sum = 0;
      for (const TensorLifetime& t : c.tensors) sum += aligned(t.size_bytes, 256);
      EXPECT_EQ(plan_and_verify(c, 256, PlannerKind::NoReuse).arena_bytes, sum)
          << test::describe(c);
    }
  }
}

TEST(PlannerPropertyTest, SameCaseAndSamePlanEveryTime) {
  for (PlanFamily family : test::all_plan_families()) {
    const std::vector<PlanCase> first = cases_of(family, 50);
    const std::vector<PlanCase> second = cases_of(family, 50);
    for (size_t i = 0; i < first.size(); ++i) {
      ASSERT_EQ(first[i].tensors.size(), second[i].tensors.size()) << test::describe(first[i]);
      for (size_t k = 0; k < first[i].tensors.size(); ++k) {
        EXPECT_EQ(first[i].tensors[k].size_bytes, second[i].tensors[k].size_bytes);
        EXPECT_EQ(first[i].tensors[k].first_use, second[i].tensors[k].first_use);
        EXPECT_EQ(first[i].tensors[k].last_use, second[i].tensors[k].last_use);
      }
      EXPECT_EQ(plan_and_verify(first[i], 256).offsets, plan_and_verify(second[i], 256).offsets)
          << test::describe(first[i]);
    }
  }
}

}  // namespace
}  // namespace planrt::planning
