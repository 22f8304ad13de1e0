// plan_engine_scratch on graphs read from files: dim values that make a shape's strides or
// byte size overflow are an InvalidProgram error, never undefined behaviour.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "planning/engine_scratch.h"
#include "planning/method_plan.h"
#include "planning/planner.h"
#include "support/plan_cases.h"
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

// An engine graph whose Planned values have the lifetimes and sizes of `tensors` (sizes
// multiples of 4 bytes): step k writes the values first used at k and reads those last used
// there. The op names nothing a CPU plan looks at.
fb::GraphT graph_of(const std::vector<TensorLifetime>& tensors) {
  fb::GraphT g;
  int64_t steps = 0;
  for (const TensorLifetime& t : tensors) steps = std::max(steps, t.last_use + 1);
  for (size_t i = 0; i < tensors.size(); ++i) {
    g.values.push_back(fixtures::planned_value("t" + std::to_string(i),
                                               {fixtures::fixed_dim(static_cast<int64_t>(tensors[i].size_bytes / 4))}, 0, 0));
  }
  for (int64_t k = 0; k < steps; ++k) {
    auto ins = std::make_unique<fb::InstructionT>();
    ins->op = "relu";
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].first_use == k) ins->outputs.push_back(static_cast<uint32_t>(i));
      else if (tensors[i].last_use == k) ins->inputs.push_back(static_cast<uint32_t>(i));
    }
    g.instructions.push_back(std::move(ins));
  }
  return g;
}

std::vector<TensorLifetime> scaled(std::vector<TensorLifetime> t) {
  for (TensorLifetime& x : t) x.size_bytes *= kEngineScratchAlignment;  // whole alignment units
  return t;
}

// The builder searches an engine's scratch plan where the greedy's is above the bound,
// stores it, and the backend's plan at the profile max is that stored plan.
TEST(EngineScratch, TheBuilderStoresASearchedPlanTheBackendTakes) {
  int searched = 0;
  for (uint32_t seed = 1; seed <= 30 && searched < 3; ++seed) {
    const std::vector<TensorLifetime> t = scaled(test::perfect_instance(seed, 20, 30, 64));
    Result<MemoryPlan> greedy = plan_memory(t, kEngineScratchAlignment);
    ASSERT_TRUE(greedy.ok());
    if (greedy->arena_bytes == greedy->lower_bound_bytes) continue;
    ++searched;
    fb::GraphT g = graph_of(t);
    ASSERT_TRUE(plan_engine_graph(g, {}, Device::cpu(), /*search_budget_ms=*/60000).ok());
    EXPECT_TRUE(g.scratch_plan_stored);
    EXPECT_EQ(g.scratch_bytes, greedy->lower_bound_bytes) << "seed " << seed;
    EXPECT_EQ(g.scratch_lower_bound_bytes, greedy->lower_bound_bytes);
    ASSERT_EQ(g.scratch_workspace_offsets.size(), g.instructions.size());

    std::vector<uint8_t> blob = fixtures::pack_graph(g);
    const fb::Graph* graph = flatbuffers::GetRoot<fb::Graph>(blob.data());
    Result<EngineScratchPlan> loaded = plan_engine_scratch(*graph, {}, false);
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    EXPECT_EQ(loaded->scratch_bytes, g.scratch_bytes);
    for (size_t v = 0; v < g.values.size(); ++v) EXPECT_EQ(loaded->value_offsets[v], g.values[v]->offset);

    // Without a budget the greedy plan is what is stored.
    fb::GraphT plain = graph_of(t);
    ASSERT_TRUE(plan_engine_graph(plain, {}, Device::cpu(), 0).ok());
    EXPECT_EQ(plain.scratch_bytes, greedy->arena_bytes);
  }
  EXPECT_EQ(searched, 3) << "the instances must include some the greedy cannot pack";
}

