// The CPU kernels' threads (kernels/cpu/threading.h): option parsing, the per-thread count
// and its scope, parallel_for's coverage, and kernels giving the same results at 1 and 2
// threads. The suite is "CpuParallelism" and no name says "Thread": names with it join the
// ThreadSanitizer lane (PLANRT_CONCURRENCY_TESTS), which cannot check these, since their
// workers are OpenMP's (libgomp is not instrumented, and TSan reports its barriers as races).
#include "kernels/cpu/threading.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <atomic>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "kernel_test_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace planrt::kernels {
namespace {

using cpu::ThreadCountScope;
using testing::HostTensor;
using testing::IsError;
using testing::run_op;

TEST(CpuParallelism, TheDefaultIsAtLeastOneAndParsesAsAuto) {
  EXPECT_GE(cpu::available_cpus(), 1);
  EXPECT_GE(cpu::default_num_threads(), 1);
  Result<int> n = cpu::parse_num_threads("auto");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, cpu::default_num_threads());
}

TEST(CpuParallelism, CountsParseAndEverythingElseIsRefusedNamingTheValue) {
  for (auto [text, value] : {std::pair{"1", 1}, {"2", 2}, {"1024", 1024}}) {
    Result<int> n = cpu::parse_num_threads(text);
    ASSERT_TRUE(n.ok()) << text;
    EXPECT_EQ(*n, value);
  }
  for (const char* bad : {"0", "-1", "1025", "two", "2x", "", " 2"}) {
    Result<int> n = cpu::parse_num_threads(bad);
    const std::string quoted = fmt::format("'{}'", bad);
    EXPECT_TRUE(IsError(n.status(), ErrorCode::InvalidArgument, {quoted, "1 to 1024", "auto"})) << bad;
  }
}

#ifdef _OPENMP
TEST(CpuParallelism, AScopeSetsTheCallersCountAndRestoresIt) {
  const int before = cpu::current_num_threads();
  {
    ThreadCountScope three(3);
    EXPECT_EQ(cpu::current_num_threads(), 3);
    // Per thread: another thread still sees the default.
    int other = 0;
    std::thread([&] { other = cpu::current_num_threads(); }).join();
    EXPECT_EQ(other, cpu::default_num_threads());
    {
      ThreadCountScope one(1);
      EXPECT_EQ(cpu::current_num_threads(), 1);
    }
    EXPECT_EQ(cpu::current_num_threads(), 3);
  }
  EXPECT_EQ(cpu::current_num_threads(), before);
}

// A caller's own OpenMP setting (omp_set_num_threads, or a library's in the same process)
// is what a run leaves behind, not planrt's default.
TEST(CpuParallelism, AScopeRestoresTheCallersOwnOpenMpSetting) {
  std::thread([] {
    omp_set_num_threads(5);
    { ThreadCountScope one(1); }
    EXPECT_EQ(omp_get_max_threads(), 5);
  }).join();
}
#endif

TEST(CpuParallelism, ParallelForCoversEveryIndexOnceAndKeepsSmallWorkWhole) {
  ThreadCountScope three(3);
  for (int64_t count : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000}}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
    std::atomic<int> ranges{0};
    ASSERT_TRUE(cpu::parallel_for(count, 1, [&](int64_t begin, int64_t end) {
                  ranges.fetch_add(1);
                  for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
                }).ok());
    for (int64_t i = 0; i < count; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << count << " " << i;
    EXPECT_LE(ranges.load(), 3);
  }
  std::atomic<int> ranges{0};
  ASSERT_TRUE(cpu::parallel_for(100, 1000, [&](int64_t, int64_t) { ranges.fetch_add(1); }).ok());
  EXPECT_EQ(ranges.load(), 1);
  ASSERT_TRUE(cpu::parallel_for(0, 1, [&](int64_t, int64_t) { ranges.fetch_add(1); }).ok());
  EXPECT_EQ(ranges.load(), 1);
}

// Each thread gets at least `grain` items: 1.9 grains of work stay on one thread, 2 grains
// may split in two (a team of 3 allows both), so that work that would cost less than waking a
// thread is not split.
TEST(CpuParallelism, EveryRangeHoldsAtLeastAGrain) {
  ThreadCountScope three(3);
  for (const auto& [count, most] : {std::pair<int64_t, int>{19, 1}, {20, 2}, {29, 2}, {30, 3}, {3000, 3}}) {
    std::atomic<int> ranges{0};
    std::atomic<int64_t> smallest{INT64_MAX};
    ASSERT_TRUE(cpu::parallel_for(count, 10, [&](int64_t begin, int64_t end) {
                  ranges.fetch_add(1);
                  int64_t seen = smallest.load();
                  while (end - begin < seen && !smallest.compare_exchange_weak(seen, end - begin)) {
                  }
                }).ok());
    EXPECT_LE(ranges.load(), most) << count;
    EXPECT_GE(smallest.load(), 10) << count;
  }
}

