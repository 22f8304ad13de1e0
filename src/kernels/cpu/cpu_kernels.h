// The CPU kernels, one function per op of the table; find_cpu_kernel (registry.cpp) is the
// only way in from outside the layer. Each follows the KernelFn contract of kernel.h.
//
// Aliasing: elementwise ops (add, sub, mul, div, pow, and the unary ones, clip, hard_sigmoid,
// hard_swish) and reshape may write
// their output over an input of the same shape (exact alias); every other kernel needs its
// output disjoint from its inputs.
#pragma once

#include "kernels/elementwise_ops.h"
#include "kernels/kernel.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cpu {

#define PLANRT_CPU_KERNEL(fn)                                         \
  Status fn(const OpAttrs& attrs, std::span<const TensorView> inputs, \
            std::span<const TensorView> outputs)

// elementwise.cpp
PLANRT_CPU_KERNEL(add);
PLANRT_CPU_KERNEL(sub);
PLANRT_CPU_KERNEL(mul);
PLANRT_CPU_KERNEL(div);
PLANRT_CPU_KERNEL(power);
PLANRT_CPU_KERNEL(unary_sqrt);
PLANRT_CPU_KERNEL(unary_neg);
PLANRT_CPU_KERNEL(unary_exp);
PLANRT_CPU_KERNEL(unary_erf);
PLANRT_CPU_KERNEL(unary_tanh);
PLANRT_CPU_KERNEL(unary_sigmoid);
PLANRT_CPU_KERNEL(relu);
PLANRT_CPU_KERNEL(silu);
PLANRT_CPU_KERNEL(gelu);
PLANRT_CPU_KERNEL(clip);
PLANRT_CPU_KERNEL(hard_sigmoid);
PLANRT_CPU_KERNEL(hard_swish);
// typed_elementwise.cpp: the family of kernels/elementwise_ops.h, every dtype its rules admit.
// The names are the op table's, inside this namespace (cpu::log is not std::log).
#define PLANRT_CPU_ELEMENTWISE_KERNEL(fn) PLANRT_CPU_KERNEL(fn);
PLANRT_ELEMENTWISE_OPS(PLANRT_CPU_ELEMENTWISE_KERNEL)
#undef PLANRT_CPU_ELEMENTWISE_KERNEL
// add, sub, mul, div, pow, neg over i32, i64, u8 (and f16, bf16): the arithmetic kernels
// call it for any input dtype but f32.
Status integer_arithmetic(std::string_view name, std::span<const TensorView> inputs,
                          std::span<const TensorView> outputs);
// gather_elements.cpp
PLANRT_CPU_KERNEL(gather_elements);
PLANRT_CPU_KERNEL(size);
PLANRT_CPU_KERNEL(take);
// convolution.cpp
PLANRT_CPU_KERNEL(conv2d);
// resize.cpp
PLANRT_CPU_KERNEL(resize);
// pooling.cpp
PLANRT_CPU_KERNEL(max_pool2d);
PLANRT_CPU_KERNEL(avg_pool2d);
// linear_algebra.cpp
PLANRT_CPU_KERNEL(linear);
PLANRT_CPU_KERNEL(matmul);
// normalization.cpp
PLANRT_CPU_KERNEL(layer_norm);
PLANRT_CPU_KERNEL(rms_norm);
PLANRT_CPU_KERNEL(softmax);
PLANRT_CPU_KERNEL(log_softmax);
PLANRT_CPU_KERNEL(reduce_sum);
PLANRT_CPU_KERNEL(reduce_mean);
PLANRT_CPU_KERNEL(reduce_max);
PLANRT_CPU_KERNEL(reduce_min);
PLANRT_CPU_KERNEL(reduce_prod);
PLANRT_CPU_KERNEL(argmax);
PLANRT_CPU_KERNEL(argmin);
PLANRT_CPU_KERNEL(cumsum);
// attention.cpp
PLANRT_CPU_KERNEL(scaled_dot_product_attention);
// embedding.cpp
PLANRT_CPU_KERNEL(embedding);
// data_movement.cpp
PLANRT_CPU_KERNEL(reshape);
PLANRT_CPU_KERNEL(permute);
PLANRT_CPU_KERNEL(transpose);
PLANRT_CPU_KERNEL(concat);
PLANRT_CPU_KERNEL(slice);
PLANRT_CPU_KERNEL(pad);
PLANRT_CPU_KERNEL(expand);

#undef PLANRT_CPU_KERNEL

// y = clip, hard_sigmoid or hard_swish of x over n floats (x may be y): the clamp ops' loop,
// also conv2d's fused activation in the plain kernel.
void map_clamp(const ClampPlan& p, const float* x, float* y, int64_t n);
// y = a(y) over n floats, split between threads (a linear's fused activation).
Status activate_in_place(LinearActivation a, float* y, int64_t n);

}  // namespace planrt::kernels::cpu
