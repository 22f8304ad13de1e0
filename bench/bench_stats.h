// What every benchmark shares: its statistics (timings are medians, docs/design.md
// "Conventions") and its exit statuses. Header-only, so each bench binary stays one .cpp file.
//
// Every benchmark has a smoke mode (--smoke): small sizes and a few iterations, every
// correctness condition it checks still checked, no figure judged against a target, lines
// written only where --out says. bench/CMakeLists.txt runs each one so as a ctest test
// labelled bench-smoke: the CPU ones in CI, the GPU ones in scripts/gpu-test.sh.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace planrt::bench {

// The median (the mean of the middle two for an even count); 0 for no samples.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2.0;
}

// Where a benchmark appends its JSON line: --out when given; else nowhere in a smoke run
// (its figures are not results) and `default_path` (under bench/results/) otherwise.
inline std::string results_path(const std::string& out_flag, bool smoke,
                                const std::string& default_path) {
  if (!out_flag.empty()) return out_flag;
  return smoke ? std::string() : default_path;
}

// The exit status of a GPU benchmark that finds no GPU: 77, which ctest reads as a skip
// (SKIP_RETURN_CODE), or 1 under PLANRT_REQUIRE_GPU=1 (the GPU lane), where a skip fails.
inline int no_gpu_exit() {
  const char* require = std::getenv("PLANRT_REQUIRE_GPU");
  return require != nullptr && std::strcmp(require, "1") == 0 ? 1 : 77;
}

}  // namespace planrt::bench
