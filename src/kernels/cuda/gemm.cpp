#include "kernels/cuda/gemm.h"

#include <algorithm>

#include "kernels/cpu/blas.h"
#include "kernels/cuda/checks.h"

namespace planrt::kernels::cuda {
namespace {

Status check_dtype(std::string_view op, DType dtype) {
  if (dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16) return {};
  return make_error(ErrorCode::NotSupported, "{}: no CUDA GEMM for dtype {}", op,
                    dtype_name(dtype));
}

// The cuBLAS type of a 16-bit operand (bf16 or f16; f32 takes the Sgemm calls).
cudaDataType_t sixteen_bit_type(DType dtype) {
  return dtype == DType::F16 ? CUDA_R_16F : CUDA_R_16BF;
}

}  // namespace

Status gemm_strided(std::string_view op, const CudaKernelContext& ctx, BLayout layout,
                    DType dtype, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
                    int64_t stride_a, const void* b, int64_t stride_b, float beta, void* y,
                    int64_t stride_y, int64_t count, GemmPitches pitches) {
  PLANRT_RETURN_IF_ERROR(check_dtype(op, dtype));
  PLANRT_RETURN_IF_ERROR(cpu::check_gemm_dims(op, m, n, k));
  PLANRT_RETURN_IF_ERROR(cpu::check_blas_dim(op, "batch count", count));
  if (m == 0 || n == 0 || count == 0) return {};
  const int64_t packed_b = layout == BLayout::KN ? n : k;
  if ((pitches.a != 0 && pitches.a < k) || (pitches.b != 0 && pitches.b < packed_b) ||
      (pitches.y != 0 && pitches.y < n)) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: GEMM row pitches a {}, b {}, y {} below the rows' lengths {}, {}, {}", op,
                      pitches.a, pitches.b, pitches.y, k, packed_b, n);
  }
  const auto elem = static_cast<int64_t>(element_size(dtype));
  const int64_t ldy = pitches.y != 0 ? pitches.y : n;
  if (k == 0) {
    if (beta != 0.0f) return {};  // beta == 1: y keeps what it holds
    auto* bytes = static_cast<char*>(y);
    if (ldy != n) {  // rows apart: one 2-D memset per product
      for (int64_t i = 0; i < count; ++i) {
        PLANRT_RETURN_IF_ERROR(cuda_status(
            op, "cudaMemset2DAsync",
            cudaMemset2DAsync(bytes + i * stride_y * elem, static_cast<size_t>(ldy * elem), 0,
                              static_cast<size_t>(n * elem), static_cast<size_t>(m), ctx.stream)));
      }
      return {};
    }
    if (stride_y == m * n) {
      return cuda_status(op, "cudaMemsetAsync",
                         cudaMemsetAsync(bytes, 0, static_cast<size_t>(count * m * n * elem),
                                         ctx.stream));
    }
    for (int64_t i = 0; i < count; ++i) {
      PLANRT_RETURN_IF_ERROR(cuda_status(
          op, "cudaMemsetAsync",
          cudaMemsetAsync(bytes + i * stride_y * elem, 0, static_cast<size_t>(m * n * elem),
                          ctx.stream)));
    }
    return {};
  }
  PLANRT_ASSIGN_OR_RETURN(const CublasLibrary* cu, prepare_cublas(op, ctx));
  const auto mi = static_cast<int>(m);
  const auto ni = static_cast<int>(n);
  const auto ki = static_cast<int>(k);
  const cublasOperation_t op_b = layout == BLayout::KN ? CUBLAS_OP_N : CUBLAS_OP_T;
  const int ldb = static_cast<int>(pitches.b != 0 ? pitches.b : packed_b);
  const int lda = static_cast<int>(pitches.a != 0 ? pitches.a : k);
  const int ldc = static_cast<int>(ldy);
  PLANRT_RETURN_IF_ERROR(cpu::check_blas_dim(op, "row pitch", std::max({pitches.a, pitches.b, pitches.y})));
  if (dtype == DType::F32) {
    const auto* fa = static_cast<const float*>(a);
    const auto* fb = static_cast<const float*>(b);
    auto* fy = static_cast<float*>(y);
    if (count == 1) {
      return cublas_status(op, "cublasSgemm",
                           cu->cublasSgemm_v2(ctx.cublas, op_b, CUBLAS_OP_N, ni, mi, ki, &alpha, fb, ldb,
                                       fa, lda, &beta, fy, ldc));
    }
    return cublas_status(
        op, "cublasSgemmStridedBatched",
        cu->cublasSgemmStridedBatched(ctx.cublas, op_b, CUBLAS_OP_N, ni, mi, ki, &alpha, fb, ldb,
                                  stride_b, fa, lda, stride_a, &beta, fy, ldc, stride_y,
                                  static_cast<int>(count)));
  }
  // bf16 or f16 operands, f32 accumulation and scalars.
  const cudaDataType_t type = sixteen_bit_type(dtype);
  if (count == 1) {
    return cublas_status(op, "cublasGemmEx",
                         cu->cublasGemmEx(ctx.cublas, op_b, CUBLAS_OP_N, ni, mi, ki, &alpha, b,
                                      type, ldb, a, type, lda, &beta, y, type,
                                      ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  return cublas_status(
      op, "cublasGemmStridedBatchedEx",
      cu->cublasGemmStridedBatchedEx(ctx.cublas, op_b, CUBLAS_OP_N, ni, mi, ki, &alpha, b,
                                 type, ldb, stride_b, a, type, lda, stride_a, &beta,
                                 y, type, ldc, stride_y, static_cast<int>(count),
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

Status gemm_pointer_batched(std::string_view op, const CudaKernelContext& ctx, DType dtype,
                            int64_t m, int64_t n, int64_t k, const void* const* a,
                            const void* const* b, void* const* y, int64_t count) {
  PLANRT_RETURN_IF_ERROR(check_dtype(op, dtype));
  PLANRT_RETURN_IF_ERROR(cpu::check_gemm_dims(op, m, n, k));
  PLANRT_RETURN_IF_ERROR(cpu::check_blas_dim(op, "batch count", count));
  if (m == 0 || n == 0 || count == 0 || k == 0) {
    return make_error(ErrorCode::Internal, "{}: pointer-batched GEMM with an empty dim", op);
  }
  PLANRT_ASSIGN_OR_RETURN(const CublasLibrary* cu, prepare_cublas(op, ctx));
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const auto mi = static_cast<int>(m);
  const auto ni = static_cast<int>(n);
  const auto ki = static_cast<int>(k);
  if (dtype == DType::F32) {
    return cublas_status(
        op, "cublasSgemmBatched",
        cu->cublasSgemmBatched(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, ni, mi, ki, &alpha,
                           reinterpret_cast<const float* const*>(b), ni,
                           reinterpret_cast<const float* const*>(a), ki, &beta,
                           reinterpret_cast<float* const*>(y), ni, static_cast<int>(count)));
  }
  const cudaDataType_t type = sixteen_bit_type(dtype);
  return cublas_status(op, "cublasGemmBatchedEx",
                       cu->cublasGemmBatchedEx(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, ni, mi, ki,
                                           &alpha, b, type, ni, a, type, ki, &beta,
                                           y, type, ni, static_cast<int>(count),
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace planrt::kernels::cuda
