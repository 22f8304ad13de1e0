// The warm private pool (docs/design.md §5). Each mutation test names, above it, the mutation of
// src/platform/cuda/pool.cpp it is there to kill. Every test gives back its handles, so
// each starts from a device with no pool users.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "planrt/platform/cuda.h"
#include "platform/cuda/pool.h"
#include "platform/cuda/stream.h"
#include "support/gpu.h"

namespace planrt {
namespace {

using cuda::PoolHandle;
using cuda::PoolOptions;

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kBlock = 64 * kMiB;

#define ASSERT_OK(expr)                                  \
  do {                                                   \
    ::planrt::Status planrt_s_ = (expr);                 \
    ASSERT_TRUE(planrt_s_.ok()) << planrt_s_.to_string(); \
  } while (0)

CudaPoolStats stats_of(int device) {
  Result<CudaPoolStats> s = cuda::pool_stats(device);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? *s : CudaPoolStats{};
}

uint64_t pool_attr(cudaMemPool_t pool, cudaMemPoolAttr attr) {
  uint64_t v = 0;
  EXPECT_EQ(cudaMemPoolGetAttribute(pool, attr, &v), cudaSuccess);
  return v;
}

uint64_t graph_reserved(int device) {
  uint64_t v = 0;
  EXPECT_EQ(cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrReservedMemCurrent, &v),
            cudaSuccess);
  return v;
}

cuda::Stream make_stream(int device) {
  auto s = cuda::Stream::create(device);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(s).value() : cuda::Stream();
}

// Allocates `n` bytes, touches them, frees them and synchronizes the stream: the pattern of
// one inference's temporaries.
void allocate_touch_free_sync(PoolHandle& h, size_t n, cudaStream_t s) {
  Result<void*> p = h.allocate(n, s);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(cudaMemsetAsync(*p, 1, n, s), cudaSuccess);
  ASSERT_OK(h.deallocate(*p, s));
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
}

// Restores the pool-creation hook even when an assertion returns early.
struct FailPoolCreation {
  FailPoolCreation() { cuda::testing::fail_pool_creation(true); }
  ~FailPoolCreation() { cuda::testing::fail_pool_creation(false); }
};

// Mutation killed: forcing pool creation to fail (acquire then errors), and any fallback
// that serves the handle from the device's default pool.
TEST(WarmPool, ServesAllocationsFromItsOwnPoolNotTheDefaultPool) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  cudaMemPool_t default_pool = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&default_pool, 0), cudaSuccess);
  const uint64_t default_used_before = pool_attr(default_pool, cudaMemPoolAttrUsedMemCurrent);
  const int64_t allocations_before = stats_of(0).allocations;

  Result<PoolHandle> h = PoolHandle::acquire(0);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_TRUE(h->private_pool());
  EXPECT_NE(h->pool(), default_pool);
  cuda::Stream s = make_stream(0);
  Result<void*> p = h->allocate(8 * kMiB, s.get());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(cudaMemsetAsync(*p, 0, 8 * kMiB, s.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);

  CudaPoolStats st = stats_of(0);
  EXPECT_TRUE(st.pool_created);
  EXPECT_TRUE(st.private_pool);
  EXPECT_GE(st.used_bytes, 8 * kMiB);
  EXPECT_EQ(st.allocations, allocations_before + 1);
  EXPECT_EQ(st.users, 1);
  // Served by the private pool, so the default pool lent nothing more.
  EXPECT_EQ(pool_attr(default_pool, cudaMemPoolAttrUsedMemCurrent), default_used_before);
  ASSERT_EQ(cudaMemPoolGetAttribute(h->pool(), cudaMemPoolAttrUsedMemCurrent, &st.used_bytes),
            cudaSuccess);
  EXPECT_GE(st.used_bytes, 8 * kMiB);
  ASSERT_OK(h->deallocate(*p, s.get()));
  ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
}

