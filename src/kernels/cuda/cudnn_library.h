// cuDNN, opened on first use (dlopen) like cuBLAS (cublas_library.h, whose search order and
// errors it shares): only a method with a CUDA convolution opens it, so a machine without
// cuDNN runs every other model, and loading a convolution there fails with NotSupported
// naming libcudnn.so.<major>, the paths tried and the loader's message. The failure is not
// remembered: a later call tries again.
// Thread safety: any thread; the table, once published, never changes or goes away.
#pragma once

#include <cudnn.h>

#include <memory>

#include "kernels/cuda/cudnn_attention_plan.h"
#include "kernels/cuda/cudnn_conv_plan.h"
#include "planrt/core/result.h"

namespace planrt::kernels::cuda {

// Every cuDNN function planrt calls: the handle and the backend (graph) API, through which
// convolutions and attention become cached execution plans (cudnn_conv_plan.h says why not the
// legacy API; cudnn_attention_plan.h).
#define PLANRT_CUDNN_FUNCTIONS(X)       \
  X(cudnnGetVersion)                    \
  X(cudnnCreate)                        \
  X(cudnnDestroy)                       \
  X(cudnnSetStream)                     \
  X(cudnnGetErrorString)                \
  X(cudnnBackendCreateDescriptor)       \
  X(cudnnBackendDestroyDescriptor)      \
  X(cudnnBackendSetAttribute)           \
  X(cudnnBackendGetAttribute)           \
  X(cudnnBackendFinalize)               \
  X(cudnnBackendExecute)

struct CudnnLibrary {
#define PLANRT_CUDNN_MEMBER(name) decltype(&::name) name = nullptr;
  PLANRT_CUDNN_FUNCTIONS(PLANRT_CUDNN_MEMBER)
#undef PLANRT_CUDNN_MEMBER
};

// The library's functions, opening it on the first call.
Result<const CudnnLibrary*> cudnn_library();
// The file name this build opens (libcudnn.so.<major>).
const char* cudnn_soname();

// One cuDNN handle, bound to the device current when it was made, with the convolution and
// attention plans made on it (destroyed before it). Move-only; destroyed with its owner. Not for two threads
// at once (the backends hold their math-handle mutex).
class CudnnHandle {
 public:
  // Opens the library when needed. allow_tf32: whether f32 convolutions may use TF32
  // tensor cores (cuDNN's default math) or must stay in f32 FMA.
  static Result<CudnnHandle> create(bool allow_tf32);
  CudnnHandle() = default;
  CudnnHandle(CudnnHandle&& other) noexcept;
  CudnnHandle& operator=(CudnnHandle&& other) noexcept;
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  ~CudnnHandle();

  cudnnHandle_t get() const { return handle_; }
  bool allow_tf32() const { return allow_tf32_; }
  // The execution plans of the convolutions run on this handle (non-null while get() is).
  ConvPlanCache& conv_plans() const { return *plans_; }
  // The attention plans, and the shapes cuDNN refused (which then run planrt's kernel).
  AttentionPlanCache& attention_plans() const { return *attention_plans_; }

 private:
  cudnnHandle_t handle_ = nullptr;
  bool allow_tf32_ = false;
  std::unique_ptr<ConvPlanCache> plans_;
  std::unique_ptr<AttentionPlanCache> attention_plans_;
};

}  // namespace planrt::kernels::cuda