TEST(CpuParallelism, ThreadsForWorkGivesEachAtLeastItsShareAndStaysInBounds) {
  EXPECT_EQ(cpu::threads_for_work(2, 0, 1000), 1);
  EXPECT_EQ(cpu::threads_for_work(2, 1999, 1000), 1);
  EXPECT_EQ(cpu::threads_for_work(2, 2000, 1000), 2);
  EXPECT_EQ(cpu::threads_for_work(4, 3500, 1000), 3);
  EXPECT_EQ(cpu::threads_for_work(4, INT64_MAX, 1000), 4);
  EXPECT_EQ(cpu::threads_for_work(4, 5000, 0), 4);  // no share given: every thread
  EXPECT_EQ(cpu::threads_for_work(0, 5000, 1000), 1);
}

// Nothing a loop body throws leaves the loop: it becomes the loop's error, after every range
// ran (the other ranges' work is done).
TEST(CpuParallelism, AnExceptionInALoopBodyBecomesAnErrorNotATermination) {
  ThreadCountScope two(2);
  std::atomic<int> ran{0};
  Status s = cpu::parallel_for(1000, 1, [&](int64_t begin, int64_t) {
    ran.fetch_add(1);
    if (begin == 0) throw std::bad_alloc();
  });
  EXPECT_TRUE(IsError(s, ErrorCode::OutOfMemory, {"1000 items", "out of memory"}));
  EXPECT_GE(ran.load(), 1);
  s = cpu::parallel_for(10, 1, [&](int64_t, int64_t) { throw 3; });
  EXPECT_TRUE(IsError(s, ErrorCode::Internal, {"exception"}));
}

// Each op's work split over threads gives the same values as one thread: rows (norms,
// softmax), attention tasks and pointwise pieces are independent, so bit for bit; the
// products within 1e-6 (the library may split a sum differently).
TEST(CpuParallelism, KernelsGiveTheSameResultsOnOneAndTwoWorkers) {
  HostTensor x = HostTensor::random({96, 512}, 11, -3.0f, 3.0f);
  HostTensor w = HostTensor::random({256, 512}, 12);
  HostTensor g = HostTensor::random({512}, 13);
  HostTensor b = HostTensor::random({512}, 14);
  HostTensor q = HostTensor::random({1, 4, 96, 32}, 15);
  HostTensor k = HostTensor::random({1, 4, 300, 32}, 16);
  HostTensor v = HostTensor::random({1, 4, 300, 32}, 17);
  struct Run {
    const char* op;
    std::vector<TensorView> in;
    Shape out;
    bool exact;
  };
  const std::vector<Run> runs = {
      {"gelu", {x.view()}, Shape({96, 512}), true},
      {"layer_norm", {x.view(), g.view(), b.view()}, Shape({96, 512}), true},
      {"softmax", {x.view()}, Shape({96, 512}), true},
      {"add", {x.view(), x.view()}, Shape({96, 512}), true},
      {"scaled_dot_product_attention", {q.view(), k.view(), v.view()}, Shape({1, 4, 96, 32}), true},
      {"linear", {x.view(), w.view()}, Shape({96, 256}), false},
  };
  for (const Run& r : runs) {
    HostTensor one(DType::F32, r.out), two(DType::F32, r.out);
    {
      ThreadCountScope scope(1);
      ASSERT_TRUE(run_op(r.op, {}, r.in, {one.view()}).ok()) << r.op;
    }
    {
      ThreadCountScope scope(2);
      ASSERT_TRUE(run_op(r.op, {}, r.in, {two.view()}).ok()) << r.op;
    }
    if (r.exact) {
      for (int64_t i = 0; i < one.numel(); ++i) ASSERT_EQ(one.f()[i], two.f()[i]) << r.op << " " << i;
    } else {
      EXPECT_LT(testing::relative_error(two, one.doubles()), 1e-6) << r.op;
    }
  }
}

}  // namespace
}  // namespace planrt::kernels
