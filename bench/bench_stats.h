// Statistics every benchmark reports (DESIGN §8: timings are medians). Header-only, so each
// bench binary stays one .cpp file.
#pragma once

#include <algorithm>
#include <vector>

namespace planrt::bench {

// The median (the mean of the middle two for an even count); 0 for no samples.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2.0;
}

}  // namespace planrt::bench
