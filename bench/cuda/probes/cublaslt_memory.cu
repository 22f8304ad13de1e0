// What a cuBLASLt handle costs on the device when it is the process's first cuBLAS object,
// against a cuBLAS handle (which library_memory.cu measured at 4 MiB even without its
// default workspace, and which planrt creates on every device that runs a GEMM). The
// question it answers: would planrt's GEMMs through cublasLtCreate's handle, with no
// cublasCreate at all, take the 4 MiB off every device's ledger? Built by hand against the
// toolkit, like the other probes here; on the GPU machine:
//   nvcc -O2 -arch=sm_90 bench/cuda/probes/cublaslt_memory.cu -o /tmp/cublaslt_memory \
//        -lcublas -lcublasLt && /tmp/cublaslt_memory [lt-first|blas-first]
// One JSON line per step; figures in bench/results/library_memory.jsonl.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "memory_steps.h"

// C = A * B, column-major, f32, no workspace: the call planrt's gemm_lt path makes.
static cublasStatus_t lt_sgemm(cublasLtHandle_t lt, int m, int n, int k, const float* a,
                               const float* b, float* c) {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k);
  cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m);
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  size_t no_workspace = 0;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &no_workspace, sizeof(no_workspace));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1,
                                                    &heuristic, &found);
  const float one = 1, zero = 0;
  if (s == CUBLAS_STATUS_SUCCESS && found > 0)
    s = cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, c, lc, c, lc, &heuristic.algo,
                       nullptr, 0, nullptr);
  else if (s == CUBLAS_STATUS_SUCCESS)
    s = CUBLAS_STATUS_NOT_SUPPORTED;
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(desc);
  return s;
}

static void lt_steps(float* x) {
  cublasLtHandle_t lt = nullptr;
  cublasStatus_t s = cublasLtCreate(&lt);
  step(s == CUBLAS_STATUS_SUCCESS ? "cublasLtCreate" : "cublasLtCreate FAILED");
  s = lt_sgemm(lt, 512, 512, 512, x, x, x + 512 * 512);
  step(s == CUBLAS_STATUS_SUCCESS ? "first cublasLtMatmul 512^3" : "cublasLtMatmul FAILED");
  s = lt_sgemm(lt, 128, 2048, 512, x, x, x + 4 * 512 * 512);
  step(s == CUBLAS_STATUS_SUCCESS ? "cublasLtMatmul 128x2048x512" : "cublasLtMatmul FAILED");
  cublasLtHandle_t lt2 = nullptr;
  cublasLtCreate(&lt2);
  lt_sgemm(lt2, 512, 512, 512, x, x, x + 512 * 512);
  step("second cublasLt handle + matmul");
}

static void blas_steps(float* x) {
  setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0", 0);  // as planrt makes its cuBLAS handle
  cublasHandle_t h = nullptr;
  cublasStatus_t s = cublasCreate(&h);
  step(s == CUBLAS_STATUS_SUCCESS ? "cublasCreate (CUBLAS_WORKSPACE_CONFIG=:0:0)"
                                  : "cublasCreate FAILED");
  const float one = 1, zero = 0;
  cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 512, 512, 512, &one, x, 512, x, 512, &zero,
              x + 512 * 512, 512);
  step("first cublasSgemm 512^3");
}

int main(int argc, char** argv) {
  const std::string order = argc > 1 ? argv[1] : "lt-first";
  std::printf("{\"order\": \"%s\"}\n", order.c_str());
  cudaSetDevice(0);
  last = used();  // creates the context
  step("context (cudaMemGetInfo)");
  float* x = nullptr;
  cudaMalloc(&x, 64 << 20);
  step("cudaMalloc 64 MiB");
  if (order == "blas-first") {
    blas_steps(x);
    lt_steps(x);
  } else {
    lt_steps(x);
    blas_steps(x);
  }
  return 0;
}
