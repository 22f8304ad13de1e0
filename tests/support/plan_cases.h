// Seeded generator of memory-planning cases (tensor lifetimes and sizes) for the planner's
// property tests, its arena regression test and its benchmark; other tests may reuse it.
//
// Every case is a pure function of (family, seed, tensor count): the generator uses its
// own PRNG and integer arithmetic only, so the same case comes out on every platform and
// standard library (the pinned arena figures depend on that).
//
// Families model what a method's instruction order produces. The first four have layer
// structure like real methods, and greedy-by-size (best of its orderings) stays within 5%
// of the lower bound on them (bounded_plan_families); the others are reported by the
// benchmark and held by the tests to their measured max, not to 5%:
//   transformer     pre-LN blocks: residual stream, layer norms, q/k/v, attention scores
//                   (or fused attention), FFN (plain or gated)
//   transformer-kv  decoder blocks on a kv cache whose grown k/v are method outputs,
//                   alive to the end
//   resnet          basic or bottleneck blocks, the block input kept until the residual
//                   add, conv/bn/relu separate or fused
//   unet            encoder levels whose outputs live until the mirroring decoder level
//                   (size-first orderings alone reach 1.13x the lower bound here; the
//                   longer-lifetime-first ordering reaches it)
//   random-chain    runs of equal-size ops, an op reading two back at random: up to 1.08x
//                   (1.5x with the original ordering alone)
//   uniform-random  intervals and sizes drawn uniformly: no model looks like this; up to
//                   1.25x
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planning/planner.h"

namespace planrt::test {

enum class PlanFamily { Transformer, TransformerKv, ResNet, UNet, RandomChain, UniformRandom };

struct PlanCase {
  PlanFamily family = PlanFamily::Transformer;
  uint64_t seed = 0;
  std::vector<planning::TensorLifetime> tensors;
};

std::span<const PlanFamily> all_plan_families();
std::span<const PlanFamily> bounded_plan_families();
std::string_view plan_family_name(PlanFamily family);

// At least num_tensors tensors: a model-like method is finished to the end of the block
// (layer, net) where the count is reached, as a real method would be, so it may have a
// block's worth more (under 70). uniform-random has exactly num_tensors.
PlanCase make_plan_case(PlanFamily family, uint64_t seed, size_t num_tensors);

// count cases with seeds first_seed, first_seed + 1, ...; each case's tensor count is
// drawn from its seed, uniformly in [min_tensors, max_tensors].
std::vector<PlanCase> make_plan_cases(PlanFamily family, uint64_t first_seed, size_t count,
                                      size_t min_tensors, size_t max_tensors);

// A guillotine cut of the rectangle [0, time) x [0, capacity) into `pieces` rectangles, each
// a tensor alive over its time range with its height as size, in shuffled order: every
// instant is covered, so the lower bound is `capacity` and a perfect packing exists (the
// planner's search must find it; the greedy often cannot).
std::vector<planning::TensorLifetime> perfect_instance(uint32_t seed, int pieces, int64_t time,
                                                       uint64_t capacity);

// "transformer seed 17 (120 tensors)": for assertion messages.
std::string describe(const PlanCase& c);

}  // namespace planrt::test
