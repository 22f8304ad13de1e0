// How much the choice of cuBLASLt algorithm and a workspace would buy on the encoder's
// linears (issue 18). planrt's linear ran cuBLASLt's first heuristic answer with no
// workspace (src/kernels/cuda/gemm_lt.cpp). For each product y[m, n] = x[m, k] w[n, k]^T +
// bias of a d512 / FFN 2048 encoder block, m = batch 1 x S, and for each workspace budget
// (none; 1, 4 and 16 times the output in f32 partial sums; 32 MiB, capped by --ws), this
// times the heuristic's first answer and the fastest of its top --top answers (20 GEMMs
// captured into a CUDA graph, median of --reps replays, per GEMM: the GPU's time, as a
// replayed method pays it). One JSON line per (dtype, m, n, k). Built by hand against the
// toolkit, like the other probes here; on the GPU machine:
//   nvcc -O2 -arch=sm_90 bench/cuda/probes/gemm_algos.cu -o /tmp/gemm_algos -lcublasLt \
//     && /tmp/gemm_algos [--reps 50] [--ws 32] [--top 16]
// Figures in bench/results/gemm_algos.jsonl.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define CHECK_CUDA(x)                                                                 \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)
#define CHECK_LT(x)                                                                   \
  do {                                                                                \
    cublasStatus_t s_ = (x);                                                          \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                \
      std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, int(s_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace {

struct Problem {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  ~Problem() {
    cublasLtMatmulDescDestroy(desc);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(d);
  }
};

// planrt's layout: column-major y^T [n, m] = op_T(w as [k, n]) x^T [k, m], bias epilogue.
void make_problem(Problem& p, cudaDataType_t type, int64_t m, int64_t n, int64_t k,
                  const void* bias) {
  CHECK_LT(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  CHECK_LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
  CHECK_LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn)));
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
  CHECK_LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  CHECK_LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                          sizeof(bias)));
  CHECK_LT(cublasLtMatrixLayoutCreate(&p.a, type, k, n, k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&p.b, type, k, m, k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&p.d, type, n, m, n));
}

std::vector<cublasLtMatmulHeuristicResult_t> heuristics(cublasLtHandle_t lt, const Problem& p,
                                                        size_t workspace, int top) {
  cublasLtMatmulPreference_t pref = nullptr;
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace, sizeof(workspace)));
  std::vector<cublasLtMatmulHeuristicResult_t> r(static_cast<size_t>(top));
  int found = 0;
  cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.d, p.d, pref, top,
                                                    r.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS) found = 0;
  r.resize(static_cast<size_t>(found));
  return r;
}

// Launches per timed sample, captured into one CUDA graph and replayed: launched from the
// host one by one, a small GEMM measures cublasLtMatmul's host cost (6-9 us a call on the
// H200's host), not the GPU's time; a method replayed as a graph pays only the latter.
constexpr int kBackToBack = 20;

