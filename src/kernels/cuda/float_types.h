// The CUDA kernels' floating dtypes as C++ element types, for the host-side kernels that pick
// a launcher by dtype: F32 float, BF16 __nv_bfloat16, F16 __half (the 16-bit types storage
// only in the device code, computed in f32: bf16_convert.cuh). The caller has checked the
// dtype (require_float_inputs, checks.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "planrt/core/dtype.h"

namespace planrt::kernels::cuda {

template <typename T>
struct FloatType {
  using type = T;
};

// body(FloatType<T>{}) for dtype's element type: every branch must return the same type.
// A dtype other than BF16 or F16 takes float.
template <typename Body>
decltype(auto) with_float_type(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::BF16: return body(FloatType<__nv_bfloat16>{});
    case DType::F16: return body(FloatType<__half>{});
    default: return body(FloatType<float>{});
  }
}

}  // namespace planrt::kernels::cuda
