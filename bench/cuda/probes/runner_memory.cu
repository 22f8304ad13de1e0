// Device memory of the per-segment resources a cuda segment or engine creates besides its
// planned memory (a stream, an event, a small cudaMalloc like the kernels' error record), 12 of
// each as a 12-block engine-per-block method makes, measured with cudaMemGetInfo; explains
// the ledger's remainder for methods of many delegates (issue 19). Built by hand:
//   nvcc -O2 -arch=sm_90 bench/cuda/probes/runner_memory.cu -o /tmp/runner_memory && /tmp/runner_memory
// Prints one JSON line per step; figures in bench/results/library_memory.jsonl.
#include <cstdio>
#include <cuda_runtime.h>

#include "memory_steps.h"


__global__ void touch(int* p) { if (p) *p = 1; }

int main() {
  cudaFree(nullptr);
  step("context", "runner_memory");
  touch<<<1, 1>>>(nullptr);
  step("first kernel", "runner_memory");
  cudaStream_t s[12];
  for (auto& x : s) cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking);
  step("12 non-blocking streams", "runner_memory");
  for (auto& x : s) touch<<<1, 1, 0, x>>>(nullptr);
  step("a kernel on each of the 12 streams", "runner_memory");
  cudaEvent_t e[12];
  for (auto& x : e) cudaEventCreateWithFlags(&x, cudaEventDisableTiming);
  step("12 events", "runner_memory");
  void* m[12];
  for (auto& x : m) cudaMalloc(&x, 64);
  step("12 cudaMalloc of 64 bytes", "runner_memory");
  void* h[12];
  for (auto& x : h) cudaHostAlloc(&x, 64, cudaHostAllocDefault);
  step("12 cudaHostAlloc of 64 bytes", "runner_memory");
  for (auto& x : s) cudaStreamDestroy(x);
  step("the 12 streams destroyed", "runner_memory");
  return 0;
}
