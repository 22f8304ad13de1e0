// Hand cases for the memory planner (docs/design.md §4): answers worked out on paper, every error
// path, and the verifier shown to fail on corrupted plans.
#include "planning/planner.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "support/status_matchers.h"

namespace planrt::planning {
namespace {

using ::planrt::testing::IsError;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kU = 64;  // one alignment unit: hand cases are written in units

TensorLifetime T(uint64_t units, int64_t first, int64_t last) {
  return TensorLifetime{units * kU, first, last};
}

MemoryPlan plan_or_die(const std::vector<TensorLifetime>& tensors, uint64_t alignment = kU,
                       PlannerKind kind = PlannerKind::GreedyBySize) {
  Result<MemoryPlan> plan = plan_memory(tensors, alignment, kind);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (!plan.ok()) return MemoryPlan{};
  Status verified = verify_plan(tensors, *plan, alignment);
  EXPECT_TRUE(verified.ok()) << verified.to_string();
  return *plan;
}

TEST(PlannerTest, NamesThePlanners) {
  EXPECT_EQ(planner_name(PlannerKind::GreedyBySize), "greedy-by-size");
  EXPECT_EQ(planner_name(PlannerKind::NoReuse), "no-reuse");
}

TEST(PlannerTest, EmptyInputGivesEmptyArena) {
  for (PlannerKind kind : {PlannerKind::GreedyBySize, PlannerKind::NoReuse}) {
    MemoryPlan plan = plan_or_die({}, kU, kind);
    EXPECT_TRUE(plan.offsets.empty());
    EXPECT_EQ(plan.arena_bytes, 0u);
    EXPECT_EQ(plan.lower_bound_bytes, 0u);
    EXPECT_EQ(plan.ratio(), 1.0);
  }
}

TEST(PlannerTest, SingleTensorTakesItsAlignedSize) {
  MemoryPlan plan = plan_or_die({{100, 3, 7}}, 64);
  EXPECT_EQ(plan.offsets, std::vector<uint64_t>{0});
  EXPECT_EQ(plan.arena_bytes, 128u);
  EXPECT_EQ(plan.lower_bound_bytes, 128u);
}

TEST(PlannerTest, ZeroSizeTensorsTakeNoSpaceAndSitAtZero) {
  const std::vector<TensorLifetime> tensors = {{0, 0, 5}, T(2, 0, 5), {0, 1, 1}, T(1, 1, 2)};
  for (PlannerKind kind : {PlannerKind::GreedyBySize, PlannerKind::NoReuse}) {
    MemoryPlan plan = plan_or_die(tensors, kU, kind);
    EXPECT_EQ(plan.offsets[0], 0u);
    EXPECT_EQ(plan.offsets[2], 0u);
    EXPECT_EQ(plan.arena_bytes, 3 * kU);
    EXPECT_EQ(plan.lower_bound_bytes, 3 * kU);
  }
  MemoryPlan only_empty = plan_or_die({{0, 0, 0}, {0, 0, 3}});
  EXPECT_EQ(only_empty.arena_bytes, 0u);
}

TEST(PlannerTest, ChainReusesTwoSlots) {
  // Each tensor is read by the next instruction only: two are alive at a time.
  std::vector<TensorLifetime> chain;
  for (int64_t i = 0; i < 10; ++i) chain.push_back({100, i, i + 1});
  MemoryPlan plan = plan_or_die(chain, 64);
  EXPECT_EQ(plan.lower_bound_bytes, 256u);
  EXPECT_EQ(plan.arena_bytes, 256u);
  for (size_t i = 0; i < chain.size(); ++i) EXPECT_EQ(plan.offsets[i], i % 2 == 0 ? 0u : 128u);

  MemoryPlan no_reuse = plan_or_die(chain, 64, PlannerKind::NoReuse);
  EXPECT_EQ(no_reuse.arena_bytes, 10 * 128u);
}

TEST(PlannerTest, LargestFirstReachesTheLowerBoundWhereDefinitionOrderDoesNot) {
  // Placing in definition order puts c above b (6 units); largest first puts c at the
  // bottom and fits a beside it: 4 units, the lower bound (b + c alive at instruction 2).
  const std::vector<TensorLifetime> tensors = {T(2, 0, 1), T(1, 1, 2), T(3, 2, 3)};
  MemoryPlan plan = plan_or_die(tensors);
  EXPECT_EQ(plan.offsets, (std::vector<uint64_t>{0, 3 * kU, 0}));
  EXPECT_EQ(plan.arena_bytes, 4 * kU);
  EXPECT_EQ(plan.lower_bound_bytes, 4 * kU);
  EXPECT_EQ(plan.ratio(), 1.0);
}

TEST(PlannerTest, TensorGoesIntoTheSmallestGapThatFits) {
  // Size first, the placement order is 3, 1, 4, 0, 2, which leaves tensor 2 two gaps among
  // the tensors alive with it (1 at [6,10), 0 at [14,17)): [0,6) and [10,14). Best fit
  // takes the smaller.
  const std::vector<TensorLifetime> tensors = {T(3, 2, 4), T(4, 2, 4), T(3, 2, 2), T(6, 3, 3),
                                               T(4, 3, 5)};
  Result<MemoryPlan> result = plan_memory_greedy(tensors, kU, GreedyOrder::SizeThenLongerLifetime);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  const MemoryPlan& plan = *result;
  EXPECT_EQ(plan.offsets,
            (std::vector<uint64_t>{14 * kU, 6 * kU, 10 * kU, 0, 10 * kU}));
  EXPECT_EQ(plan.arena_bytes, 17 * kU);
}

TEST(PlannerTest, TiesPlaceLongerLifetimeFirst) {
  // Equal sizes: the long-lived middle tensor is placed first, at the bottom, and the two
  // short ones go above it although they have lower and higher ids.
  MemoryPlan plan = plan_or_die({T(1, 0, 0), T(1, 0, 5), T(1, 5, 5)});
  EXPECT_EQ(plan.offsets, (std::vector<uint64_t>{kU, 0, kU}));
}

TEST(PlannerTest, BestOfOrderingsBeatsTheFirstOrderingOnAChainEndingLongLived) {
  // A chain of equal sizes, each read by the next op; the last lives on to instruction 7.
  // Longest lifetime first puts 3 at the bottom, then 0 (also at the bottom: not alive
  // with 3), then 1 above 0, and 2 (alive with 1 and 3) in a third slot. Later last_use
  // first goes 3, 2, 1, 0 and alternates two slots: the lower bound.
  const std::vector<TensorLifetime> chain = {T(1, 0, 2), T(1, 1, 3), T(1, 3, 4), T(1, 4, 7)};
  Result<MemoryPlan> first = plan_memory_greedy(chain, kU, GreedyOrder::SizeThenLongerLifetime);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  ASSERT_TRUE(verify_plan(chain, *first, kU).ok());
  EXPECT_EQ(first->offsets, (std::vector<uint64_t>{0, kU, 2 * kU, 0}));
  EXPECT_EQ(first->arena_bytes, 3 * kU);

  MemoryPlan best = plan_or_die(chain);
  EXPECT_EQ(best.offsets, (std::vector<uint64_t>{kU, 0, kU, 0}));
  EXPECT_EQ(best.arena_bytes, 2 * kU);
  EXPECT_EQ(best.lower_bound_bytes, 2 * kU);
  Result<MemoryPlan> second = plan_memory_greedy(chain, kU, GreedyOrder::SizeThenLaterLastUse);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->offsets, best.offsets);
}

TEST(PlannerTest, BestOfOrderingsBeatsSizeFirstOnNestedLongLivedTensors) {
  // U-Net-like: tensor 4 (2 units) lives across [1, 4] while the 3-unit tensors 0 and 2
  // come and go before and after it. Size first puts 0 at the bottom, so 4 goes above it
  // at 3 and the small tail stacks up to 6 units; lifetime first puts 4 at the bottom and
  // 0 above it at 2, and reaches the lower bound of 5.
  const std::vector<TensorLifetime> tensors = {T(3, 0, 1), T(1, 5, 6), T(3, 5, 7), T(1, 4, 5),
                                               T(2, 1, 4)};
  uint64_t size_first = ~uint64_t{0};
  for (GreedyOrder order : {GreedyOrder::SizeThenLongerLifetime, GreedyOrder::SizeThenLaterLastUse}) {
    Result<MemoryPlan> plan = plan_memory_greedy(tensors, kU, order);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    ASSERT_TRUE(verify_plan(tensors, *plan, kU).ok());
    size_first = std::min(size_first, plan->arena_bytes);
  }
  MemoryPlan best = plan_or_die(tensors);
  EXPECT_EQ(size_first, 6 * kU);
  EXPECT_EQ(best.arena_bytes, 5 * kU);
  EXPECT_EQ(best.lower_bound_bytes, 5 * kU);
  EXPECT_EQ(best.offsets, plan_memory_greedy(tensors, kU, GreedyOrder::LongerLifetimeThenSize)->offsets);
}

TEST(PlannerTest, ListsTheOrderingsInTieBreakOrder) {
  const std::vector<GreedyOrder> orders(greedy_orders().begin(), greedy_orders().end());
  EXPECT_EQ(orders, (std::vector<GreedyOrder>{GreedyOrder::LongerLifetimeThenSize,
                                              GreedyOrder::SizeThenLongerLifetime,
                                              GreedyOrder::SizeThenLaterLastUse}));
  EXPECT_EQ(greedy_order_name(GreedyOrder::SizeThenLongerLifetime), "size-then-longer-lifetime");
  EXPECT_EQ(greedy_order_name(GreedyOrder::SizeThenLaterLastUse), "size-then-later-last-use");
  EXPECT_EQ(greedy_order_name(GreedyOrder::LongerLifetimeThenSize), "longer-lifetime-then-size");
}

TEST(PlannerTest, BestOfKeepsTheEarliestOrderingOnATie) {
  // All three orderings need 4 units (lower bound 3), each with a different plan. The
  // first listed ordering's plan is kept.
  const std::vector<TensorLifetime> tensors = {T(2, 0, 2), T(1, 3, 5), T(1, 0, 3), T(2, 4, 4)};
  Result<MemoryPlan> lifetime = plan_memory_greedy(tensors, kU, GreedyOrder::LongerLifetimeThenSize);
  Result<MemoryPlan> size = plan_memory_greedy(tensors, kU, GreedyOrder::SizeThenLongerLifetime);
  Result<MemoryPlan> last_use = plan_memory_greedy(tensors, kU, GreedyOrder::SizeThenLaterLastUse);
  ASSERT_TRUE(lifetime.ok() && size.ok() && last_use.ok());
  EXPECT_EQ(lifetime->arena_bytes, 4 * kU);
  EXPECT_EQ(size->arena_bytes, 4 * kU);
  EXPECT_EQ(last_use->arena_bytes, 4 * kU);
  EXPECT_NE(lifetime->offsets, size->offsets);
  EXPECT_NE(size->offsets, last_use->offsets);
  const MemoryPlan best = plan_or_die(tensors);
  EXPECT_EQ(best.lower_bound_bytes, 3 * kU);
  EXPECT_EQ(best.offsets, lifetime->offsets);
  EXPECT_EQ(best.arena_bytes, 4 * kU);
}

TEST(PlannerTest, SingleOrderingReportsTheLowerBoundAndTheSameErrors) {
  const std::vector<TensorLifetime> tensors = {T(2, 0, 2), T(1, 3, 5), T(1, 0, 3), T(2, 4, 4)};
  for (GreedyOrder order : greedy_orders()) {
    Result<MemoryPlan> plan = plan_memory_greedy(tensors, kU, order);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->lower_bound_bytes, 3 * kU);
    Result<MemoryPlan> bad = plan_memory_greedy(std::vector<TensorLifetime>{T(1, 4, 3)}, kU, order);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), ErrorCode::InvalidArgument);
    EXPECT_TRUE(IsError(plan_memory_greedy(tensors, 48, order).status(), ErrorCode::InvalidArgument,
                        {"alignment 48 is not a power of two"}));
  }
}

