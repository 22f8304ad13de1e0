// CublasHandle, StreamOrderedTempMemory, device_error_status and find_cuda_kernel.
#include "kernels/cuda/cuda_kernel.h"

#include <cstdlib>
#include <mutex>
#include <utility>

#include "kernels/cuda/checks.h"
#include "kernels/cuda/cuda_kernels.h"

namespace planrt::kernels::cuda {
namespace {

cublasMath_t math_mode(bool allow_tf32) {
  return allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
}

struct Entry {
  std::string_view name;
  CudaKernelFn fn;
};

constexpr Entry kCudaKernels[] = {
    {"linear", linear},
    {"matmul", matmul},
    {"add", add},
    {"sub", sub},
    {"mul", mul},
    {"div", div},
    {"layer_norm", layer_norm},
    {"rms_norm", rms_norm},
    {"softmax", softmax},
    {"gelu", gelu},
    {"relu", relu},
    {"silu", silu},
    {"sqrt", unary_sqrt},
    {"neg", unary_neg},
    {"exp", unary_exp},
    {"erf", unary_erf},
    {"tanh", unary_tanh},
    {"sigmoid", unary_sigmoid},
    {"pow", power},
    {"reduce_mean", reduce_mean},
    {"reduce_sum", reduce_sum},
    {"reduce_max", reduce_max},
    {"reduce_min", reduce_min},
    {"reduce_prod", reduce_prod},
    {"argmax", argmax},
    {"argmin", argmin},
    {"cumsum", cumsum},
    {"log_softmax", log_softmax},
    {"reshape", reshape},
    {"permute", permute},
    {"transpose", transpose},
    {"scaled_dot_product_attention", scaled_dot_product_attention},
    {"embedding", embedding},
    {"concat", concat},
    {"slice", slice},
    {"gather_elements", gather_elements},
    {"take", take},
    {"size", size},
    {"conv2d", conv2d},
    {"max_pool2d", max_pool2d},
    {"avg_pool2d", avg_pool2d},
    {"clip", clip},
    {"hard_sigmoid", hard_sigmoid},
    {"hard_swish", hard_swish},
    {"pad", pad},
    {"expand", expand},
    {"resize", resize},
    // The typed elementwise family: kernels/elementwise_ops.h lists the same ops.
#define PLANRT_CUDA_ENTRY(op) {#op, elementwise_##op},
    PLANRT_ELEMENTWISE_OPS(PLANRT_CUDA_ENTRY)
#undef PLANRT_CUDA_ENTRY
};

}  // namespace

Result<void*> StreamOrderedTempMemory::allocate(size_t bytes, cudaStream_t stream) {
  void* p = nullptr;
  cudaError_t err = cudaMallocAsync(&p, bytes, stream);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure is not sticky; do not leave it behind
    return make_error(err == cudaErrorMemoryAllocation ? ErrorCode::OutOfMemory
                                                       : ErrorCode::Internal,
                      "cudaMallocAsync of {} bytes of temporary memory failed: {}", bytes,
                      cudaGetErrorString(err));
  }
  return p;
}

Status StreamOrderedTempMemory::deallocate(void* ptr, size_t, cudaStream_t stream) {
  return cuda_status("temporary memory", "cudaFreeAsync", cudaFreeAsync(ptr, stream));
}

namespace {
constexpr const char* kWorkspaceConfig = "CUBLAS_WORKSPACE_CONFIG";
std::mutex& workspace_config_mutex() {
  static std::mutex mu;
  return mu;
}
}  // namespace

NoDefaultCublasWorkspace::NoDefaultCublasWorkspace() {
  workspace_config_mutex().lock();
  if (std::getenv(kWorkspaceConfig) == nullptr) {
    // A failed setenv leaves cuBLAS its default workspace: memory, not correctness.
    set_ = setenv(kWorkspaceConfig, ":0:0", /*overwrite=*/0) == 0;
  }
}

NoDefaultCublasWorkspace::~NoDefaultCublasWorkspace() {
  if (set_) (void)unsetenv(kWorkspaceConfig);
  workspace_config_mutex().unlock();
}

Result<CublasHandle> CublasHandle::create(const CublasOptions& options) {
  // The first handle of the process opens the math libraries (cublas_library.h).
  Result<const CublasLibrary*> cu = cublas_library();
  if (!cu.ok()) return cu.status().with_context("cuBLAS");
  cublasHandle_t h = nullptr;
  cublasStatus_t created;
  {
    NoDefaultCublasWorkspace no_default;  // cuBLAS reads the variable in cublasCreate
    created = (*cu)->cublasCreate_v2(&h);
  }
  PLANRT_RETURN_IF_ERROR(cublas_status("cuBLAS", "cublasCreate", created));
  CublasHandle handle(h);
  PLANRT_RETURN_IF_ERROR(handle.set_allow_tf32(options.allow_tf32));
  return handle;
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) (void)cublas_library_if_open()->cublasDestroy_v2(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

CublasHandle::~CublasHandle() {
  // A handle exists only once the library that made it is open.
  if (handle_ != nullptr) (void)cublas_library_if_open()->cublasDestroy_v2(handle_);
}

Status CublasHandle::set_allow_tf32(bool allow) {
  if (handle_ == nullptr) {
    return make_error(ErrorCode::InvalidArgument, "cuBLAS: the handle is empty");
  }
  return cublas_status("cuBLAS", "cublasSetMathMode",
                       cublas_library_if_open()->cublasSetMathMode(handle_, math_mode(allow)));
}

Result<bool> CublasHandle::allow_tf32() const {
  if (handle_ == nullptr) {
    return make_error(ErrorCode::InvalidArgument, "cuBLAS: the handle is empty");
  }
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
  PLANRT_RETURN_IF_ERROR(cublas_status(
      "cuBLAS", "cublasGetMathMode", cublas_library_if_open()->cublasGetMathMode(handle_, &mode)));
  // The low bits are the mode; flags such as DISALLOW_REDUCED_PRECISION_REDUCTION sit above.
  return (static_cast<int>(mode) & 0xf) == static_cast<int>(CUBLAS_TF32_TENSOR_OP_MATH);
}

Status device_error_status(const CudaDeviceError& e) {
  switch (static_cast<DeviceErrorKind>(e.kind)) {
    case DeviceErrorKind::None:
      return {};
    case DeviceErrorKind::EmbeddingIdOutOfRange:
      return make_error(ErrorCode::OutOfRange,
                        "embedding: ids[{}] = {} is outside the table's {} rows", e.position,
                        e.value, e.limit);
    case DeviceErrorKind::GatherElementsIndexOutOfRange:
      return make_error(ErrorCode::OutOfRange,
                        "gather_elements: indices[{}] = {} is outside [-{}, {}) along its dim",
                        e.position, e.value, e.limit, e.limit);
    case DeviceErrorKind::TakeIndexOutOfRange:
      return make_error(ErrorCode::OutOfRange, "take: indices[{}] = {} is outside [-{}, {})",
                        e.position, e.value, e.limit, e.limit);
  }
  return make_error(ErrorCode::Internal, "unknown device error kind {}", e.kind);
}

Result<CudaKernelFn> find_cuda_kernel(std::string_view name) {
  for (const Entry& e : kCudaKernels) {
    if (e.name == name) return e.fn;
  }
  return make_error(ErrorCode::NotFound, "no CUDA kernel for op '{}'", name);
}

}  // namespace planrt::kernels::cuda
