// Arena regression guard: the total arena bytes greedy-by-size needs for a fixed set of
// seeded cases may not grow. The totals were recorded when the planner was written and
// lowered when it became best of several orderings; a
// planner change that lowers them should lower the pins too, so a later change cannot
// quietly give the saving back.
//
// The lower-bound totals are pinned exactly: they depend only on the cases, so a mismatch
// means support/plan_cases changed, and both figures must be re-recorded from this test's
// output (it prints them) rather than the arena pin loosened.
#include <cstdint>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "planning/planner.h"
#include "support/plan_cases.h"

namespace planrt::planning {
namespace {

using test::PlanFamily;

struct Pin {
  PlanFamily family;
  uint64_t lower_bound_bytes;
  uint64_t arena_bytes;  // ratio in the comment
};

// 100 cases per family: seeds 1..100, 5..200 tensors, alignment 256. Arena pins lowered
// when GreedyBySize became best of several orderings (previous pin, ratio, in the comment).
constexpr Pin kPins[] = {
    {PlanFamily::Transformer, 7548779008ull, 7548779008ull},       // 1.0000
    {PlanFamily::TransformerKv, 11388693504ull, 11388700672ull},   // 1.0000
    {PlanFamily::ResNet, 9228050688ull, 9228050688ull},            // 1.0000
    {PlanFamily::UNet, 2840971776ull, 2840971776ull},              // 1.0000 (was 2844156160, 1.0011)
    {PlanFamily::RandomChain, 357739776ull, 357749760ull},         // 1.0000 (was 360731904, 1.0084)
    {PlanFamily::UniformRandom, 958370048ull, 1009941760ull},      // 1.0538 (was 1015892736, 1.0600)
};

TEST(PlannerRegressionTest, ArenaBytesOfPinnedCasesDoNotGrow) {
  ASSERT_EQ(std::size(kPins), test::all_plan_families().size()) << "a family has no pin";
  for (const Pin& pin : kPins) {
    uint64_t lower_bound = 0;
    uint64_t arena = 0;
    for (const test::PlanCase& c : test::make_plan_cases(pin.family, 1, 100, 5, 200)) {
      Result<MemoryPlan> plan = plan_memory(c.tensors, 256);
      ASSERT_TRUE(plan.ok()) << test::describe(c) << ": " << plan.status().to_string();
      Status verified = verify_plan(c.tensors, *plan, 256);
      ASSERT_TRUE(verified.ok()) << test::describe(c) << ": " << verified.to_string();
      lower_bound += plan->lower_bound_bytes;
      arena += plan->arena_bytes;
    }
    const std::string now = fmt::format("{}: lower bound {} bytes, arena {} bytes",
                                        test::plan_family_name(pin.family), lower_bound, arena);
    EXPECT_EQ(lower_bound, pin.lower_bound_bytes) << "the cases changed; re-record. " << now;
    EXPECT_LE(arena, pin.arena_bytes) << "arena grew. " << now;
  }
}

}  // namespace
}  // namespace planrt::planning
