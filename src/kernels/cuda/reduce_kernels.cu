// Device code of the reductions that are not a fold of values: argmax and argmin (f32, f16
// and bf16, an i64 index out) and cumsum (f32, f16, bf16, i32, i64). The plain reductions (sum,
// mean, max, min, prod) are math_kernels.cu's. Both follow the CPU kernels
// (kernels/cpu/reductions.cpp) to the element: the same index on ties and NaN, the same
// wrapping of integer sums; float running sums in double, which a parallel scan adds in
// another order than the CPU's loop (a last-bit difference at most, once rounded).
//
// Launch shapes, as the other row kernels: a contiguous line (inner == 1) takes a block of
// kThreads, its threads striding over the line; lines along a middle dim take one thread
// each, neighbouring threads on neighbouring lines (coalesced reads), walking n in order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/bf16_convert.cuh"
#include "kernels/cuda/launch.h"

namespace planrt::kernels::cuda::launch {
namespace {

constexpr int kThreads = 256;            // a multiple of 32
constexpr int64_t kMaxBlocks = 1 << 20;  // grid-stride loops cover the rest
constexpr unsigned kFullMask = 0xffffffffu;

int grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

int grid_for_rows(int64_t rows) { return static_cast<int>(rows < kMaxBlocks ? rows : kMaxBlocks); }

// ---- argmax, argmin -----------------------------------------------------------------------

// A candidate: the value at index i of the line; i < 0 is none (a thread past the line).
struct Best {
  float v;
  int64_t i;
};

// The candidate argmax (argmin) keeps of two: a NaN over any number; else the larger
// (smaller) value; on equal values, or two NaNs, the smaller index, or the larger with
// select_last. A total order on (NaN, value, index), so the pick is associative and
// commutative: a block may combine its threads' candidates in any order and get what the
// CPU's left-to-right scan gets.
__device__ __forceinline__ Best pick(Best a, Best b, bool max, bool select_last) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  const bool a_nan = a.v != a.v;
  const bool b_nan = b.v != b.v;
  bool a_wins;
  if (a_nan != b_nan) {
    a_wins = a_nan;
  } else if (!a_nan && a.v != b.v) {
    a_wins = max ? a.v > b.v : a.v < b.v;
  } else {
    a_wins = select_last ? a.i > b.i : a.i < b.i;
  }
  return a_wins ? a : b;
}

__device__ __forceinline__ Best warp_pick(Best b, bool max, bool select_last) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    Best other;
    other.v = __shfl_xor_sync(kFullMask, b.v, offset);
    other.i = __shfl_xor_sync(kFullMask, static_cast<long long>(b.i), offset);
    b = pick(b, other, max, select_last);
  }
  return b;
}

template <typename T>
__global__ void arg_reduce_rows_kernel(const T* x, int64_t* y, int64_t rows, int64_t n, bool max,
                                       bool select_last) {
  __shared__ Best shared[32];
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int warps = static_cast<int>(blockDim.x >> 5);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    Best best{0.0f, -1};
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      best = pick(best, Best{widen(xr[i]), i}, max, select_last);
    }
    best = warp_pick(best, max, select_last);
    if (lane == 0) shared[warp] = best;
    __syncthreads();
    if (warp == 0) {
      best = lane < warps ? shared[lane] : Best{0.0f, -1};
      best = warp_pick(best, max, select_last);
      if (lane == 0) y[r] = best.i;
    }
    __syncthreads();  // the next row writes `shared` again
  }
}

template <typename T>
__global__ void arg_reduce_strided_kernel(const T* x, int64_t* y, int64_t outer, int64_t n,
                                          int64_t inner, bool max, bool select_last) {
  const int64_t lines = outer * inner;
  for (int64_t l = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; l < lines;
       l += int64_t{gridDim.x} * blockDim.x) {
    const T* xl = x + (l / inner) * n * inner + l % inner;
    Best best{widen(xl[0]), 0};
    for (int64_t i = 1; i < n; ++i) best = pick(best, Best{widen(xl[i * inner]), i}, max, select_last);
    y[l] = best.i;
  }
}

template <typename T>
cudaError_t launch_arg_reduce(const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner,
                              bool max, bool select_last, cudaStream_t stream) {
  if (outer == 0 || n == 0 || inner == 0) return cudaSuccess;
  if (inner == 1) {
    arg_reduce_rows_kernel<T><<<grid_for_rows(outer), kThreads, 0, stream>>>(x, y, outer, n, max,
                                                                             select_last);
  } else {
    arg_reduce_strided_kernel<T><<<grid_for(outer * inner), kThreads, 0, stream>>>(
        x, y, outer, n, inner, max, select_last);
  }
  return cudaGetLastError();
}

// ---- cumsum -------------------------------------------------------------------------------

