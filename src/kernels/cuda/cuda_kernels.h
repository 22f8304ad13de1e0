// The CUDA kernels, one function per op of the table; find_cuda_kernel (cuda_kernel.cpp)
// is the way in from outside the layer. Each follows the CudaKernelFn contract of
// cuda_kernel.h.
#pragma once

#include "kernels/cuda/cuda_kernel.h"

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
// vision.cpp
PLANRT_CUDA_KERNEL(conv2d);
PLANRT_CUDA_KERNEL(max_pool2d);
PLANRT_CUDA_KERNEL(avg_pool2d);
PLANRT_CUDA_KERNEL(clip);
PLANRT_CUDA_KERNEL(hard_sigmoid);
PLANRT_CUDA_KERNEL(hard_swish);
PLANRT_CUDA_KERNEL(pad);
PLANRT_CUDA_KERNEL(expand);
// linear_algebra.cpp
PLANRT_CUDA_KERNEL(linear);
PLANRT_CUDA_KERNEL(matmul);
// normalization.cpp
PLANRT_CUDA_KERNEL(layer_norm);
PLANRT_CUDA_KERNEL(rms_norm);
PLANRT_CUDA_KERNEL(softmax);
PLANRT_CUDA_KERNEL(reduce_mean);
// attention.cpp
PLANRT_CUDA_KERNEL(scaled_dot_product_attention);
// data_movement.cpp
PLANRT_CUDA_KERNEL(embedding);
PLANRT_CUDA_KERNEL(reshape);
PLANRT_CUDA_KERNEL(permute);
PLANRT_CUDA_KERNEL(transpose);
PLANRT_CUDA_KERNEL(concat);
PLANRT_CUDA_KERNEL(slice);

#undef PLANRT_CUDA_KERNEL

}  // namespace planrt::kernels::cuda
