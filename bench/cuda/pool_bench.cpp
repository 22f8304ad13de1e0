// pool_bench: per allocation, allocate + a 256-byte cudaMemsetAsync + free with a
// cudaStreamSynchronize between (the pattern of one inference's temporaries), through the
// warm private pool and through the device's default pool, side by side in one run, at
// 4 KiB, 1 MiB and 64 MiB. Target (issue 3): warm at least 10x faster at every size.
// Also checks that device-used memory (cudaMemGetInfo) after the last release is within
// 2 MiB of the figure before any pool was used.
//
// Appends one JSON line per size to bench/results/cuda_pool.jsonl (or --out=PATH):
// {bench, commit (PLANRT_COMMIT or "unknown"), device, command, size, iterations,
//  default_pool_us, warm_pool_us, ratio}, and one "cuda_pool_memory" line.
//   pool_bench [--iters=N] [--out=PATH] [--smoke]
// --smoke (the GPU lane): 40 iterations per size, the memory condition still checked, the
// 10x target not judged; lines written only with --out. Exit 0: met; 1: an error; 2: not
// met; 77: no GPU visible (a skip, as ctest reads it).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../bench_stats.h"
#include "gpu_bench.h"
#include "planrt/platform/cuda.h"
#include "platform/cuda/pool.h"
#include "platform/cuda/stream.h"

namespace {

using planrt::Status;
using planrt::cuda::PoolHandle;
using planrt::cuda::PoolOptions;

int fail(const std::string& what) {
  std::fprintf(stderr, "pool_bench: %s\n", what.c_str());
  return 1;
}

using planrt::bench::median;

// Median microseconds of allocate + memset 256 B + free + synchronize; -1 on error.
double measure(const PoolOptions& options, size_t bytes, int iters, std::string* error) {
  auto handle = PoolHandle::acquire(0, options);
  if (!handle.ok()) {
    *error = handle.status().to_string();
    return -1;
  }
  auto stream = planrt::cuda::Stream::create(0);
  if (!stream.ok()) {
    *error = stream.status().to_string();
    return -1;
  }
  cudaStream_t s = stream->get();
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iters));
  const int warmup = std::max(5, iters / 20);
  for (int i = 0; i < warmup + iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto p = handle->allocate(bytes, s);
    if (!p.ok()) {
      *error = p.status().to_string();
      return -1;
    }
    cudaMemsetAsync(*p, 0, 256, s);
    Status freed = handle->deallocate(*p, s);
    cudaError_t err = cudaStreamSynchronize(s);
    auto t1 = std::chrono::steady_clock::now();
    if (!freed.ok() || err != cudaSuccess) {
      *error = freed.ok() ? cudaGetErrorString(err) : freed.to_string();
      return -1;
    }
    if (i >= warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return median(std::move(us));  // the handle's release (the last user) follows
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path source_dir =
      std::filesystem::path(__FILE__).parent_path().parent_path();
  std::string out_flag;  // --out=PATH
  int iters = 2000;
  bool smoke = false;
  std::string command;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    command += (i ? " " : "") + a;
    if (a.rfind("--out=", 0) == 0) out_flag = a.substr(6);
    else if (a.rfind("--iters=", 0) == 0) iters = std::max(10, std::atoi(a.c_str() + 8));
    else if (a == "--smoke") smoke = true;
    else if (i > 0) return fail("unknown argument " + a);
  }
  if (smoke) {
    iters = 40;
  }
  const std::string out_path =
      planrt::bench::results_path(out_flag, smoke, (source_dir / "results" / "cuda_pool.jsonl").string());
  const std::optional<planrt::bench::GpuBenchDevice> gpu = planrt::bench::open_gpu_bench("pool_bench");
  if (!gpu) return planrt::bench::no_gpu_exit();
  const std::string& commit = gpu->commit;
  const std::string& device = gpu->name;

  const size_t used_before = planrt::bench::device_used_bytes();
  std::ofstream out;
  if (!out_path.empty()) {
    out.open(out_path, std::ios::app);
    if (!out) return fail("cannot open " + out_path);
  }

  std::printf("%-8s %14s %14s %8s\n", "size", "default_us", "warm_us", "ratio");
  bool all_met = true;
  for (size_t bytes : {size_t{4} << 10, size_t{1} << 20, size_t{64} << 20}) {
    // The large size maps 64 MiB per default-pool call: fewer iterations keep it short.
    const int n = bytes >= (size_t{64} << 20) ? std::max(10, iters / 4) : iters;
    std::string error;
    PoolOptions default_pool;
    default_pool.use_private_pool = false;
    const double d = measure(default_pool, bytes, n, &error);
    if (d < 0) return fail("default pool: " + error);
    const double w = measure(PoolOptions{}, bytes, n, &error);
    if (w < 0) return fail("warm pool: " + error);
    const double ratio = d / w;
    all_met = all_met && ratio >= 10.0;
    std::printf("%-8zu %14.2f %14.2f %7.1fx\n", bytes, d, w, ratio);
    nlohmann::json line = {{"bench", "cuda_pool"}, {"commit", commit},   {"device", device},
                           {"command", command},   {"size", bytes},      {"iterations", n},
                           {"default_pool_us", d}, {"warm_pool_us", w},  {"ratio", ratio},
                           {"smoke", smoke}};
    if (out.is_open()) out << line.dump() << "\n";
  }

  const size_t used_after = planrt::bench::device_used_bytes();
  const double diff_mib =
      (static_cast<double>(used_after) - static_cast<double>(used_before)) / (1 << 20);
  const bool memory_ok = diff_mib <= 2.0;
  auto stats = planrt::cuda_pool_stats(planrt::Device::cuda(0));
  std::printf("device used: before %.1f MiB, after last release %.1f MiB (%+.2f MiB, %s)\n",
              used_before / 1048576.0, used_after / 1048576.0, diff_mib,
              memory_ok ? "within 2 MiB" : "MORE than 2 MiB");
  if (stats.ok()) {
    std::printf("warm pool: reserved %llu B, high-water %llu B, allocations %lld, trims %lld\n",
                static_cast<unsigned long long>(stats->reserved_bytes),
                static_cast<unsigned long long>(stats->reserved_high_bytes),
                static_cast<long long>(stats->allocations), static_cast<long long>(stats->trims));
  }
  nlohmann::json mem = {{"bench", "cuda_pool_memory"}, {"commit", commit},
                        {"device", device},            {"command", command},
                        {"used_before_bytes", used_before},
                        {"used_after_release_bytes", used_after},
                        {"diff_mib", diff_mib},        {"within_2_mib", memory_ok},
                        {"smoke", smoke}};
  if (out.is_open()) out << mem.dump() << "\n";
  if (smoke) {
    std::printf("smoke run: the 10x target is not judged on %d iterations\n", iters);
    return memory_ok ? 0 : 2;
  }
  std::printf("target warm >= 10x default at every size: %s\n", all_met ? "met" : "NOT met");
  return all_met && memory_ok ? 0 : 2;
}
