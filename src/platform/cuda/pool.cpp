#include "platform/cuda/pool.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "planrt/core/log.h"
#include "platform/cuda/cuda_status.h"
#include "platform/cuda/device_guard.h"
#include "platform/cuda/fault_injection.h"

namespace planrt::cuda {
namespace detail {

struct DeviceSlot {
  explicit DeviceSlot(int d) : device(d) {}
  const int device;
  std::mutex mu;  // configuration, users, release
  cudaMemPool_t private_pool = nullptr;  // created once, kept for the process
  cudaMemPool_t active = nullptr;        // set while users == 0 only
  PoolOptions options;
  bool configured = false;
  Stream release_stream;  // the stream the release makes every fenced free visible on
  int64_t users = 0;
  std::atomic<int64_t> allocations{0};
  std::atomic<int64_t> frees{0};
  std::atomic<int64_t> trims{0};
};

}  // namespace detail

namespace {

using detail::DeviceSlot;

std::atomic<bool> g_fail_pool_creation{false};

struct Registry {
  std::mutex mu;  // find-or-create only; no CUDA call under it
  std::map<int, std::unique_ptr<DeviceSlot>> slots;
};

Registry& registry() {
  // Leaked on purpose: at static destruction the CUDA runtime may already be gone, and a
  // slot's stream must not be destroyed then. The driver reclaims everything at exit.
  static Registry* r = new Registry;
  return *r;
}

DeviceSlot& slot_for(int device) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto& slot = r.slots[device];
  if (!slot) slot = std::make_unique<DeviceSlot>(device);
  return *slot;
}

DeviceSlot* find_slot(int device) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.slots.find(device);
  return it == r.slots.end() ? nullptr : it->second.get();
}

std::string describe(const PoolOptions& o) {
  if (!o.use_private_pool) return "the default pool";
  return fmt::format("a private pool with release threshold {}", o.release_threshold);
}

// Under slot.mu with no users.
Status configure(DeviceSlot& slot, const PoolOptions& options) {
  const int device = slot.device;
  PLANRT_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::set(device));
  int supported = 0;
  PLANRT_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device),
      "cudaDeviceGetAttribute(MemoryPoolsSupported)", device);
  if (supported == 0) {
    return make_error(ErrorCode::NotSupported,
                      "cuda:{} does not support stream-ordered memory pools", device);
  }
  if (slot.release_stream.empty()) {
    auto stream = Stream::create(device);
    if (!stream.ok()) return stream.status().with_context("creating the pool's release stream");
    slot.release_stream = std::move(stream).value();
  }
  cudaMemPool_t pool = nullptr;
  if (options.use_private_pool) {
    if (g_fail_pool_creation.load()) {
      return cuda_error(cudaErrorMemoryAllocation,
                        "creating the warm pool (cudaMemPoolCreate, forced to fail by a test)",
                        device);
    }
    if (slot.private_pool == nullptr) {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.handleTypes = cudaMemHandleTypeNone;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device;
      PLANRT_CUDA_RETURN_IF_ERROR(cudaMemPoolCreate(&slot.private_pool, &props),
                                  "creating the warm pool (cudaMemPoolCreate)", device);
    }
    pool = slot.private_pool;
    uint64_t threshold = options.release_threshold;  // attribute type cuuint64_t
    PLANRT_CUDA_RETURN_IF_ERROR(
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
        "setting the warm pool's release threshold", device);
  } else {
    PLANRT_CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&pool, device),
                                "cudaDeviceGetDefaultMemPool", device);
  }
  slot.active = pool;
  slot.options = options;
  slot.configured = true;
  return {};
}

// Under slot.mu. Every fenced free was made a dependency of the release stream before.
Status release(DeviceSlot& slot) {
  const int device = slot.device;
  PLANRT_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::set(device));
  Status first;
  auto keep = [&first](Status s) {
    if (first.ok() && !s.ok()) first = std::move(s);
  };
  // Waits for this runtime's frees only (not the whole device), and is the synchronization
  // that lets the driver see them, so the trim below can give them back.
  if (!slot.release_stream.empty()) keep(slot.release_stream.synchronize());
  if (slot.options.use_private_pool && slot.active != nullptr) {
    cudaError_t err = cudaMemPoolTrimTo(slot.active, 0);
    if (err != cudaSuccess) keep(cuda_error(err, "trimming the warm pool (cudaMemPoolTrimTo)", device));
  }
  // Device-wide (see pool.h): graph-captured allocations live in the graph pool.
  cudaError_t err = cudaDeviceGraphMemTrim(device);
  if (err != cudaSuccess) keep(cuda_error(err, "cudaDeviceGraphMemTrim", device));
  slot.trims.fetch_add(1, std::memory_order_relaxed);
  return first;
}

