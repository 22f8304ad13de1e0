// What every GPU benchmark starts with (header-only, like bench_stats.h): device 0 made
// current with its CUDA context created, so a "device used before loading" figure already
// includes the context; the device's name and the commit (PLANRT_COMMIT) to record.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace planrt::bench {

struct GpuBenchDevice {
  std::string name;
  std::string commit;  // PLANRT_COMMIT, or "unknown"
};

// nullopt, after saying so on stderr, when no CUDA device is visible: the caller exits
// with no_gpu_exit() (bench_stats.h).
inline std::optional<GpuBenchDevice> open_gpu_bench(const char* bench) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "%s: no CUDA device visible: nothing measured\n", bench);
    return std::nullopt;
  }
  cudaSetDevice(0);
  cudaFree(nullptr);  // the context exists before any figure is read
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const char* commit = std::getenv("PLANRT_COMMIT");
  return GpuBenchDevice{prop.name, commit != nullptr ? commit : "unknown"};
}

// The current device's used memory (cudaMemGetInfo: total - free), every process's; 0 when
// the query fails.
inline uint64_t device_used_bytes() {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return 0;
  return total_bytes - free_bytes;
}

}  // namespace planrt::bench
