// Device code of the arithmetic kernels, f32, bf16 and f16: elementwise (broadcast by index
// math), the row normalisations, softmax and log_softmax (one block per row, warp-shuffle
// reductions), the reductions (sum, mean, max, min, prod). Numerics follow the CPU kernels:
// two-pass layer_norm, max-subtracted softmax, reductions folded in double, the same
// formulas for silu and gelu, and NaN propagating through relu. bf16 and f16 tensors are
// storage only: every kernel widens to f32 on load, computes as for f32, and rounds to
// nearest even on store (as PyTorch's bf16 and f16 elementwise kernels and norms do).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/index_map.cuh"
#include "kernels/cuda/bf16_convert.cuh"
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


// 16 bytes of T: what one vectorized load or store moves (4 floats, 8 bf16s or f16s).
template <typename T>
struct alignas(16) Pack {
  static constexpr int kCount = 16 / sizeof(T);
  T v[kCount];
};

template <int Op>
__device__ __forceinline__ float apply_binary(float a, float b) {
  if constexpr (Op == static_cast<int>(BinaryOp::Add)) return a + b;
  if constexpr (Op == static_cast<int>(BinaryOp::Sub)) return a - b;
  if constexpr (Op == static_cast<int>(BinaryOp::Mul)) return a * b;
  if constexpr (Op == static_cast<int>(BinaryOp::Pow)) return b == 2.0f ? a * a : powf(a, b);
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
  } else if constexpr (Op == static_cast<int>(UnaryOp::Sqrt)) {
    return sqrtf(x);
  } else if constexpr (Op == static_cast<int>(UnaryOp::Neg)) {
    return -x;
  } else if constexpr (Op == static_cast<int>(UnaryOp::Exp)) {
    return expf(x);
  } else if constexpr (Op == static_cast<int>(UnaryOp::Erf)) {
    return erff(x);
  } else if constexpr (Op == static_cast<int>(UnaryOp::Tanh)) {
    return tanhf(x);
  } else if constexpr (Op == static_cast<int>(UnaryOp::Sigmoid)) {
    return 1.0f / (1.0f + expf(-x));
  } else {
    constexpr float kSqrt2OverPi = 0.79788456080286535588f;
    return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
  }
}

// Same-shape elementwise kernels move 16 bytes at a time (4 floats, 8 bf16s) when every
// pointer is 16-byte aligned (the launchers check; the tail goes element by element): a
// quarter of the f32 loop's loads, stores and index arithmetic, which left the memory bus
// half idle.
bool all_aligned16(const void* a, const void* b, const void* c) {
  return ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
           reinterpret_cast<uintptr_t>(c)) & 15u) == 0;
}
__device__ __forceinline__ int64_t first_index() {
  return blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() { return int64_t{gridDim.x} * blockDim.x; }

template <int Op, bool Vec, typename T>
__global__ void binary_same_kernel(const T* a, const T* b, T* y, int64_t n) {
  int64_t tail = 0;
  if (Vec) {
    constexpr int kCount = Pack<T>::kCount;
    const int64_t packs = n / kCount;
    for (int64_t i = first_index(); i < packs; i += grid_stride()) {
      const Pack<T> va = reinterpret_cast<const Pack<T>*>(a)[i];
      const Pack<T> vb = reinterpret_cast<const Pack<T>*>(b)[i];
      Pack<T> vy;
#pragma unroll
      for (int e = 0; e < kCount; ++e) {
        vy.v[e] = narrow<T>(apply_binary<Op>(widen(va.v[e]), widen(vb.v[e])));
      }
      reinterpret_cast<Pack<T>*>(y)[i] = vy;
    }
    tail = packs * kCount;
  }
  for (int64_t i = tail + first_index(); i < n; i += grid_stride()) {
    y[i] = narrow<T>(apply_binary<Op>(widen(a[i]), widen(b[i])));
  }
}

template <int Op, typename T>
__global__ void binary_broadcast_kernel(const T* a, const T* b, T* y, int64_t n, IndexMap map) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    int64_t oa = 0;
    int64_t ob = 0;
    map_offsets(i, map, &oa, &ob);
    y[i] = narrow<T>(apply_binary<Op>(widen(a[oa]), widen(b[ob])));
  }
}

