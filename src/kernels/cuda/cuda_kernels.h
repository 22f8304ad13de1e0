// The CUDA kernels, one function per op of the table; find_cuda_kernel (cuda_kernel.cpp)
// is the way in from outside the layer. Each follows the CudaKernelFn contract of
// cuda_kernel.h. Dtypes: the arithmetic, normalization, reduction, attention, vision and
// linear algebra kernels take f32 or bf16 (one dtype per call); add, sub, mul, div, pow and
// neg also i32, i64 and u8 (their integer forms), cumsum also i32 and i64; the typed
// elementwise family every dtype its rules admit (f32, f16, bf16, i32, i64, u8, bool; f16
// and bf16 computed in f32); data movement (reshape, permute, transpose, concat, slice,
// expand, pad, embedding, gather_elements, take) any dtype; size any dtype of x (never
// read), an i64 output.
#pragma once

#include "kernels/cuda/cuda_kernel.h"
#include "kernels/elementwise_ops.h"

namespace planrt::kernels::cuda {

#define PLANRT_CUDA_KERNEL(fn)                                                      \
  Status fn(const CudaKernelContext& ctx, const OpAttrs& attrs,                     \
            std::span<const TensorView> inputs, std::span<const TensorView> outputs)

// elementwise.cpp
PLANRT_CUDA_KERNEL(add);
PLANRT_CUDA_KERNEL(sub);
PLANRT_CUDA_KERNEL(mul);
PLANRT_CUDA_KERNEL(div);
PLANRT_CUDA_KERNEL(power);
PLANRT_CUDA_KERNEL(unary_sqrt);
PLANRT_CUDA_KERNEL(unary_neg);
PLANRT_CUDA_KERNEL(unary_exp);
PLANRT_CUDA_KERNEL(unary_erf);
PLANRT_CUDA_KERNEL(unary_tanh);
PLANRT_CUDA_KERNEL(unary_sigmoid);
PLANRT_CUDA_KERNEL(relu);
PLANRT_CUDA_KERNEL(silu);
PLANRT_CUDA_KERNEL(gelu);
// typed_elementwise.cpp: the typed elementwise family (kernels/elementwise_ops.h), every
// dtype its rules admit.
#define PLANRT_CUDA_ELEMENTWISE_KERNEL(op) PLANRT_CUDA_KERNEL(elementwise_##op);
PLANRT_ELEMENTWISE_OPS(PLANRT_CUDA_ELEMENTWISE_KERNEL)
#undef PLANRT_CUDA_ELEMENTWISE_KERNEL
// The integer forms (i32, i64, u8) of add, sub, mul, div, pow and neg, which elementwise.cpp
// hands integer operands to: wrapping, division truncating toward zero with x / 0 = 0, never
// a trap (kernels/elementwise_ops.h).
PLANRT_CUDA_KERNEL(integer_add);
PLANRT_CUDA_KERNEL(integer_sub);
PLANRT_CUDA_KERNEL(integer_mul);
PLANRT_CUDA_KERNEL(integer_div);
PLANRT_CUDA_KERNEL(integer_pow);
PLANRT_CUDA_KERNEL(integer_neg);
// vision.cpp
PLANRT_CUDA_KERNEL(conv2d);
PLANRT_CUDA_KERNEL(max_pool2d);
PLANRT_CUDA_KERNEL(avg_pool2d);
PLANRT_CUDA_KERNEL(clip);
PLANRT_CUDA_KERNEL(hard_sigmoid);
PLANRT_CUDA_KERNEL(hard_swish);
PLANRT_CUDA_KERNEL(pad);
PLANRT_CUDA_KERNEL(expand);
// resize.cpp: f32, bf16 and f16
PLANRT_CUDA_KERNEL(resize);
// linear_algebra.cpp
PLANRT_CUDA_KERNEL(linear);
PLANRT_CUDA_KERNEL(matmul);
// normalization.cpp
PLANRT_CUDA_KERNEL(layer_norm);
PLANRT_CUDA_KERNEL(rms_norm);
PLANRT_CUDA_KERNEL(softmax);
PLANRT_CUDA_KERNEL(log_softmax);
// reductions.cpp: f32 and bf16; cumsum also i32 and i64. argmax and argmin write i64.
PLANRT_CUDA_KERNEL(reduce_sum);
PLANRT_CUDA_KERNEL(reduce_mean);
PLANRT_CUDA_KERNEL(reduce_max);
PLANRT_CUDA_KERNEL(reduce_min);
PLANRT_CUDA_KERNEL(reduce_prod);
PLANRT_CUDA_KERNEL(argmax);
PLANRT_CUDA_KERNEL(argmin);
PLANRT_CUDA_KERNEL(cumsum);
// attention.cpp
PLANRT_CUDA_KERNEL(scaled_dot_product_attention);
// data_movement.cpp
PLANRT_CUDA_KERNEL(embedding);
PLANRT_CUDA_KERNEL(reshape);
PLANRT_CUDA_KERNEL(permute);
PLANRT_CUDA_KERNEL(transpose);
PLANRT_CUDA_KERNEL(concat);
PLANRT_CUDA_KERNEL(slice);
PLANRT_CUDA_KERNEL(gather_elements);
PLANRT_CUDA_KERNEL(take);
PLANRT_CUDA_KERNEL(size);

#undef PLANRT_CUDA_KERNEL

}  // namespace planrt::kernels::cuda
