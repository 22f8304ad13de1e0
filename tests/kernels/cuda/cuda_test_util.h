// Helpers for the CUDA kernel tests: host tensors of any dtype, a runner that owns a
// stream, a cuBLAS handle and temporary memory, and the CPU-vs-CUDA comparison every
// numeric test uses. Construct a CudaRunner only after PLANRT_REQUIRE_GPU_OR_SKIP().
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cudnn_library.h"
#include "kernels/kernel.h"
#include "support/status_matchers.h"

namespace planrt::kernels::cuda::testing {

inline constexpr double kTolerance = 1e-5;

// Shapes for the fused attention kernels (head dim 64): row and key counts around their
// 64-row tiles, more keys than queries and fewer.
struct AttentionCase {
  int64_t heads, sq, sk;
};
inline constexpr AttentionCase kFusedAttentionCases[] = {
    {1, 1, 1}, {2, 64, 64}, {3, 65, 130}, {1, 130, 65}, {2, 200, 333}, {1, 5, 1000}, {8, 512, 512}};

class HostTensor {
 public:
  HostTensor() = default;  // none: an absent optional operand
  HostTensor(DType dtype, Shape shape);
  // f32 uniform in [lo, hi); other dtypes random bytes; deterministic for a seed.
  static HostTensor random(Shape shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f,
                           DType dtype = DType::F32);
  // Integer ids uniform in [lo, hi).
  static HostTensor ids(DType dtype, Shape shape, uint32_t seed, int64_t lo, int64_t hi);

  bool is_none() const { return none_; }
  TensorView view() const;
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  size_t nbytes() const { return static_cast<size_t>(shape_.numel()) * element_size(dtype_); }
  void* data() const { return const_cast<uint64_t*>(storage_.data()); }
  float* f() const { return static_cast<float*>(data()); }

 private:
  bool none_ = true;
  DType dtype_ = DType::F32;
  Shape shape_;
  std::vector<uint64_t> storage_;
};

// ||out - ref|| / ||ref|| over f32 tensors (||out - ref|| when ref is zero); +inf when
// any value is NaN or the sizes differ, so NaN never passes.
double relative_error(const HostTensor& out, const HostTensor& ref);
bool same_bytes(const HostTensor& a, const HostTensor& b);

// Error-status assertions: support/status_matchers.h (shared with the CPU kernel tests).
using ::planrt::testing::IsError;

// Device memory owned by a test (cudaMalloc/cudaFree).
class DeviceMemory {
 public:
  explicit DeviceMemory(size_t bytes);
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  DeviceMemory& operator=(DeviceMemory&&) = delete;
  ~DeviceMemory();
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

struct Comparison {
  Status cpu;
  Status cuda;
  HostTensor cpu_out;
  HostTensor cuda_out;
  double error = 0.0;  // relative_error for f32 outputs; 0 or +inf (byte equality) otherwise
};

class CudaRunner {
 public:
  explicit CudaRunner(CublasOptions options = {});
  ~CudaRunner();
  CudaRunner(const CudaRunner&) = delete;
  CudaRunner& operator=(const CudaRunner&) = delete;

  const CudaKernelContext& ctx() const { return ctx_; }
  CublasHandle& cublas() { return cublas_; }
  // Opens cuDNN and gives the context a handle (conv2d needs one); false when it cannot.
  bool enable_cudnn();
  cudaStream_t stream() const { return stream_; }

  // A device copy of `t` (none stays none); the memory lives as long as the runner.
  // offset_bytes > 0 places it that far into its allocation (e.g. 4: off 16-byte
  // alignment, which kernels with vectorized paths must handle too).
  TensorView upload(const HostTensor& t, size_t offset_bytes = 0);
  // A device output of `dtype`/`shape` filled with 0xff bytes (NaN for f32), so an
  // element the kernel leaves unwritten never matches.
  TensorView device_output(DType dtype, const Shape& shape, size_t offset_bytes = 0);
  HostTensor download(const TensorView& v);
  Status synchronize();
  CudaDeviceError device_errors();  // a host copy of ctx().device_errors

  // Runs the CPU kernel and the CUDA kernel of `op` on the same inputs.
  Comparison compare(std::string_view op, const OpAttrs& attrs,
                     const std::vector<HostTensor>& inputs, DType out_dtype,
                     const Shape& out_shape);

 private:
  cudaStream_t stream_ = nullptr;
  CublasHandle cublas_;
  CudnnHandle cudnn_;
  StreamOrderedTempMemory temp_;
  std::vector<DeviceMemory> buffers_;
  CudaKernelContext ctx_;
};

// Attributes from a brace list: attrs_of({{"causal", true}, {"scale", 0.3}}).
inline OpAttrs attrs_of(std::initializer_list<std::pair<const char*, AttrValue>> values) {
  OpAttrs a;
  for (const auto& [k, v] : values) a.set(k, v);
  return a;
}

// f32 uniform in [lo, hi), deterministic for a seed.
inline HostTensor rnd(Shape s, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  return HostTensor::random(s, seed, lo, hi);
}

// The operands of every kFusedAttentionCases case, causal and not: q and k in [-2, 2), v in
// [-1, 1), fresh values from `seed` on.
struct AttentionInputs {
  HostTensor q, k, v;
  Shape out;
  bool causal = false;
  std::string label;  // for SCOPED_TRACE
};
std::vector<AttentionInputs> fused_attention_inputs(uint32_t seed);

// EXPECT that both kernels succeed and agree within kTolerance (f32) or byte for byte.
void ExpectAgree(CudaRunner& runner, std::string_view op, const OpAttrs& attrs,
                 const std::vector<HostTensor>& inputs, DType out_dtype, const Shape& out_shape);

}  // namespace planrt::kernels::cuda::testing
