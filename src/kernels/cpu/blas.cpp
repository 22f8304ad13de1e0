#include "kernels/cpu/blas.h"

#include <dnnl.h>

#include <algorithm>

#include "kernels/cpu/checks.h"

namespace planrt::kernels::cpu {
namespace {

// k == 0: alpha * (empty sum) + beta * y.
void scale_only(int64_t m, int64_t n, float beta, float* y, int64_t ldy) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = y + i * ldy;
    if (beta == 0.0f) {
      std::fill(row, row + n, 0.0f);
    } else if (beta != 1.0f) {
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  }
}

Status sgemm(char transb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
             int64_t lda, const float* b, int64_t ldb, float beta, float* y, int64_t ldy) {
  if (m == 0 || n == 0) return {};
  if (k == 0) {
    scale_only(m, n, beta, y, ldy);
    return {};
  }
  dnnl_status_t s = dnnl_sgemm('N', transb, m, n, k, alpha, a, lda, b, ldb, beta, y, ldy);
  if (s == dnnl_success) return {};
  return make_error(s == dnnl_out_of_memory ? ErrorCode::OutOfMemory : ErrorCode::Internal,
                    "oneDNN sgemm of {} x {} x {} (transb {}) failed with status {}", m, n, k,
                    transb, static_cast<int>(s));
}

}  // namespace

Status check_gemm_dims(std::string_view op, int64_t m, int64_t n, int64_t k) {
  PLANRT_RETURN_IF_ERROR(check_blas_dim(op, "rows (M)", m));
  PLANRT_RETURN_IF_ERROR(check_blas_dim(op, "columns (N)", n));
  return check_blas_dim(op, "inner dim (K)", k);
}

Status gemm_nn(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* y, int64_t ldy) {
  return sgemm('N', m, n, k, alpha, a, lda, b, ldb, beta, y, ldy);
}

Status gemm_nt(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* y, int64_t ldy) {
  return sgemm('T', m, n, k, alpha, a, lda, b, ldb, beta, y, ldy);
}

}  // namespace planrt::kernels::cpu