// A stored plan that does not hold (two values alive together overlapping, a value past
// the recorded scratch, workspace offsets missing) is an InvalidProgram error at load.
TEST(EngineScratch, AStoredPlanThatDoesNotHoldIsRefused) {
  const std::vector<TensorLifetime> t = scaled(test::perfect_instance(3, 12, 20, 32));
  fb::GraphT good = graph_of(t);
  ASSERT_TRUE(plan_engine_graph(good, {}, Device::cpu(), 1000).ok());
  auto load = [](const fb::GraphT& g) {
    std::vector<uint8_t> blob = fixtures::pack_graph(g);
    return plan_engine_scratch(*flatbuffers::GetRoot<fb::Graph>(blob.data()), {}, false);
  };
  ASSERT_TRUE(load(good).ok());
  auto expect_refused = [&](const fb::GraphT& g, std::string_view what) {
    Result<EngineScratchPlan> r = load(g);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), ErrorCode::InvalidProgram) << what;
    EXPECT_NE(r.status().message().find("stored scratch plan"), std::string::npos) << r.status().to_string();
  };
  // Two values alive at one step, the second moved onto the first.
  size_t a = 0, b = 1;
  while (!(t[a].first_use <= t[b].last_use && t[b].first_use <= t[a].last_use)) ++b;
  fb::GraphT overlap = graph_of(t);
  ASSERT_TRUE(plan_engine_graph(overlap, {}, Device::cpu(), 1000).ok());
  overlap.values[b]->offset = overlap.values[a]->offset;
  expect_refused(overlap, "overlap");
  fb::GraphT outside = graph_of(t);
  ASSERT_TRUE(plan_engine_graph(outside, {}, Device::cpu(), 1000).ok());
  outside.values[0]->offset = outside.scratch_bytes;
  expect_refused(outside, "outside");
  fb::GraphT missing = graph_of(t);
  ASSERT_TRUE(plan_engine_graph(missing, {}, Device::cpu(), 1000).ok());
  missing.scratch_workspace_offsets.pop_back();
  expect_refused(missing, "missing workspace offsets");
}


// Graph.scratch_plan_views: step 0 writes a, step 1 reshapes a to b, step 2 adds a and b
// into c, step 3 reads c. With views b takes a's place (two places live at step 2, not
// three); without (programs written before), every value has its own.
struct Step {
  const char* op;
  std::vector<uint32_t> inputs, outputs;
};

// Planned values a, b, c, d of 256 bytes each, written and read by `steps` in order.
fb::GraphT four_value_graph(const std::vector<Step>& steps, bool views) {
  fb::GraphT g;
  for (const char* name : {"a", "b", "c", "d"}) {
    g.values.push_back(fixtures::planned_value(name, {fixtures::fixed_dim(64)}, 0, 0));
  }
  for (const Step& s : steps) {
    auto ins = std::make_unique<fb::InstructionT>();
    ins->op = s.op;
    ins->inputs = s.inputs;
    ins->outputs = s.outputs;
    g.instructions.push_back(std::move(ins));
  }
  g.scratch_plan_views = views;
  return g;
}

fb::GraphT reshape_graph(bool views) {
  return four_value_graph({{"relu", {}, {0}}, {"reshape", {0}, {1}}, {"add", {0, 1}, {2}}, {"relu", {2}, {3}}},
                          views);
}

TEST(EngineScratch, AReshapeBetweenPlannedValuesTakesItsInputsPlaceWhenTheGraphSaysSo) {
  fb::GraphT viewed = reshape_graph(true);
  ASSERT_TRUE(plan_engine_graph(viewed, {}, Device::cpu(), 0).ok());
  EXPECT_EQ(viewed.values[1]->offset, viewed.values[0]->offset);
  EXPECT_NE(viewed.values[2]->offset, viewed.values[0]->offset) << "c is written while a|b is read";
  EXPECT_EQ(viewed.scratch_bytes, 2 * kEngineScratchAlignment);
  EXPECT_EQ(viewed.scratch_lower_bound_bytes, 2 * kEngineScratchAlignment);

  fb::GraphT separate = reshape_graph(false);
  ASSERT_TRUE(plan_engine_graph(separate, {}, Device::cpu(), 0).ok());
  EXPECT_NE(separate.values[1]->offset, separate.values[0]->offset);
  EXPECT_EQ(separate.scratch_bytes, 3 * kEngineScratchAlignment);

  // The backend's plan at load is the stored one, the view at its input's offset.
  std::vector<uint8_t> blob = fixtures::pack_graph(viewed);
  Result<EngineScratchPlan> loaded = plan_engine_scratch(*flatbuffers::GetRoot<fb::Graph>(blob.data()), {}, false);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->value_offsets[1], loaded->value_offsets[0]);
  EXPECT_EQ(loaded->scratch_bytes, viewed.scratch_bytes);
}

