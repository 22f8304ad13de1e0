#include "kernels/cuda/checks.h"

#include <array>
#include <string>
#include <vector>

#include "kernels/operands.h"

namespace planrt::kernels::cuda {
namespace {

// The shared CPU checks speak of "the CPU kernel"; the rule they state is the same here.
Status reword(Status s) {
  if (s.ok()) return s;
  std::string message = s.message();
  constexpr std::string_view from = "the CPU kernel";
  constexpr std::string_view to = "the CUDA kernel";
  for (size_t at = message.find(from); at != std::string::npos; at = message.find(from, at)) {
    message.replace(at, from.size(), to);
    at += to.size();
  }
  return Status(s.code(), std::move(message));
}

Status check_device(std::string_view op, const std::string& role, const TensorView& v,
                    int current) {
  if (v.device.type != DeviceType::CUDA) {
    return make_error(ErrorCode::InvalidArgument, "{}: {} is on {}, the CUDA kernel needs cuda",
                      op, role, to_string(v.device));
  }
  if (v.device.index != current) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: {} is on {} but the current device is cuda:{}", op, role,
                      to_string(v.device), current);
  }
  return {};
}

// The views with their device relabelled as the CPU, so that cpu::check_operands applies
// its every other rule unchanged.
template <size_t N>
std::span<const TensorView> as_host(std::span<const TensorView> views,
                                    std::array<TensorView, N>& small,
                                    std::vector<TensorView>& large) {
  TensorView* dst = small.data();
  if (views.size() > N) {
    large.resize(views.size());
    dst = large.data();
  }
  for (size_t i = 0; i < views.size(); ++i) {
    dst[i] = views[i];
    if (!views[i].is_none()) dst[i].device = Device::cpu();
  }
  return {dst, views.size()};
}

}  // namespace

Status check_operands(std::string_view op, std::span<const TensorView> inputs,
                      std::span<const TensorView> outputs) {
  int current = 0;
  cudaError_t err = cudaGetDevice(&current);
  if (err != cudaSuccess) return cuda_status(op, "cudaGetDevice", err);
  std::array<TensorView, 4> small_in;
  std::array<TensorView, 1> small_out;
  std::vector<TensorView> large_in;
  std::vector<TensorView> large_out;
  // Counts and absence first, as the CPU kernel reports them.
  PLANRT_RETURN_IF_ERROR(reword(cpu::check_operands(op, as_host(inputs, small_in, large_in),
                                                    as_host(outputs, small_out, large_out))));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].is_none()) continue;
    PLANRT_RETURN_IF_ERROR(check_device(op, input_role(op, i), inputs[i], current));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    PLANRT_RETURN_IF_ERROR(check_device(
        op, outputs.size() == 1 ? std::string("output") : fmt::format("output {}", i),
        outputs[i], current));
  }
  return {};
}

Status require_f32_inputs(std::string_view op, std::span<const TensorView> inputs) {
  return reword(cpu::require_f32_inputs(op, inputs));
}

namespace {

// Every present input of one dtype among those `accepts` admits (`takes` names them).
template <typename Accepts>
Result<DType> require_one_float_dtype(std::string_view op, std::span<const TensorView> inputs,
                                      Accepts accepts, std::string_view takes) {
  const TensorView* first = nullptr;
  size_t first_index = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorView& in = inputs[i];
    if (in.is_none()) continue;
    if (!accepts(in.dtype)) {
      return make_error(ErrorCode::NotSupported,
                        "{}: {} has dtype {}; the CUDA kernel supports {}", op,
                        input_role(op, i), dtype_name(in.dtype), takes);
    }
    if (first == nullptr) {
      first = &in;
      first_index = i;
    } else if (in.dtype != first->dtype) {
      return make_error(ErrorCode::NotSupported,
                        "{}: {} has dtype {} but {} has {}; the CUDA kernel needs one dtype", op,
                        input_role(op, i), dtype_name(in.dtype),
                        input_role(op, first_index), dtype_name(first->dtype));
    }
  }
  return first == nullptr ? DType::F32 : first->dtype;
}

}  // namespace

Result<DType> require_f32_or_bf16_inputs(std::string_view op,
                                         std::span<const TensorView> inputs) {
  return require_one_float_dtype(
      op, inputs, [](DType d) { return d == DType::F32 || d == DType::BF16; }, "f32 and bf16");
}

Result<DType> require_float_inputs(std::string_view op, std::span<const TensorView> inputs) {
  return require_one_float_dtype(
      op, inputs, [](DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; },
      "f32, f16 and bf16");
}

Status cuda_status(std::string_view op, std::string_view what, cudaError_t err) {
  if (err == cudaSuccess) return {};
  const ErrorCode code =
      err == cudaErrorMemoryAllocation ? ErrorCode::OutOfMemory : ErrorCode::Internal;
  return make_error(code, "{}: {} failed: {} ({})", op, what, cudaGetErrorString(err),
                    cudaGetErrorName(err));
}

Status cublas_status(std::string_view op, std::string_view what, cublasStatus_t status) {
  if (status == CUBLAS_STATUS_SUCCESS) return {};
  ErrorCode code = ErrorCode::Internal;
  if (status == CUBLAS_STATUS_ALLOC_FAILED) code = ErrorCode::OutOfMemory;
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_ARCH_MISMATCH) {
    code = ErrorCode::NotSupported;
  }
  // A status comes from a call through the opened library, so its strings are there.
  const CublasLibrary* cu = cublas_library_if_open();
  if (cu == nullptr) {
    return make_error(code, "{}: {} failed: cuBLAS status {}", op, what, static_cast<int>(status));
  }
  return make_error(code, "{}: {} failed: {} ({})", op, what, cu->cublasGetStatusString(status),
                    cu->cublasGetStatusName(status));
}

Result<const CublasLibrary*> prepare_cublas(std::string_view op, const CudaKernelContext& ctx) {
  if (ctx.cublas == nullptr) {
    return make_error(ErrorCode::InvalidArgument, "{}: the CUDA kernel needs a cuBLAS handle", op);
  }
  Result<const CublasLibrary*> cu = cublas_library();
  if (!cu.ok()) return cu.status().with_context(op);
  cudaStream_t current = nullptr;
  PLANRT_RETURN_IF_ERROR(
      cublas_status(op, "cublasGetStream", (*cu)->cublasGetStream_v2(ctx.cublas, &current)));
  // Only when it differs: cublasSetStream also resets the handle's workspace.
  if (current != ctx.stream) {
    PLANRT_RETURN_IF_ERROR(
        cublas_status(op, "cublasSetStream", (*cu)->cublasSetStream_v2(ctx.cublas, ctx.stream)));
  }
  return *cu;
}

Status require_temp(std::string_view op, const CudaKernelContext& ctx) {
  if (ctx.temp != nullptr) return {};
  return make_error(ErrorCode::InvalidArgument,
                    "{}: the CUDA kernel needs temporary memory (CudaKernelContext::temp)", op);
}

TempBuffer::~TempBuffer() { (void)release(); }

Status TempBuffer::allocate(std::string_view op, size_t bytes) {
  PLANRT_RETURN_IF_ERROR(require_temp(op, ctx_));
  Result<void*> p = ctx_.temp->allocate(bytes, ctx_.stream);
  if (!p.ok()) return p.status().with_context(op);
  ptr_ = *p;
  bytes_ = bytes;
  return {};
}

Status TempBuffer::release() {
  if (ptr_ == nullptr) return {};
  void* p = ptr_;
  ptr_ = nullptr;
  return ctx_.temp->deallocate(p, bytes_, ctx_.stream);
}

}  // namespace planrt::kernels::cuda
