// The softmax of one line of values, shared by the softmax op and attention so that both
// have the same numerics (PyTorch's: subtract the max, exponentiate, divide by the sum).
// A line that is all -inf gives NaN, as in PyTorch. Pure; thread-safe.
#pragma once

#include <cstdint>

namespace planrt::kernels::cpu {

// y[i * stride] = softmax(x[0], x[stride], ..., x[(n - 1) * stride])[i]; y may equal x.
void softmax_line(const float* x, float* y, int64_t n, int64_t stride);

}  // namespace planrt::kernels::cpu
