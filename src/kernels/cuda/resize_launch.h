// The launcher of resize's device code (resize_kernels.cu), in the plain terms of launch.h:
// the plan (kernels/op_plans.h: plan_resize) as a by-value struct, the enums as their
// kernels:: values. One thread per output element; every coordinate in double, as the CPU
// kernel computes it (resize_taps), accumulated in double for f32 and in f32 for bf16 and f16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace planrt::kernels::cuda::launch {

inline constexpr int kResizeMaxDims = 8;

struct ResizeAxisArgs {
  int64_t in = 1, out = 1;
  double scale = 1.0;
  double roi_start = 0.0, roi_end = 1.0;
  int identity = 0;  // output position i reads x's position i: no taps
};

struct ResizeArgs {
  int rank = 0;
  int mode = 0;         // kernels::ResizeMode
  int coordinates = 0;  // kernels::ResizeCoordinates
  int nearest = 0;      // kernels::ResizeNearest
  int exclude_outside = 0;
  double cubic_a = -0.75;
  double extrapolation = 0.0;
  ResizeAxisArgs axis[kResizeMaxDims];
};

// y (n elements, the output's shape is axis[d].out) from x (axis[d].in).
cudaError_t resize(const float* x, float* y, int64_t n, const ResizeArgs& args, cudaStream_t stream);
cudaError_t resize(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t n, const ResizeArgs& args,
                   cudaStream_t stream);
cudaError_t resize(const __half* x, __half* y, int64_t n, const ResizeArgs& args, cudaStream_t stream);

}  // namespace planrt::kernels::cuda::launch