TEST(PlannerTest, TiesOfSizeAndLifetimePlaceLowerIdFirst) {
  MemoryPlan plan = plan_or_die({T(1, 0, 2), T(1, 0, 2), T(1, 0, 2)});
  EXPECT_EQ(plan.offsets, (std::vector<uint64_t>{0, kU, 2 * kU}));
}

TEST(PlannerTest, LifetimesAreInclusive) {
  // The first tensor's last read and the second's definition are the same instruction.
  MemoryPlan plan = plan_or_die({T(1, 0, 3), T(1, 3, 4)});
  EXPECT_EQ(plan.arena_bytes, 2 * kU);
  EXPECT_EQ(plan.lower_bound_bytes, 2 * kU);
}

TEST(PlannerTest, UnalignedSizesAreRoundedForOffsetsButNotForArenaEnds) {
  // 65 bytes occupy two 64-byte units; the next tensor starts at 128.
  MemoryPlan plan = plan_or_die({{65, 0, 1}, {64, 0, 1}}, 64);
  EXPECT_EQ(plan.offsets, (std::vector<uint64_t>{0, 128}));
  EXPECT_EQ(plan.arena_bytes, 192u);
  EXPECT_EQ(plan.lower_bound_bytes, 192u);
}

TEST(PlannerTest, SamePlanForTheSameInput) {
  const std::vector<TensorLifetime> tensors = {T(3, 0, 4), T(3, 1, 2), T(2, 2, 6), T(3, 3, 5),
                                               T(1, 0, 6), T(2, 5, 6), T(3, 6, 7)};
  MemoryPlan first = plan_or_die(tensors);
  MemoryPlan second = plan_or_die(tensors);
  EXPECT_EQ(first.offsets, second.offsets);
  EXPECT_EQ(first.arena_bytes, second.arena_bytes);
}

