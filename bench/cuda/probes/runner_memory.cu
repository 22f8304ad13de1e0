// Device memory of the per-segment resources a cuda segment or engine creates besides its
// planned memory (a stream, an event, a small cudaMalloc like the kernels' error record), 12 of
// each as a 12-block engine-per-block method makes, measured with cudaMemGetInfo; explains
// the ledger's remainder for methods of many delegates (issue 19). Built by hand:
//   nvcc -O2 -arch=sm_90 bench/cuda/probes/runner_memory.cu -o /tmp/runner_memory && /tmp/runner_memory
// Prints one JSON line per step; figures in bench/results/library_memory.jsonl.
#include <cstdio>
#include <cuda_runtime.h>

static size_t used() {
  size_t f = 0, t = 0;
  cudaMemGetInfo(&f, &t);
  return t - f;
}
static size_t last = 0;
static void step(const char* what) {
  cudaDeviceSynchronize();
  const size_t u = used();
  std::printf("{\"probe\": \"runner_memory\", \"step\": \"%s\", \"used_mib\": %.2f, \"delta_mib\": %.2f}\n", what,
              u / 1048576.0, (double(u) - double(last)) / 1048576.0);
  last = u;
}

__global__ void touch(int* p) { if (p) *p = 1; }

int main() {
  cudaFree(nullptr);
  step("context");
  touch<<<1, 1>>>(nullptr);
  step("first kernel");
  cudaStream_t s[12];
  for (auto& x : s) cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking);
  step("12 non-blocking streams");
  for (auto& x : s) touch<<<1, 1, 0, x>>>(nullptr);
  step("a kernel on each of the 12 streams");
  cudaEvent_t e[12];
  for (auto& x : e) cudaEventCreateWithFlags(&x, cudaEventDisableTiming);
  step("12 events");
  void* m[12];
  for (auto& x : m) cudaMalloc(&x, 64);
  step("12 cudaMalloc of 64 bytes");
  void* h[12];
  for (auto& x : h) cudaHostAlloc(&x, 64, cudaHostAllocDefault);
  step("12 cudaHostAlloc of 64 bytes");
  for (auto& x : s) cudaStreamDestroy(x);
  step("the 12 streams destroyed");
  return 0;
}
