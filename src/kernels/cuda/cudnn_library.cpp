#include "kernels/cuda/cudnn_library.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "kernels/cuda/cudnn_conv_plan.h"
#include "kernels/cuda/library_loader.h"

namespace planrt::kernels::cuda {
namespace {

#define PLANRT_STRINGIFY2(x) #x
#define PLANRT_STRINGIFY(x) PLANRT_STRINGIFY2(x)
constexpr const char* kSoname = "libcudnn.so." PLANRT_STRINGIFY(CUDNN_MAJOR);

std::atomic<const CudnnLibrary*> g_library{nullptr};
std::mutex g_open_mu;

Result<const CudnnLibrary*> open_table() {
  PLANRT_ASSIGN_OR_RETURN(void* handle, open_cuda_library(kSoname, "cuDNN (libcudnn9 for this CUDA major version)"));
  auto table = std::make_unique<CudnnLibrary>();
  Status resolved;
#define PLANRT_RESOLVE(name) \
  if (resolved.ok()) resolved = resolve_function(handle, kSoname, #name, table->name);
  PLANRT_CUDNN_FUNCTIONS(PLANRT_RESOLVE)
#undef PLANRT_RESOLVE
  if (!resolved.ok()) {
    dlclose(handle);
    return resolved;
  }
  return table.release();  // open until exit: handles made from it may live as long
}

}  // namespace

const char* cudnn_soname() { return kSoname; }

Result<const CudnnLibrary*> cudnn_library() {
  if (const CudnnLibrary* open = g_library.load(std::memory_order_acquire)) return open;
  std::lock_guard lock(g_open_mu);
  if (const CudnnLibrary* open = g_library.load(std::memory_order_acquire)) return open;
  PLANRT_ASSIGN_OR_RETURN(const CudnnLibrary* opened, open_table());
  g_library.store(opened, std::memory_order_release);
  return opened;
}

Result<CudnnHandle> CudnnHandle::create(bool allow_tf32) {
  PLANRT_ASSIGN_OR_RETURN(const CudnnLibrary* lib, cudnn_library());
  CudnnHandle h;
  const cudnnStatus_t s = lib->cudnnCreate(&h.handle_);
  if (s != CUDNN_STATUS_SUCCESS) {
    return make_error(s == CUDNN_STATUS_ALLOC_FAILED ? ErrorCode::OutOfMemory : ErrorCode::Internal,
                      "cudnnCreate failed: {}", lib->cudnnGetErrorString(s));
  }
  h.allow_tf32_ = allow_tf32;
  h.plans_ = std::make_unique<ConvPlanCache>();
  h.attention_plans_ = std::make_unique<AttentionPlanCache>();
  return h;
}

CudnnHandle::CudnnHandle(CudnnHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), allow_tf32_(other.allow_tf32_),
      plans_(std::move(other.plans_)),
      attention_plans_(std::move(other.attention_plans_)) {}

CudnnHandle& CudnnHandle::operator=(CudnnHandle&& other) noexcept {
  if (this != &other) {
    CudnnHandle gone(std::move(*this));
    handle_ = std::exchange(other.handle_, nullptr);
    allow_tf32_ = other.allow_tf32_;
    plans_ = std::move(other.plans_);
    attention_plans_ = std::move(other.attention_plans_);
  }
  return *this;
}

CudnnHandle::~CudnnHandle() {
  plans_.reset();  // the plans are bound to the handle: gone first
  attention_plans_.reset();
  if (handle_ == nullptr) return;
  // The handle exists only when the table was opened; a failed destroy is not actionable.
  if (const CudnnLibrary* lib = g_library.load(std::memory_order_acquire)) (void)lib->cudnnDestroy(handle_);
}

}  // namespace planrt::kernels::cuda
