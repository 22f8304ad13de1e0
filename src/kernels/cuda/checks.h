// Operand checks of the CUDA kernels: the CPU kernels' checks (kernels/cpu/checks.h), with
// the device rule swapped (every operand on the current CUDA device), plus the conversion
// of CUDA runtime and cuBLAS errors into a Status naming the op.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <span>
#include <string_view>

#include "kernels/cpu/checks.h"
#include "kernels/cuda/cublas_library.h"
#include "kernels/cuda/cuda_kernel.h"

namespace planrt::kernels::cuda {

// cpu::check_operands (counts, required operands, sizes, contiguity, data) for device
// views: every present operand must be a CUDA view of the current device.
Status check_operands(std::string_view op, std::span<const TensorView> inputs,
                      std::span<const TensorView> outputs);

// cpu::require_f32_inputs with the message naming the CUDA kernel.
Status require_f32_inputs(std::string_view op, std::span<const TensorView> inputs);

// For the kernels with a bf16 path only: every present input f32, or every one bf16 (no
// mixing); that dtype, else NotSupported naming the input and its dtype.
Result<DType> require_f32_or_bf16_inputs(std::string_view op, std::span<const TensorView> inputs);
// For the kernels with 16-bit paths (float_types.h): every present input f32, every one f16
// or every one bf16 (no mixing); that dtype, else NotSupported naming the input and its dtype.
Result<DType> require_float_inputs(std::string_view op, std::span<const TensorView> inputs);

// ok for cudaSuccess; OutOfMemory for allocation failures, Internal otherwise, naming the
// op, what was being done and the CUDA error.
Status cuda_status(std::string_view op, std::string_view what, cudaError_t err);
Status cublas_status(std::string_view op, std::string_view what, cublasStatus_t status);

// ctx.cublas set and bound to ctx.stream: the math libraries' functions to call with it
// (cublas_library.h; the errors of opening them, when no handle opened them before).
Result<const CublasLibrary*> prepare_cublas(std::string_view op, const CudaKernelContext& ctx);
Status require_temp(std::string_view op, const CudaKernelContext& ctx);

// Scratch from ctx.temp for one call, given back (stream-ordered) by release() or, on an
// error path, by the destructor (whose own failure is dropped: the first error stands).
class TempBuffer {
 public:
  explicit TempBuffer(const CudaKernelContext& ctx) : ctx_(ctx) {}
  TempBuffer(const TempBuffer&) = delete;
  TempBuffer& operator=(const TempBuffer&) = delete;
  ~TempBuffer();
  Status allocate(std::string_view op, size_t bytes);
  void* get() const { return ptr_; }
  Status release();

 private:
  const CudaKernelContext& ctx_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace planrt::kernels::cuda
