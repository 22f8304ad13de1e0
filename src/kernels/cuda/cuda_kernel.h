// CUDA kernels for every op of the table (docs/design.md §9): f32 or bf16 operands for the
// arithmetic (one dtype per call, computed in f32), i32, i64 and u8 too for the integer forms
// of add, sub, mul, div, pow and neg, every dtype the typed elementwise family's rules admit
// (kernels/elementwise_ops.h; f16 and bf16 computed in f32), any dtype for data movement: the
// interface the `cuda` backend and the CUDA engine runner call.
//
// Design
// - A call is `CudaKernelFn(ctx, attrs, inputs, outputs)`, parallel to KernelFn (kernel.h):
//   the same op names, operands, attributes, shape rules and error messages as the CPU
//   kernels (checks are shared with kernels/cpu, only the device rule differs: every
//   operand is a contiguous view of device memory on the current CUDA device). Outputs
//   have their final shapes and are owned by the caller. Look a kernel up once with
//   find_cuda_kernel(name); the call itself does no lookup and no allocation on the host
//   heap beyond error messages.
// - Streams: everything a kernel does is enqueued on ctx.stream (kernel launches, cuBLAS
//   calls, device-to-device copies, temporary allocations and frees). Nothing
//   synchronizes: when the call returns ok the work is queued, not done, and the inputs
//   must stay alive and unmodified until the stream reaches it. A returned error comes
//   either from a check made before anything was enqueued (InvalidArgument, NotSupported,
//   NotFound, as on the CPU) or from the CUDA runtime/cuBLAS while enqueueing (launch
//   errors are read with cudaGetLastError after each launch); OutOfMemory for failed
//   allocations. Kernels never abort and never throw.
// - cuBLAS: GEMMs (linear, matmul, attention) run on ctx.cublas, which the kernel points
//   at ctx.stream (cublasSetStream, only when it is not already). Its math mode decides
//   TF32: CublasHandle creates handles with CUBLAS_DEFAULT_MATH (full f32, what the 1e-5
//   tests need) unless CublasOptions::allow_tf32 asks for CUBLAS_TF32_TENSOR_OP_MATH.
//   A handle is not thread-safe: one handle per thread (or per stream in flight).
// - Temporary memory: per-call scratch (attention scores, batched-GEMM pointer arrays)
//   comes from ctx.temp, a stream-ordered allocator: allocate on ctx.stream, use, free on
//   ctx.stream, all within the call. The `cuda` backend implements it with the warm pool
//   (§5); StreamOrderedTempMemory is the plain cudaMallocAsync/cudaFreeAsync version.
//   Ops that need no scratch accept ctx.temp == nullptr.
// - Data-dependent errors (an embedding id outside the table, a gather_elements index
//   outside its dim) cannot be returned without synchronizing. The kernel never reads out
//   of bounds (a bad id gives a row of zeros, a bad index a zero element) and, when
//   ctx.device_errors is set, records the first bad one there (device memory,
//   stream-ordered); the caller reads it back when it next synchronizes and turns it into
//   the CPU kernel's OutOfRange with device_error_status().
// - Aliasing, as on the CPU: elementwise ops and reshape may write over an input of the
//   output's shape (exact alias); every other kernel needs outputs disjoint from inputs.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <string_view>

#include "kernels/cuda/device_error.h"
#include "kernels/kernel.h"

namespace planrt::kernels::cuda {

// Stream-ordered scratch for one kernel call. Thread safety is the implementation's; the
// kernels use it from the calling thread only.
class CudaTempMemory {
 public:
  virtual ~CudaTempMemory() = default;
  // `bytes` (> 0) usable by work enqueued on `stream` from now on; OutOfMemory naming the
  // byte count when it cannot be had.
  virtual Result<void*> allocate(size_t bytes, cudaStream_t stream) = 0;
  // Gives `ptr` (from allocate, with the same `bytes`) back once the work already
  // enqueued on `stream` is done; it does not wait.
  virtual Status deallocate(void* ptr, size_t bytes, cudaStream_t stream) = 0;
};

// cudaMallocAsync / cudaFreeAsync from the current device's default memory pool.
class StreamOrderedTempMemory final : public CudaTempMemory {
 public:
  Result<void*> allocate(size_t bytes, cudaStream_t stream) override;
  Status deallocate(void* ptr, size_t bytes, cudaStream_t stream) override;
};

struct CublasOptions {
  bool allow_tf32 = false;  // TF32 tensor cores for f32 GEMMs: faster, ~1e-3 relative error
};

// While alive, CUBLAS_WORKSPACE_CONFIG is ":0:0" (no default workspace for a cublasCreate
// made meanwhile) if it was unset when the guard was made; on destruction it is unset again,
// so nothing else in the process (another library's cuBLAS handles, which may size their
// own workspace from the variable) sees it afterwards. A variable the caller set is left as
// it is. Guards serialize with one another (a process-wide lock); like any setenv, the
// window must not race with another thread's getenv/setenv outside planrt.
class NoDefaultCublasWorkspace {
 public:
  NoDefaultCublasWorkspace();
  ~NoDefaultCublasWorkspace();
  NoDefaultCublasWorkspace(const NoDefaultCublasWorkspace&) = delete;
  NoDefaultCublasWorkspace& operator=(const NoDefaultCublasWorkspace&) = delete;