uint64_t pool_attribute(cudaMemPool_t pool, cudaMemPoolAttr attr, int device, Status* status) {
  uint64_t v = 0;
  cudaError_t err = cudaMemPoolGetAttribute(pool, attr, &v);
  if (err != cudaSuccess && status->ok()) *status = cuda_error(err, "cudaMemPoolGetAttribute", device);
  return v;
}

}  // namespace

Result<PoolHandle> PoolHandle::acquire(int device, const PoolOptions& options) {
  PLANRT_RETURN_IF_ERROR(check_cuda_device(device));
  // Created before the lock: an event is per handle and needs no coordination.
  auto fence = Event::create(device);
  if (!fence.ok()) return fence.status().with_context("creating a pool handle's fence event");
  DeviceSlot& slot = slot_for(device);
  std::lock_guard lock(slot.mu);
  if (slot.users == 0) {
    Status s = configure(slot, options);
    if (!s.ok()) return s;
  } else if (!(slot.options == options)) {
    return make_error(ErrorCode::InvalidArgument,
                      "the pool of cuda:{} is in use with {}; it cannot switch to {} until its "
                      "{} user(s) are gone",
                      device, describe(slot.options), describe(options), slot.users);
  }
  ++slot.users;
  PoolHandle h;
  h.slot_ = &slot;
  h.device_ = device;
  h.pool_ = slot.active;
  h.private_ = slot.options.use_private_pool;
  h.fence_ = std::move(fence).value();
  return h;
}

PoolHandle::PoolHandle(PoolHandle&& other) noexcept
    : slot_(std::exchange(other.slot_, nullptr)),
      device_(std::exchange(other.device_, -1)),
      pool_(std::exchange(other.pool_, nullptr)),
      private_(other.private_),
      fence_(std::move(other.fence_)),
      fence_stream_(std::exchange(other.fence_stream_, nullptr)),
      fenced_(std::exchange(other.fenced_, false)) {}

PoolHandle& PoolHandle::operator=(PoolHandle&& other) noexcept {
  if (this != &other) {
    reset();
    slot_ = std::exchange(other.slot_, nullptr);
    device_ = std::exchange(other.device_, -1);
    pool_ = std::exchange(other.pool_, nullptr);
    private_ = other.private_;
    fence_ = std::move(other.fence_);
    fence_stream_ = std::exchange(other.fence_stream_, nullptr);
    fenced_ = std::exchange(other.fenced_, false);
  }
  return *this;
}

Result<void*> PoolHandle::allocate(size_t nbytes, cudaStream_t stream) {
  if (slot_ == nullptr) {
    return make_error(ErrorCode::InvalidArgument, "allocating {} bytes from an empty pool handle",
                      nbytes);
  }
  if (nbytes == 0) return static_cast<void*>(nullptr);
  // A null stream is the legacy default stream of the CURRENT device: make it this one.
  PLANRT_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::set(device_));
  void* p = nullptr;
  cudaError_t err = injected_allocation_failure();
  if (err == cudaSuccess) err = cudaMallocFromPoolAsync(&p, nbytes, pool_, stream);
  if (err != cudaSuccess) {
    return cuda_error(err,
                      fmt::format("allocating {} bytes from the {} pool (cudaMallocFromPoolAsync)",
                                  nbytes, private_ ? "warm" : "default"),
                      device_);
  }
  slot_->allocations.fetch_add(1, std::memory_order_relaxed);
  return p;
}

Status PoolHandle::deallocate(void* ptr, cudaStream_t stream) {
  if (ptr == nullptr) return {};
  if (slot_ == nullptr) {
    return make_error(ErrorCode::InvalidArgument, "freeing through an empty pool handle");
  }
  PLANRT_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::set(device_));
  PLANRT_CUDA_RETURN_IF_ERROR(cudaFreeAsync(ptr, stream), "freeing pool memory (cudaFreeAsync)",
                              device_);
  slot_->frees.fetch_add(1, std::memory_order_relaxed);
  return fence(stream);
}

