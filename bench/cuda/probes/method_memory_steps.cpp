// When a method's unnamed device memory appears (issue 19): the device-memory ledger
// (planrt/backends/memory_ledger.h) read after each step of one process's life — the program
// loaded, the method loaded, its first execute, its second — against a baseline taken once the
// CUDA context exists. A remainder that appears at the first execute and not at load is what
// is loaded on first launch (kernel images: planrt's own, cuBLAS's, cuDNN's engines). Through
// planrt's public API; built by CMake, run by hand on the GPU machine, not by ctest:
//   build/gpu/bench/method_memory_steps PROGRAM DIM,DIM,... [method]
// (the method's one f32 input, filled with 0.5). Figures in bench/results/.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "planrt/backends/cuda.h"
#include "planrt/backends/engine.h"
#include "planrt/backends/memory_ledger.h"
#include "planrt/platform/cuda.h"
#include "planrt/runtime/module.h"

namespace {

using namespace planrt;

uint64_t baseline = 0;

void report(const char* step) {
  Result<DeviceMemoryLedger> l = device_memory_ledger(Device::cuda(0), baseline);
  if (!l.ok()) {
    std::printf("{\"step\": \"%s\", \"error\": \"%s\"}\n", step, l.status().message().c_str());
    return;
  }
  std::printf("{\"step\": \"%s\", \"measured_mib\": %.2f, \"remainder_mib\": %.2f", step,
              l->measured_bytes() / 1048576.0, l->remainder_bytes() / 1048576.0);
  for (const DeviceMemoryLine& line : l->lines) std::printf(", \"%s\": %.2f", line.name.c_str(), line.bytes / 1048576.0);
  std::printf("}\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: method_memory_steps PROGRAM DIM,DIM,... [method]\n");
    return 1;
  }
  const std::string method = argc > 3 ? argv[3] : "forward";
  std::vector<int64_t> dims;
  std::stringstream in(argv[2]);
  for (std::string d; std::getline(in, d, ',');) dims.push_back(std::atoll(d.c_str()));
  if (cudaFree(nullptr) != cudaSuccess) return 77;  // the context, before the baseline
  Result<CudaDeviceMemory> before = cuda_device_memory(Device::cuda(0));
  if (!before.ok()) return 1;
  baseline = before->used_bytes();
  // As the CLI does: the backends a CUDA or engine partition names, registered after the
  // baseline so that anything registration causes is in the figures.
  if (!register_cuda_backend().ok() || !register_engine_backend().ok()) return 1;
  Result<Module> module = Module::load(argv[1]);
  if (!module.ok()) {
    std::printf("{\"error\": \"%s\"}\n", module.status().to_string().c_str());
    return 1;
  }
  report("program loaded");
  if (Status s = module->load_method(method); !s.ok()) {
    std::printf("{\"error\": \"%s\"}\n", s.to_string().c_str());
    return 1;
  }
  report("method loaded");
  Result<Shape> shape = Shape::from(dims);
  if (!shape.ok()) return 1;
  std::vector<float> x(static_cast<size_t>(shape->numel()), 0.5f);
  const TensorView input = TensorView::contiguous(x.data(), DType::F32, *shape);
  for (const char* step : {"first execute", "second execute", "third execute"}) {
    Result<std::vector<Tensor>> out = module->execute(method, {&input, 1});
    if (!out.ok()) {
      std::printf("{\"error\": \"%s\"}\n", out.status().to_string().c_str());
      return 1;
    }
    report(step);
  }
  return 0;
}
