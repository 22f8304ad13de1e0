#include "platform/cuda/fault_injection.h"

#include <atomic>

namespace planrt::cuda {
namespace {

std::atomic<int64_t> g_remaining{0};  // allocations until the armed one; 0: disarmed
std::atomic<int64_t> g_counted{0};
std::atomic<int64_t> g_failed{0};

}  // namespace

cudaError_t injected_allocation_failure() {
  int64_t remaining = g_remaining.load(std::memory_order_relaxed);
  // Count down without going below zero, so a concurrent arming is never lost.
  while (remaining > 0 && !g_remaining.compare_exchange_weak(remaining, remaining - 1)) {
  }
  if (remaining <= 0) return cudaSuccess;
  g_counted.fetch_add(1, std::memory_order_relaxed);
  if (remaining > 1) return cudaSuccess;
  g_failed.fetch_add(1, std::memory_order_relaxed);
  return cudaErrorMemoryAllocation;
}

namespace testing {

void fail_nth_allocation(int64_t n) { g_remaining.store(n > 0 ? n : 0); }

InjectedAllocationCounts injected_allocation_counts() {
  return {g_counted.load(), g_failed.load()};
}

}  // namespace testing
}  // namespace planrt::cuda