// Mutation killed: swallowing a failed cudaMemPoolCreate (falling back to the default pool).
TEST(WarmPool, FailedPoolCreationIsReturnedNamingTheDevice) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  {
    FailPoolCreation fail;
    Result<PoolHandle> h = PoolHandle::acquire(0);
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(h.status().code(), ErrorCode::OutOfMemory) << h.status().to_string();
    EXPECT_NE(h.status().message().find("cuda:0"), std::string::npos) << h.status().message();
    EXPECT_NE(h.status().message().find("cudaMemPoolCreate"), std::string::npos);
  }
  EXPECT_EQ(stats_of(0).users, 0);  // the failed acquire left no user behind
  Result<PoolHandle> h = PoolHandle::acquire(0);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_TRUE(h->private_pool());
}

// Mutation killed: dropping the release threshold (CUDA's default 0 gives the block back to
// the driver at the synchronize).
TEST(WarmPool, FreedBlockStaysReservedAcrossSynchronize) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  Result<PoolHandle> h = PoolHandle::acquire(0);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  cuda::Stream s = make_stream(0);
  allocate_touch_free_sync(*h, kBlock, s.get());
  ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);  // a second observer of the free

  CudaPoolStats st = stats_of(0);
  EXPECT_EQ(st.release_threshold, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(st.used_bytes, 0u);
  EXPECT_GE(st.reserved_bytes, kBlock);
  // Warm: the same size again maps nothing new.
  const uint64_t reserved = st.reserved_bytes;
  allocate_touch_free_sync(*h, kBlock, s.get());
  EXPECT_EQ(stats_of(0).reserved_bytes, reserved);
}

// The control for the test above: the threshold option is honoured, and with 0 the driver
// does give a freed block back at the synchronize (so the test above can fail).
TEST(WarmPool, ZeroReleaseThresholdGivesFreedBlocksBackAtSynchronize) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  PoolOptions zero;
  zero.release_threshold = 0;
  Result<PoolHandle> h = PoolHandle::acquire(0, zero);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  cuda::Stream s = make_stream(0);
  allocate_touch_free_sync(*h, kBlock, s.get());
  ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
  CudaPoolStats st = stats_of(0);
  EXPECT_EQ(st.release_threshold, 0u);
  EXPECT_LT(st.reserved_bytes, kBlock);
}

// Mutation killed: dropping the trim (cudaMemPoolTrimTo) from the last handle's release.
TEST(WarmPool, LastHandleReleaseReturnsReservedMemory) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  Result<PoolHandle> h = PoolHandle::acquire(0);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  ASSERT_EQ(stats_of(0).users, 1);
  Result<PoolHandle> second = PoolHandle::acquire(0);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  cuda::Stream s = make_stream(0);
  allocate_touch_free_sync(*h, kBlock, s.get());
  allocate_touch_free_sync(*second, 2 * kBlock, s.get());
  CudaPoolStats before = stats_of(0);
  ASSERT_GE(before.reserved_bytes, 2 * kBlock);  // something to give back

  h->reset();  // not the last: nothing is released yet
  EXPECT_EQ(stats_of(0).reserved_bytes, before.reserved_bytes);
  EXPECT_EQ(stats_of(0).trims, before.trims);
  second->reset();  // the last
  CudaPoolStats after = stats_of(0);
  EXPECT_EQ(after.users, 0);
  EXPECT_EQ(after.reserved_bytes, 0u);
  EXPECT_EQ(after.trims, before.trims + 1);
}

// Mutation killed: not fencing the frees onto the pool's own stream (synchronizing nothing,
// or only what the caller synchronized): the reference's hazard, frees queued on a stream
// that is destroyed before the release, so the trim gave back less than the pool.
TEST(WarmPool, ReleaseReturnsFreesQueuedOnAStreamAlreadyDestroyed) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  Result<PoolHandle> h = PoolHandle::acquire(0);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  {
    cuda::Stream s = make_stream(0);
    Result<void*> p = h->allocate(kBlock, s.get());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    // Enough queued work that the free is still pending when the stream goes away.
    for (int i = 0; i < 32; ++i) ASSERT_EQ(cudaMemsetAsync(*p, i, kBlock, s.get()), cudaSuccess);
    ASSERT_OK(h->deallocate(*p, s.get()));
  }  // destroyed without a synchronize
  h->reset();
  EXPECT_EQ(stats_of(0).reserved_bytes, 0u);
  EXPECT_EQ(stats_of(0).used_bytes, 0u);
}

