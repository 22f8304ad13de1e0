// The device copies of program constants (weights), shared by every CUDA segment and CUDA
// engine that reads them. Private to src/backends.
//
// Contract:
// - acquire_all(device, requests): the device copy of each request's host bytes, uploading
//   those not yet resident; one more reference to each. Keyed by the constant's host bytes
//   (address and size in the program's mapping, valid while any method of that program
//   exists), so two segments, two methods or a method loaded twice share one copy.
// - release(device, host, nbytes): one reference less; the copy goes with its last one.
// - All or nothing: when an upload fails, the references this call took are given back and
//   what it allocated is freed before the error returns.
//
// Placement: cudaMalloc rounds every allocation above 1 MiB up to 2 MiB pages and packs
// smaller ones into shared pages (bench/results/malloc_granularity.jsonl: resnet18's 42
// constants, 44.6 MiB, took 56 MiB one allocation each and 46 MiB as one). So one call's
// new constants above kPackAbove bytes are packed, 256-byte aligned, into one allocation
// (a slab): the rounding is then at most one page per call instead of up to one per
// constant, and never more than separate allocations would take. Smaller constants get
// their own allocation, which the driver already packs. A slab is freed when the last of
// its constants is released: until then it keeps the bytes of its released constants too
// (a method unloaded while another still reads one of its weights frees less than its
// weights), which allocated_bytes_on() counts and the ledger's weights line shows.
//
// Thread safety: every member may be called from any thread (one mutex, held through a
// call's uploads, so that two loads never upload one constant twice: concurrent loads of
// new weights upload one after the other).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "planrt/backends/cuda.h"
#include "planrt/core/result.h"
#include "platform/device_pages.h"

namespace planrt::backends {

struct WeightRequest {
  std::span<const uint8_t> host;  // non-empty
  std::string_view name;          // for errors
};

class WeightCache {
 public:
  static constexpr size_t kPackAbove = device_pages::kPackedAtOrBelow;
  static constexpr size_t kSlabAlignment = device_pages::kPackedAlignment;

  Result<std::vector<void*>> acquire_all(int device, std::span<const WeightRequest> requests);
  void release(int device, const uint8_t* host, size_t nbytes);

  // Constant bytes resident on `device` now (what the constants hold, not the pages).
  uint64_t resident_bytes_on(int device);
  // Bytes of the allocations holding them on `device`: the constants, the slabs' alignment
  // padding and what released constants leave in a slab still in use.
  uint64_t allocated_bytes_on(int device);
  void stats(CudaBackendStats& out);

 private:
  struct Key {
    int device;
    const uint8_t* host;
    size_t nbytes;
    friend bool operator<(const Key& a, const Key& b) {
      if (a.device != b.device) return a.device < b.device;
      if (a.host != b.host) return a.host < b.host;
      return a.nbytes < b.nbytes;
    }
  };
  // One device allocation holding one or more constants.
  struct Allocation {
    void* base = nullptr;
    size_t nbytes = 0;
    int device = 0;
    int64_t constants = 0;  // live constants placed in it
  };
  struct Entry {
    void* device_ptr = nullptr;
    int64_t refs = 0;
    Allocation* allocation = nullptr;  // owned by allocations_
  };

  // Frees `a` when its last constant has gone. Caller holds mu_.
  void drop_constant_locked(Allocation* a);

  std::mutex mu_;
  std::map<Key, Entry> entries_;
  std::map<void*, Allocation> allocations_;  // by base address
  int64_t uploads_ = 0;
  uint64_t resident_bytes_ = 0;
};

WeightCache& weight_cache();

}  // namespace planrt::backends
