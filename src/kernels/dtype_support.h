// Which input dtypes each back end's kernel of an op implements, known without running it:
// the builder refuses at build time what a back end would refuse at run time (an f16 model
// placed on the CPU, a bool tensor into a CUDA softmax), with the same words the kernels use.
//
// This is a table, not a probe: each back end's kernels check their operands again when they
// run (cpu/checks.h, cuda/checks.h), and a change to what a kernel implements changes its
// row here too (tests/kernels/cpu/dtype_support_test.cpp runs the CPU kernels against it).
// Pure functions; thread-safe.
#pragma once

#include <span>
#include <string_view>

#include "planrt/core/dtype.h"
#include "planrt/core/result.h"

namespace planrt::kernels {

enum class KernelBackend { Cpu, Cuda };

// ok when `backend`'s kernel of `op` implements inputs of these dtypes (absent optional
// inputs left out); NotSupported naming the op, the input, its dtype and what the kernel
// takes otherwise. An op the table does not know is ok (the op table and shape inference
// report unknown ops).
Status check_kernel_dtypes(KernelBackend backend, std::string_view op, std::span<const DType> inputs);

}  // namespace planrt::kernels
