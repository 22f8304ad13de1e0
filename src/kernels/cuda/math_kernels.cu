// Device code of the f32 arithmetic kernels: elementwise (broadcast by index math), the
// row normalisations and softmax (one block per row, warp-shuffle reductions). Numerics
// follow the CPU kernels: two-pass layer_norm, max-subtracted softmax, the same formulas
// for silu and gelu, and NaN propagating through relu.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/index_map.cuh"
#include "kernels/cuda/launch.h"

namespace planrt::kernels::cuda::launch {
namespace {

constexpr int kThreads = 256;            // elementwise and row blocks; a multiple of 32
constexpr int64_t kMaxBlocks = 1 << 20;  // grid-stride loops cover the rest

int grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

int grid_for_rows(int64_t rows) {
  return static_cast<int>(rows < kMaxBlocks ? rows : kMaxBlocks);
}

template <int Op>
__device__ __forceinline__ float apply_binary(float a, float b) {
  if constexpr (Op == static_cast<int>(BinaryOp::Add)) return a + b;
  if constexpr (Op == static_cast<int>(BinaryOp::Sub)) return a - b;
  if constexpr (Op == static_cast<int>(BinaryOp::Mul)) return a * b;
  return a / b;  // IEEE: x / 0 is +-inf, 0 / 0 NaN, as on the CPU
}

template <int Op>
__device__ __forceinline__ float apply_unary(float x) {
  if constexpr (Op == static_cast<int>(UnaryOp::Relu)) {
    return x < 0.0f ? 0.0f : x;  // NaN passes through, as torch.relu
  } else if constexpr (Op == static_cast<int>(UnaryOp::Silu)) {
    return x / (1.0f + expf(-x));
  } else if constexpr (Op == static_cast<int>(UnaryOp::GeluErf)) {
    constexpr float kInvSqrt2 = 0.70710678118654752440f;
    return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
  } else {
    constexpr float kSqrt2OverPi = 0.79788456080286535588f;
    return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
  }
}

// Same-shape elementwise kernels move float4s when every pointer is 16-byte aligned (the
// launchers check; the n % 4 tail goes element by element): a quarter of the loads, stores
// and index arithmetic of the element-wise loop, which left the memory bus half idle.
bool all_aligned16(const void* a, const void* b, const void* c) {
  return ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
           reinterpret_cast<uintptr_t>(c)) & 15u) == 0;
}
__device__ __forceinline__ int64_t first_index() {
  return blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() { return int64_t{gridDim.x} * blockDim.x; }

template <int Op, bool Vec>
__global__ void binary_same_kernel(const float* a, const float* b, float* y, int64_t n) {
  int64_t tail = 0;
  if (Vec) {
    const int64_t n4 = n / 4;
    for (int64_t i = first_index(); i < n4; i += grid_stride()) {
      const float4 va = reinterpret_cast<const float4*>(a)[i];
      const float4 vb = reinterpret_cast<const float4*>(b)[i];
      reinterpret_cast<float4*>(y)[i] =
          make_float4(apply_binary<Op>(va.x, vb.x), apply_binary<Op>(va.y, vb.y),
                      apply_binary<Op>(va.z, vb.z), apply_binary<Op>(va.w, vb.w));
    }
    tail = n4 * 4;
  }
  for (int64_t i = tail + first_index(); i < n; i += grid_stride()) {
    y[i] = apply_binary<Op>(a[i], b[i]);
  }
}

template <int Op>
__global__ void binary_broadcast_kernel(const float* a, const float* b, float* y, int64_t n,
                                        IndexMap map) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    int64_t oa = 0;
    int64_t ob = 0;
    map_offsets(i, map, &oa, &ob);
    y[i] = apply_binary<Op>(a[oa], b[ob]);
  }
}

template <int Op, bool Vec>
__global__ void unary_kernel(const float* x, float* y, int64_t n) {
  int64_t tail = 0;
  if (Vec) {
    const int64_t n4 = n / 4;
    for (int64_t i = first_index(); i < n4; i += grid_stride()) {
      const float4 v = reinterpret_cast<const float4*>(x)[i];
      reinterpret_cast<float4*>(y)[i] = make_float4(apply_unary<Op>(v.x), apply_unary<Op>(v.y),
                                                    apply_unary<Op>(v.z), apply_unary<Op>(v.w));
    }
    tail = n4 * 4;
  }
  for (int64_t i = tail + first_index(); i < n; i += grid_stride()) {
    y[i] = apply_unary<Op>(x[i]);
  }
}

