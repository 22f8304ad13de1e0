// The CUDA math libraries, cuBLAS and cuBLASLt, opened on first use (dlopen) rather than
// linked: loading libcublasLt runs its initialisation (about 210 MB of resident memory and
// tens of milliseconds, docs/design.md §7) in every process that links it, before main,
// whether or not it ever touches a GPU. planrt's CPU work (`--version`, `inspect`, `build`, a
// CPU `run`, `import planrt`) therefore never opens them; the first cuBLAS handle does.
//
// cublas_library() opens libcublas.so.<major> and libcublasLt.so.<major> of the CUDA
// toolkit the build used and resolves every function planrt calls, once per process. It
// looks, in order, in PLANRT_CUDA_MATH_LIBRARY_DIR when that is set (and only there), then
// through the dynamic loader's own search (LD_LIBRARY_PATH, the runpath of the object that
// holds this code: the executable, or the shared library planrt is linked into;
// ld.so.cache), then beside the libcudart the process has loaded. When a library is missing
// or lacks a function the error is NotSupported naming the library, every path tried and the
// loader's message. The failure is not remembered: a later call tries again (and reads
// PLANRT_CUDA_MATH_LIBRARY_DIR again). The process and its CPU methods keep working.
// Thread safety: any thread; the first successful call publishes the table, which never
// changes or goes away after (the libraries stay open until exit).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include "planrt/core/result.h"

namespace planrt::kernels::cuda {

// Every cuBLAS function planrt calls, by its exported name (the _v2 entry points
// cublas_v2.h maps the plain names to).
#define PLANRT_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate_v2)               \
  X(cublasDestroy_v2)              \
  X(cublasSetStream_v2)            \
  X(cublasGetStream_v2)            \
  X(cublasSetMathMode)             \
  X(cublasGetMathMode)             \
  X(cublasGetStatusName)           \
  X(cublasGetStatusString)         \
  X(cublasSgemm_v2)                \
  X(cublasSgemmStridedBatched)     \
  X(cublasSgemmBatched)

// Overloaded in C++ (cublas_api.h adds wrappers taking a cudaDataType compute type), so
// decltype cannot name them: the C entry points' types, spelled out.
using CublasGemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                          int, int, int, const void*, const void*, cudaDataType,
                                          int, const void*, cudaDataType, int, const void*, void*,
                                          cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using CublasGemmBatchedExFn = cublasStatus_t (*)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
    const void* const[], cudaDataType, int, const void* const[], cudaDataType, int, const void*,
    void* const[], cudaDataType, int, int, cublasComputeType_t, cublasGemmAlgo_t);
using CublasGemmStridedBatchedExFn = cublasStatus_t (*)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
    cudaDataType, int, long long int, const void*, cudaDataType, int, long long int, const void*,
    void*, cudaDataType, int, long long int, int, cublasComputeType_t, cublasGemmAlgo_t);
#define PLANRT_CUBLAS_TYPED_FUNCTIONS(X)             \
  X(cublasGemmEx, CublasGemmExFn)                    \
  X(cublasGemmBatchedEx, CublasGemmBatchedExFn)      \
  X(cublasGemmStridedBatchedEx, CublasGemmStridedBatchedExFn)

#define PLANRT_CUBLASLT_FUNCTIONS(X)    \
  X(cublasLtMatmulDescCreate)           \
  X(cublasLtMatmulDescDestroy)          \
  X(cublasLtMatmulDescSetAttribute)     \
  X(cublasLtMatrixLayoutCreate)         \
  X(cublasLtMatrixLayoutDestroy)        \
  X(cublasLtMatmulPreferenceCreate)     \
  X(cublasLtMatmulPreferenceDestroy)    \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)     \
  X(cublasLtMatmul)

struct CublasLibrary {
#define PLANRT_CUBLAS_MEMBER(name) decltype(&::name) name = nullptr;
#define PLANRT_CUBLAS_TYPED_MEMBER(name, type) type name = nullptr;
  PLANRT_CUBLAS_FUNCTIONS(PLANRT_CUBLAS_MEMBER)
  PLANRT_CUBLAS_TYPED_FUNCTIONS(PLANRT_CUBLAS_TYPED_MEMBER)
  PLANRT_CUBLASLT_FUNCTIONS(PLANRT_CUBLAS_MEMBER)
#undef PLANRT_CUBLAS_TYPED_MEMBER
#undef PLANRT_CUBLAS_MEMBER
};

// The libraries' functions, opening them on the first call (see above).
Result<const CublasLibrary*> cublas_library();

// The table if this process has opened the libraries, else nullptr; never opens them.
const CublasLibrary* cublas_library_if_open();

// The library file names this build opens (libcublas.so.<major>, libcublasLt.so.<major>).
const char* cublas_soname();
const char* cublaslt_soname();

}  // namespace planrt::kernels::cuda