// Mutation killed: trimming too much (a release that frees or drops memory still lent out,
// e.g. destroying and recreating the pool, or freeing tracked allocations, instead of
// cudaMemPoolTrimTo(pool, 0), which keeps what is in use).
TEST(WarmPool, ReleaseLeavesALiveAllocationReserved) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  Result<PoolHandle> h = PoolHandle::acquire(0);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  cuda::Stream s = make_stream(0);
  const size_t live_bytes = 32 * kMiB;
  std::vector<uint32_t> pattern(live_bytes / sizeof(uint32_t));
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint32_t>(i * 2654435761u);
  Result<void*> live = h->allocate(live_bytes, s.get());
  ASSERT_TRUE(live.ok()) << live.status().to_string();
  ASSERT_EQ(cudaMemcpyAsync(*live, pattern.data(), live_bytes, cudaMemcpyHostToDevice, s.get()),
            cudaSuccess);
  allocate_touch_free_sync(*h, kBlock, s.get());

  ASSERT_OK(h->release_unused());
  CudaPoolStats st = stats_of(0);
  EXPECT_GE(st.used_bytes, live_bytes);
  EXPECT_GE(st.reserved_bytes, live_bytes);
  std::vector<uint32_t> back(pattern.size(), 0);
  ASSERT_EQ(cudaMemcpy(back.data(), *live, live_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, pattern);
  ASSERT_EQ(cudaMemsetAsync(*live, 0, live_bytes, s.get()), cudaSuccess);  // still usable

  ASSERT_OK(h->deallocate(*live, s.get()));
  h->reset();
  EXPECT_EQ(stats_of(0).reserved_bytes, 0u);
}

// Mutation killed: dropping the graph trim (cudaDeviceGraphMemTrim) from the release.
TEST(WarmPool, GraphMemoryGoesBackAfterRelease) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  ASSERT_EQ(cudaDeviceGraphMemTrim(0), cudaSuccess);  // start from what others left
  const uint64_t graph_before = graph_reserved(0);
  Result<PoolHandle> h = PoolHandle::acquire(0);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  cuda::Stream s = make_stream(0);

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
  void* raw = nullptr;  // the way a compiled graph module allocates
  ASSERT_EQ(cudaMallocAsync(&raw, kBlock, s.get()), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(raw, 0, 256, s.get()), cudaSuccess);
  Result<void*> pooled = h->allocate(kBlock, s.get());  // through the handle, inside capture
  ASSERT_TRUE(pooled.ok()) << pooled.status().to_string();
  ASSERT_EQ(cudaMemsetAsync(*pooled, 0, 256, s.get()), cudaSuccess);
  ASSERT_OK(h->deallocate(*pooled, s.get()));
  ASSERT_EQ(cudaFreeAsync(raw, s.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(s.get(), &graph), cudaSuccess);

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s.get()), cudaSuccess);
  ASSERT_GT(graph_reserved(0), graph_before) << "the graph mapped no graph memory to give back";

  h->reset();  // the last handle
  EXPECT_EQ(graph_reserved(0), 0u);
}

TEST(WarmPool, OutOfMemoryNamesDeviceAndBytesAndTheNextAllocationWorks) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  Result<PoolHandle> h = PoolHandle::acquire(0);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  cuda::Stream s = make_stream(0);
  const size_t absurd = size_t{1} << 50;
  Result<void*> p = h->allocate(absurd, s.get());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::OutOfMemory) << p.status().to_string();
  EXPECT_NE(p.status().message().find("cuda:0"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find(std::to_string(absurd)), std::string::npos);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  allocate_touch_free_sync(*h, kMiB, s.get());
}

