#include "kernels/cpu/blas.h"

#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/checks.h"

namespace planrt::kernels::cpu {
namespace {

// k == 0: alpha * (empty sum) + beta * y.
void scale_only(int64_t m, int64_t n, float beta, float* y) {
  if (beta == 0.0f) {
    std::fill(y, y + m * n, 0.0f);
  } else if (beta != 1.0f) {
    for (int64_t i = 0; i < m * n; ++i) y[i] *= beta;
  }
}

}  // namespace

Status check_gemm_dims(std::string_view op, int64_t m, int64_t n, int64_t k) {
  PLANRT_RETURN_IF_ERROR(check_blas_dim(op, "rows (M)", m));
  PLANRT_RETURN_IF_ERROR(check_blas_dim(op, "columns (N)", n));
  return check_blas_dim(op, "inner dim (K)", k);
}

void gemm_nn(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
             float* y) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_only(m, n, 0.0f, y);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(k), b, static_cast<int>(n), 0.0f, y,
              static_cast<int>(n));
}

void gemm_nt(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
             float beta, float* y) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_only(m, n, beta, y);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(k), b, static_cast<int>(k), beta, y,
              static_cast<int>(n));
}

}  // namespace planrt::kernels::cpu