// Median over `reps` graph replays of the ms per GEMM of `algo`, or -1 when it fails.
double time_algo(cublasLtHandle_t lt, const Problem& p, const cublasLtMatmulAlgo_t& algo,
                 const void* w, const void* x, void* y, void* ws, size_t ws_bytes,
                 cudaStream_t stream, int reps) {
  const float one = 1, zero = 0;
  if (cublasLtMatmul(lt, p.desc, &one, w, p.a, x, p.b, &zero, y, p.d, y, p.d, &algo, ws,
                     ws_bytes, stream) != CUBLAS_STATUS_SUCCESS) {
    return -1;
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  bool ok = true;
  for (int j = 0; j < kBackToBack; ++j) {
    ok = ok && cublasLtMatmul(lt, p.desc, &one, w, p.a, x, p.b, &zero, y, p.d, y, p.d, &algo, ws,
                              ws_bytes, stream) == CUBLAS_STATUS_SUCCESS;
  }
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  if (!ok) {
    cudaGraphDestroy(graph);
    return -1;
  }
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) CHECK_CUDA(cudaGraphLaunch(exec, stream));
  std::vector<float> ms;
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  for (int i = 0; i < reps; ++i) {
    CHECK_CUDA(cudaEventRecord(e0, stream));
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaEventRecord(e1, stream));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t / kBackToBack);
  }
  CHECK_CUDA(cudaEventDestroy(e0));
  CHECK_CUDA(cudaEventDestroy(e1));
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 50, top = 16;
  size_t ws_mib = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--ws")) ws_mib = std::strtoull(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--top")) top = std::atoi(argv[i + 1]);
  }
  cublasLtHandle_t lt = nullptr;
  CHECK_LT(cublasLtCreate(&lt));
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t ws_bytes = ws_mib << 20;
  const size_t big = size_t{2048} * 2048 * 4;
  void *w = nullptr, *x = nullptr, *y = nullptr, *bias = nullptr, *ws = nullptr;
  CHECK_CUDA(cudaMalloc(&w, big));
  CHECK_CUDA(cudaMalloc(&x, big));
  CHECK_CUDA(cudaMalloc(&y, big));
  CHECK_CUDA(cudaMalloc(&bias, 2048 * 4));
  CHECK_CUDA(cudaMalloc(&ws, ws_bytes));
  // Non-zero operands (bytes 0x3c: about 0.0115 in f32 and in bf16): zeros would flatter
  // the clock under power management.
  CHECK_CUDA(cudaMemset(w, 0x3c, big));
  CHECK_CUDA(cudaMemset(x, 0x3c, big));
  CHECK_CUDA(cudaMemset(bias, 0, 2048 * 4));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const int64_t nk[][2] = {{512, 512}, {1536, 512}, {2048, 512}, {512, 2048}};
  for (const char* dtype : {"f32", "bf16"}) {
    const cudaDataType_t type = std::string(dtype) == "f32" ? CUDA_R_32F : CUDA_R_16BF;
    for (int64_t m : {1, 16, 128, 512, 2048}) {
      for (const auto& p2 : nk) {
        const int64_t n = p2[0], k = p2[1];
        Problem p;
        make_problem(p, type, m, n, k, bias);
        // Workspace budgets: none (planrt before issue 18), multiples of the output in f32
        // partial sums (what split-K reduces through), and cuBLAS's own Hopper default.
        const size_t out_f32 = size_t(m) * size_t(n) * 4;
        const size_t budgets[] = {0, out_f32, 4 * out_f32, 16 * out_f32, size_t{32} << 20};
        const char* names[] = {"none", "1x_out", "4x_out", "16x_out", "32mib"};
        const double flop = 2.0 * double(m) * double(n) * double(k);
        std::printf("{\"probe\": \"gemm_algos\", \"timing\": \"graph\", \"gpu\": \"%s\", \"dtype\": \"%s\", "
                    "\"m\": %lld, \"n\": %lld, \"k\": %lld, \"reps\": %d",
                    prop.name, dtype, (long long)m, (long long)n, (long long)k, reps);
        for (int b = 0; b < 5; ++b) {
          const size_t budget = std::min(budgets[b], ws_bytes);
          auto cands = heuristics(lt, p, budget, top);
          double first = -1, best = -1;
          size_t best_need = 0;
          int best_rank = -1;
          for (size_t i = 0; i < cands.size(); ++i) {
            double t = time_algo(lt, p, cands[i].algo, w, x, y, budget ? ws : nullptr, budget,
                                 stream, reps);
            if (i == 0) first = t;
            if (t > 0 && (best < 0 || t < best)) best = t, best_rank = int(i), best_need = cands[i].workspaceSize;
          }
          std::printf(", \"%s\": {\"budget_bytes\": %zu, \"candidates\": %zu, \"first_ms\": %.5f, "
                      "\"best_ms\": %.5f, \"best_rank\": %d, \"best_workspace_bytes\": %zu, "
                      "\"best_tflops\": %.2f}",
                      names[b], budget, cands.size(), first, best, best_rank, best_need,
                      best > 0 ? flop / best / 1e9 : 0.0);
        }
        std::printf("}\n");
        std::fflush(stdout);
      }
    }
  }
  cudaFree(w);
  cudaFree(x);
  cudaFree(y);
  cudaFree(bias);
  cudaFree(ws);
  cudaStreamDestroy(stream);
  cublasLtDestroy(lt);
  return 0;
}
