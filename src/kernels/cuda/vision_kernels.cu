// Device code of the convolutional networks' ops beside cuDNN's convolution: clip and the
// hard activations, max and average pooling (NCHW or NHWC, one thread per output), the bias
// and ReLU after a convolution (either layout), and pad. f32, bf16 and f16 (storage only:
// computed in f32 as the CPU kernels compute, rounded to nearest even on store).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/bf16_convert.cuh"
#include "kernels/cuda/launch.h"

namespace planrt::kernels::cuda::launch {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 20;

int grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}


#define PLANRT_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

template <typename T>
__global__ void clamp_kernel(const T* x, T* y, int64_t n, float scale, float shift, float lo, float hi,
                             bool times_x) {
  PLANRT_GRID_STRIDE(i, n) {
    const float v = widen(x[i]);
    const float a = scale * v + shift;
    const float c = a < lo ? lo : (a > hi ? hi : a);  // NaN falls through both tests
    y[i] = narrow<T>(times_x ? v * c : c);
  }
}

// The max (NaN wins) or average of the window at output (oy, ox) of one image of w.h x w.w;
// at(iy, ix) reads the image's element there as f32. Both layouts' kernels share it, so they
// add in the same order and agree bit for bit.
template <typename At>
__device__ __forceinline__ float pool_window(bool is_max, bool include_pad, const Window& w, int64_t oy, int64_t ox,
                                             At at) {
  const int64_t y0 = oy * w.stride_h - w.pad_top, x0 = ox * w.stride_w - w.pad_left;
  if (is_max) {
    float best = -INFINITY;
    for (int64_t r = 0; r < w.kh; ++r) {
      const int64_t iy = y0 + r * w.dilation_h;
      if (iy < 0 || iy >= w.h) continue;
      for (int64_t s = 0; s < w.kw; ++s) {
        const int64_t ix = x0 + s * w.dilation_w;
        if (ix < 0 || ix >= w.w) continue;
        const float v = at(iy, ix);
        best = (v > best || v != v) ? v : best;
      }
    }
    return best;
  }
  const int64_t ye = min(y0 + w.kh, w.h + w.pad_bottom), xe = min(x0 + w.kw, w.w + w.pad_right);
  const int64_t iy0 = max(y0, int64_t{0}), iy1 = min(ye, w.h), ix0 = max(x0, int64_t{0}), ix1 = min(xe, w.w);
  float sum = 0.0f;
  for (int64_t iy = iy0; iy < iy1; ++iy) {
    for (int64_t ix = ix0; ix < ix1; ++ix) sum += at(iy, ix);
  }
  const int64_t count = include_pad ? (ye - y0) * (xe - x0) : (iy1 - iy0) * (ix1 - ix0);
  return sum / static_cast<float>(count);
}

// NCHW: x [planes, h, w] -> y [planes, oh, ow].
template <typename T>
__global__ void pool2d_kernel(bool is_max, bool include_pad, const T* x, T* y, int64_t planes, Window w) {
  PLANRT_GRID_STRIDE(i, planes * w.oh * w.ow) {
    const int64_t ox = i % w.ow, oy = i / w.ow % w.oh, plane = i / (w.ow * w.oh);
    const T* img = x + plane * w.h * w.w;
    y[i] = narrow<T>(pool_window(is_max, include_pad, w, oy, ox,
                                 [&](int64_t iy, int64_t ix) { return widen(img[iy * w.w + ix]); }));
  }
}

// NHWC: x [images, h, w, channels] -> y [images, oh, ow, channels]. Neighbouring threads take
// neighbouring channels of one output position, so each window element is read coalesced.
template <typename T>
__global__ void pool2d_channels_last_kernel(bool is_max, bool include_pad, const T* x, T* y, int64_t images,
                                            int64_t channels, Window w) {
  PLANRT_GRID_STRIDE(i, images * w.oh * w.ow * channels) {
    const int64_t ch = i % channels, position = i / channels;
    const int64_t ox = position % w.ow, oy = position / w.ow % w.oh, image = position / (w.ow * w.oh);
    const T* img = x + image * w.h * w.w * channels + ch;
    y[i] = narrow<T>(pool_window(is_max, include_pad, w, oy, ox,
                                 [&](int64_t iy, int64_t ix) { return widen(img[(iy * w.w + ix) * channels]); }));
  }
}

template <typename T>
__global__ void bias_activation_kernel(T* y, const T* bias, int64_t planes, int64_t channels, int64_t hw,
                                       bool relu) {
  PLANRT_GRID_STRIDE(i, planes * hw) {
    float v = widen(y[i]);
    if (bias != nullptr) v += widen(bias[(i / hw) % channels]);
    y[i] = narrow<T>(relu && v < 0.0f ? 0.0f : v);
  }
}

// Channels-last: y [rows, channels], the channel the fastest-moving index.
template <typename T>
__global__ void bias_activation_channels_last_kernel(T* y, const T* bias, int64_t rows, int64_t channels, bool relu) {
  PLANRT_GRID_STRIDE(i, rows * channels) {
    float v = widen(y[i]);
    if (bias != nullptr) v += widen(bias[i % channels]);
    y[i] = narrow<T>(relu && v < 0.0f ? 0.0f : v);
  }
}

