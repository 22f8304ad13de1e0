// The matrix products of the CPU kernels (linear, matmul, attention), in one place so that
// the library's limits are handled once: a zero inner dim (a sum over nothing) is answered
// here, and a library failure becomes a Status.
//
// Products run on oneDNN's sgemm (Debian libdnnl), which picks its kernels by the CPU's
// features (AVX-512, AVX2, ...) at run time, not by a table of known models: OpenBLAS 0.3.21
// (Debian 12) does not know recent Xeons and falls back to a kernel several times slower there
// (docs/design.md §10). It threads over the calling thread's count (kernels/cpu/threading.h)
// and runs single-threaded inside a parallel region. Thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "planrt/core/status.h"

namespace planrt::kernels::cpu {

// NotSupported naming the op when m, n or k exceeds what one product takes (INT_MAX, the
// bound the rest of the CPU kernels index within).
Status check_gemm_dims(std::string_view op, int64_t m, int64_t n, int64_t k);

// y[m, n] = alpha * a[m, k] @ b[k, n] + beta * y; row-major, leading dims as given (the
// row lengths when contiguous).
Status gemm_nn(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* y, int64_t ldy);
// y[m, n] = alpha * a[m, k] @ b[n, k]^T + beta * y; row-major, leading dims as given.
Status gemm_nt(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* y, int64_t ldy);

}  // namespace planrt::kernels::cpu
