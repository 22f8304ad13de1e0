// Failing planrt's N-th CUDA allocation on purpose: what the GPU lane's allocation-failure
// sweeps (tests/runtime/cuda/allocation_sweep_cuda_test.cpp, issue 6) use to make the real
// allocator and pools run out of memory at every point of a load or an execute.
//
// Every place where planrt asks CUDA for memory asks injected_allocation_failure() first
// and, when told to fail, takes the path a real cudaErrorMemoryAllocation takes (same
// error, same message, same cleanup). The places: CudaAllocator::allocate (cudaMalloc:
// planned arenas, uploaded weights, device error records, engines' private scratch),
// PoolHandle::allocate (per-call temporaries from the warm pool, or the default pool when
// that option is chosen), the engines' shared scratch growth and the pinned error
// records (cudaMallocHost) of `cuda` segments and CUDA engines. cuBLAS's own workspace
// (cublasCreate) is not ours and is not counted.
//
// Disarmed (the default) the check is one relaxed atomic load. Thread safety: any thread;
// with several threads allocating, which of them gets the N-th allocation is a race the
// caller accepts.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace planrt::cuda {

// cudaErrorMemoryAllocation when this allocation is the one armed to fail, else cudaSuccess.
cudaError_t injected_allocation_failure();

// cudaMallocHost behind the check above.
inline cudaError_t malloc_host(void** ptr, size_t nbytes) {
  cudaError_t err = injected_allocation_failure();
  return err != cudaSuccess ? err : cudaMallocHost(ptr, nbytes);
}

namespace testing {

// From now on, the n-th allocation (n >= 1) at the places above fails; 0 disarms. Firing
// disarms too, so exactly one allocation fails per arming.
void fail_nth_allocation(int64_t n);

struct InjectedAllocationCounts {
  int64_t counted = 0;  // allocations seen while armed, since the process started
  int64_t failed = 0;   // failures injected, since the process started
};
InjectedAllocationCounts injected_allocation_counts();

}  // namespace testing
}  // namespace planrt::cuda