template <typename T>
struct SumOp {
  __device__ T operator()(T a, T b) const { return a + b; }
  static constexpr T kIdentity = T{0};
};
struct MaxOp {
  // fmaxf ignores NaN as the CPU's std::fmax does; a NaN still reaches the output through
  // exp(x - max).
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
  static constexpr float kIdentity = -INFINITY;
};

template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Every thread of the block gets the reduction of v. `shared` holds 32 values; the block
// may call it again right after (the trailing barrier protects the reuse).
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T* shared) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = warp_reduce(v, op);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x >> 5);
  v = threadIdx.x < static_cast<unsigned>(warps) ? shared[threadIdx.x] : Op::kIdentity;
  if (warp == 0) v = warp_reduce(v, op);
  if (threadIdx.x == 0) shared[0] = v;
  __syncthreads();
  const T result = shared[0];
  __syncthreads();
  return result;
}

// The norms accumulate in double, as the CPU kernel does: a float sum of a row whose mean
// is large against its spread loses the 1e-5 relative accuracy the tests ask for.
// residual != nullptr: the row normalised is x + residual (an f32 add, as the add kernel),
// written to `sum` on the way: a residual add and the layer_norm after it in one pass.
__global__ void layer_norm_kernel(const float* x, const float* residual, float* sum_out,
                                  const float* w, const float* b, float* y, int64_t rows,
                                  int64_t n, double eps) {
  __shared__ double shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    // Two passes (mean, then the centred squares), as the CPU kernel: no cancellation when
    // the mean is large against the spread.
    double sum = 0.0;
    if (residual != nullptr) {
      float* sr = sum_out + r * n;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        sr[i] = xr[i] + residual[r * n + i];
        sum += sr[i];
      }
      xr = sr;  // each thread reads back only what it wrote
    } else {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += xr[i];
    }
    const double mean = block_reduce(sum, SumOp<double>{}, shared) / static_cast<double>(n);
    double sq = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const double d = xr[i] - mean;
      sq += d * d;
    }
    const double var = block_reduce(sq, SumOp<double>{}, shared) / static_cast<double>(n);
    const double inv_std = 1.0 / sqrt(var + eps);  // biased variance, as PyTorch
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      double v = (xr[i] - mean) * inv_std;
      if (w != nullptr) v *= w[i];
      if (b != nullptr) v += b[i];
      yr[i] = static_cast<float>(v);
    }
  }
}

__global__ void rms_norm_kernel(const float* x, const float* w, float* y, int64_t rows, int64_t n,
                                double eps) {
  __shared__ double shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double sq = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      sq += static_cast<double>(xr[i]) * xr[i];
    }
    const double mean_sq = block_reduce(sq, SumOp<double>{}, shared) / static_cast<double>(n);
    const double inv_rms = 1.0 / sqrt(mean_sq + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      double v = xr[i] * inv_rms;
      if (w != nullptr) v *= w[i];
      yr[i] = static_cast<float>(v);
    }
  }
}

// Each thread reads and writes only its own elements, after the block-wide max: y == x is
// safe (attention normalises its scores in place).
__global__ void softmax_rows_kernel(const float* x, float* y, int64_t rows, int64_t n,
                                    int64_t causal_period) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    int64_t live = n;  // keys [0, live) take part; the rest are masked
    if (causal_period > 0) {
      const int64_t query = r % causal_period;
      live = query + 1 < n ? query + 1 : n;
    }
    float m = MaxOp::kIdentity;
    for (int64_t i = threadIdx.x; i < live; i += blockDim.x) m = fmaxf(m, xr[i]);
    m = block_reduce(m, MaxOp{}, shared);
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < live; i += blockDim.x) {
      const float e = expf(xr[i] - m);
      yr[i] = e;
      sum += e;
    }
    sum = block_reduce(sum, SumOp<float>{}, shared);
    const float inv = 1.0f / sum;
    for (int64_t i = threadIdx.x; i < live; i += blockDim.x) yr[i] *= inv;
    for (int64_t i = live + threadIdx.x; i < n; i += blockDim.x) yr[i] = 0.0f;
  }
}

// One thread per (outer, inner) line; neighbouring threads read neighbouring addresses.
__global__ void softmax_strided_kernel(const float* x, float* y, int64_t outer, int64_t n,
                                       int64_t inner) {
  const int64_t lines = outer * inner;
  for (int64_t l = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; l < lines;
       l += int64_t{gridDim.x} * blockDim.x) {
    const int64_t base = (l / inner) * n * inner + l % inner;
    const float* xl = x + base;
    float* yl = y + base;
    float m = MaxOp::kIdentity;
    for (int64_t i = 0; i < n; ++i) m = fmaxf(m, xl[i * inner]);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      const float e = expf(xl[i * inner] - m);
      yl[i * inner] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; ++i) yl[i * inner] *= inv;
  }
}