// The commonest broadcast, an operand repeated along the others' dims: a per-channel scale
// or bias over NCHW planes (inner = h * w) or over channels-last rows (inner = 1), a
// squeeze-excitation gate ([n, c, 1, 1] over its planes). y[i] = op(full[i], part[(i / inner)
// % count]) (operands swapped when part is a). Without the general walk's division per dim
// per element, which ran convnext_tiny's layer-scale multiplies at a quarter of the memory
// bus. kPacks: 0 one element a thread; 1 packs of 16 bytes sharing one part element
// (inner a multiple of the pack); 2 packs reading a run of part (inner 1, count a multiple).
template <int Op, bool PartIsA, int kPacks, typename T>
__global__ void binary_channel_kernel(const T* full, const T* part, T* y, int64_t n, int64_t count,
                                      int64_t inner) {
  auto apply = [](float f, float p) {
    return PartIsA ? apply_binary<Op>(p, f) : apply_binary<Op>(f, p);
  };
  if constexpr (kPacks == 0) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
      y[i] = narrow<T>(apply(widen(full[i]), widen(part[(i / inner) % count])));
    }
  } else {
    constexpr int kCount = Pack<T>::kCount;
    for (int64_t i = first_index(); i < n / kCount; i += grid_stride()) {
      const int64_t first = i * kCount;
      const Pack<T> vf = reinterpret_cast<const Pack<T>*>(full)[i];
      Pack<T> vy;
      if constexpr (kPacks == 1) {
        const float p = widen(part[(first / inner) % count]);
#pragma unroll
        for (int e = 0; e < kCount; ++e) vy.v[e] = narrow<T>(apply(widen(vf.v[e]), p));
      } else {
        const T* run = part + first % count;
#pragma unroll
        for (int e = 0; e < kCount; ++e) vy.v[e] = narrow<T>(apply(widen(vf.v[e]), widen(run[e])));
      }
      reinterpret_cast<Pack<T>*>(y)[i] = vy;
    }
  }
}

template <int Op, bool Vec, typename T>
__global__ void unary_kernel(const T* x, T* y, int64_t n) {
  int64_t tail = 0;
  if (Vec) {
    constexpr int kCount = Pack<T>::kCount;
    const int64_t packs = n / kCount;
    for (int64_t i = first_index(); i < packs; i += grid_stride()) {
      const Pack<T> vx = reinterpret_cast<const Pack<T>*>(x)[i];
      Pack<T> vy;
#pragma unroll
      for (int e = 0; e < kCount; ++e) vy.v[e] = narrow<T>(apply_unary<Op>(widen(vx.v[e])));
      reinterpret_cast<Pack<T>*>(y)[i] = vy;
    }
    tail = packs * kCount;
  }
  for (int64_t i = tail + first_index(); i < n; i += grid_stride()) {
    y[i] = narrow<T>(apply_unary<Op>(widen(x[i])));
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
// bf16: the sum is rounded to bf16 when stored (it is the residual stream the next block
// reads), and the norm is taken of that stored value, as an add kernel then a layer_norm
// kernel would.
template <typename T>
__global__ void layer_norm_kernel(const T* x, const T* residual, T* sum_out, const T* w,
                                  const T* b, T* y, int64_t rows, int64_t n, double eps) {
  __shared__ double shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    // Two passes (mean, then the centred squares), as the CPU kernel: no cancellation when
    // the mean is large against the spread.
    double sum = 0.0;
    if (residual != nullptr) {
      T* sr = sum_out + r * n;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        sr[i] = narrow<T>(widen(xr[i]) + widen(residual[r * n + i]));
        sum += widen(sr[i]);
      }
      xr = sr;  // each thread reads back only what it wrote
    } else {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += widen(xr[i]);
    }
    const double mean = block_reduce(sum, SumOp<double>{}, shared) / static_cast<double>(n);
    double sq = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const double d = widen(xr[i]) - mean;
      sq += d * d;
    }
    const double var = block_reduce(sq, SumOp<double>{}, shared) / static_cast<double>(n);
    const double inv_std = 1.0 / sqrt(var + eps);  // biased variance, as PyTorch
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      double v = (widen(xr[i]) - mean) * inv_std;
      if (w != nullptr) v *= widen(w[i]);
      if (b != nullptr) v += widen(b[i]);
      yr[i] = narrow<T>(static_cast<float>(v));
    }
  }
}