TEST(WarmPool, OptionsAreFixedWhileInUseAndTheDefaultPoolIsAvailableForComparison) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  PoolOptions default_pool;
  default_pool.use_private_pool = false;
  {
    Result<PoolHandle> h = PoolHandle::acquire(0);
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    Result<PoolHandle> other = PoolHandle::acquire(0, default_pool);
    ASSERT_FALSE(other.ok());
    EXPECT_EQ(other.status().code(), ErrorCode::InvalidArgument) << other.status().to_string();
    EXPECT_NE(other.status().message().find("cuda:0"), std::string::npos);
  }
  cudaMemPool_t device_default = nullptr;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&device_default, 0), cudaSuccess);
  const uint64_t threshold_before = pool_attr(device_default, cudaMemPoolAttrReleaseThreshold);
  Result<PoolHandle> h = PoolHandle::acquire(0, default_pool);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_FALSE(h->private_pool());
  EXPECT_EQ(h->pool(), device_default);
  cuda::Stream s = make_stream(0);
  allocate_touch_free_sync(*h, kMiB, s.get());
  EXPECT_FALSE(stats_of(0).private_pool);
  h->reset();
  // The default pool belongs to the whole process: its threshold is never changed.
  EXPECT_EQ(pool_attr(device_default, cudaMemPoolAttrReleaseThreshold), threshold_before);
}

TEST(WarmPool, StatisticsOfAMissingDeviceAreAnError) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  Result<CudaPoolStats> st = cuda_pool_stats(Device::cuda(count));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("cuda:" + std::to_string(count)), std::string::npos);
  EXPECT_EQ(cuda_pool_stats(Device::cpu()).status().code(), ErrorCode::InvalidArgument);
  Result<PoolHandle> h = PoolHandle::acquire(count);
  EXPECT_FALSE(h.ok());
}

// Mutation killed: serving or trimming the wrong device (a missing device guard, one pool
// shared by all devices, or a release that trims every device).
TEST(WarmPool, TwoDevicesAllocateAndTrimIndependently) {
  PLANRT_REQUIRE_GPUS_OR_SKIP(2);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const CudaPoolStats dev0_before = stats_of(0);

  Result<PoolHandle> h1 = PoolHandle::acquire(1);
  ASSERT_TRUE(h1.ok()) << h1.status().to_string();
  cuda::Stream s1 = make_stream(1);
  Result<void*> p = h1->allocate(kBlock, s1.get());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0);  // the caller's device is unchanged
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, *p), cudaSuccess);
  EXPECT_EQ(attr.device, 1);
  ASSERT_EQ(cudaMemsetAsync(*p, 0, kBlock, s1.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s1.get()), cudaSuccess);
  EXPECT_GE(stats_of(1).used_bytes, kBlock);
  EXPECT_EQ(stats_of(0).used_bytes, dev0_before.used_bytes);  // device 0 untouched
  EXPECT_EQ(stats_of(0).allocations, dev0_before.allocations);
  ASSERT_OK(h1->deallocate(*p, s1.get()));
  ASSERT_EQ(cudaStreamSynchronize(s1.get()), cudaSuccess);

  Result<PoolHandle> h0 = PoolHandle::acquire(0);
  ASSERT_TRUE(h0.ok()) << h0.status().to_string();
  cuda::Stream s0 = make_stream(0);
  allocate_touch_free_sync(*h0, kBlock, s0.get());
  ASSERT_GE(stats_of(0).reserved_bytes, kBlock);
  ASSERT_GE(stats_of(1).reserved_bytes, kBlock);
  const int64_t dev0_trims = stats_of(0).trims;

  h1->reset();  // the last user of device 1 only
  EXPECT_EQ(stats_of(1).reserved_bytes, 0u);
  EXPECT_GE(stats_of(0).reserved_bytes, kBlock);
  EXPECT_EQ(stats_of(0).trims, dev0_trims);
  h0->reset();
  EXPECT_EQ(stats_of(0).reserved_bytes, 0u);
}

}  // namespace
}  // namespace planrt
