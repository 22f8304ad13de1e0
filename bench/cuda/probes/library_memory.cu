// Fixed device-memory costs of what planrt's CUDA side creates (context, cuBLAS and cuDNN
// handles, a stream-ordered pool, a CUDA graph), measured step by step with cudaMemGetInfo:
// the part of a method's measured device delta that is no planned buffer (issue 19). It
// calls the libraries directly, so it is built by hand against the toolkit, not by CMake
// (planrt itself opens them at run time); on the GPU machine:
//   nvcc -O2 -arch=sm_90 bench/cuda/probes/library_memory.cu -o /tmp/library_memory \
//        -lcublas -lcublasLt -lcudnn && /tmp/library_memory [setenv]
// `setenv` sets CUBLAS_WORKSPACE_CONFIG=:0:0 in the process before the first handle, as
// planrt does around its own cublasCreate (kernels/cuda/cuda_kernel.h). Prints one JSON line per step; figures in
// bench/results/library_memory.jsonl.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cudnn.h>
#include <cuda_runtime.h>

#include "memory_steps.h"

__global__ void add_one(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
int main(int argc, char** argv) {
  const char* lazy = std::getenv("CUDA_MODULE_LOADING");
  std::printf("{\"CUDA_MODULE_LOADING\": \"%s\"}\n", lazy ? lazy : "(unset: lazy)");
  cudaSetDevice(0);
  {
    size_t f = 0, t = 0;
    cudaMemGetInfo(&f, &t);  // creates the context
    last = t - f;
  }
  step("context (cudaMemGetInfo)");
  float* x = nullptr;
  cudaMalloc(&x, 64 << 20);
  step("cudaMalloc 64 MiB");
  add_one<<<1, 32>>>(x, 32);
  step("first own kernel launch");
  // "setenv": ask for no default workspace from inside the process, after cuBLAS is loaded
  // and the context exists, as a library could (CUBLAS_WORKSPACE_CONFIG, if unset).
  if (argc > 1 && std::string(argv[1]) == "setenv") {
    setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0", 0);
    std::printf("{\"setenv\": \"CUBLAS_WORKSPACE_CONFIG=%s\"}\n", std::getenv("CUBLAS_WORKSPACE_CONFIG"));
  }
  cublasHandle_t h;
  cublasCreate(&h);
  step("cublasCreate");
  const int n = 512;
  const float one = 1, zero = 0;
  cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, x, n, x, n, &zero, x + n * n, n);
  step("first cublasSgemm 512^3");
  cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 128, 2048, 512, &one, x, 128, x, 512, &zero, x + 4 * n * n, 128);
  step("cublasSgemm 128x2048x512");
  cublasHandle_t h2;
  cublasCreate(&h2);
  cublasSgemm(h2, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, x, n, x, n, &zero, x + n * n, n);
  step("second cublas handle + sgemm");
  cublasSetWorkspace(h2, nullptr, 0);
  cublasDestroy(h2);
  step("second handle destroyed");
  void* own_ws = nullptr;
  cudaMalloc(&own_ws, 4 << 20);
  step("cudaMalloc 4 MiB (a workspace of our own)");
  cublasSetWorkspace(h, own_ws, 4 << 20);
  step("cublasSetWorkspace(first handle, own 4 MiB)");
  cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, x, n, x, n, &zero, x + n * n, n);
  step("sgemm on the own workspace");
  cublasHandle_t h3;
  cublasCreate(&h3);
  step("third cublasCreate");
  cublasSetWorkspace(h3, own_ws, 4 << 20);
  step("third: cublasSetWorkspace before any call");
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  step("cublasLtCreate");
  cudnnHandle_t dnn;
  cudnnStatus_t ds = cudnnCreate(&dnn);
  step(ds == CUDNN_STATUS_SUCCESS ? "cudnnCreate" : "cudnnCreate FAILED");
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  step("cudaStreamCreate");
  cudaMemPool_t pool;
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPoolCreate(&pool, &props);
  uint64_t thr = UINT64_MAX;
  cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr);
  step("cudaMemPoolCreate");
  void* p = nullptr;
  cudaMallocFromPoolAsync(&p, 4096, pool, s);
  cudaStreamSynchronize(s);
  step("pool: 4 KiB allocation");
  void* q = nullptr;
  cudaMallocFromPoolAsync(&q, 3 << 20, pool, s);
  cudaStreamSynchronize(s);
  step("pool: + 3 MiB allocation");
  cudaFreeAsync(p, s);
  cudaFreeAsync(q, s);
  cudaStreamSynchronize(s);
  step("pool: both freed (threshold max)");
  cudaGraph_t g;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  for (int k = 0; k < 100; ++k) add_one<<<1, 32, 0, s>>>(x, 32);
  cudaStreamEndCapture(s, &g);
  cudaGraphExec_t ge;
  cudaGraphInstantiate(&ge, g, 0);
  step("graph of 100 kernels instantiated");
  cudaGraphLaunch(ge, s);
  cudaStreamSynchronize(s);
  step("graph launched");
  std::printf("{\"done\": true}\n");
  return 0;
}
