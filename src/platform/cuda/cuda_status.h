// Turning CUDA runtime errors into planrt Status values (private to the platform layer
// and the layers above it that call CUDA).
//
// Every fallible CUDA call in planrt goes through cuda_error(): the message names the
// call, the device and the CUDA error, and the thread's last-error slot is cleared so a
// recoverable failure (out of memory, invalid value) does not resurface in an unrelated
// later cudaGetLastError(). Sticky errors (a faulted context) cannot be cleared; they keep
// failing every later call, which is what the caller then reports.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <string_view>

#include "planrt/core/status.h"

namespace planrt::cuda {

// "cudaErrorMemoryAllocation (out of memory)".
std::string cuda_error_text(cudaError_t err);

// OutOfMemory for cudaErrorMemoryAllocation, NotSupported when there is no device or
// driver, InvalidArgument for an invalid device or value, Internal otherwise. The message
// is "<what> on cuda:<device>: <error text>". Clears the last error.
Status cuda_error(cudaError_t err, std::string_view what, int device);

// Ok when `device` is a visible CUDA device; otherwise NotSupported (no device, no
// driver) or InvalidArgument (index out of range), naming the device and how many exist.
Status check_cuda_device(int device);

}  // namespace planrt::cuda

// Returns the Status from the enclosing function when a CUDA call fails.
#define PLANRT_CUDA_RETURN_IF_ERROR(call, what, device)                      \
  do {                                                                       \
    cudaError_t planrt_cuda_err_ = (call);                                   \
    if (planrt_cuda_err_ != cudaSuccess)                                     \
      return ::planrt::cuda::cuda_error(planrt_cuda_err_, (what), (device)); \
  } while (0)
