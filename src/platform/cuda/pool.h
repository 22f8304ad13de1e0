// The warm private pool (docs/design.md §5): where the stream-ordered temporaries of planrt's CUDA
// code come from, one pool per device. Private to planrt (not installed): users read its
// statistics through planrt/platform/cuda.h.
//
// Why a pool of our own: the stream-ordered allocator gives freed memory back to the driver
// at every synchronization while the pool's release threshold is 0 (the default), so an
// inference that synchronizes maps its temporaries again on every call (the measured cost:
// docs/design.md §5, bench/results/cuda_pool.jsonl). Raising the threshold on the device's DEFAULT
// pool would make every other user of cudaMallocAsync in the process retain memory, and
// trimming it would throw their cache away; a pool created here (cudaMemPoolCreate) keeps
// the threshold and the trims to planrt.
//
// Behaviour:
// - PoolHandle::acquire(device, options) makes one more user of the device's pool. The
//   first user configures it: the private pool is created once per device and kept for the
//   process (its release threshold set to options.release_threshold, UINT64_MAX by
//   default, so freed blocks stay reserved across synchronizations); with
//   options.use_private_pool = false the device's default pool is used instead, untouched
//   (for A/B measurements). Options are fixed while the device has users; acquiring with
//   different options then is an InvalidArgument error. A failure to create the pool is
//   returned (never a silent fallback to the default pool).
// - allocate()/deallocate() are cudaMallocFromPoolAsync/cudaFreeAsync on the caller's
//   stream, which must belong to the handle's device.
// - Release: when the LAST handle on a device is destroyed, the frees its handles queued are
//   made visible on a stream the pool owns (each handle's last free is fenced by an event;
//   the pool's own stream waits on those events and is synchronized), then the pool is
//   trimmed to zero (cudaMemPoolTrimTo(pool, 0)) and the device's graph memory is trimmed
//   (cudaDeviceGraphMemTrim). The fence is what makes the release whole even when the
//   caller destroyed its stream without synchronizing: the reference released less than
//   the whole pool because its frees sat on a stream already destroyed. Only this runtime's
//   work is waited for, never the whole device. Live allocations are never released.
//   NOTE cudaDeviceGraphMemTrim is device-wide: it also gives back unused graph memory that
//   other code in this process cached on that device (they pay to map it again); memory
//   allocated while a CUDA graph is captured belongs to that graph pool, which no pool trim
//   reaches, so without it a graph-captured method would hold its footprint for the life
//   of the process. With the default pool, the release trims only the graph memory (the
//   default pool is not ours to trim; its threshold 0 returns memory at synchronization).
// - Statistics per device (pool_stats): reserved/used current and high-water from the
//   pool's attributes, allocations, frees, trims, users.
//
// Thread safety: acquire, release and pool_stats may run concurrently from any threads. A
// registry mutex guards only find-or-create of a device's slot (no CUDA call under it);
// each device has its own mutex for configuration and release, so devices never wait on
// each other. The release synchronizes the pool's own stream under the device's mutex:
// an acquire on the same device waits for it. One handle is used by one thread at a time
// (allocate/deallocate on different handles may run concurrently). Errors name the device
// and the byte count; nothing here throws or aborts.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <limits>

#include "planrt/core/result.h"
#include "planrt/platform/cuda.h"
#include "platform/cuda/stream.h"

namespace planrt::cuda {

struct PoolOptions {
  bool use_private_pool = true;  // false: the device's default pool (A/B only)
  uint64_t release_threshold = std::numeric_limits<uint64_t>::max();  // private pool only
  friend bool operator==(const PoolOptions&, const PoolOptions&) = default;
};

namespace detail {
struct DeviceSlot;
}

class PoolHandle {
 public:
  PoolHandle() = default;
  // One more user of `device`'s pool; configures the pool when it has no user.
  static Result<PoolHandle> acquire(int device, const PoolOptions& options = {});

  PoolHandle(PoolHandle&& other) noexcept;
  PoolHandle& operator=(PoolHandle&& other) noexcept;
  PoolHandle(const PoolHandle&) = delete;
  PoolHandle& operator=(const PoolHandle&) = delete;
  ~PoolHandle() { reset(); }

  // Stream-ordered: usable on `stream` once the call returns. Zero bytes: nullptr.
  // OutOfMemory names the device and the byte count; the error is cleared.
  Result<void*> allocate(size_t nbytes, cudaStream_t stream);
  // Frees `ptr` (from allocate on any handle of this device) in order on `stream`, and
  // fences the free so the release can see it even after `stream` is destroyed.
  Status deallocate(void* ptr, cudaStream_t stream);
  // Gives back now what is freed and not in use, as the last handle's destruction does
  // (this handle's frees are waited for; other live handles' later frees are not).
  Status release_unused();
  // Stops being a user; the last user's reset releases the device's pool. Never throws;
  // errors of the release are logged.
  void reset();

  bool empty() const { return slot_ == nullptr; }
  int device() const { return device_; }
  cudaMemPool_t pool() const { return pool_; }
  bool private_pool() const { return private_; }

 private:
  Status fence(cudaStream_t stream);

  detail::DeviceSlot* slot_ = nullptr;
  int device_ = -1;
  cudaMemPool_t pool_ = nullptr;
  bool private_ = true;
  Event fence_;                        // recorded after this handle's last free
  cudaStream_t fence_stream_ = nullptr;  // the stream of that record (compared, never used)
  bool fenced_ = false;
};

// Gives back what the device's pool holds and no one uses (trim_cuda_pool, planrt/platform/cuda.h).
Status trim_pool(int device);

// The device's statistics (see planrt/platform/cuda.h).
Result<CudaPoolStats> pool_stats(int device);

namespace testing {
// While on, acquiring the private pool of a device that has no users fails as if
// cudaMemPoolCreate had failed (for the test that the pool is really created and used).
void fail_pool_creation(bool on);
}  // namespace testing

}  // namespace planrt::cuda
