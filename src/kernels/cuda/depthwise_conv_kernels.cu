// Depthwise 2-D convolution (one filter per channel: groups == in channels == out channels)
// with its bias and ReLU, channels-last (NCHW ones stay on cuDNN: kernels/workspace.h). f32
// bf16 and f16 (storage only: products summed in f32 in the filter's row-major order, rounded to
// nearest even on store).
//
// Why not cuDNN: its grouped kernels for these shapes read every input element once per tap
// through a generic path. On an H200, convnext_tiny's 7x7 depthwise convolutions at batch 32
// in bf16 took 93-183 us each under ncu (0.1-0.2 TB/s of the 5 TB/s the GPU moves), 2.6 ms
// of its 8.7 ms forward, and its NHWC kernels were slower still (docs/performance.md). A
// depthwise convolution does 2 * kh * kw FLOPs per element it reads: it is a memory-bound
// stencil, which these kernels run as one.
//
// NHWC (the layout the channels-last rewrite gives these convolutions on the GPU):
// neighbouring threads take neighbouring channels (two per thread for bf16 and f16 when the channel
// count is even), so each tap's load is one coalesced row of the image. Where the window
// slides by one column (stride_w == dilation_w == 1) and is at most 7 wide, a thread computes
// kStrip neighbouring outputs of a row: it loads the kStrip + kw - 1 input columns of each
// filter row once into registers and reuses each kw times, so an output costs about
// (kStrip + kw - 1) * kh / kStrip loads instead of kh * kw. Other windows take one thread per
// output (the L1 cache serves the overlap).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/bf16_convert.cuh"
#include "kernels/cuda/launch.h"

