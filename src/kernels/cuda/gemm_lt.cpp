#include "kernels/cuda/gemm_lt.h"

#include <cublasLt.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

#include "kernels/cpu/blas.h"
#include "kernels/cuda/checks.h"

namespace planrt::kernels::cuda {
namespace {

// cuBLASLt descriptors, destroyed on every path out (one exists only once the library that
// made it is open).
struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublas_library_if_open()->cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const {
    cublas_library_if_open()->cublasLtMatrixLayoutDestroy(l);
  }
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const {
    cublas_library_if_open()->cublasLtMatmulPreferenceDestroy(p);
  }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DescDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DescDeleter>;

// The heuristic query costs tens of microseconds of host time, more than a small GEMM:
// its answer is kept per device and problem. An empty optional records "no algorithm".
// device, dtype, m, n, k, tf32
using AlgoKey = std::tuple<int, DType, int64_t, int64_t, int64_t, bool>;
struct AlgoCache {
  std::mutex mu;
  std::map<AlgoKey, std::optional<cublasLtMatmulAlgo_t>> algos;
};
AlgoCache& algo_cache() {
  static AlgoCache* cache = new AlgoCache();  // never destroyed: used until process exit
  return *cache;
}

constexpr uint32_t kAlignment = 16;  // every pointer must have it; the caller checks

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignment == 0; }

Result<Layout> make_layout(const CublasLibrary& cu, std::string_view op, cudaDataType_t type,
                           uint64_t rows, uint64_t cols, int64_t ld) {
  cublasLtMatrixLayout_t raw = nullptr;
  PLANRT_RETURN_IF_ERROR(cublas_status(op, "cublasLtMatrixLayoutCreate",
                                       cu.cublasLtMatrixLayoutCreate(&raw, type, rows, cols, ld)));
  return Layout(raw);
}

template <typename T>
Status set_desc(const CublasLibrary& cu, std::string_view op, cublasLtMatmulDesc_t desc,
                cublasLtMatmulDescAttributes_t attr, const T& value) {
  return cublas_status(op, "cublasLtMatmulDescSetAttribute",
                       cu.cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

}  // namespace

Result<bool> gemm_bias_nk(std::string_view op, const CudaKernelContext& ctx, DType dtype,
                          int64_t m, int64_t n, int64_t k, const void* x, const void* w,
                          const void* bias, void* y) {
  PLANRT_RETURN_IF_ERROR(cpu::check_gemm_dims(op, m, n, k));
  if (m == 0 || n == 0 || k == 0) return false;
  if (dtype != DType::F32 && dtype != DType::BF16) return false;
  const cudaDataType_t type = dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
  if (!aligned(x) || !aligned(w) || !aligned(bias) || !aligned(y)) return false;
  if (ctx.cublas == nullptr) {
    return make_error(ErrorCode::InvalidArgument, "{}: the kernel context has no cuBLAS handle",
                      op);
  }
  Result<const CublasLibrary*> opened = cublas_library();
  if (!opened.ok()) return opened.status().with_context(op);
  const CublasLibrary& cu = **opened;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  PLANRT_RETURN_IF_ERROR(
      cublas_status(op, "cublasGetMathMode", cu.cublasGetMathMode(ctx.cublas, &math)));
  // TF32 concerns f32 operands; bf16 products run on the tensor cores regardless.
  const bool tf32 = dtype == DType::F32 && (math & CUBLAS_TF32_TENSOR_OP_MATH) != 0;
  int device = 0;
  PLANRT_RETURN_IF_ERROR(cuda_status(op, "cudaGetDevice", cudaGetDevice(&device)));

  // Column-major view of the row-major product: y^T [n, m] = op_T(w as [k, n]) @ x^T [k, m];
  // the bias is a column vector of y^T's n rows, broadcast over its m columns.
  cublasLtMatmulDesc_t raw_desc = nullptr;
  PLANRT_RETURN_IF_ERROR(cublas_status(
      op, "cublasLtMatmulDescCreate",
      cu.cublasLtMatmulDescCreate(&raw_desc, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                               CUDA_R_32F)));
  MatmulDesc desc(raw_desc);
  PLANRT_RETURN_IF_ERROR(set_desc(cu, op, desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T));
  PLANRT_RETURN_IF_ERROR(set_desc(cu, op, desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N));
  PLANRT_RETURN_IF_ERROR(
      set_desc(cu, op, desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS));
  PLANRT_RETURN_IF_ERROR(set_desc(cu, op, desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias));
  PLANRT_ASSIGN_OR_RETURN(Layout a, make_layout(cu, op, type, k, n, k));
  PLANRT_ASSIGN_OR_RETURN(Layout b, make_layout(cu, op, type, k, m, k));
  PLANRT_ASSIGN_OR_RETURN(Layout d, make_layout(cu, op, type, n, m, n));

  std::optional<cublasLtMatmulAlgo_t> algo;
  const AlgoKey key{device, dtype, m, n, k, tf32};
  {
    AlgoCache& cache = algo_cache();
    std::lock_guard lock(cache.mu);
    auto it = cache.algos.find(key);
    if (it != cache.algos.end()) {
      algo = it->second;
    } else {
      cublasLtMatmulPreference_t raw_pref = nullptr;
      PLANRT_RETURN_IF_ERROR(cublas_status(op, "cublasLtMatmulPreferenceCreate",
                                           cu.cublasLtMatmulPreferenceCreate(&raw_pref)));
      Preference pref(raw_pref);
      const uint64_t no_workspace = 0;  // nothing to allocate per call
      PLANRT_RETURN_IF_ERROR(cublas_status(
          op, "cublasLtMatmulPreferenceSetAttribute",
          cu.cublasLtMatmulPreferenceSetAttribute(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &no_workspace, sizeof(no_workspace))));
      for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
        PLANRT_RETURN_IF_ERROR(cublas_status(
            op, "cublasLtMatmulPreferenceSetAttribute",
            cu.cublasLtMatmulPreferenceSetAttribute(pref.get(), attr, &kAlignment, sizeof(kAlignment))));
      }
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      const cublasStatus_t st = cu.cublasLtMatmulAlgoGetHeuristic(
          reinterpret_cast<cublasLtHandle_t>(ctx.cublas), desc.get(), a.get(), b.get(), d.get(),
          d.get(), pref.get(), 1, &result, &found);
      if (st == CUBLAS_STATUS_SUCCESS && found > 0) algo = result.algo;
      cache.algos.emplace(key, algo);
    }
  }
  if (!algo) return false;  // nothing enqueued: the caller takes its two-pass path
  const float alpha = 1.0f;
  const float beta = 0.0f;
  // A cuBLAS handle is also a cuBLASLt handle (cuBLAS documents the cast).
  PLANRT_RETURN_IF_ERROR(cublas_status(
      op, "cublasLtMatmul",
      cu.cublasLtMatmul(reinterpret_cast<cublasLtHandle_t>(ctx.cublas), desc.get(), &alpha, w,
                     a.get(), x, b.get(), &beta, y, d.get(), y, d.get(), &*algo, nullptr, 0,
                     ctx.stream)));
  return true;
}

}  // namespace planrt::kernels::cuda
