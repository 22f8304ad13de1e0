// GPU tests in a build or on a machine without a GPU: they skip and say why, unless
// PLANRT_REQUIRE_GPU=1 (the GPU lane, ./scripts/gpu-test.sh), where a skip is a failure.
//
//   TEST(Pool, ...) { PLANRT_REQUIRE_GPU_OR_SKIP(); ... }
//   TEST(Pool, TwoDevices) { PLANRT_REQUIRE_GPUS_OR_SKIP(2); ... }  // always skips on one GPU
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace planrt::testing_support {

// Visible CUDA devices; 0 in a build without CUDA or when the driver reports none.
int visible_gpu_count();
// Why there are fewer than `needed`: "built without CUDA", "no CUDA device visible (...)".
std::string gpu_unavailable_reason(int needed);
bool gpu_required();  // PLANRT_REQUIRE_GPU=1

}  // namespace planrt::testing_support

#define PLANRT_REQUIRE_GPUS_OR_SKIP(n)                                                      \
  do {                                                                                      \
    if (::planrt::testing_support::visible_gpu_count() < (n)) {                             \
      std::string planrt_reason_ = ::planrt::testing_support::gpu_unavailable_reason(n);   \
      if (::planrt::testing_support::gpu_required() && (n) == 1) {                          \
        FAIL() << "PLANRT_REQUIRE_GPU=1 but " << planrt_reason_;                            \
      }                                                                                     \
      GTEST_SKIP() << planrt_reason_;                                                       \
    }                                                                                       \
  } while (0)

#define PLANRT_REQUIRE_GPU_OR_SKIP() PLANRT_REQUIRE_GPUS_OR_SKIP(1)