// Only Planned values of the graph share: a reshape of a graph input (the caller's memory)
// or into one that another step also writes keeps its own place.
TEST(EngineScratch, AReshapeOfTheCallersMemoryOrOfAValueWrittenTwiceIsNoView) {
  fb::GraphT input = reshape_graph(true);
  input.values[0]->kind = fb::ValueKind::Temporary;
  input.inputs = {0};
  ASSERT_TRUE(plan_engine_graph(input, {}, Device::cpu(), 0).ok());
  EXPECT_EQ(input.scratch_bytes, 2 * kEngineScratchAlignment) << "b and c, a is not in the scratch";
  EXPECT_NE(input.values[1]->offset, input.values[2]->offset);

  fb::GraphT twice = reshape_graph(true);
  twice.instructions[3]->outputs = {1};  // the last step writes b again
  ASSERT_TRUE(plan_engine_graph(twice, {}, Device::cpu(), 0).ok());
  EXPECT_NE(twice.values[1]->offset, twice.values[0]->offset);

  fb::GraphT input_twice = reshape_graph(true);
  input_twice.instructions[3]->outputs = {0};  // the last step writes a again
  ASSERT_TRUE(plan_engine_graph(input_twice, {}, Device::cpu(), 0).ok());
  EXPECT_NE(input_twice.values[1]->offset, input_twice.values[0]->offset);

  // A reshape reading a value before the step that writes it (a malformed graph).
  fb::GraphT early = reshape_graph(true);
  std::swap(early.instructions[0], early.instructions[1]);
  ASSERT_TRUE(plan_engine_graph(early, {}, Device::cpu(), 0).ok());
  EXPECT_NE(early.values[1]->offset, early.values[0]->offset);
}

// A view that outlives its input: a's last read is the reshape, b is read two steps later,
// and c, written in between, must not land on a|b.
TEST(EngineScratch, AViewThatOutlivesItsInputKeepsThePlaceAlive) {
  fb::GraphT g = four_value_graph({{"relu", {}, {0}},        // a
                                   {"reshape", {0}, {1}},   // b = a's bytes; a's last read
                                   {"relu", {}, {2}},       // c, while b lives
                                   {"add", {1, 2}, {3}}},   // reads b and c
                                  true);
  ASSERT_TRUE(plan_engine_graph(g, {}, Device::cpu(), 0).ok());
  EXPECT_EQ(g.values[1]->offset, g.values[0]->offset);
  EXPECT_NE(g.values[2]->offset, g.values[1]->offset);
  EXPECT_NE(g.values[3]->offset, g.values[1]->offset);
  EXPECT_NE(g.values[3]->offset, g.values[2]->offset);
  std::vector<uint8_t> blob = fixtures::pack_graph(g);
  EXPECT_TRUE(plan_engine_scratch(*flatbuffers::GetRoot<fb::Graph>(blob.data()), {}, false).ok());
}

// A stored plan that puts a view anywhere but at its input's offset is refused at load.
TEST(EngineScratch, AStoredViewAwayFromItsInputIsRefused) {
  fb::GraphT g = reshape_graph(true);
  ASSERT_TRUE(plan_engine_graph(g, {}, Device::cpu(), 0).ok());
  g.scratch_bytes += kEngineScratchAlignment;
  g.values[1]->offset = 2 * kEngineScratchAlignment;  // inside the scratch, overlapping nothing live
  std::vector<uint8_t> blob = fixtures::pack_graph(g);
  Result<EngineScratchPlan> r = plan_engine_scratch(*flatbuffers::GetRoot<fb::Graph>(blob.data()), {}, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::InvalidProgram);
  EXPECT_NE(r.status().message().find("is a view of value 0"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace planrt::planning