// The same for rows of at most 32 * kPerLane elements, one warp per row: each lane keeps its
// elements (i, i + 32, ...) in registers between the passes, so a row is read once and no
// block-wide barrier is taken. A block of 256 threads with one row each was launch- and
// barrier-bound on short rows: convnext_tiny's layer norms over 96-768 channels at batch 32
// ran at 0.4 TB/s on an H200 (docs/performance.md). Every load of a lane (the row, the
// residual, the affine operands) is issued before its first store: after a store the
// compiler must assume a later load may read it (the outputs may alias the inputs as far as
// it knows), and a first version that loaded w and b beside each store took 14 us for a
// [128, 512] norm on an H100, one memory round trip per element of the lane. Same numerics
// as above: f64 sums, the centred squares in a second pass, bf16 sums rounded before they
// are normalised.
template <typename T, int kPerLane>
__global__ void layer_norm_warp_kernel(const T* x, const T* residual, T* sum_out, const T* w,
                                       const T* b, T* y, int64_t rows, int64_t n, double eps) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / 32);
  for (int64_t r = blockIdx.x * int64_t{blockDim.x / 32} + threadIdx.x / 32; r < rows; r += warps) {
    float v[kPerLane], added[kPerLane], scale[kPerLane], shift[kPerLane];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t i = lane + 32 * j;
      const bool in = i < n;
      v[j] = in ? widen(x[r * n + i]) : 0.0f;
      added[j] = in && residual != nullptr ? widen(residual[r * n + i]) : 0.0f;
      scale[j] = in && w != nullptr ? widen(w[i]) : 1.0f;
      shift[j] = in && b != nullptr ? widen(b[i]) : 0.0f;
    }
    double sum = 0.0;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t i = lane + 32 * j;
      if (i >= n) continue;
      if (residual != nullptr) {
        const T s = narrow<T>(v[j] + added[j]);
        sum_out[r * n + i] = s;
        v[j] = widen(s);
      }
      sum += v[j];
    }
    const double mean = warp_reduce(sum, SumOp<double>{}) / static_cast<double>(n);
    double sq = 0.0;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      if (lane + 32 * j < n) {
        const double d = v[j] - mean;
        sq += d * d;
      }
    }
    const double var = warp_reduce(sq, SumOp<double>{}) / static_cast<double>(n);
    const double inv_std = 1.0 / sqrt(var + eps);
    T* yr = y + r * n;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t i = lane + 32 * j;
      if (i < n) {
        double o = (v[j] - mean) * inv_std;
        if (w != nullptr) o *= scale[j];
        if (b != nullptr) o += shift[j];
        yr[i] = narrow<T>(static_cast<float>(o));
      }
    }
  }
}

template <typename T>
__global__ void rms_norm_kernel(const T* x, const T* w, T* y, int64_t rows, int64_t n,
                                double eps) {
  __shared__ double shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    double sq = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const double xi = widen(xr[i]);
      sq += xi * xi;
    }
    const double mean_sq = block_reduce(sq, SumOp<double>{}, shared) / static_cast<double>(n);
    const double inv_rms = 1.0 / sqrt(mean_sq + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      double v = widen(xr[i]) * inv_rms;
      if (w != nullptr) v *= widen(w[i]);
      yr[i] = narrow<T>(static_cast<float>(v));
    }
  }
}

