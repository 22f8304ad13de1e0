#include "kernels/cuda/cublas_library.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace planrt::kernels::cuda {
namespace {

std::atomic<const CublasLibrary*> g_library{nullptr};
std::mutex g_open_mu;

// The folder of the libcudart this process loaded (the toolkit's library folder), or empty.
std::string cudart_folder() {
  // The loaded library's own symbol: in a non-PIE executable &cudaGetDeviceCount could be
  // the executable's stub, whose folder is not the toolkit's.
  void* symbol = dlsym(RTLD_DEFAULT, "cudaGetDeviceCount");
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return {};
  std::filesystem::path p(info.dli_fname);
  return p.has_parent_path() ? p.parent_path().string() : std::string();
}

// dlopen of `soname`, trying each place in the documented order; the handle, or an error
// naming every path tried and the loader's last message.
Result<void*> open_library(const char* soname) {
  std::vector<std::string> candidates;
  if (const char* dir = std::getenv("PLANRT_CUDA_MATH_LIBRARY_DIR"); dir != nullptr && *dir != '\0') {
    candidates.push_back((std::filesystem::path(dir) / soname).string());
  } else {
    candidates.emplace_back(soname);  // the loader's own search
    if (std::string folder = cudart_folder(); !folder.empty()) {
      candidates.push_back((std::filesystem::path(folder) / soname).string());
    }
  }
  std::string last_error;
  for (const std::string& path : candidates) {
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* err = dlerror();
    last_error = err != nullptr ? err : "unknown error";
  }
  const char* ld_path = std::getenv("LD_LIBRARY_PATH");
  return make_error(ErrorCode::NotSupported,
                    "cannot load the CUDA math library {} (needed by the CUDA kernels; tried {}; "
                    "LD_LIBRARY_PATH={}): {}. Install the CUDA toolkit's cuBLAS, or point "
                    "PLANRT_CUDA_MATH_LIBRARY_DIR at the folder holding it",
                    soname, fmt::join(candidates, ", "), ld_path != nullptr ? ld_path : "(unset)",
                    last_error);
}

template <typename Fn>
Status resolve(void* handle, const char* soname, const char* name, Fn& out) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    return make_error(ErrorCode::NotSupported,
                      "the CUDA math library {} has no function {}: it is not the version planrt "
                      "was built against (CUDA {})",
                      soname, name, CUDART_VERSION / 1000);
  }
  out = reinterpret_cast<Fn>(symbol);
  return {};
}

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
  if (resolved.ok()) resolved = resolve(handle, soname, #name, table->name);
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
