#include "kernels/cuda/library_loader.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace planrt::kernels::cuda {
namespace {

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

}  // namespace

Result<void*> open_cuda_library(const char* soname, std::string_view install_hint) {
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
                    "LD_LIBRARY_PATH={}): {}. Install {}, or point PLANRT_CUDA_MATH_LIBRARY_DIR at "
                    "the folder holding it",
                    soname, fmt::join(candidates, ", "), ld_path != nullptr ? ld_path : "(unset)",
                    last_error, install_hint);
}

Status missing_function(const char* soname, const char* name) {
  return make_error(ErrorCode::NotSupported,
                    "the CUDA math library {} has no function {}: it is not the version planrt "
                    "was built against (CUDA {})",
                    soname, name, CUDART_VERSION / 1000);
}

}  // namespace planrt::kernels::cuda
