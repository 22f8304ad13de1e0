// The sgemm calls of the CPU kernels (linear, matmul, attention), in one place so that the
// BLAS limits are handled once: dims must fit an int, and a zero inner dim (a sum over
// nothing) is answered here because BLAS rejects leading dims of 0.
//
// OpenBLAS serializes or threads internally; concurrent calls from distinct threads are
// safe with the pthread build Debian ships.
#pragma once

#include <cstdint>
#include <string_view>

#include "planrt/core/status.h"

namespace planrt::kernels::cpu {

// NotSupported naming the op when m, n or k exceeds INT_MAX.
Status check_gemm_dims(std::string_view op, int64_t m, int64_t n, int64_t k);

// y[m, n] = alpha * a[m, k] @ b[k, n]; row-major, contiguous, dims checked.
void gemm_nn(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
             float* y);
// y[m, n] = alpha * a[m, k] @ b[n, k]^T + beta * y; row-major, contiguous, dims checked.
void gemm_nt(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
             float beta, float* y);

}  // namespace planrt::kernels::cpu