Status PoolHandle::fence(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  PLANRT_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing",
                              device_);
  // Inside a capture the free is a graph node (the graph trim covers it), and recording
  // there would pull the pool's stream into the capture.
  if (capture != cudaStreamCaptureStatusNone) return {};
  if (fenced_ && fence_stream_ != stream) {
    // Switching streams: hand the previous stream's last free to the release stream now,
    // while the event still holds it (the old stream may be destroyed later; it is not
    // touched here).
    PLANRT_RETURN_IF_ERROR(fence_.wait_on(slot_->release_stream.get()));
  }
  PLANRT_RETURN_IF_ERROR(fence_.record(stream));
  fenced_ = true;
  fence_stream_ = stream;
  return {};
}

Status PoolHandle::release_unused() {
  if (slot_ == nullptr) {
    return make_error(ErrorCode::InvalidArgument, "releasing through an empty pool handle");
  }
  std::lock_guard lock(slot_->mu);
  if (fenced_) PLANRT_RETURN_IF_ERROR(fence_.wait_on(slot_->release_stream.get()));
  return release(*slot_);
}

void PoolHandle::reset() {
  if (slot_ == nullptr) return;
  DeviceSlot& slot = *slot_;
  {
    std::lock_guard lock(slot.mu);
    if (fenced_) {
      Status s = fence_.wait_on(slot.release_stream.get());
      if (!s.ok()) PLANRT_LOG_ERROR("pool handle teardown: {}", s.to_string());
    }
    fence_.reset();  // the wait above already holds what it needs
    if (--slot.users == 0) {
      Status s = release(slot);
      if (!s.ok()) PLANRT_LOG_ERROR("releasing the pool of cuda:{}: {}", slot.device, s.to_string());
    }
  }
  slot_ = nullptr;
  device_ = -1;
  pool_ = nullptr;
  fence_stream_ = nullptr;
  fenced_ = false;
}

Status trim_pool(int device) {
  PLANRT_RETURN_IF_ERROR(check_cuda_device(device));
  DeviceSlot& slot = slot_for(device);
  std::lock_guard lock(slot.mu);
  if (!slot.configured) return {};  // planrt never used this device's pool: nothing to give back
  return release(slot);
}

Result<CudaPoolStats> pool_stats(int device) {
  PLANRT_RETURN_IF_ERROR(check_cuda_device(device));
  CudaPoolStats stats;
  stats.device = Device::cuda(device);
  DeviceSlot* slot = find_slot(device);
  if (slot == nullptr) return stats;
  std::lock_guard lock(slot->mu);
  stats.allocations = slot->allocations.load();
  stats.frees = slot->frees.load();
  stats.trims = slot->trims.load();
  stats.users = slot->users;
  if (!slot->configured) return stats;
  stats.pool_created = true;
  stats.private_pool = slot->options.use_private_pool;
  Status status;
  cudaMemPool_t pool = slot->active;
  stats.release_threshold = pool_attribute(pool, cudaMemPoolAttrReleaseThreshold, device, &status);
  stats.reserved_bytes = pool_attribute(pool, cudaMemPoolAttrReservedMemCurrent, device, &status);
  stats.reserved_high_bytes = pool_attribute(pool, cudaMemPoolAttrReservedMemHigh, device, &status);
  stats.used_bytes = pool_attribute(pool, cudaMemPoolAttrUsedMemCurrent, device, &status);
  stats.used_high_bytes = pool_attribute(pool, cudaMemPoolAttrUsedMemHigh, device, &status);
  if (!status.ok()) return status;
  return stats;
}

namespace testing {
void fail_pool_creation(bool on) { g_fail_pool_creation.store(on); }
}  // namespace testing

}  // namespace planrt::cuda

namespace planrt {

Status trim_cuda_pool(Device device) {
  if (device.type != DeviceType::CUDA) {
    return make_error(ErrorCode::InvalidArgument, "{} has no CUDA memory pool", to_string(device));
  }
  return cuda::trim_pool(device.index);
}

Result<CudaPoolStats> cuda_pool_stats(Device device) {
  if (device.type != DeviceType::CUDA) {
    return make_error(ErrorCode::InvalidArgument, "{} has no CUDA memory pool", to_string(device));
  }
  return cuda::pool_stats(device.index);
}

}  // namespace planrt