// What a running sum of T adds in: floats in double; integers in the unsigned type of their
// width, so that overflow wraps as two's complement (signed overflow would be undefined).
template <typename T>
struct Scan {
  using Acc = double;
  __device__ static Acc load(T v) { return static_cast<double>(widen(v)); }
  __device__ static T store(Acc a) {
    if constexpr (std::is_same_v<T, float>) {
      return static_cast<float>(a);
    } else if constexpr (std::is_same_v<T, f16>) {
      return __double2half(a);  // rounded once, from the double
    } else {
      return __double2bfloat16(a);  // rounded once, from the double
    }
  }
};
template <>
struct Scan<int32_t> {
  using Acc = unsigned int;
  __device__ static Acc load(int32_t v) { return static_cast<Acc>(v); }
  __device__ static int32_t store(Acc a) { return static_cast<int32_t>(a); }
};
template <>
struct Scan<int64_t> {
  using Acc = unsigned long long;
  __device__ static Acc load(int64_t v) { return static_cast<Acc>(v); }
  __device__ static int64_t store(Acc a) { return static_cast<int64_t>(a); }
};

// A block per row, kThreads elements at a time: each chunk is scanned in its warps
// (shuffles), the warps' totals offset the later warps, and the running total of the
// chunks before it (`carry`) the whole chunk. Element k of the walk is x[n - 1 - k] when
// reverse. Each thread reads and writes only its own element: y == x is safe.
template <typename T>
__global__ void cumsum_rows_kernel(const T* x, T* y, int64_t rows, int64_t n, bool exclusive,
                                   bool reverse) {
  using Acc = typename Scan<T>::Acc;
  __shared__ Acc warp_totals[32];
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int warps = static_cast<int>(blockDim.x >> 5);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    Acc carry = 0;
    for (int64_t k0 = 0; k0 < n; k0 += blockDim.x) {
      const int64_t k = k0 + threadIdx.x;
      const int64_t i = reverse ? n - 1 - k : k;
      const Acc v = k < n ? Scan<T>::load(xr[i]) : Acc{0};
      Acc inclusive = v;
      for (int offset = 1; offset < 32; offset <<= 1) {
        const Acc up = __shfl_up_sync(kFullMask, inclusive, offset);
        if (lane >= offset) inclusive += up;
      }
      // The lane before's sum rather than inclusive - v: exact for doubles too.
      Acc before_lane = __shfl_up_sync(kFullMask, inclusive, 1);
      if (lane == 0) before_lane = 0;
      if (lane == 31) warp_totals[warp] = inclusive;
      __syncthreads();
      Acc before_warp = carry;
      Acc chunk_end = carry;
      for (int w = 0; w < warps; ++w) {
        if (w < warp) before_warp += warp_totals[w];
        chunk_end += warp_totals[w];
      }
      if (k < n) yr[i] = Scan<T>::store(before_warp + (exclusive ? before_lane : inclusive));
      carry = chunk_end;
      __syncthreads();  // the next chunk writes warp_totals again
    }
  }
}

// One thread per line along a middle dim: the CPU's loop.
template <typename T>
__global__ void cumsum_strided_kernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                                      bool exclusive, bool reverse) {
  using Acc = typename Scan<T>::Acc;
  const int64_t lines = outer * inner;
  for (int64_t l = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; l < lines;
       l += int64_t{gridDim.x} * blockDim.x) {
    const int64_t base = (l / inner) * n * inner + l % inner;
    Acc acc = 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = base + (reverse ? n - 1 - k : k) * inner;
      const Acc v = Scan<T>::load(x[i]);
      if (!exclusive) acc += v;
      y[i] = Scan<T>::store(acc);
      if (exclusive) acc += v;
    }
  }
}

template <typename T>
cudaError_t launch_cumsum(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                          bool exclusive, bool reverse, cudaStream_t stream) {
  if (outer == 0 || n == 0 || inner == 0) return cudaSuccess;
  if (inner == 1) {
    cumsum_rows_kernel<T><<<grid_for_rows(outer), kThreads, 0, stream>>>(x, y, outer, n, exclusive,
                                                                         reverse);
  } else {
    cumsum_strided_kernel<T><<<grid_for(outer * inner), kThreads, 0, stream>>>(
        x, y, outer, n, inner, exclusive, reverse);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t arg_reduce(const float* x, int64_t* y, int64_t outer, int64_t n, int64_t inner,
                       bool max, bool select_last, cudaStream_t stream) {
  return launch_arg_reduce(x, y, outer, n, inner, max, select_last, stream);
}

cudaError_t arg_reduce(const __nv_bfloat16* x, int64_t* y, int64_t outer, int64_t n,
                       int64_t inner, bool max, bool select_last, cudaStream_t stream) {
  return launch_arg_reduce(x, y, outer, n, inner, max, select_last, stream);
}

cudaError_t arg_reduce(const __half* x, int64_t* y, int64_t outer, int64_t n, int64_t inner,
                       bool max, bool select_last, cudaStream_t stream) {
  return launch_arg_reduce(x, y, outer, n, inner, max, select_last, stream);
}

#define PLANRT_CUMSUM_LAUNCHER(T)                                                             \
  cudaError_t cumsum(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, \
                     bool reverse, cudaStream_t stream) {                                     \
    return launch_cumsum<T>(x, y, outer, n, inner, exclusive, reverse, stream);               \
  }
PLANRT_CUMSUM_LAUNCHER(float)
PLANRT_CUMSUM_LAUNCHER(__nv_bfloat16)
PLANRT_CUMSUM_LAUNCHER(__half)
PLANRT_CUMSUM_LAUNCHER(int32_t)
PLANRT_CUMSUM_LAUNCHER(int64_t)
#undef PLANRT_CUMSUM_LAUNCHER

}  // namespace planrt::kernels::cuda::launch