// Softmax (kLog false) and log_softmax (kLog true: x - max - log(sum(exp(x - max))), the
// form of the CPU kernel) share their passes: the max, the sum of exponentials, the output.
// Each thread reads and writes only its own elements, after the block-wide max: y == x is
// safe (attention normalises its scores in place).
// bf16 softmax: y holds the exponentials between the passes, so a bf16 row is normalised
// from its rounded exponentials while the sum is of the unrounded ones: two roundings per
// element, each within bf16's own 2^-8 relative. log_softmax stores nothing between the
// passes and reads x again for the output (one rounding).
// A NaN in the line reaches every output through the sum (fmaxf skips it in the max); a
// line all -inf gives NaN (exp(-inf - -inf)), as PyTorch and the CPU kernel.
template <bool kLog, typename T>
__global__ void softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t n,
                                    int64_t causal_period) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    int64_t live = n;  // keys [0, live) take part; the rest are masked
    if (causal_period > 0) {
      const int64_t query = r % causal_period;
      live = query + 1 < n ? query + 1 : n;
    }
    float m = MaxOp::kIdentity;
    for (int64_t i = threadIdx.x; i < live; i += blockDim.x) m = fmaxf(m, widen(xr[i]));
    m = block_reduce(m, MaxOp{}, shared);
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < live; i += blockDim.x) {
      const float e = expf(widen(xr[i]) - m);
      if constexpr (!kLog) yr[i] = narrow<T>(e);
      sum += e;
    }
    sum = block_reduce(sum, SumOp<float>{}, shared);
    if constexpr (kLog) {
      const float log_sum = logf(sum);
      for (int64_t i = threadIdx.x; i < live; i += blockDim.x) {
        yr[i] = narrow<T>((widen(xr[i]) - m) - log_sum);
      }
    } else {
      const float inv = 1.0f / sum;
      for (int64_t i = threadIdx.x; i < live; i += blockDim.x) yr[i] = narrow<T>(widen(yr[i]) * inv);
    }
    const float masked = kLog ? -INFINITY : 0.0f;  // log(0) for a masked key
    for (int64_t i = live + threadIdx.x; i < n; i += blockDim.x) yr[i] = narrow<T>(masked);
  }
}

// One thread per (outer, inner) line; neighbouring threads read neighbouring addresses.
template <bool kLog, typename T>
__global__ void softmax_strided_kernel(const T* x, T* y, int64_t outer, int64_t n,
                                       int64_t inner) {
  const int64_t lines = outer * inner;
  for (int64_t l = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; l < lines;
       l += int64_t{gridDim.x} * blockDim.x) {
    const int64_t base = (l / inner) * n * inner + l % inner;
    const T* xl = x + base;
    T* yl = y + base;
    float m = MaxOp::kIdentity;
    for (int64_t i = 0; i < n; ++i) m = fmaxf(m, widen(xl[i * inner]));
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      const float e = expf(widen(xl[i * inner]) - m);
      if constexpr (!kLog) yl[i * inner] = narrow<T>(e);
      sum += e;
    }
    if constexpr (kLog) {
      const float log_sum = logf(sum);
      for (int64_t i = 0; i < n; ++i) yl[i * inner] = narrow<T>((widen(xl[i * inner]) - m) - log_sum);
    } else {
      const float inv = 1.0f / sum;
      for (int64_t i = 0; i < n; ++i) yl[i * inner] = narrow<T>(widen(yl[i * inner]) * inv);
    }
  }
}

