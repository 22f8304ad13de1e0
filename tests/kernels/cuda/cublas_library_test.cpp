// The CUDA math libraries are opened on first use (kernels/cuda/cublas_library.h). These
// tests need no GPU (opening a library and resolving its functions does not touch one), so
// they run in CI's CPU lane too. ctest runs each test in a process of its own; run alone,
// a test that needs a process that has not opened the libraries yet skips when it has.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernels/cuda/cublas_library.h"
#include "kernels/cuda/cuda_kernel.h"
#include "support/status_matchers.h"

namespace planrt::kernels::cuda {
namespace {

using testing::IsError;

bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(name) != std::string::npos) return true;
  }
  return false;
}

// cuBLAS's default workspace (64 MiB a handle on an H200, in no plan) is turned off while
// planrt creates a handle, unless the caller chose a setting; afterwards the environment is
// as it was, so other libraries in the process never see planrt's setting. ctest runs this
// a second time with the variable set (tests/CMakeLists.txt).
TEST(CublasLibrary, TheDefaultWorkspaceIsOffWhilePlanrtCreatesAHandleUnlessTheCallerSetIt) {
  const char* at_start = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  const std::string callers = at_start != nullptr ? at_start : "";
  {
    NoDefaultCublasWorkspace guard;
    const char* inside = std::getenv("CUBLAS_WORKSPACE_CONFIG");
    ASSERT_NE(inside, nullptr);
    EXPECT_EQ(std::string(inside), at_start != nullptr ? callers : std::string(":0:0"));
  }
  const char* after = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  if (at_start == nullptr) {
    EXPECT_EQ(after, nullptr) << "left set to " << after;
  } else {
    ASSERT_NE(after, nullptr);
    EXPECT_EQ(std::string(after), callers);
  }
}

TEST(CublasLibrary, IsOpenedOnFirstUseAndResolvesEveryFunction) {
  if (cublas_library_if_open() != nullptr) GTEST_SKIP() << "opened earlier in this process";
  EXPECT_FALSE(mapped(cublaslt_soname())) << "linked or opened before first use";
  EXPECT_FALSE(mapped(cublas_soname()));
  Result<const CublasLibrary*> lib = cublas_library();
  ASSERT_TRUE(lib.ok()) << lib.status().to_string();
  EXPECT_EQ(cublas_library_if_open(), *lib);
#define PLANRT_EXPECT_RESOLVED(name) EXPECT_NE((*lib)->name, nullptr) << #name;
#define PLANRT_EXPECT_TYPED_RESOLVED(name, type) PLANRT_EXPECT_RESOLVED(name)
  PLANRT_CUBLAS_FUNCTIONS(PLANRT_EXPECT_RESOLVED)
  PLANRT_CUBLAS_TYPED_FUNCTIONS(PLANRT_EXPECT_TYPED_RESOLVED)
  PLANRT_CUBLASLT_FUNCTIONS(PLANRT_EXPECT_RESOLVED)
#undef PLANRT_EXPECT_TYPED_RESOLVED
#undef PLANRT_EXPECT_RESOLVED
  EXPECT_TRUE(mapped(cublaslt_soname()));
  EXPECT_TRUE(mapped(cublas_soname()));
  // Opened once: the same table after.
  EXPECT_EQ(*cublas_library(), *lib);
}

TEST(CublasLibrary, AMissingLibraryIsAnErrorNamingItAndWhereItLookedAndALaterCallRetries) {
  if (cublas_library_if_open() != nullptr) GTEST_SKIP() << "opened earlier in this process";
  ASSERT_EQ(setenv("PLANRT_CUDA_MATH_LIBRARY_DIR", "/nonexistent/planrt-cuda", 1), 0);
  const std::string path = std::string("/nonexistent/planrt-cuda/") + cublaslt_soname();
  EXPECT_TRUE(IsError(cublas_library().status(), ErrorCode::NotSupported,
                      {"cannot load the CUDA math library", cublaslt_soname(), path,
                       "PLANRT_CUDA_MATH_LIBRARY_DIR"}));
  // A handle is where the kernels first need them: its creation says the same.
  EXPECT_TRUE(IsError(CublasHandle::create().status(), ErrorCode::NotSupported,
                      {"cuBLAS", cublaslt_soname(), path}));
  EXPECT_EQ(cublas_library_if_open(), nullptr);
  ASSERT_EQ(unsetenv("PLANRT_CUDA_MATH_LIBRARY_DIR"), 0);
  Result<const CublasLibrary*> lib = cublas_library();
  EXPECT_TRUE(lib.ok()) << lib.status().to_string();
}

// A file of the right name that is not the library (here the C maths library under
// cuBLASLt's name): the first function it lacks is named, with the CUDA version expected.
TEST(CublasLibrary, ALibraryWithoutTheFunctionsIsAnErrorNamingTheFirstMissingOne) {
  if (cublas_library_if_open() != nullptr) GTEST_SKIP() << "opened earlier in this process";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("planrt_cublas_impostor_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink("/lib/x86_64-linux-gnu/libm.so.6", dir / cublaslt_soname());
  std::filesystem::create_symlink("/lib/x86_64-linux-gnu/libm.so.6", dir / cublas_soname());
  ASSERT_EQ(setenv("PLANRT_CUDA_MATH_LIBRARY_DIR", dir.c_str(), 1), 0);
  EXPECT_TRUE(IsError(cublas_library().status(), ErrorCode::NotSupported,
                      {"has no function cublasCreate_v2", "not the version planrt was built against"}));
  EXPECT_EQ(cublas_library_if_open(), nullptr);
  ASSERT_EQ(unsetenv("PLANRT_CUDA_MATH_LIBRARY_DIR"), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace planrt::kernels::cuda
