// GEMMs with a fused epilogue through cuBLASLt (the plain products are in gemm.h).
// Contract as gemm.h: row-major f32 or bf16 (every operand, the bias too), enqueued on ctx.stream, never synchronizes, TF32 only
// when the handle's math mode allows it. Thread safety: the algorithm cache is shared and
// locked; the handle is the caller's (one per thread or stream in flight).
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/cuda/cuda_kernel.h"

namespace planrt::kernels::cuda {

// linear's y[m, n] = x[m, k] @ w[n, k]^T + bias[n] in one call, the bias added by the
// GEMM's epilogue instead of a pass of its own. Returns false, having enqueued nothing,
// when it does not apply (an empty dim, a pointer not 16-byte aligned, no cuBLASLt
// algorithm for the problem, a dtype other than f32 and bf16): the caller then takes its two-pass path. The heuristic's
// answer is cached per device, dtype, shape and math mode.
Result<bool> gemm_bias_nk(std::string_view op, const CudaKernelContext& ctx, DType dtype,
                          int64_t m, int64_t n, int64_t k, const void* x, const void* w,
                          const void* bias, void* y);

}  // namespace planrt::kernels::cuda