// The reductions fold doubles (every f32, bf16 and f16 value is exact in one): sums and
// products accumulate as the CPU kernel's do, so the mean of a long line keeps f32
// precision; max and min keep a NaN once seen (torch.amax), where fmax would drop it.
// kIdentity is what a line of no elements gives (mean: 0, then 0 / 0 = NaN in finish).
template <ReduceOp F>
struct Fold {
  static constexpr double kIdentity = F == ReduceOp::Prod  ? 1.0
                                      : F == ReduceOp::Max ? -static_cast<double>(INFINITY)
                                      : F == ReduceOp::Min ? static_cast<double>(INFINITY)
                                                           : 0.0;
  __device__ double operator()(double a, double b) const {
    if constexpr (F == ReduceOp::Sum || F == ReduceOp::Mean) {
      return a + b;
    } else if constexpr (F == ReduceOp::Prod) {
      return a * b;
    } else {
      if (a != a || b != b) return a + b;  // NaN
      return F == ReduceOp::Max ? fmax(a, b) : fmin(a, b);
    }
  }
  __device__ static float finish(double acc, int64_t n) {
    return static_cast<float>(F == ReduceOp::Mean ? acc / static_cast<double>(n) : acc);
  }
};

// One block per contiguous row (inner == 1), else one thread per strided line, its
// neighbours on the neighbouring lines (coalesced reads).
template <ReduceOp F, typename T>
__global__ void reduce_rows_kernel(const T* x, T* y, int64_t rows, int64_t n) {
  __shared__ double shared[32];
  const Fold<F> fold;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    double acc = Fold<F>::kIdentity;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc = fold(acc, widen(xr[i]));
    acc = block_reduce(acc, fold, shared);
    if (threadIdx.x == 0) y[r] = narrow<T>(Fold<F>::finish(acc, n));
  }
}

template <ReduceOp F, typename T>
__global__ void reduce_strided_kernel(const T* x, T* y, int64_t outer, int64_t n,
                                      int64_t inner) {
  const Fold<F> fold;
  const int64_t lines = outer * inner;
  for (int64_t l = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; l < lines;
       l += int64_t{gridDim.x} * blockDim.x) {
    const T* xl = x + (l / inner) * n * inner + l % inner;
    double acc = Fold<F>::kIdentity;
    for (int64_t i = 0; i < n; ++i) acc = fold(acc, widen(xl[i * inner]));
    y[l] = narrow<T>(Fold<F>::finish(acc, n));
  }
}

template <typename T>
__global__ void fill_rows_kernel(const T* row, T* y, int64_t total, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = row[i % n];
  }
}

// The map as binary_channel_kernel reads it: one operand contiguous, the other's nonzero
// strides on one run of dims, row-major over it (size-1 dims ignored). count: the run's
// elements; inner: the elements of the dims after it.
struct ChannelBroadcast {
  bool found = false;
  bool part_is_a = false;
  int64_t count = 1, inner = 1;
};

ChannelBroadcast channel_broadcast(const IndexMap& m) {
  int64_t row_major[kMaxDims];
  int64_t step = 1;
  for (int d = m.rank - 1; d >= 0; --d) {
    row_major[d] = step;
    step *= m.size[d];
  }
  auto contiguous = [&](const int64_t* stride) {
    for (int d = 0; d < m.rank; ++d) {
      if (m.size[d] != 1 && stride[d] != row_major[d]) return false;
    }
    return true;
  };
  auto run_of = [&](const int64_t* stride, ChannelBroadcast* out) {
    int first = -1, last = -1;
    for (int d = 0; d < m.rank; ++d) {
      if (m.size[d] == 1 || stride[d] == 0) continue;
      if (last >= 0) {  // a repeated dim between two strided ones ends the run
        for (int g = last + 1; g < d; ++g) {
          if (m.size[g] != 1) return false;
        }
      }
      if (first < 0) first = d;
      last = d;
    }
    int64_t expect = 1;
    for (int d = last; d >= 0 && d >= first; --d) {
      if (m.size[d] == 1) continue;
      if (stride[d] != expect) return false;
      expect *= m.size[d];
    }
    out->count = expect;
    out->inner = 1;
    for (int d = last + 1; d < m.rank; ++d) out->inner *= m.size[d];
    if (last < 0) out->inner = step;  // a single element repeated everywhere
    return true;
  };
  ChannelBroadcast cb;
  if (contiguous(m.stride_a) && run_of(m.stride_b, &cb)) {
    cb.found = true;
  } else if (contiguous(m.stride_b) && run_of(m.stride_a, &cb)) {
    cb.found = true;
    cb.part_is_a = true;
  }
  return cb;
}

