// A host kernel call prepared once at load for one instruction whose weight is a constant:
// the weight reordered into the layout a library's kernels read fastest (packed_linear.h,
// packed_conv.h). The runtime runs it instead of the op's plain kernel, with the same
// operands; the plain kernel stays the reference and the fallback.
//
// Memory: packed_bytes() of host memory the object owns (the reordered weight), counted in
// the method's memory report. Thread safety: run() may be called from several threads at once.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/kernel.h"
#include "planrt/core/status.h"
#include "planrt/core/tensor_view.h"

namespace planrt::kernels::cpu {

class PreparedKernel {
 public:
  virtual ~PreparedKernel() = default;
  // The op's kernel contract (kernel.h) with the instruction's attributes (a linear's fused
  // activation; a convolution uses those it was prepared with); the weight operand is not read.
  virtual Status run(const OpAttrs& attrs, std::span<const TensorView> inputs,
                     std::span<const TensorView> outputs) const = 0;
  // The same with no attributes.
  Status run(std::span<const TensorView> inputs, std::span<const TensorView> outputs) const {
    return run(OpAttrs{}, inputs, outputs);
  }
  virtual uint64_t packed_bytes() const = 0;
};

}  // namespace planrt::kernels::cpu
