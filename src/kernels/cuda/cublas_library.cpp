#include "kernels/cuda/cublas_library.h"

#include "kernels/cuda/library_loader.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <atomic>
#include <memory>
#include <mutex>

#include <fmt/format.h>

namespace planrt::kernels::cuda {
namespace {

std::atomic<const CublasLibrary*> g_library{nullptr};
std::mutex g_open_mu;

Result<void*> open_library(const char* soname) { return open_cuda_library(soname, "the CUDA toolkit's cuBLAS"); }

Result<const CublasLibrary*> open_both() {
  // cuBLASLt first: libcublas needs it, and its absence is then reported by its own name.
  PLANRT_ASSIGN_OR_RETURN(void* lt, open_library(cublaslt_soname()));
  Result<void*> blas = open_library(cublas_soname());
  if (!blas.ok()) {
    dlclose(lt);
    return blas.status();
  }
  auto table = std::make_unique<CublasLibrary>();
  Status resolved;
#define PLANRT_RESOLVE(name, handle, soname) \
  if (resolved.ok()) resolved = resolve_function(handle, soname, #name, table->name);
#define PLANRT_RESOLVE_BLAS(name) PLANRT_RESOLVE(name, *blas, cublas_soname())
#define PLANRT_RESOLVE_LT(name) PLANRT_RESOLVE(name, lt, cublaslt_soname())
#define PLANRT_RESOLVE_TYPED(name, type) PLANRT_RESOLVE_BLAS(name)
  PLANRT_CUBLAS_FUNCTIONS(PLANRT_RESOLVE_BLAS)
  PLANRT_CUBLAS_TYPED_FUNCTIONS(PLANRT_RESOLVE_TYPED)
  PLANRT_CUBLASLT_FUNCTIONS(PLANRT_RESOLVE_LT)
#undef PLANRT_RESOLVE_TYPED
#undef PLANRT_RESOLVE_LT
#undef PLANRT_RESOLVE_BLAS
#undef PLANRT_RESOLVE
  if (!resolved.ok()) {
    dlclose(*blas);
    dlclose(lt);
    return resolved;
  }
  // Open until exit: handles and descriptors made from the table may live as long.
  return table.release();
}

}  // namespace

const char* cublas_soname() { return PLANRT_CUBLAS_SONAME; }
const char* cublaslt_soname() { return PLANRT_CUBLASLT_SONAME; }

const CublasLibrary* cublas_library_if_open() { return g_library.load(std::memory_order_acquire); }

Result<const CublasLibrary*> cublas_library() {
  if (const CublasLibrary* open = cublas_library_if_open()) return open;
  std::lock_guard lock(g_open_mu);
  if (const CublasLibrary* open = cublas_library_if_open()) return open;
  PLANRT_ASSIGN_OR_RETURN(const CublasLibrary* opened, open_both());
  g_library.store(opened, std::memory_order_release);
  return opened;
}

}  // namespace planrt::kernels::cuda