template <int Op, bool PartIsA, typename T>
void launch_channel(const T* full, const T* part, T* y, int64_t n, const ChannelBroadcast& cb,
                    cudaStream_t stream) {
  constexpr int64_t kCount = Pack<T>::kCount;
  const bool aligned = all_aligned16(full, y, y);
  if (aligned && cb.inner % kCount == 0) {
    binary_channel_kernel<Op, PartIsA, 1, T>
        <<<grid_for(n / kCount), kThreads, 0, stream>>>(full, part, y, n, cb.count, cb.inner);
  } else if (aligned && cb.inner == 1 && cb.count % kCount == 0) {
    binary_channel_kernel<Op, PartIsA, 2, T>
        <<<grid_for(n / kCount), kThreads, 0, stream>>>(full, part, y, n, cb.count, cb.inner);
  } else {
    binary_channel_kernel<Op, PartIsA, 0, T>
        <<<grid_for(n), kThreads, 0, stream>>>(full, part, y, n, cb.count, cb.inner);
  }
}

template <int Op, typename T>
cudaError_t launch_binary(const T* a, const T* b, T* y, int64_t n, const IndexMap* map,
                          cudaStream_t stream) {
  constexpr int64_t kCount = Pack<T>::kCount;
  if (map != nullptr) {
    if (const ChannelBroadcast cb = channel_broadcast(*map); cb.found) {
      if (cb.part_is_a) {
        launch_channel<Op, true>(b, a, y, n, cb, stream);
      } else {
        launch_channel<Op, false>(a, b, y, n, cb, stream);
      }
      return cudaGetLastError();
    }
  }
  if (map == nullptr && all_aligned16(a, b, y)) {
    binary_same_kernel<Op, true, T>
        <<<grid_for((n + kCount - 1) / kCount), kThreads, 0, stream>>>(a, b, y, n);
  } else if (map == nullptr) {
    binary_same_kernel<Op, false, T><<<grid_for(n), kThreads, 0, stream>>>(a, b, y, n);
  } else {
    binary_broadcast_kernel<Op, T><<<grid_for(n), kThreads, 0, stream>>>(a, b, y, n, *map);
  }
  return cudaGetLastError();
}

