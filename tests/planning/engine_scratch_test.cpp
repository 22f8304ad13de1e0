// plan_engine_scratch on graphs read from files: dim values that make a shape's strides or
// byte size overflow are an InvalidProgram error, never undefined behaviour.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "planning/engine_scratch.h"
#include "support/engine_fixtures.h"
#include "support/program_fixtures.h"

namespace planrt::planning {
namespace {

// Each dim of [S, 4] fits at S = 2^62, but the element count does not: computing the
// strides of that shape overflowed (found by tests/fuzz/program_fuzz through an engine
// profile far above its method's bounds).
TEST(EngineScratch, ShapesWhoseSizeOverflowsAreInvalidPrograms) {
  fixtures::EngineFixture f = fixtures::engine_fixture(4, 64);
  const fb::Graph* graph = flatbuffers::GetRoot<fb::Graph>(f.blob.data());
  for (int64_t s : {int64_t{1} << 62, int64_t{1} << 61, INT64_MAX / 4}) {
    std::vector<int64_t> dims = {s};
    Result<EngineScratchPlan> plan = plan_engine_scratch(*graph, dims, false);
    ASSERT_FALSE(plan.ok()) << s;
    EXPECT_EQ(plan.status().code(), ErrorCode::InvalidProgram);
    EXPECT_NE(plan.status().message().find("overflows 64-bit sizes"), std::string::npos)
        << plan.status().to_string();
  }
  // The fixture's own max still plans.
  std::vector<int64_t> max = {64};
  EXPECT_TRUE(plan_engine_scratch(*graph, max, false).ok());
}

// A zero dim empties a tensor but not the other dims' strides: [S, 2^58, 64] at S = 0
// has no elements, yet its outer stride is 2^64 (found by tests/fuzz/program_fuzz).
TEST(EngineScratch, EmptyShapesWhoseStridesOverflowAreInvalidPrograms) {
  fb::GraphT g;
  g.values.push_back(fixtures::planned_value(
      "t", {fixtures::named_dim(0), fixtures::fixed_dim(int64_t{1} << 58), fixtures::fixed_dim(64)}, 0, 0));
  std::vector<uint8_t> blob = fixtures::pack_graph(g);
  const fb::Graph* graph = flatbuffers::GetRoot<fb::Graph>(blob.data());
  std::vector<int64_t> dims = {0};
  Result<EngineScratchPlan> plan = plan_engine_scratch(*graph, dims, false);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), ErrorCode::InvalidProgram);
  EXPECT_NE(plan.status().message().find("overflows 64-bit sizes"), std::string::npos)
      << plan.status().to_string();
}

}  // namespace
}  // namespace planrt::planning
