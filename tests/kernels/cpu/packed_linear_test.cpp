// PackedLinear (kernels/cpu/packed_linear.h) against the plain linear kernel: every row count,
// with and without bias, odd sizes, more row counts than it keeps matmuls for, concurrent
// calls; and its refusals.
#include "kernels/cpu/packed_linear.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "kernel_test_util.h"

namespace planrt::kernels {
namespace {

using cpu::PackedLinear;
using testing::HostTensor;
using testing::IsError;
using testing::run_op;

void expect_matches_plain(const PackedLinear& packed, const HostTensor& x, const HostTensor& w,
                          const HostTensor* bias, int64_t rows) {
  const int64_t n = w.shape()[0];
  HostTensor want(DType::F32, {rows, n}), got(DType::F32, {rows, n});
  std::vector<TensorView> in = {x.view(), w.view()};
  if (bias != nullptr) in.push_back(bias->view());
  ASSERT_TRUE(run_op("linear", {}, in, {want.view()}).ok());
  const TensorView out = got.view();
  Status s = packed.run(in, {&out, 1});
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_LT(testing::relative_error(got, want.doubles()), 1e-6) << rows << " rows, n " << n;
}

TEST(PackedLinear, MatchesThePlainKernelAtEveryRowCountWithAndWithoutBias) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{512, 512}, {2048, 512}, {3, 5}, {1000, 77}}) {
    HostTensor w = HostTensor::random({n, k}, 3);
    HostTensor b = HostTensor::random({n}, 4);
    Result<std::unique_ptr<PackedLinear>> packed = PackedLinear::create(w.view());
    if (!packed.ok()) {
      // oneDNN may keep a tiny weight as stored; the caller then runs the plain kernel.
      EXPECT_TRUE(IsError(packed.status(), ErrorCode::NotSupported)) << n << "x" << k;
      continue;
    }
    EXPECT_GE((*packed)->packed_bytes(), static_cast<uint64_t>(n * k) * sizeof(float));
    for (int64_t rows : {int64_t{1}, int64_t{7}, int64_t{128}, int64_t{300}}) {
      HostTensor x = HostTensor::random({rows, k}, static_cast<uint32_t>(rows));
      expect_matches_plain(**packed, x, w, &b, rows);
      expect_matches_plain(**packed, x, w, nullptr, rows);
    }
  }
}

TEST(PackedLinear, MoreRowCountsThanItKeepsStillRun) {
  HostTensor w = HostTensor::random({64, 256}, 5);
  Result<std::unique_ptr<PackedLinear>> packed = PackedLinear::create(w.view());
  ASSERT_TRUE(packed.ok()) << packed.status().to_string();
  for (int64_t rows = 1; rows <= 80; ++rows) {
    HostTensor x = HostTensor::random({rows, 256}, static_cast<uint32_t>(rows));
    expect_matches_plain(**packed, x, w, nullptr, rows);
  }
}

TEST(PackedLinear, ConcurrentCallsGiveWhatSerialOnesDo) {
  HostTensor w = HostTensor::random({256, 128}, 6);
  HostTensor b = HostTensor::random({256}, 7);
  Result<std::unique_ptr<PackedLinear>> packed = PackedLinear::create(w.view());
  ASSERT_TRUE(packed.ok()) << packed.status().to_string();
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const int64_t rows = 1 + (t * 20 + i) % 9;
        HostTensor x = HostTensor::random({rows, 128}, static_cast<uint32_t>(i));
        HostTensor want(DType::F32, {rows, 256}), got(DType::F32, {rows, 256});
        std::vector<TensorView> in = {x.view(), w.view(), b.view()};
        const TensorView out = got.view();
        if (!run_op("linear", {}, in, {want.view()}).ok() || !(*packed)->run(in, {&out, 1}).ok() ||
            testing::relative_error(got, want.doubles()) > 1e-6) {
          ++failures[static_cast<size_t>(t)];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

TEST(PackedLinear, RefusesWhatIsNotAnF32MatrixAndAWeightOfAnotherShape) {
  HostTensor vec = HostTensor::random({16}, 1);
  EXPECT_TRUE(IsError(PackedLinear::create(vec.view()).status(), ErrorCode::NotSupported, {"f32 matrix"}));
  HostTensor ints(DType::I32, {4, 4});
  EXPECT_TRUE(IsError(PackedLinear::create(ints.view()).status(), ErrorCode::NotSupported));
  HostTensor w = HostTensor::random({64, 128}, 2);
  Result<std::unique_ptr<PackedLinear>> packed = PackedLinear::create(w.view());
  ASSERT_TRUE(packed.ok()) << packed.status().to_string();
  HostTensor other = HostTensor::random({32, 128}, 3);
  HostTensor x = HostTensor::random({4, 128}, 4);
  HostTensor y(DType::F32, {4, 32});
  const TensorView out = y.view();
  std::vector<TensorView> in = {x.view(), other.view()};
  EXPECT_TRUE(IsError((*packed)->run(in, {&out, 1}), ErrorCode::InvalidArgument, {"32 x 128", "64 x 128"}));
}

}  // namespace
}  // namespace planrt::kernels
