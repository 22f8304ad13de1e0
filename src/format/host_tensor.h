// HostTensor: a tensor that owns its bytes in host memory, row-major and contiguous.
//
// What the .npy reader returns and the writer takes; the CLI uses it for inputs and
// outputs. A plain value type: copyable, movable, no invariants enforced beyond what the
// functions taking it check (data.size() == shape.numel() * element_size(dtype)).
#pragma once

#include <cstdint>
#include <vector>

#include "planrt/core/dtype.h"
#include "planrt/core/tensor_view.h"

namespace planrt::format {

struct HostTensor {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> data;

  TensorView view() { return TensorView::contiguous(data.data(), dtype, shape); }
};

}  // namespace planrt::format