__device__ __forceinline__ int64_t pad_source(int64_t o, int64_t begin, int64_t n, PadMode mode) {
  const int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  if (mode == PadMode::Constant) return -1;
  if (mode == PadMode::Edge) return i < 0 ? 0 : n - 1;
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);  // reflection about the end elements, as numpy.pad's
  const int64_t m = ((i % period) + period) % period;
  return m < n ? m : period - m;
}

template <typename U>
__global__ void pad_kernel(const U* x, U* y, int64_t n, PadMap map, PadMode mode, U fill) {
  PLANRT_GRID_STRIDE(i, n) {
    int64_t rest = i, offset = 0, stride = 1;
    bool constant = false;
    for (int d = map.rank - 1; d >= 0; --d) {
      const int64_t o = rest % map.out_size[d];
      rest /= map.out_size[d];
      const int64_t s = pad_source(o, map.begin[d], map.in_size[d], mode);
      constant = constant || s < 0;
      offset += s * stride;
      stride *= map.in_size[d];
    }
    y[i] = constant ? fill : x[offset];
  }
}

template <typename T>
cudaError_t launch_pool(bool is_max, bool include_pad, const T* x, T* y, int64_t planes, const Window& w,
                        cudaStream_t stream) {
  const int64_t n = planes * w.oh * w.ow;
  if (n == 0) return cudaSuccess;
  pool2d_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(is_max, include_pad, x, y, planes, w);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_pool_channels_last(bool is_max, bool include_pad, const T* x, T* y, int64_t images,
                                      int64_t channels, const Window& w, cudaStream_t stream) {
  const int64_t n = images * w.oh * w.ow * channels;
  if (n == 0) return cudaSuccess;
  pool2d_channels_last_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(is_max, include_pad, x, y, images, channels, w);
  return cudaGetLastError();
}

template <typename U>
cudaError_t launch_pad(const void* x, void* y, int64_t n, const PadMap& map, PadMode mode, uint64_t fill,
                       cudaStream_t stream) {
  U f;
  memcpy(&f, &fill, sizeof f);
  pad_kernel<U><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const U*>(x), static_cast<U*>(y), n, map, mode, f);
  return cudaGetLastError();
}

}  // namespace

#define PLANRT_VISION_LAUNCHERS(T)                                                               \
  cudaError_t clamp(const T* x, T* y, int64_t n, float scale, float shift, float lo, float hi,    \
                    bool times_x, cudaStream_t stream) {                                          \
    if (n == 0) return cudaSuccess;                                                               \
    clamp_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(x, y, n, scale, shift, lo, hi, times_x); \
    return cudaGetLastError();                                                                    \
  }                                                                                               \
  cudaError_t pool2d(bool is_max, bool count_include_pad, const T* x, T* y, int64_t planes,       \
                     const Window& window, cudaStream_t stream) {                                 \
    return launch_pool(is_max, count_include_pad, x, y, planes, window, stream);                  \
  }                                                                                               \
  cudaError_t bias_activation(T* y, const T* bias, int64_t planes, int64_t channels, int64_t hw,  \
                              bool relu, cudaStream_t stream) {                                   \
    if (planes * hw == 0) return cudaSuccess;                                                     \
    bias_activation_kernel<T><<<grid_for(planes * hw), kThreads, 0, stream>>>(y, bias, planes,    \
                                                                              channels, hw, relu); \
    return cudaGetLastError();                                                                    \
  }                                                                                               \
  cudaError_t pool2d_channels_last(bool is_max, bool count_include_pad, const T* x, T* y,         \
                                   int64_t images, int64_t channels, const Window& window,        \
                                   cudaStream_t stream) {                                         \
    return launch_pool_channels_last(is_max, count_include_pad, x, y, images, channels, window,   \
                                     stream);                                                     \
  }                                                                                               \
  cudaError_t bias_activation_channels_last(T* y, const T* bias, int64_t rows, int64_t channels,  \
                                            bool relu, cudaStream_t stream) {                     \
    if (rows * channels == 0) return cudaSuccess;                                                 \
    bias_activation_channels_last_kernel<T><<<grid_for(rows * channels), kThreads, 0, stream>>>(  \
        y, bias, rows, channels, relu);                                                           \
    return cudaGetLastError();                                                                    \
  }

PLANRT_VISION_LAUNCHERS(float)
PLANRT_VISION_LAUNCHERS(__nv_bfloat16)
PLANRT_VISION_LAUNCHERS(__half)
#undef PLANRT_VISION_LAUNCHERS

cudaError_t pad(const void* x, void* y, size_t elem_size, int64_t n, const PadMap& map, PadMode mode,
                uint64_t fill, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (elem_size) {
    case 1:
      return launch_pad<uint8_t>(x, y, n, map, mode, fill, stream);
    case 2:
      return launch_pad<uint16_t>(x, y, n, map, mode, fill, stream);
    case 4:
      return launch_pad<uint32_t>(x, y, n, map, mode, fill, stream);
    case 8:
      return launch_pad<uint64_t>(x, y, n, map, mode, fill, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace planrt::kernels::cuda::launch
