// Engines for the engine backend's tests, built without the builder: one engine segment
// graph y = (relu(x + c))^2 + x over x [S, F] (S dynamic in [1, max_s]), with its two
// intermediates planned into activation scratch by planning/engine_scratch.h, and the
// BackendInitContext that hands the engine its constant c. Different F give engines that
// ask for different scratch; S scales the requirement of a call.
#pragma once

#include <cstdint>
#include <vector>

#include "planrt/runtime/backend.h"

namespace planrt::fixtures {

struct EngineFixture {
  int64_t features = 4;
  int64_t max_s = 64;
  Device device = Device::cpu();
  std::vector<uint8_t> blob;
  std::vector<float> c;
  std::vector<DimSpec> dims;
  BackendInitContext context(std::span<const BackendOption> options = {}) const;
  bool no_scratch = false;
  // What the engine computes, for x of shape [S, features].
  std::vector<float> reference(const std::vector<float>& x) const;
};

// `no_scratch`: the engine computes y = x + c only (no intermediate: needs no scratch).
// `min_s`: the profile's (and the dim's) minimum; 0 allows calls that need no scratch.
EngineFixture engine_fixture(int64_t features, int64_t max_s, Device device = Device::cpu(),
                             bool no_scratch = false, int64_t min_s = 1);

}  // namespace planrt::fixtures
