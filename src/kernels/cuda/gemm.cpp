#include "kernels/cuda/gemm.h"

#include "kernels/cpu/blas.h"
#include "kernels/cuda/checks.h"

namespace planrt::kernels::cuda {

Status gemm_strided(std::string_view op, const CudaKernelContext& ctx, BLayout layout, int64_t m,
                    int64_t n, int64_t k, float alpha, const float* a, int64_t stride_a,
                    const float* b, int64_t stride_b, float beta, float* y, int64_t stride_y,
                    int64_t count) {
  PLANRT_RETURN_IF_ERROR(cpu::check_gemm_dims(op, m, n, k));
  PLANRT_RETURN_IF_ERROR(cpu::check_blas_dim(op, "batch count", count));
  if (m == 0 || n == 0 || count == 0) return {};
  if (k == 0) {
    if (beta != 0.0f) return {};  // beta == 1: y keeps what it holds
    if (stride_y == m * n) {
      return cuda_status(op, "cudaMemsetAsync",
                         cudaMemsetAsync(y, 0, static_cast<size_t>(count * m * n) * sizeof(float),
                                         ctx.stream));
    }
    for (int64_t i = 0; i < count; ++i) {
      PLANRT_RETURN_IF_ERROR(cuda_status(
          op, "cudaMemsetAsync",
          cudaMemsetAsync(y + i * stride_y, 0, static_cast<size_t>(m * n) * sizeof(float),
                          ctx.stream)));
    }
    return {};
  }
  PLANRT_RETURN_IF_ERROR(prepare_cublas(op, ctx));
  const auto mi = static_cast<int>(m);
  const auto ni = static_cast<int>(n);
  const auto ki = static_cast<int>(k);
  const cublasOperation_t op_b = layout == BLayout::KN ? CUBLAS_OP_N : CUBLAS_OP_T;
  const int ldb = layout == BLayout::KN ? ni : ki;
  if (count == 1) {
    return cublas_status(op, "cublasSgemm",
                         cublasSgemm(ctx.cublas, op_b, CUBLAS_OP_N, ni, mi, ki, &alpha, b, ldb, a,
                                     ki, &beta, y, ni));
  }
  return cublas_status(
      op, "cublasSgemmStridedBatched",
      cublasSgemmStridedBatched(ctx.cublas, op_b, CUBLAS_OP_N, ni, mi, ki, &alpha, b, ldb,
                                stride_b, a, ki, stride_a, &beta, y, ni, stride_y,
                                static_cast<int>(count)));
}

Status gemm_pointer_batched(std::string_view op, const CudaKernelContext& ctx, int64_t m,
                            int64_t n, int64_t k, const float* const* a, const float* const* b,
                            float* const* y, int64_t count) {
  PLANRT_RETURN_IF_ERROR(cpu::check_gemm_dims(op, m, n, k));
  PLANRT_RETURN_IF_ERROR(cpu::check_blas_dim(op, "batch count", count));
  if (m == 0 || n == 0 || count == 0 || k == 0) {
    return make_error(ErrorCode::Internal, "{}: pointer-batched GEMM with an empty dim", op);
  }
  PLANRT_RETURN_IF_ERROR(prepare_cublas(op, ctx));
  const float alpha = 1.0f;
  const float beta = 0.0f;
  return cublas_status(op, "cublasSgemmBatched",
                       cublasSgemmBatched(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N,
                                          static_cast<int>(n), static_cast<int>(m),
                                          static_cast<int>(k), &alpha, b, static_cast<int>(n), a,
                                          static_cast<int>(k), &beta, y, static_cast<int>(n),
                                          static_cast<int>(count)));
}

}  // namespace planrt::kernels::cuda
