// Row-major products on cuBLAS, f32, bf16 or f16 (every operand the same dtype; bf16 and f16
// products accumulate in f32 and round the result, as PyTorch's bf16 and f16 matmuls). cuBLAS is column-major, so y = a @ b is computed as
// y^T = b^T @ a^T, which reads the row-major buffers as they are. Dims are checked against
// the int limits (cpu::check_gemm_dims); a zero inner dim (a sum over nothing) is
// answered here, as on the CPU, since cuBLAS rejects leading dims of 0. beta is 0 or 1.
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/cuda/cuda_kernel.h"

namespace planrt::kernels::cuda {

enum class BLayout { KN, NK };  // b is [k, n] (a @ b) or [n, k] (a @ b^T)

// Row pitches of the operands in elements; 0 = packed rows (k for a, n or k for b, n for y).
struct GemmPitches {
  int64_t a = 0;
  int64_t b = 0;
  int64_t y = 0;
};

// count products: y_i[m, n] = alpha * a_i[m, k] @ b_i + beta * y_i, operand i at
// base + i * stride elements (stride 0 broadcasts one matrix), rows `pitches` apart.
// count == 1: a plain GEMM. No two y_i may share an element. dtype: F32, BF16 or F16.
Status gemm_strided(std::string_view op, const CudaKernelContext& ctx, BLayout layout,
                    DType dtype, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                    int64_t stride_a, const void* b, int64_t stride_b, float beta, void* y,
                    int64_t stride_y, int64_t count, GemmPitches pitches = {});
inline Status gemm_strided(std::string_view op, const CudaKernelContext& ctx, BLayout layout,
                           int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                           int64_t stride_a, const float* b, int64_t stride_b, float beta,
                           float* y, int64_t stride_y, int64_t count, GemmPitches pitches = {}) {
  return gemm_strided(op, ctx, layout, DType::F32, m, n, k, alpha, a, stride_a, b, stride_b, beta,
                      y, stride_y, count, pitches);
}

// Pointer-array batched GEMM (b KN, beta 0): arrays of count device pointers in device
// memory.
Status gemm_pointer_batched(std::string_view op, const CudaKernelContext& ctx, DType dtype,
                            int64_t m, int64_t n, int64_t k, const void* const* a,
                            const void* const* b, void* const* y, int64_t count);

}  // namespace planrt::kernels::cuda