namespace planrt::kernels::cuda::launch {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 20;
constexpr int kStrip = 8;  // outputs of one row per thread on the register path

int grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

#define PLANRT_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

// kVec channels of element type T, loaded and stored together.
template <typename T, int kVec>
struct Lanes {
  float v[kVec];
};

template <typename T, int kVec>
__device__ __forceinline__ Lanes<T, kVec> load(const T* p) {
  Lanes<T, kVec> out;
  if constexpr (kVec == 2) {
    static_assert(sizeof(T) == 2, "pairs are bf16 or f16");
    const typename Pair<T>::type pair = *reinterpret_cast<const typename Pair<T>::type*>(p);
    out.v[0] = __low2float(pair);
    out.v[1] = __high2float(pair);
  } else {
    out.v[0] = widen(p[0]);
  }
  return out;
}

template <typename T, int kVec>
__device__ __forceinline__ void store(T* p, const float (&v)[kVec]) {
  if constexpr (kVec == 2) {
    *reinterpret_cast<typename Pair<T>::type*>(p) = Pair<T>::from(v[0], v[1]);
  } else {
    p[0] = narrow<T>(v[0]);
  }
}

__device__ __forceinline__ float finish(float v, bool relu) { return relu && v < 0.0f ? 0.0f : v; }

// acc plus the products of the filter [kh, kw] with the window at output (oy, ox), row by
// row; at(iy, ix) reads the image's element there as f32 (the padding reads as zero).
template <typename T, typename At>
__device__ __forceinline__ float window_dot(const Window& win, int64_t oy, int64_t ox, float acc, const T* filter,
                                            At at) {
  for (int64_t r = 0; r < win.kh; ++r) {
    const int64_t iy = oy * win.stride_h - win.pad_top + r * win.dilation_h;
    if (iy < 0 || iy >= win.h) continue;
    for (int64_t s = 0; s < win.kw; ++s) {
      const int64_t ix = ox * win.stride_w - win.pad_left + s * win.dilation_w;
      if (ix < 0 || ix >= win.w) continue;
      acc += widen(filter[r * win.kw + s]) * at(iy, ix);
    }
  }
  return acc;
}

// The register path: x [images, h, w, channels] -> y [images, oh, ow, channels], the window
// sliding by one column (stride_w == dilation_w == 1), kKw its width. One thread: kVec
// channels of kStrip outputs of one output row.
template <typename T, int kKw, int kVec>
__global__ void depthwise_nhwc_strip_kernel(const T* x, const T* w, const T* bias, T* y, int64_t images,
                                            int64_t channels, Window win, bool relu) {
  const int64_t groups = channels / kVec;
  const int64_t strips = (win.ow + kStrip - 1) / kStrip;
  PLANRT_GRID_STRIDE(i, images * win.oh * strips * groups) {
    const int64_t c = (i % groups) * kVec;
    const int64_t rest = i / groups;
    const int64_t ox0 = (rest % strips) * kStrip;
    const int64_t oy = rest / strips % win.oh, image = rest / (strips * win.oh);
    float acc[kStrip][kVec];
    for (int v = 0; v < kVec; ++v) {
      const float b = bias != nullptr ? widen(bias[c + v]) : 0.0f;
      for (int j = 0; j < kStrip; ++j) acc[j][v] = b;
    }
    const T* img = x + image * win.h * win.w * channels + c;
    const int64_t ix0 = ox0 - win.pad_left;
    for (int64_t r = 0; r < win.kh; ++r) {
      const int64_t iy = oy * win.stride_h - win.pad_top + r * win.dilation_h;
      if (iy < 0 || iy >= win.h) continue;
      const T* row = img + iy * win.w * channels;
      float in[kStrip + kKw - 1][kVec];
#pragma unroll
      for (int s = 0; s < kStrip + kKw - 1; ++s) {
        const int64_t ix = ix0 + s;
        if (ix >= 0 && ix < win.w) {
          const Lanes<T, kVec> l = load<T, kVec>(row + ix * channels);
          for (int v = 0; v < kVec; ++v) in[s][v] = l.v[v];
        } else {
          for (int v = 0; v < kVec; ++v) in[s][v] = 0.0f;
        }
      }
#pragma unroll
      for (int s = 0; s < kKw; ++s) {
        float tap[kVec];
        for (int v = 0; v < kVec; ++v) tap[v] = widen(w[((c + v) * win.kh + r) * kKw + s]);
#pragma unroll
        for (int j = 0; j < kStrip; ++j) {
          for (int v = 0; v < kVec; ++v) acc[j][v] += tap[v] * in[j + s][v];
        }
      }
    }
    T* out = y + ((image * win.oh + oy) * win.ow + ox0) * channels + c;
#pragma unroll
    for (int j = 0; j < kStrip; ++j) {
      if (ox0 + j >= win.ow) break;
      float v[kVec];
      for (int k = 0; k < kVec; ++k) v[k] = finish(acc[j][k], relu);
      store<T, kVec>(out + j * channels, v);
    }
  }
}

// Any window, NHWC: one thread per output element, the channel fastest.
template <typename T>
__global__ void depthwise_nhwc_kernel(const T* x, const T* w, const T* bias, T* y, int64_t images, int64_t channels,
                                      Window win, bool relu) {
  PLANRT_GRID_STRIDE(i, images * win.oh * win.ow * channels) {
    const int64_t c = i % channels, position = i / channels;
    const int64_t ox = position % win.ow, oy = position / win.ow % win.oh, image = position / (win.ow * win.oh);
    const T* img = x + image * win.h * win.w * channels + c;
    const float acc = window_dot(win, oy, ox, bias != nullptr ? widen(bias[c]) : 0.0f, w + c * win.kh * win.kw,
                                 [&](int64_t iy, int64_t ix) { return widen(img[(iy * win.w + ix) * channels]); });
    y[i] = narrow<T>(finish(acc, relu));
  }
}

template <typename T, int kKw, int kVec>
cudaError_t launch_strip(const T* x, const T* w, const T* bias, T* y, int64_t images, int64_t channels,
                         const Window& win, bool relu, cudaStream_t stream) {
  const int64_t n = images * win.oh * ((win.ow + kStrip - 1) / kStrip) * (channels / kVec);
  depthwise_nhwc_strip_kernel<T, kKw, kVec><<<grid_for(n), kThreads, 0, stream>>>(x, w, bias, y, images, channels,
                                                                                   win, relu);
  return cudaGetLastError();
}

template <typename T, int kVec>
cudaError_t launch_strip_for_width(const T* x, const T* w, const T* bias, T* y, int64_t images, int64_t channels,
                                   const Window& win, bool relu, cudaStream_t stream) {
  switch (win.kw) {
    case 1: return launch_strip<T, 1, kVec>(x, w, bias, y, images, channels, win, relu, stream);
    case 3: return launch_strip<T, 3, kVec>(x, w, bias, y, images, channels, win, relu, stream);
    case 5: return launch_strip<T, 5, kVec>(x, w, bias, y, images, channels, win, relu, stream);
    default: return launch_strip<T, 7, kVec>(x, w, bias, y, images, channels, win, relu, stream);
  }
}

bool strip_path(const Window& win) {
  return win.stride_w == 1 && win.dilation_w == 1 && (win.kw == 1 || win.kw == 3 || win.kw == 5 || win.kw == 7);
}

template <typename T>
cudaError_t depthwise(const T* x, const T* w, const T* bias, T* y, int64_t images, int64_t channels,
                      const Window& win, bool relu, cudaStream_t stream) {
  const int64_t outputs = images * channels * win.oh * win.ow;
  if (outputs == 0) return cudaSuccess;
  if (strip_path(win)) {
    // Channel pairs where a pair's address is 4-byte aligned (bf16 or f16, an even count, an aligned base).
    const bool pairs = sizeof(T) == 2 && channels % 2 == 0 && reinterpret_cast<uintptr_t>(x) % 4 == 0 &&
                       reinterpret_cast<uintptr_t>(y) % 4 == 0;
    if constexpr (sizeof(T) == 2) {
      if (pairs) return launch_strip_for_width<T, 2>(x, w, bias, y, images, channels, win, relu, stream);
    }
    return launch_strip_for_width<T, 1>(x, w, bias, y, images, channels, win, relu, stream);
  }
  depthwise_nhwc_kernel<T><<<grid_for(outputs), kThreads, 0, stream>>>(x, w, bias, y, images, channels, win, relu);
  return cudaGetLastError();
}

}  // namespace

cudaError_t depthwise_conv2d(const float* x, const float* w, const float* bias, float* y, int64_t images,
                             int64_t channels, const Window& window, bool relu, cudaStream_t stream) {
  return depthwise(x, w, bias, y, images, channels, window, relu, stream);
}

cudaError_t depthwise_conv2d(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias,
                             __nv_bfloat16* y, int64_t images, int64_t channels, const Window& window, bool relu,
                             cudaStream_t stream) {
  return depthwise(x, w, bias, y, images, channels, window, relu, stream);
}

cudaError_t depthwise_conv2d(const __half* x, const __half* w, const __half* bias, __half* y, int64_t images,
                             int64_t channels, const Window& window, bool relu, cudaStream_t stream) {
  return depthwise(x, w, bias, y, images, channels, window, relu, stream);
}

}  // namespace planrt::kernels::cuda::launch