template <int Op, typename T>
cudaError_t launch_unary(const T* x, T* y, int64_t n, cudaStream_t stream) {
  constexpr int64_t kCount = Pack<T>::kCount;
  if (all_aligned16(x, y, y)) {
    unary_kernel<Op, true, T><<<grid_for((n + kCount - 1) / kCount), kThreads, 0, stream>>>(x, y, n);
  } else {
    unary_kernel<Op, false, T><<<grid_for(n), kThreads, 0, stream>>>(x, y, n);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t dispatch_binary(BinaryOp op, const T* a, const T* b, T* y, int64_t n,
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
    case BinaryOp::Pow:
      return launch_binary<static_cast<int>(BinaryOp::Pow)>(a, b, y, n, map, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t dispatch_unary(UnaryOp op, const T* x, T* y, int64_t n, cudaStream_t stream) {
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
    case UnaryOp::Sqrt:
      return launch_unary<static_cast<int>(UnaryOp::Sqrt)>(x, y, n, stream);
    case UnaryOp::Neg:
      return launch_unary<static_cast<int>(UnaryOp::Neg)>(x, y, n, stream);
    case UnaryOp::Exp:
      return launch_unary<static_cast<int>(UnaryOp::Exp)>(x, y, n, stream);
    case UnaryOp::Erf:
      return launch_unary<static_cast<int>(UnaryOp::Erf)>(x, y, n, stream);
    case UnaryOp::Tanh:
      return launch_unary<static_cast<int>(UnaryOp::Tanh)>(x, y, n, stream);
    case UnaryOp::Sigmoid:
      return launch_unary<static_cast<int>(UnaryOp::Sigmoid)>(x, y, n, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t launch_layer_norm(const T* x, const T* residual, T* sum, const T* w, const T* b,
                              T* y, int64_t rows, int64_t n, double eps, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  // Many short rows (convnext_tiny's early stages: 25k-100k rows of 96-192) one warp each;
  // rows longer than 512 would hold too many registers per lane. Fewer rows (a transformer's
  // 128-2048 tokens) keep the block kernel, measured there; the warp kernel is not yet
  // measured on them since its loads were reordered (docs/performance.md).
  if (n <= 32 * 16 && rows >= 8192) {
    constexpr int64_t kRowsPerBlock = kThreads / 32;
    const int blocks = grid_for_rows((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    auto warp_rows = [&](auto per_lane) {
      layer_norm_warp_kernel<T, decltype(per_lane)::value>
          <<<blocks, kThreads, 0, stream>>>(x, residual, sum, w, b, y, rows, n, eps);
    };
    if (n <= 32 * 4) {
      warp_rows(std::integral_constant<int, 4>{});
    } else if (n <= 32 * 8) {
      warp_rows(std::integral_constant<int, 8>{});
    } else {
      warp_rows(std::integral_constant<int, 16>{});
    }
    return cudaGetLastError();
  }
  layer_norm_kernel<T><<<grid_for_rows(rows), kThreads, 0, stream>>>(x, residual, sum, w, b, y,
                                                                     rows, n, eps);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_rms_norm(const T* x, const T* w, T* y, int64_t rows, int64_t n, double eps,
                            cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  rms_norm_kernel<T><<<grid_for_rows(rows), kThreads, 0, stream>>>(x, w, y, rows, n, eps);
  return cudaGetLastError();
}

template <bool kLog, typename T>
cudaError_t launch_softmax_rows(const T* x, T* y, int64_t rows, int64_t n, int64_t causal_period,
                                cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  softmax_rows_kernel<kLog, T><<<grid_for_rows(rows), kThreads, 0, stream>>>(x, y, rows, n,
                                                                             causal_period);
  return cudaGetLastError();
}

template <bool kLog, typename T>
cudaError_t launch_softmax_strided(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                                   cudaStream_t stream) {
  if (outer == 0 || n == 0 || inner == 0) return cudaSuccess;
  softmax_strided_kernel<kLog, T><<<grid_for(outer * inner), kThreads, 0, stream>>>(x, y, outer,
                                                                                    n, inner);
  return cudaGetLastError();
}

template <ReduceOp F, typename T>
cudaError_t launch_reduce(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                          cudaStream_t stream) {
  // n == 0 still writes every output (the identity); no outputs, nothing to launch.
  if (outer == 0 || inner == 0) return cudaSuccess;
  if (inner == 1) {
    reduce_rows_kernel<F, T><<<grid_for_rows(outer), kThreads, 0, stream>>>(x, y, outer, n);
  } else {
    reduce_strided_kernel<F, T><<<grid_for(outer * inner), kThreads, 0, stream>>>(x, y, outer, n,
                                                                                  inner);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t dispatch_reduce(ReduceOp op, const T* x, T* y, int64_t outer, int64_t n,
                            int64_t inner, cudaStream_t stream) {
  switch (op) {
    case ReduceOp::Sum:
      return launch_reduce<ReduceOp::Sum>(x, y, outer, n, inner, stream);
    case ReduceOp::Mean:
      return launch_reduce<ReduceOp::Mean>(x, y, outer, n, inner, stream);
    case ReduceOp::Max:
      return launch_reduce<ReduceOp::Max>(x, y, outer, n, inner, stream);
    case ReduceOp::Min:
      return launch_reduce<ReduceOp::Min>(x, y, outer, n, inner, stream);
    case ReduceOp::Prod:
      return launch_reduce<ReduceOp::Prod>(x, y, outer, n, inner, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t launch_fill_rows(const T* row, T* y, int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  fill_rows_kernel<T><<<grid_for(rows * n), kThreads, 0, stream>>>(row, y, rows * n, n);
  return cudaGetLastError();
}

}  // namespace

// The launchers of launch.h, once per element type.
#define PLANRT_MATH_LAUNCHERS(T)                                                              \
  cudaError_t binary_same_shape(BinaryOp op, const T* a, const T* b, T* y, int64_t n,         \
                                cudaStream_t stream) {                                        \
    return dispatch_binary(op, a, b, y, n, nullptr, stream);                                  \
  }                                                                                           \
  cudaError_t binary_broadcast(BinaryOp op, const T* a, const T* b, T* y, int64_t n,          \
                               const IndexMap& map, cudaStream_t stream) {                    \
    return dispatch_binary(op, a, b, y, n, &map, stream);                                     \
  }                                                                                           \
  cudaError_t unary(UnaryOp op, const T* x, T* y, int64_t n, cudaStream_t stream) {           \
    return dispatch_unary(op, x, y, n, stream);                                               \
  }                                                                                           \
  cudaError_t layer_norm(const T* x, const T* w, const T* b, T* y, int64_t rows, int64_t n,   \
                         double eps, cudaStream_t stream) {                                   \
    return launch_layer_norm<T>(x, nullptr, nullptr, w, b, y, rows, n, eps, stream);          \
  }                                                                                           \
  cudaError_t add_layer_norm(const T* x, const T* residual, T* sum, const T* w, const T* b,   \
                             T* y, int64_t rows, int64_t n, double eps, cudaStream_t stream) { \
    return launch_layer_norm<T>(x, residual, sum, w, b, y, rows, n, eps, stream);             \
  }                                                                                           \
  cudaError_t rms_norm(const T* x, const T* w, T* y, int64_t rows, int64_t n, double eps,     \
                       cudaStream_t stream) {                                                 \
    return launch_rms_norm<T>(x, w, y, rows, n, eps, stream);                                 \
  }                                                                                           \
  cudaError_t softmax_rows(const T* x, T* y, int64_t rows, int64_t n, int64_t causal_period,  \
                           cudaStream_t stream) {                                             \
    return launch_softmax_rows<false, T>(x, y, rows, n, causal_period, stream);               \
  }                                                                                           \
  cudaError_t softmax_strided(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,      \
                              cudaStream_t stream) {                                          \
    return launch_softmax_strided<false, T>(x, y, outer, n, inner, stream);                   \
  }                                                                                           \
  cudaError_t log_softmax_rows(const T* x, T* y, int64_t rows, int64_t n,                     \
                               cudaStream_t stream) {                                         \
    return launch_softmax_rows<true, T>(x, y, rows, n, 0, stream);                            \
  }                                                                                           \
  cudaError_t log_softmax_strided(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,  \
                                  cudaStream_t stream) {                                      \
    return launch_softmax_strided<true, T>(x, y, outer, n, inner, stream);                    \
  }                                                                                           \
  cudaError_t reduce(ReduceOp op, const T* x, T* y, int64_t outer, int64_t n, int64_t inner,  \
                     cudaStream_t stream) {                                                   \
    return dispatch_reduce<T>(op, x, y, outer, n, inner, stream);                             \
  }                                                                                           \
  cudaError_t fill_rows(const T* row, T* y, int64_t rows, int64_t n, cudaStream_t stream) {   \
    return launch_fill_rows<T>(row, y, rows, n, stream);                                      \
  }

PLANRT_MATH_LAUNCHERS(float)
PLANRT_MATH_LAUNCHERS(__nv_bfloat16)
PLANRT_MATH_LAUNCHERS(__half)
#undef PLANRT_MATH_LAUNCHERS

}  // namespace planrt::kernels::cuda::launch