TEST(PlannerTest, NoReuseArenaIsTheSumOfAlignedSizes) {
  const std::vector<TensorLifetime> tensors = {{100, 0, 1}, {0, 0, 1}, {64, 5, 6}, {1, 9, 9}};
  MemoryPlan plan = plan_or_die(tensors, 64, PlannerKind::NoReuse);
  EXPECT_EQ(plan.offsets, (std::vector<uint64_t>{0, 0, 128, 192}));
  EXPECT_EQ(plan.arena_bytes, 128u + 64u + 64u);
  EXPECT_EQ(plan.lower_bound_bytes, 128u);
}

TEST(PlannerTest, RejectsLastUseBeforeFirstUseNamingTheTensor) {
  for (PlannerKind kind : {PlannerKind::GreedyBySize, PlannerKind::NoReuse}) {
    Result<MemoryPlan> plan = plan_memory(std::vector<TensorLifetime>{T(1, 0, 1), T(1, 4, 3)},
                                          kU, kind);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), ErrorCode::InvalidArgument);
    EXPECT_NE(plan.status().message().find("tensor 1 has last_use 3 before its first_use 4"),
              std::string::npos)
        << plan.status().message();
  }
}

TEST(PlannerTest, RejectsAlignmentThatIsNotAPowerOfTwo) {
  const std::vector<TensorLifetime> tensors = {T(1, 0, 1)};
  for (uint64_t alignment : {uint64_t{0}, uint64_t{3}, uint64_t{48}, kMax}) {
    Result<MemoryPlan> plan = plan_memory(tensors, alignment);
    ASSERT_FALSE(plan.ok()) << alignment;
    EXPECT_EQ(plan.status().code(), ErrorCode::InvalidArgument);
    EXPECT_NE(plan.status().message().find("alignment " + std::to_string(alignment)),
              std::string::npos)
        << plan.status().message();
  }
}

