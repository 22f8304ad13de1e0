// Device resources the CUDA-running backends (cuda, engine) share per device: uploaded
// weights and the cuBLAS handle. Private to src/backends.
//
// - WeightCache: a program constant resident on a device, uploaded on first use and shared
//   by every segment reading it, freed when the last one releases it. Keyed by the
//   constant's host bytes (address and size in the program's mapping, valid while any
//   method of that program exists).
// - shared_cublas(device, tf32): one cuBLAS handle per (device, TF32 mode): a handle holds
//   tens of MiB of device memory (docs/design.md §7 has the figure), so a handle per
//   segment made a model of many delegates pay it once per delegate. A handle
//   must not be used from two threads at once: hold `mu` from the first enqueue through the
//   last. The handle goes, with its memory, when the last user does.
// Thread safety: both may be used from any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <tuple>

#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cudnn_library.h"
#include "planrt/backends/cuda.h"
#include "planrt/core/result.h"
#include "platform/cuda/cuda_allocator.h"

namespace planrt::backends {


// One constant resident on one device, shared by every segment reading it.
struct WeightKey {
  int device;
  const uint8_t* host;
  size_t nbytes;
  friend bool operator<(const WeightKey& a, const WeightKey& b) {
    return std::tie(a.device, a.host, a.nbytes) < std::tie(b.device, b.host, b.nbytes);
  }
};

struct WeightEntry {
  void* device_ptr = nullptr;
  int64_t refs = 0;
};

class WeightCache {
 public:
  // The device copy of `host` (nbytes > 0), uploading it on first use; one more reference.
  Result<void*> acquire(int device, std::span<const uint8_t> host, std::string_view name) {
    std::lock_guard lock(mu_);
    WeightKey key{device, host.data(), host.size()};
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      ++it->second.refs;
      return it->second.device_ptr;
    }
    cuda::CudaAllocator& alloc = cuda::cuda_allocator();
    Device d = Device::cuda(device);
    Result<void*> p = alloc.allocate(host.size(), d);
    if (!p.ok()) {
      return p.status().with_context(fmt::format("uploading constant '{}' ({} bytes)", name, host.size()));
    }
    Status s = alloc.copy_host_to_device(*p, host.data(), host.size(), d);
    if (!s.ok()) {
      alloc.deallocate(*p, host.size(), d);
      return s.with_context(fmt::format("uploading constant '{}' ({} bytes)", name, host.size()));
    }
    entries_[key] = WeightEntry{*p, 1};
    ++uploads_;
    resident_bytes_ += host.size();
    return *p;
  }

  void release(int device, const uint8_t* host, size_t nbytes) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(WeightKey{device, host, nbytes});
    if (it == entries_.end()) return;
    if (--it->second.refs > 0) return;
    // cudaFree waits for the device, so work still reading the weight finishes first.
    cuda::cuda_allocator().deallocate(it->second.device_ptr, nbytes, Device::cuda(device));
    resident_bytes_ -= nbytes;
    entries_.erase(it);
  }

  // Bytes resident on `device` now.
  uint64_t resident_bytes_on(int device) {
    std::lock_guard lock(mu_);
    uint64_t bytes = 0;
    for (const auto& [key, entry] : entries_) bytes += key.device == device ? key.nbytes : 0;
    return bytes;
  }

  void stats(CudaBackendStats& out) {
    std::lock_guard lock(mu_);
    out.weight_uploads = uploads_;
    out.resident_weights = static_cast<int64_t>(entries_.size());
    out.resident_weight_bytes = resident_bytes_;
  }

 private:
  std::mutex mu_;
  std::map<WeightKey, WeightEntry> entries_;
  int64_t uploads_ = 0;
  uint64_t resident_bytes_ = 0;
};

WeightCache& weight_cache();

// The device's math-library handles: cuBLAS, and cuDNN once a segment with a convolution
// asks (ensure_cudnn), both used under `mu`.
struct SharedCublas {
  std::mutex mu;
  kernels::cuda::CublasHandle handle;
  bool allow_tf32 = false;
  kernels::cuda::CudnnHandle cudnn;  // empty until ensure_cudnn
  int device = 0;
  // Device memory each handle's creation added (cudaMemGetInfo around the call: the
  // libraries do not say; another thread allocating meanwhile would be counted too).
  // Atomics, so the ledger reads them without the handle's lock (a long run holds it).
  std::atomic<uint64_t> cublas_bytes{0};
  std::atomic<uint64_t> cudnn_bytes{0};
};

// What the live handles of `device` took when they were made (the ledger's line).
uint64_t library_handle_bytes(int device);

// The current device must be `device` (the handle binds to it).
Result<std::shared_ptr<SharedCublas>> shared_cublas(int device, bool allow_tf32);

// Opens cuDNN (the first time in the process) and makes the device's handle, unless made;
// the current device must be the handles' device. NotSupported naming libcudnn when it is
// absent: only methods with a CUDA convolution need it.
Status ensure_cudnn(SharedCublas& shared);

}  // namespace planrt::backends