 private:
  bool set_ = false;  // this guard set the variable, and unsets it
};

// An owned cuBLAS handle (RAII, move-only) created on the current device, with the math
// mode CublasOptions asks for. Errors are returned, never thrown.
//
// Device memory: cublasCreate allocates a default workspace per handle unless told not to
// by CUBLAS_WORKSPACE_CONFIG, which it reads at each creation; it is held until the handle
// is destroyed (cublasSetWorkspace does not give it back) and no plan names it (its size
// and the measurements: docs/performance.md, bench/results/library_memory.jsonl). planrt's
// GEMMs do not use it (the cuBLASLt path asks for no workspace, and the encoder's latency
// is the same without it), so create() makes its handle under NoDefaultCublasWorkspace. A
// caller who sets the variable keeps its own setting.
class CublasHandle {
 public:
  static Result<CublasHandle> create(const CublasOptions& options = {});
  CublasHandle() = default;  // empty: get() is nullptr
  CublasHandle(CublasHandle&& other) noexcept;
  CublasHandle& operator=(CublasHandle&& other) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle();

  cublasHandle_t get() const { return handle_; }
  // Switches the math mode (TF32 on or off) for later calls on this handle.
  Status set_allow_tf32(bool allow);
  Result<bool> allow_tf32() const;  // as the handle reports it

 private:
  explicit CublasHandle(cublasHandle_t h) : handle_(h) {}
  cublasHandle_t handle_ = nullptr;
};

class CudnnHandle;  // cudnn_library.h

// How linear picks its cuBLASLt algorithm (gemm_lt.h): the fastest of the heuristic's top
// answers, timed on the first call of a shape (the default), or the heuristic's first answer
// (the same choice in every process: for bit-for-bit reproducibility across runs, and A/B).
enum class GemmAlgorithm { Timed, Heuristic };

struct CudaKernelContext {
  cudaStream_t stream = nullptr;          // every enqueue of the call goes here
  cublasHandle_t cublas = nullptr;        // needed by linear, matmul, attention
  const CudnnHandle* cudnn = nullptr;     // needed by conv2d (cuDNN, opened on first use)
  CudaTempMemory* temp = nullptr;         // needed by attention and broadcast matmul
  CudaDeviceError* device_errors = nullptr;  // optional, device memory (see above)
  GemmAlgorithm gemm_algorithm = GemmAlgorithm::Timed;
  // bf16 attention on cuDNN where it takes the call (attention.cpp); false: planrt's kernel.
  bool cudnn_attention = true;
};

using CudaKernelFn = Status (*)(const CudaKernelContext& ctx, const OpAttrs& attrs,
                                std::span<const TensorView> inputs,
                                std::span<const TensorView> outputs);

// The CUDA implementation of `name`; NotFound for an unknown op.
Result<CudaKernelFn> find_cuda_kernel(std::string_view name);

// Fused kernels no op of the table names: a backend substitutes one for a sequence of ops
// it has checked, with the operands of the ops it replaces.
// add_layer_norm: inputs {a, b, weight?, bias?}, outputs {sum, normed}, attrs those of the
// layer_norm: sum = a + b (equal shapes, no broadcasting), normed = layer_norm(sum), in one
// pass over the rows instead of an add kernel and a layer_norm kernel. Each output must be
// disjoint from every input.
Status add_layer_norm(const CudaKernelContext& ctx, const OpAttrs& attrs,
                      std::span<const TensorView> inputs, std::span<const TensorView> outputs);

// A host copy of a CudaDeviceError record as a Status: ok when nothing was recorded,
// otherwise the error the CPU kernel would have returned (OutOfRange for embedding ids and
// gather_elements indices).
Status device_error_status(const CudaDeviceError& host_copy);

}  // namespace planrt::kernels::cuda
