// The device-side error record of the CUDA kernels (cuda_kernel.h): plain data so that
// device code can write it. Zero-initialised means "no error"; the first error stays.
#pragma once

#include <cstdint>

namespace planrt::kernels::cuda {

enum class DeviceErrorKind : int32_t {
  None = 0,
  EmbeddingIdOutOfRange = 1,
  GatherElementsIndexOutOfRange = 2,
  TakeIndexOutOfRange = 3,
};

struct CudaDeviceError {
  int32_t kind = 0;       // DeviceErrorKind
  int32_t reserved = 0;
  int64_t position = 0;   // flat index of the offending id (index)
  int64_t value = 0;      // the id (index)
  int64_t limit = 0;      // the table's row count (the size of gather_elements' dim, take's
                          // numel of x)
};

}  // namespace planrt::kernels::cuda