TEST(PlannerTest, AlignmentOfOneIsAllowed) {
  MemoryPlan plan = plan_or_die({{3, 0, 1}, {5, 1, 2}}, 1);
  EXPECT_EQ(plan.arena_bytes, 8u);
}

TEST(PlannerTest, RejectsSizeThatOverflowsWhenAligned) {
  for (PlannerKind kind : {PlannerKind::GreedyBySize, PlannerKind::NoReuse}) {
    Result<MemoryPlan> plan =
        plan_memory(std::vector<TensorLifetime>{T(1, 0, 0), {kMax - 10, 0, 0}}, 64, kind);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), ErrorCode::InvalidArgument);
    EXPECT_NE(plan.status().message().find("tensor 1"), std::string::npos)
        << plan.status().message();
    EXPECT_NE(plan.status().message().find("overflows"), std::string::npos);
  }
}

TEST(PlannerTest, RejectsArenaThatOverflowsSixtyFourBits) {
  // Each fits alone; alive together they need 2^64 bytes.
  const std::vector<TensorLifetime> tensors = {{uint64_t{1} << 63, 0, 1},
                                               {uint64_t{1} << 63, 1, 2}};
  for (PlannerKind kind : {PlannerKind::GreedyBySize, PlannerKind::NoReuse}) {
    Result<MemoryPlan> plan = plan_memory(tensors, 64, kind);
    ASSERT_FALSE(plan.ok()) << planner_name(kind);
    EXPECT_EQ(plan.status().code(), ErrorCode::InvalidArgument);
    EXPECT_NE(plan.status().message().find("tensor 1"), std::string::npos)
        << plan.status().message();
  }
  // Not alive together: they share the bottom of the arena.
  MemoryPlan reused = plan_or_die({{uint64_t{1} << 63, 0, 1}, {uint64_t{1} << 63, 2, 3}});
  EXPECT_EQ(reused.arena_bytes, uint64_t{1} << 63);
}

TEST(PlannerTest, RejectsPlacementWhoseAlignedEndOverflows) {
  // Tensor 0's offset is representable; its end is, too, until rounded up to the
  // alignment, which the arena size must be.
  const std::vector<TensorLifetime> tensors = {{65, 0, 1}, {kMax - 127, 0, 1}};
  Result<MemoryPlan> plan = plan_memory(tensors, 64);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(plan.status().message(),
            "tensor 0 of 65 bytes placed at offset 18446744073709551488 overflows a 64-bit "
            "arena (alignment 64)");
}

