#include "backends/cuda/weight_cache.h"

#include <fmt/format.h>

#include "platform/cuda/cuda_allocator.h"

namespace planrt::backends {
using device_pages::round_up;

WeightCache& weight_cache() {
  static WeightCache* cache = new WeightCache();  // never destroyed: handles may outlive statics
  return *cache;
}

Result<std::vector<void*>> WeightCache::acquire_all(int device, std::span<const WeightRequest> requests) {
  std::lock_guard lock(mu_);
  std::vector<void*> out(requests.size(), nullptr);
  std::vector<Key> taken;        // references this call added, to give back on failure
  std::vector<size_t> to_place;  // requests not resident, first occurrence of each key
  std::map<Key, size_t> first_of;
  for (size_t k = 0; k < requests.size(); ++k) {
    const Key key{device, requests[k].host.data(), requests[k].host.size()};
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      ++it->second.refs;
      taken.push_back(key);
      out[k] = it->second.device_ptr;
    } else if (first_of.emplace(key, k).second) {
      to_place.push_back(k);
    }
  }

  Device d = Device::cuda(device);
  cuda::CudaAllocator& alloc = cuda::cuda_allocator();
  std::vector<void*> allocated;  // new allocations, freed on failure
  auto fail = [&](Status s, const WeightRequest& r) -> Status {
    for (void* p : allocated) {
      alloc.deallocate(p, allocations_.at(p).nbytes, d);
      allocations_.erase(p);
    }
    for (const Key& key : taken) {
      Entry& e = entries_.at(key);
      if (--e.refs == 0) entries_.erase(key);  // a constant placed by this call: its memory went above
    }
    return s.with_context(fmt::format("uploading constant '{}' ({} bytes) to cuda:{}", r.name, r.host.size(), device));
  };
  auto new_allocation = [&](size_t nbytes) -> Result<Allocation*> {
    PLANRT_ASSIGN_OR_RETURN(void* p, alloc.allocate(nbytes, d));
    allocated.push_back(p);
    Allocation& a = allocations_[p];
    a = Allocation{p, nbytes, device, 0};
    return &a;
  };
  auto place = [&](size_t k, Allocation* a, size_t offset) -> Status {
    const WeightRequest& r = requests[k];
    void* dst = static_cast<uint8_t*>(a->base) + offset;
    PLANRT_RETURN_IF_ERROR(alloc.copy_host_to_device(dst, r.host.data(), r.host.size(), d));
    const Key key{device, r.host.data(), r.host.size()};
    entries_[key] = Entry{dst, 1, a};
    taken.push_back(key);
    ++a->constants;
    return {};
  };

  // The large constants, packed into one slab.
  size_t slab_bytes = 0;
  const WeightRequest* first_large = nullptr;
  for (size_t k : to_place) {
    if (requests[k].host.size() <= kPackAbove) continue;
    slab_bytes = round_up(slab_bytes, kSlabAlignment) + requests[k].host.size();
    if (first_large == nullptr) first_large = &requests[k];
  }
  if (first_large != nullptr) {
    Result<Allocation*> slab = new_allocation(slab_bytes);
    if (!slab.ok()) {
      return fail(slab.status().with_context(fmt::format("packing the large constants ({} bytes)", slab_bytes)),
                  *first_large);
    }
    size_t offset = 0;
    for (size_t k : to_place) {
      if (requests[k].host.size() <= kPackAbove) continue;
      offset = round_up(offset, kSlabAlignment);
      if (Status s = place(k, *slab, offset); !s.ok()) return fail(std::move(s), requests[k]);
      offset += requests[k].host.size();
    }
  }
  // The small ones, one allocation each (the driver packs those into shared pages).
  for (size_t k : to_place) {
    if (requests[k].host.size() > kPackAbove) continue;
    Result<Allocation*> a = new_allocation(requests[k].host.size());
    if (!a.ok()) return fail(a.status(), requests[k]);
    if (Status s = place(k, *a, 0); !s.ok()) return fail(std::move(s), requests[k]);
  }

  for (size_t k = 0; k < requests.size(); ++k) {
    const Key key{device, requests[k].host.data(), requests[k].host.size()};
    Entry& e = entries_.at(key);
    if (out[k] == nullptr) {
      out[k] = e.device_ptr;
      if (first_of.count(key) && first_of[key] != k) ++e.refs;  // a repeat within this call
    }
  }
  uploads_ += static_cast<int64_t>(to_place.size());
  for (size_t k : to_place) resident_bytes_ += requests[k].host.size();
  return out;
}

void WeightCache::drop_constant_locked(Allocation* a) {
  if (--a->constants > 0) return;
  // cudaFree waits for the device, so work still reading the weights finishes first.
  cuda::cuda_allocator().deallocate(a->base, a->nbytes, Device::cuda(a->device));
  allocations_.erase(a->base);
}

void WeightCache::release(int device, const uint8_t* host, size_t nbytes) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(Key{device, host, nbytes});
  if (it == entries_.end()) return;
  if (--it->second.refs > 0) return;
  Allocation* a = it->second.allocation;
  resident_bytes_ -= nbytes;
  entries_.erase(it);
  drop_constant_locked(a);
}

uint64_t WeightCache::resident_bytes_on(int device) {
  std::lock_guard lock(mu_);
  uint64_t bytes = 0;
  for (const auto& [key, entry] : entries_) bytes += key.device == device ? key.nbytes : 0;
  return bytes;
}

uint64_t WeightCache::allocated_bytes_on(int device) {
  std::lock_guard lock(mu_);
  uint64_t bytes = 0;
  for (const auto& [base, a] : allocations_) bytes += a.device == device ? a.nbytes : 0;
  return bytes;
}

void WeightCache::stats(CudaBackendStats& out) {
  std::lock_guard lock(mu_);
  out.weight_uploads = uploads_;
  out.resident_weights = static_cast<int64_t>(entries_.size());
  out.resident_weight_bytes = resident_bytes_;
  out.weight_allocations = static_cast<int64_t>(allocations_.size());
}

}  // namespace planrt::backends
