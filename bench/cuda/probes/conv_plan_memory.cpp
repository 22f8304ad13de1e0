// Device memory that cuDNN convolutions add beyond their planned workspace (issue 19): the
// "remainder" the ledger measures on the CNNs and the estimate cannot see. For every distinct
// convolution of resnet18 and of mobilenet_v2 (224x224 input), through planrt's own plan code
// (kernels/cuda/cudnn_conv_plan.h, the workspace budget vision.cpp gives it), the device's
// used bytes (cudaMemGetInfo, after a synchronize) are printed after the handle, after each
// plan's creation, after its first execution and after a second one, one JSON line each, plus
// totals per model. Built by CMake beside the benchmarks (it needs planrt's internals), never
// run by ctest; on the GPU machine:
//   build/gpu/bench/conv_plan_memory [batch] [f32|bf16]
// Figures in bench/results/conv_plan_memory.jsonl.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda/cudnn_conv_plan.h"
#include "kernels/cuda/cudnn_library.h"
#include "kernels/op_plans.h"
#include "kernels/workspace.h"
#include "memory_steps.h"

namespace {

using namespace planrt;
using namespace planrt::kernels;
using namespace planrt::kernels::cuda;

struct Conv {
  const char* model;
  int64_t c, hw, k, kernel, stride, groups;  // square images and windows, pad kernel / 2
};

// The distinct convolutions of the two models at 224x224 (torchvision's definitions).
std::vector<Conv> convolutions() {
  std::vector<Conv> out = {
      {"resnet18", 3, 224, 64, 7, 2, 1},     {"resnet18", 64, 56, 64, 3, 1, 1},
      {"resnet18", 64, 56, 128, 3, 2, 1},    {"resnet18", 128, 28, 128, 3, 1, 1},
      {"resnet18", 64, 56, 128, 1, 2, 1},    {"resnet18", 128, 28, 256, 3, 2, 1},
      {"resnet18", 256, 14, 256, 3, 1, 1},   {"resnet18", 128, 28, 256, 1, 2, 1},
      {"resnet18", 256, 14, 512, 3, 2, 1},   {"resnet18", 512, 7, 512, 3, 1, 1},
      {"resnet18", 256, 14, 512, 1, 2, 1},   {"mobilenet_v2", 3, 224, 32, 3, 2, 1},
      {"mobilenet_v2", 32, 112, 32, 3, 1, 32}, {"mobilenet_v2", 32, 112, 16, 1, 1, 1},
      {"mobilenet_v2", 16, 112, 96, 1, 1, 1},  {"mobilenet_v2", 96, 112, 96, 3, 2, 96},
      {"mobilenet_v2", 96, 56, 24, 1, 1, 1},   {"mobilenet_v2", 24, 56, 144, 1, 1, 1},
      {"mobilenet_v2", 144, 56, 144, 3, 1, 144}, {"mobilenet_v2", 144, 56, 24, 1, 1, 1},
      {"mobilenet_v2", 144, 56, 144, 3, 2, 144}, {"mobilenet_v2", 144, 28, 32, 1, 1, 1},
      {"mobilenet_v2", 32, 28, 192, 1, 1, 1},  {"mobilenet_v2", 192, 28, 192, 3, 1, 192},
      {"mobilenet_v2", 192, 28, 32, 1, 1, 1},  {"mobilenet_v2", 192, 28, 192, 3, 2, 192},
      {"mobilenet_v2", 192, 14, 64, 1, 1, 1},  {"mobilenet_v2", 64, 14, 384, 1, 1, 1},
      {"mobilenet_v2", 384, 14, 384, 3, 1, 384}, {"mobilenet_v2", 384, 14, 64, 1, 1, 1},
      {"mobilenet_v2", 384, 14, 96, 1, 1, 1},  {"mobilenet_v2", 96, 14, 576, 1, 1, 1},
      {"mobilenet_v2", 576, 14, 576, 3, 1, 576}, {"mobilenet_v2", 576, 14, 96, 1, 1, 1},
      {"mobilenet_v2", 576, 14, 576, 3, 2, 576}, {"mobilenet_v2", 576, 7, 160, 1, 1, 1},
      {"mobilenet_v2", 160, 7, 960, 1, 1, 1},  {"mobilenet_v2", 960, 7, 960, 3, 1, 960},
      {"mobilenet_v2", 960, 7, 160, 1, 1, 1},  {"mobilenet_v2", 960, 7, 320, 1, 1, 1},
      {"mobilenet_v2", 320, 7, 1280, 1, 1, 1},
  };
  return out;
}

int fail(const char* what, const Status& s) {
  std::printf("{\"error\": \"%s: %s\"}\n", what, s.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 1;
  const DType dtype = argc > 2 && std::string(argv[2]) == "bf16" ? DType::BF16 : DType::F32;
  const char* lazy = std::getenv("CUDA_MODULE_LOADING");
  std::printf("{\"batch\": %lld, \"dtype\": \"%s\", \"CUDA_MODULE_LOADING\": \"%s\"}\n",
              static_cast<long long>(batch), dtype == DType::BF16 ? "bf16" : "f32", lazy ? lazy : "(unset: lazy)");
  if (cudaSetDevice(0) != cudaSuccess) return 77;
  last = used();
  step("context");
  // Operands big enough for every convolution above at this batch; their bytes are not part of
  // what the steps below measure.
  const size_t es = dtype == DType::BF16 ? 2 : 4;
  const size_t operand_bytes = static_cast<size_t>(batch) * 96 * 112 * 112 * es * 2;
  void *x = nullptr, *w = nullptr, *y = nullptr, *ws = nullptr;
  const size_t weight_bytes = size_t{1280} * 320 * es + size_t{512} * 512 * 9 * es;
  if (cudaMalloc(&x, operand_bytes) != cudaSuccess || cudaMalloc(&y, operand_bytes) != cudaSuccess ||
      cudaMalloc(&w, weight_bytes) != cudaSuccess || cudaMalloc(&ws, operand_bytes) != cudaSuccess) {
    return fail("operands", make_error(ErrorCode::OutOfMemory, "cudaMalloc"));
  }
  cudaMemset(x, 0, operand_bytes);
  cudaMemset(w, 0, weight_bytes);
  step("operands allocated");
  Result<const CudnnLibrary*> lib = cudnn_library();
  if (!lib.ok()) return fail("cudnn", lib.status());
  step("cuDNN opened");
  Result<CudnnHandle> handle = CudnnHandle::create(/*allow_tf32=*/false);
  if (!handle.ok()) return fail("handle", handle.status());
  step("cudnnCreate");
  std::string model;
  size_t model_start = used();
  for (const Conv& c : convolutions()) {
    if (model != c.model) {
      if (!model.empty())
        std::printf("{\"model\": \"%s\", \"total_mib\": %.2f}\n", model.c_str(), (used() - model_start) / 1048576.0);
      model = c.model;
      model_start = used();
    }
    Conv2dPlan p;
    p.n = batch;
    p.c = c.c;
    p.h = p.w = c.hw;
    p.k = c.k;
    p.groups = c.groups;
    p.window.kh = p.window.kw = c.kernel;
    p.window.stride_h = p.window.stride_w = c.stride;
    p.window.pad_top = p.window.pad_left = p.window.pad_bottom = p.window.pad_right = c.kernel / 2;
    p.oh = p.ow = (c.hw + 2 * (c.kernel / 2) - c.kernel) / c.stride + 1;
    Conv2dPlan one = p;
    one.n = 1;
    ConvPlanKey key;
    key.n = p.n;
    key.c = p.c;
    key.h = p.h;
    key.w = p.w;
    key.k = p.k;
    key.kh = key.kw = c.kernel;
    key.stride_h = key.stride_w = c.stride;
    key.pad_h = key.pad_w = c.kernel / 2;
    key.groups = c.groups;
    key.oh = p.oh;
    key.ow = p.ow;
    key.dtype = dtype;
    key.workspace_budget = conv2d_cuda_workspace_per_image(one, dtype).algorithm_bytes * static_cast<uint64_t>(batch);
    char name[160];
    std::snprintf(name, sizeof name, "%s %lldx%lld %lld->%lld k%lld s%lld g%lld", c.model,
                  static_cast<long long>(c.hw), static_cast<long long>(c.hw), static_cast<long long>(c.c),
                  static_cast<long long>(c.k), static_cast<long long>(c.kernel), static_cast<long long>(c.stride),
                  static_cast<long long>(c.groups));
    Result<const CudnnConvPlan*> plan = handle->conv_plans().get(**lib, handle->get(), key);
    if (!plan.ok()) return fail(name, plan.status());
    std::string what = std::string(name) + ": plan (workspace " +
                       std::to_string((*plan)->workspace_bytes()) + " B)";
    step(what.c_str());
    for (const char* run : {": first execute", ": second execute"}) {
      Status s = (*plan)->execute(handle->get(), x, w, y, ws);
      if (!s.ok()) return fail(name, s);
      step((std::string(name) + run).c_str());
    }
  }
  std::printf("{\"model\": \"%s\", \"total_mib\": %.2f}\n", model.c_str(), (used() - model_start) / 1048576.0);
  std::printf("{\"done\": true}\n");
  return 0;
}
