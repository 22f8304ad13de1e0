// Launchers of the device code (*.cu), called by the host-side kernels after every operand
// check. Plain types only, so that the .cu files need neither fmt nor the planrt headers.
// Each enqueues on `stream`, never synchronizes, and returns the launch's error
// (cudaGetLastError). Sizes are in elements unless named *_bytes; n == 0 launches nothing.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/attention_layout.h"
#include "kernels/cuda/device_error.h"

namespace planrt::kernels::cuda::launch {

inline constexpr int kMaxDims = 8;

// Row-major walk of `size`; operand k reads at sum(index[d] * stride_k[d]).
struct IndexMap {
  int rank = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride_a[kMaxDims] = {};
  int64_t stride_b[kMaxDims] = {};
};

enum class BinaryOp : int { Add, Sub, Mul, Div, Pow };
enum class UnaryOp : int { Relu, Silu, GeluErf, GeluTanh, Sqrt, Neg, Exp, Erf, Tanh, Sigmoid };
// kernels::ReduceFn (op_plans.h) in the launchers' plain terms.
enum class ReduceOp : int { Sum, Mean, Max, Min, Prod };

// The arithmetic launchers exist for float, __nv_bfloat16 and __half (the 16-bit types
// storage only: computed in f32, rounded to nearest even on store; math_kernels.cu).
#define PLANRT_MATH_LAUNCHER_DECLS(T)                                                         \
  /* y[i] = op(a[i], b[i]). */                                                                \
  cudaError_t binary_same_shape(BinaryOp op, const T* a, const T* b, T* y, int64_t n,         \
                                cudaStream_t stream);                                         \
  /* y[i] = op(a[map_a(i)], b[map_b(i)]) over the n = prod(map.size) outputs. */              \
  cudaError_t binary_broadcast(BinaryOp op, const T* a, const T* b, T* y, int64_t n,          \
                               const IndexMap& map, cudaStream_t stream);                     \
  cudaError_t unary(UnaryOp op, const T* x, T* y, int64_t n, cudaStream_t stream);            \
  /* One block per row of n; w, b may be null. */                                             \
  cudaError_t layer_norm(const T* x, const T* w, const T* b, T* y, int64_t rows, int64_t n,   \
                         double eps, cudaStream_t stream);                                    \
  cudaError_t rms_norm(const T* x, const T* w, T* y, int64_t rows, int64_t n, double eps,     \
                       cudaStream_t stream);                                                  \
  /* sum = x + residual (same shape), y = layer_norm(sum): one pass over the rows. */         \
  cudaError_t add_layer_norm(const T* x, const T* residual, T* sum, const T* w, const T* b,   \
                             T* y, int64_t rows, int64_t n, double eps, cudaStream_t stream); \
  /* Softmax of each contiguous row of n (y may equal x). causal_period > 0: row r is       \
     query i = r % causal_period and keys j > i are masked (weight 0), PyTorch's top-left    \
     is_causal. */                                                                            \
  cudaError_t softmax_rows(const T* x, T* y, int64_t rows, int64_t n, int64_t causal_period,  \
                           cudaStream_t stream);                                              \
  /* Softmax along a middle dim: x is [outer, n, inner], each (o, i) line normalised. */      \
  cudaError_t softmax_strided(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,      \
                              cudaStream_t stream);                                           \
  /* log_softmax (x - max - log(sum(exp(x - max)))) of each contiguous row of n, and along  \
     a middle dim of x [outer, n, inner]; y may equal x. */                                   \
  cudaError_t log_softmax_rows(const T* x, T* y, int64_t rows, int64_t n,                     \
                               cudaStream_t stream);                                          \
  cudaError_t log_softmax_strided(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,  \
                                  cudaStream_t stream);                                       \
  /* y[o, i] = op over j of x[o, j, i] (x is [outer, n, inner]), folded in f64; n == 0       \
     writes the identity (sum 0, prod 1, max -inf, min +inf, mean NaN); max and min keep a   \
     NaN. */                                                                                  \
  cudaError_t reduce(ReduceOp op, const T* x, T* y, int64_t outer, int64_t n, int64_t inner,  \
                     cudaStream_t stream);                                                    \
  /* y[r, :] = row[:] for r < rows (the bias of linear before a beta = 1 GEMM). */            \
  cudaError_t fill_rows(const T* row, T* y, int64_t rows, int64_t n, cudaStream_t stream);

PLANRT_MATH_LAUNCHER_DECLS(float)
PLANRT_MATH_LAUNCHER_DECLS(__nv_bfloat16)
PLANRT_MATH_LAUNCHER_DECLS(__half)
#undef PLANRT_MATH_LAUNCHER_DECLS

// argmax (max) or argmin of each (o, i) line of x [outer, n, inner], n > 0, as the i64
// index along n: the first of the best, the last with select_last; a NaN beats every number
// (reduce_kernels.cu).
cudaError_t arg_reduce(const float* x, int64_t* y, int64_t outer, int64_t n, int64_t inner,
                       bool max, bool select_last, cudaStream_t stream);
cudaError_t arg_reduce(const __nv_bfloat16* x, int64_t* y, int64_t outer, int64_t n,
                       int64_t inner, bool max, bool select_last, cudaStream_t stream);
cudaError_t arg_reduce(const __half* x, int64_t* y, int64_t outer, int64_t n, int64_t inner,
                       bool max, bool select_last, cudaStream_t stream);
// Running sums along n of x [outer, n, inner] (y may equal x): exclusive, y[k] sums x[< k];
// reverse, the sums run from the end. Floats sum in f64, rounded once per element; integers
// in their own width, wrapping (reduce_kernels.cu).
#define PLANRT_CUMSUM_LAUNCHER_DECL(T)                                                        \
  cudaError_t cumsum(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool exclusive, \
                     bool reverse, cudaStream_t stream);
PLANRT_CUMSUM_LAUNCHER_DECL(float)
PLANRT_CUMSUM_LAUNCHER_DECL(__nv_bfloat16)
PLANRT_CUMSUM_LAUNCHER_DECL(__half)
PLANRT_CUMSUM_LAUNCHER_DECL(int32_t)
PLANRT_CUMSUM_LAUNCHER_DECL(int64_t)
#undef PLANRT_CUMSUM_LAUNCHER_DECL

// One-pass attention for head dim 64 (d == dv == 64): `heads` (batch x heads) problems
// q [sq, 64], k and v [sk, 64] -> out [sq, 64], their rows where `layout` puts them
// (kernels/attention_layout.h); sk > 0. Online softmax, no score matrix, no temporary
// memory (attention_kernels.cu). `mask` (null: none) is read as layout.mask says: bool bytes
// (nonzero: attend) or additive values of the operands' dtype; a query row left without a
// key gives zeros.
cudaError_t fused_attention(const float* q, const float* k, const float* v, const void* mask,
                            float* out, int64_t heads, int64_t sq, int64_t sk, float scale,
                            bool causal, const AttentionLayout& layout, cudaStream_t stream);
// The same for bf16 or f16 operands on the tensor cores (attention_bf16_kernels.cu, one
// kernel templated on the element type): scores and the output accumulate in f32, the
// probabilities enter the second product in the operands' dtype, as in FlashAttention. An
// additive mask has the operands' dtype.
cudaError_t fused_attention(const __nv_bfloat16* q, const __nv_bfloat16* k,
                            const __nv_bfloat16* v, const void* mask, __nv_bfloat16* out,
                            int64_t heads, int64_t sq, int64_t sk, float scale, bool causal,
                            const AttentionLayout& layout, cudaStream_t stream);
cudaError_t fused_attention(const __half* q, const __half* k, const __half* v, const void* mask,
                            __half* out, int64_t heads, int64_t sq, int64_t sk, float scale,
                            bool causal, const AttentionLayout& layout, cudaStream_t stream);
// The unfused f32 path's softmax under a mask, in place: `scores` holds heads x sq rows of
// sk (flat heads first_head.. of `mask_layout`), already scaled; each row gets the causal
// mask (keys past its query, when causal), the mask (bool: -inf where 0; additive f32: added)
// and its softmax; a row left without a key gives zeros (attention_kernels.cu).
cudaError_t attention_softmax_rows(float* scores, int64_t heads, int64_t sq, int64_t sk,
                                   bool causal, const void* mask,
                                   const AttentionMask& mask_layout, int64_t first_head,
                                   cudaStream_t stream);

// Batched-GEMM pointer arrays for count products: a[i] = a + map_a(i), b[i] = b + map_b(i),
// c[i] = c + i * c_stride, all in elements of elem_size bytes (map strides included).
cudaError_t gemm_pointers(const void* a, const void* b, void* c, size_t elem_size,
                          int64_t c_stride, int64_t count, const IndexMap& map,
                          const void** a_ptrs, const void** b_ptrs, void** c_ptrs,
                          cudaStream_t stream);

// y[i] = x[map_a(i)] for n elements of elem_size bytes (1, 2, 4 or 8); stride_b unused.
cudaError_t permute(const void* x, void* y, size_t elem_size, int64_t n, const IndexMap& map,
                    cudaStream_t stream);
// rows copies of row_bytes: dst + r * dst_pitch <- src + r * src_pitch (bytes).
cudaError_t copy_rows(const void* src, int64_t src_pitch, void* dst, int64_t dst_pitch,
                      int64_t rows, int64_t row_bytes, cudaStream_t stream);

// Records the first id outside [0, table_rows) in *record (unless one is recorded).
cudaError_t embedding_check(const void* ids, bool ids_i64, int64_t n, int64_t table_rows,
                            CudaDeviceError* record, cudaStream_t stream);
// out row i = table row ids[i]; a row of zeros for an id outside the table.
cudaError_t embedding_gather(const void* ids, bool ids_i64, int64_t n, const void* table,
                             int64_t table_rows, int64_t row_bytes, void* out,
                             cudaStream_t stream);

// gather_elements (kernels/op_plans.h): y[i] = x[map_a(i) + k * dim_stride] over the n
// elements of indices' shape (map.size), where k = indices[i] (i32 or i64), plus dim_size
// when negative; map.stride_a holds x's strides with 0 along the gathered dim. Elements of
// elem_size bytes (1, 2, 4 or 8); an index outside [-dim_size, dim_size) gives a zero
// element (never a read outside x).
cudaError_t gather_elements(const void* x, size_t elem_size, const void* indices,
                            bool indices_i64, void* y, int64_t n, const IndexMap& map,
                            int64_t dim_stride, int64_t dim_size, cudaStream_t stream);
// Records the first index outside [-dim_size, dim_size) in *record (unless one is recorded).
cudaError_t gather_elements_check(const void* indices, bool indices_i64, int64_t n,
                                  int64_t dim_size, CudaDeviceError* record, cudaStream_t stream);

// take (kernels/op_plans.h): y[i] = x[k] over the n indices, k = indices[i] (i32 or i64),
// plus numel when negative. Elements of elem_size bytes (1, 2, 4 or 8); an index outside
// [-numel, numel) gives a zero element (never a read outside x).
cudaError_t take(const void* x, size_t elem_size, int64_t numel, const void* indices,
                 bool indices_i64, void* y, int64_t n, cudaStream_t stream);
// Records the first index outside [-numel, numel) in *record (unless one is recorded).
cudaError_t take_check(const void* indices, bool indices_i64, int64_t n, int64_t numel,
                       CudaDeviceError* record, cudaStream_t stream);

// *y = value: one thread of one block, the value a kernel argument (no host memory read,
// so it can be captured in a CUDA graph; size's output).
cudaError_t write_i64(int64_t* y, int64_t value, cudaStream_t stream);

// ---- the convolutional networks' ops (vision_kernels.cu), float, bf16 and f16 -----------

// A 2-D sliding window over h x w images (convolution padding, pooling).
struct Window {
  int64_t h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, stride_h = 1, stride_w = 1, pad_top = 0, pad_left = 0;
  int64_t pad_bottom = 0, pad_right = 0, dilation_h = 1, dilation_w = 1;
};

#define PLANRT_VISION_LAUNCHER_DECLS(T)                                                       \
  /* y = (times_x ? x : 1) * clamp(scale * x + shift, lo, hi); NaN stays NaN. */              \
  cudaError_t clamp(const T* x, T* y, int64_t n, float scale, float shift, float lo, float hi, \
                    bool times_x, cudaStream_t stream);                                       \
  /* Max (NaN wins) or average (divisor: the window within the input, or within the padded   \
     input with count_include_pad) of each window of each of `planes` images (NCHW: x         \
     [planes, h, w] -> y [planes, oh, ow]). */                                                \
  cudaError_t pool2d(bool max, bool count_include_pad, const T* x, T* y, int64_t planes,       \
                     const Window& window, cudaStream_t stream);                              \
  /* The same channels-last (NHWC): x [images, h, w, channels] -> y [images, oh, ow,          \
     channels], each channel's windows as pool2d computes them, to the same bits. */          \
  cudaError_t pool2d_channels_last(bool max, bool count_include_pad, const T* x, T* y,         \
                                   int64_t images, int64_t channels, const Window& window,    \
                                   cudaStream_t stream);                                      \
  /* y[plane, i] = act(y[plane, i] + bias[plane % channels]) over planes of hw; bias may be  \
     null; relu: max(0, .) with NaN kept. */                                                  \
  cudaError_t bias_activation(T* y, const T* bias, int64_t planes, int64_t channels,          \
                              int64_t hw, bool relu, cudaStream_t stream);                    \
  /* Channels-last: y[row, c] = act(y[row, c] + bias[c]) over rows of `channels` (an NHWC     \
     output: rows = n * oh * ow); bias may be null; relu as above. */                         \
  cudaError_t bias_activation_channels_last(T* y, const T* bias, int64_t rows,                \
                                            int64_t channels, bool relu, cudaStream_t stream);

PLANRT_VISION_LAUNCHER_DECLS(float)
PLANRT_VISION_LAUNCHER_DECLS(__nv_bfloat16)
PLANRT_VISION_LAUNCHER_DECLS(__half)
// Channels-last depthwise convolution (depthwise_conv_kernels.cu): one filter per channel,
// weight [channels, kh, kw] (the nhwc layout's [c, kh, kw, 1]), x [images, h, w, channels]
// -> y [images, oh, ow, channels], y = act(bias[c] + the window's products, summed in f32 in
// the filter's row-major order); bias may be null; relu as above. Any pads (no padded copy
// needed), strides and dilations.
cudaError_t depthwise_conv2d(const float* x, const float* w, const float* bias, float* y, int64_t images,
                             int64_t channels, const Window& window, bool relu, cudaStream_t stream);
cudaError_t depthwise_conv2d(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias,
                             __nv_bfloat16* y, int64_t images, int64_t channels, const Window& window, bool relu,
                             cudaStream_t stream);
cudaError_t depthwise_conv2d(const __half* x, const __half* w, const __half* bias, __half* y, int64_t images,
                             int64_t channels, const Window& window, bool relu, cudaStream_t stream);
#undef PLANRT_VISION_LAUNCHER_DECLS

enum class PadMode : int { Constant, Reflect, Edge };
// pad over a rank <= kMaxDims tensor of elements of elem_size bytes (1, 2, 4 or 8): output
// dim d has out_size[d] entries, reading input index o - begin[d] (in_size[d] long) inside
// it, else the constant (fill, elem_size bytes) or the reflected or clamped index.
struct PadMap {
  int rank = 0;
  int64_t out_size[kMaxDims] = {};
  int64_t in_size[kMaxDims] = {};
  int64_t begin[kMaxDims] = {};
};
cudaError_t pad(const void* x, void* y, size_t elem_size, int64_t n, const PadMap& map, PadMode mode,
                uint64_t fill, cudaStream_t stream);

}  // namespace planrt::kernels::cuda::launch