TEST(LowerBoundTest, IsTheLargestLiveSetOfAlignedSizes) {
  // Alive at 2: tensors 0, 1 and 2 (100 -> 128 each); at 4: tensors 0 and 3.
  const std::vector<TensorLifetime> tensors = {{100, 0, 4}, {100, 1, 2}, {100, 2, 3}, {500, 4, 4}};
  EXPECT_EQ(lower_bound_bytes(tensors, 64), 128u + 512u);
  EXPECT_EQ(lower_bound_bytes(tensors, 1), 600u);
  EXPECT_EQ(lower_bound_bytes({}, 64), 0u);
}

TEST(LowerBoundTest, IsTotalOnInputThePlannerRejects) {
  EXPECT_EQ(lower_bound_bytes(std::vector<TensorLifetime>{{64, 3, 1}, {64, 0, 0}}, 64), 64u);
  EXPECT_EQ(lower_bound_bytes(std::vector<TensorLifetime>{{64, 0, 0}}, 48), 0u);
  EXPECT_EQ(lower_bound_bytes(std::vector<TensorLifetime>{{kMax, 0, 1}, {kMax, 1, 1}}, 64),
            kMax);
}

// The verifier: each corruption below must be caught, so a passing verify_plan elsewhere
// means something.
class VerifyPlanTest : public ::testing::Test {
 protected:
  const std::vector<TensorLifetime> tensors_ = {T(2, 0, 2), T(1, 1, 3), T(1, 3, 4)};
  MemoryPlan plan_ = plan_or_die(tensors_);
};

TEST_F(VerifyPlanTest, AcceptsThePlannersPlan) {
  EXPECT_TRUE(verify_plan(tensors_, plan_, kU).ok());
}

TEST_F(VerifyPlanTest, CatchesOverlapAndNamesThePair) {
  plan_.offsets[1] = kU;  // inside tensor 0, which is alive at instructions 1 and 2
  Status s = verify_plan(tensors_, plan_, kU);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::Internal);
  EXPECT_EQ(s.message(),
            "tensors 0 (live [0, 2], bytes [0, 128)) and 1 (live [1, 3], bytes [64, 128)) "
            "are alive together and overlap");
}

TEST_F(VerifyPlanTest, AllowsOverlapOfTensorsNotAliveTogether) {
  plan_.offsets[2] = kU;  // inside tensor 0, dead by instruction 3
  EXPECT_TRUE(verify_plan(tensors_, plan_, kU).ok());
}

TEST_F(VerifyPlanTest, CatchesMisalignedOffset) {
  plan_.offsets[2] += 8;
  Status s = verify_plan(tensors_, plan_, kU);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::Internal);
  EXPECT_NE(s.message().find("tensor 2 offset"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("alignment 64"), std::string::npos) << s.message();
}

TEST_F(VerifyPlanTest, CatchesTensorOutsideTheArena) {
  plan_.arena_bytes -= kU;
  Status s = verify_plan(tensors_, plan_, kU);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::Internal);
  EXPECT_NE(s.message().find("outside the arena"), std::string::npos) << s.message();
}

TEST_F(VerifyPlanTest, CatchesOffsetNearTheTopOfTheAddressSpaceWithoutOverflow) {
  plan_.offsets[1] = kMax - (kU - 1);  // offset + size would wrap to a small number
  Status s = verify_plan(tensors_, plan_, kU);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::Internal);
  EXPECT_NE(s.message().find("tensor 1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("outside the arena"), std::string::npos) << s.message();
}

TEST_F(VerifyPlanTest, CatchesWrongNumberOfOffsets) {
  plan_.offsets.pop_back();
  Status s = verify_plan(tensors_, plan_, kU);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::Internal);
  EXPECT_NE(s.message().find("2 offsets for 3 tensors"), std::string::npos) << s.message();
}

TEST_F(VerifyPlanTest, RejectsInputThePlannerRejects) {
  EXPECT_EQ(verify_plan(tensors_, plan_, 48).code(), ErrorCode::InvalidArgument);
  std::vector<TensorLifetime> backwards = tensors_;
  backwards[0].last_use = -1;
  EXPECT_EQ(verify_plan(backwards, plan_, kU).code(), ErrorCode::InvalidArgument);
}

TEST_F(VerifyPlanTest, AcceptsZeroSizeTensorAtTheArenaEnd) {
  std::vector<TensorLifetime> tensors = tensors_;
  tensors.push_back({0, 0, 4});
  MemoryPlan plan = plan_;
  plan.offsets.push_back(plan.arena_bytes);
  EXPECT_TRUE(verify_plan(tensors, plan, kU).ok());
}

}  // namespace
}  // namespace planrt::planning