__global__ void fill_rows_kernel(const float* row, float* y, int64_t total, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = row[i % n];
  }
}

template <int Op>
cudaError_t launch_binary(const float* a, const float* b, float* y, int64_t n,
                          const IndexMap* map, cudaStream_t stream) {
  if (map == nullptr && all_aligned16(a, b, y)) {
    binary_same_kernel<Op, true><<<grid_for((n + 3) / 4), kThreads, 0, stream>>>(a, b, y, n);
  } else if (map == nullptr) {
    binary_same_kernel<Op, false><<<grid_for(n), kThreads, 0, stream>>>(a, b, y, n);
  } else {
    binary_broadcast_kernel<Op><<<grid_for(n), kThreads, 0, stream>>>(a, b, y, n, *map);
  }
  return cudaGetLastError();
}

template <int Op>
cudaError_t launch_unary(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (all_aligned16(x, y, y)) {
    unary_kernel<Op, true><<<grid_for((n + 3) / 4), kThreads, 0, stream>>>(x, y, n);
  } else {
    unary_kernel<Op, false><<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
  }
  return cudaGetLastError();
}

cudaError_t dispatch_binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n,
                            const IndexMap* map, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (op) {
    case BinaryOp::Add:
      return launch_binary<static_cast<int>(BinaryOp::Add)>(a, b, y, n, map, stream);
    case BinaryOp::Sub:
      return launch_binary<static_cast<int>(BinaryOp::Sub)>(a, b, y, n, map, stream);
    case BinaryOp::Mul:
      return launch_binary<static_cast<int>(BinaryOp::Mul)>(a, b, y, n, map, stream);
    case BinaryOp::Div:
      return launch_binary<static_cast<int>(BinaryOp::Div)>(a, b, y, n, map, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t binary_same_shape(BinaryOp op, const float* a, const float* b, float* y, int64_t n,
                              cudaStream_t stream) {
  return dispatch_binary(op, a, b, y, n, nullptr, stream);
}

cudaError_t binary_broadcast(BinaryOp op, const float* a, const float* b, float* y, int64_t n,
                             const IndexMap& map, cudaStream_t stream) {
  return dispatch_binary(op, a, b, y, n, &map, stream);
}

cudaError_t unary(UnaryOp op, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (op) {
    case UnaryOp::Relu:
      return launch_unary<static_cast<int>(UnaryOp::Relu)>(x, y, n, stream);
    case UnaryOp::Silu:
      return launch_unary<static_cast<int>(UnaryOp::Silu)>(x, y, n, stream);
    case UnaryOp::GeluErf:
      return launch_unary<static_cast<int>(UnaryOp::GeluErf)>(x, y, n, stream);
    case UnaryOp::GeluTanh:
      return launch_unary<static_cast<int>(UnaryOp::GeluTanh)>(x, y, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t layer_norm(const float* x, const float* w, const float* b, float* y, int64_t rows,
                       int64_t n, double eps, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  layer_norm_kernel<<<grid_for_rows(rows), kThreads, 0, stream>>>(x, nullptr, nullptr, w, b, y,
                                                                  rows, n, eps);
  return cudaGetLastError();
}

cudaError_t add_layer_norm(const float* x, const float* residual, float* sum, const float* w,
                           const float* b, float* y, int64_t rows, int64_t n, double eps,
                           cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  layer_norm_kernel<<<grid_for_rows(rows), kThreads, 0, stream>>>(x, residual, sum, w, b, y,
                                                                  rows, n, eps);
  return cudaGetLastError();
}

cudaError_t rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t n,
                     double eps, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  rms_norm_kernel<<<grid_for_rows(rows), kThreads, 0, stream>>>(x, w, y, rows, n, eps);
  return cudaGetLastError();
}

cudaError_t softmax_rows(const float* x, float* y, int64_t rows, int64_t n,
                         int64_t causal_period, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  softmax_rows_kernel<<<grid_for_rows(rows), kThreads, 0, stream>>>(x, y, rows, n,
                                                                    causal_period);
  return cudaGetLastError();
}

cudaError_t softmax_strided(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                            cudaStream_t stream) {
  if (outer == 0 || n == 0 || inner == 0) return cudaSuccess;
  softmax_strided_kernel<<<grid_for(outer * inner), kThreads, 0, stream>>>(x, y, outer, n,
                                                                           inner);
  return cudaGetLastError();
}

cudaError_t fill_rows(const float* row, float* y, int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  fill_rows_kernel<<<grid_for(rows * n), kThreads, 0, stream>>>(row, y, rows * n, n);
  return cudaGetLastError();
}

}  // namespace planrt::kernels::cuda::launch
