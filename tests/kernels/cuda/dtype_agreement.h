// The CPU-vs-CUDA comparison in each arithmetic dtype of the CUDA kernels, for the tests
// written once and run in f32, bf16 and f16 (kernels_in_each_dtype_test.cpp).
//
// f32: the CUDA kernel on the inputs against the CPU kernel on the same values, within
// 1e-5 (TF32 off). bf16: the inputs are rounded to bf16 once, the CPU computes in f32 on
// those rounded values, and the CUDA kernel's bf16 output (widened) must agree within
// 5e-3: what an output rounded to bf16 (relative step 2^-8) plus f32 accumulation leaves,
// with room; a wrong fragment layout or a missed rescale shows as errors of order 1.
// f16 the same way within 1e-3 (relative step 2^-11, about 2 of them): tight enough that
// an f16 path that rounded through bf16 anywhere (normwise about 2e-3) fails too.
#pragma once

#include <string_view>
#include <vector>

#include "kernels/cuda/cuda_test_util.h"

namespace planrt::kernels::cuda::testing {

double tolerance_of(DType dtype);  // 1e-5 (f32), 5e-3 (bf16) or 1e-3 (f16)

// f32 values -> the tensor of `dtype` holding them (bf16, f16: rounded to nearest even);
// none stays none.
HostTensor in_dtype(const HostTensor& f32, DType dtype);
// Back to f32 (bf16 and f16 widen exactly).
HostTensor widened(const HostTensor& t);
// The f32 values a kernel of `dtype` sees.
HostTensor rounded_to(const HostTensor& f32, DType dtype);

struct DtypeRun {
  Status cuda;
  double error = 0.0;
};

// The CUDA kernel of `op` on `inputs` in `dtype`, operands `offset_bytes` into their
// allocations (off 16-byte alignment: the kernels' fallback paths), against the CPU kernel
// on the values it sees.
DtypeRun run_in(DType dtype, CudaRunner& r, std::string_view op, const OpAttrs& attrs,
                const std::vector<HostTensor>& inputs, const Shape& out_shape,
                size_t offset_bytes = 0);

// EXPECT that the CUDA kernel succeeds and agrees within tolerance_of(dtype).
void ExpectAgreeIn(DType dtype, CudaRunner& r, std::string_view op, const OpAttrs& attrs,
                   const std::vector<HostTensor>& inputs, const Shape& out_shape,
                   size_t offset_bytes = 0);

}  // namespace planrt::kernels::cuda::testing
