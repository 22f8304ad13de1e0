// Device code of resize (resize_launch.h): one thread per output element. Each dim's taps
// follow kernels::resize_taps (op_plans.cpp) step for step: the coordinate transform in
// double with every operation rounded on its own (no fused multiply-add, so that a nearest
// tap lands where the CPU's does), the ONNX coefficients, the edge-padded window, the
// exclude_outside renormalization, merged taps and weight-0 taps dropped. f32 accumulates in
// double; bf16 and f16 (storage only) in f32, rounded to nearest even on store.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/resize_launch.h"

namespace planrt::kernels::cuda::launch {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 20;

int grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// kernels::ResizeMode, ResizeCoordinates and ResizeNearest, by value.
enum : int { kNearest = 0, kLinear = 1, kCubic = 2 };
enum : int {
  kHalfPixel = 0, kHalfPixelSymmetric = 1, kPytorchHalfPixel = 2, kAlignCorners = 3, kAsymmetric = 4,
  kTfHalfPixelForNn = 5, kTfCropAndResize = 6
};
enum : int { kRoundPreferFloor = 0, kRoundPreferCeil = 1, kFloor = 2, kCeil = 3 };

__device__ __forceinline__ float load(float v) { return v; }
__device__ __forceinline__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float load(__half v) { return __half2float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }

struct Taps {
  int count;
  int64_t index[4];
  double weight[4];
};

__device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double div(double a, double b) { return __ddiv_rn(a, b); }

// false: tf_crop_and_resize's coordinate is outside the image.
__device__ bool axis_taps(const ResizeArgs& a, const ResizeAxisArgs& ax, int64_t xi, Taps* t) {
  t->count = 0;
  const double x = static_cast<double>(xi);
  const double in = static_cast<double>(ax.in);
  const double out_w = mul(ax.scale, in);
  double xo = 0.0;
  switch (a.coordinates) {
    case kHalfPixel:
      xo = sub(div(add(x, 0.5), ax.scale), 0.5);
      break;
    case kHalfPixelSymmetric: {
      const double adjustment = div(static_cast<double>(ax.out), out_w);
      const double center = div(in, 2.0);
      const double offset = mul(center, sub(1.0, adjustment));
      xo = sub(add(offset, div(add(x, 0.5), ax.scale)), 0.5);
      break;
    }
    case kPytorchHalfPixel:
      xo = out_w == 1.0 ? -0.5 : sub(div(add(x, 0.5), ax.scale), 0.5);
      break;
    case kAlignCorners:
      xo = out_w == 1.0 ? 0.0 : div(mul(x, sub(in, 1.0)), sub(out_w, 1.0));
      break;
    case kAsymmetric:
      xo = div(x, ax.scale);
      break;
    case kTfHalfPixelForNn:
      xo = div(add(x, 0.5), ax.scale);
      break;
    default: {  // kTfCropAndResize
      const double span = sub(ax.roi_end, ax.roi_start);
      xo = out_w == 1.0 ? div(mul(span, sub(in, 1.0)), 2.0) : div(mul(mul(x, span), sub(in, 1.0)), sub(out_w, 1.0));
      xo = add(xo, mul(ax.roi_start, sub(in, 1.0)));
      if (xo < 0 || xo > in - 1) return false;
      break;
    }
  }
  const int n = a.mode == kCubic ? 4 : 2;
  const int64_t pad = n / 2;
  const double fl = floor(xo);
  const bool integral = xo == fl;
  const double ratio = integral ? 1.0 : xo - fl;
  double c[4] = {0, 0, 0, 0};
  if (a.mode == kNearest) {
    if (integral) {
      c[1] = 1;
    } else {
      bool right = false;
      switch (a.nearest) {
        case kRoundPreferFloor: right = ratio > 0.5; break;
        case kRoundPreferCeil: right = ratio >= 0.5; break;
        case kFloor: right = false; break;
        default: right = true; break;
      }
      c[right ? 1 : 0] = 1;
    }
  } else if (a.mode == kLinear) {
    c[0] = 1 - ratio;
    c[1] = ratio;
  } else {
    const double A = a.cubic_a;
    const double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
    c[0] = ((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A;
    c[1] = ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1;
    c[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
    c[3] = ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A;
  }
  const double limit = static_cast<double>(ax.in + pad + n);
  const double cx = ceil(fmin(fmax(xo, -limit), limit));
  int64_t base = static_cast<int64_t>(cx) - pad;
  if (base < -pad) base = -pad;
  if (base + n - 1 > ax.in + pad - 1) base = ax.in + pad - n;
  if (a.exclude_outside) {
    double sum = 0;
    for (int j = 0; j < n; ++j) {
      const int64_t idx = base + j;
      if (idx < 0 || idx >= ax.in) c[j] = 0;
      sum += c[j];
    }
    for (int j = 0; j < n; ++j) c[j] /= sum;
  }
  for (int j = 0; j < n; ++j) {
    if (c[j] == 0) continue;
    int64_t idx = base + j;
    idx = idx < 0 ? 0 : (idx >= ax.in ? ax.in - 1 : idx);
    int k = 0;
    while (k < t->count && t->index[k] != idx) ++k;
    if (k == t->count) {
      t->index[k] = idx;
      t->weight[k] = 0;
      ++t->count;
    }
    t->weight[k] += c[j];
  }
  return true;
}

template <typename T, typename Acc>
__global__ void resize_kernel(const T* x, T* y, int64_t n, ResizeArgs args) {
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < n; o += int64_t{gridDim.x} * blockDim.x) {
    int64_t coord[kResizeMaxDims];
    int64_t rest = o;
    for (int d = args.rank - 1; d >= 0; --d) {
      coord[d] = rest % args.axis[d].out;
      rest /= args.axis[d].out;
    }
    Taps taps[kResizeMaxDims];
    int64_t strides[kResizeMaxDims];
    int tap[kResizeMaxDims];
    int k = 0;
    int64_t base = 0, stride = 1;
    bool outside = false, empty = false;
    for (int d = args.rank - 1; d >= 0; --d) {
      const ResizeAxisArgs& ax = args.axis[d];
      if (ax.identity) {
        base += coord[d] * stride;
      } else {
        outside = outside || !axis_taps(args, ax, coord[d], &taps[k]);
        empty = empty || taps[k].count == 0;
        strides[k] = stride;
        tap[k] = 0;
        ++k;
      }
      stride *= ax.in;
    }
    if (outside) {
      store(y + o, static_cast<float>(args.extrapolation));
      continue;
    }
    if (empty) {
      store(y + o, 0.0f);
      continue;
    }
    Acc sum = 0;
    while (true) {
      Acc w = 1;
      int64_t offset = base;
      for (int a = 0; a < k; ++a) {
        w *= static_cast<Acc>(taps[a].weight[tap[a]]);
        offset += taps[a].index[tap[a]] * strides[a];
      }
      sum += w * static_cast<Acc>(load(x[offset]));
      int a = k - 1;
      while (a >= 0 && ++tap[a] == taps[a].count) tap[a--] = 0;
      if (a < 0) break;
    }
    store(y + o, static_cast<float>(sum));
  }
}

}  // namespace

cudaError_t resize(const float* x, float* y, int64_t n, const ResizeArgs& args, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  resize_kernel<float, double><<<grid_for(n), kThreads, 0, stream>>>(x, y, n, args);
  return cudaGetLastError();
}

cudaError_t resize(const __nv_bfloat16* x, __nv_bfloat16* y, int64_t n, const ResizeArgs& args,
                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  resize_kernel<__nv_bfloat16, float><<<grid_for(n), kThreads, 0, stream>>>(x, y, n, args);
  return cudaGetLastError();
}

cudaError_t resize(const __half* x, __half* y, int64_t n, const ResizeArgs& args, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  resize_kernel<__half, float><<<grid_for(n), kThreads, 0, stream>>>(x, y, n, args);
  return cudaGetLastError();
}

}  // namespace planrt::kernels::cuda::launch
