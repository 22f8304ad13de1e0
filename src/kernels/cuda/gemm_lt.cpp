#include "kernels/cuda/gemm_lt.h"

#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

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

// The choice of one problem. The heuristic query costs tens of microseconds of host time,
// more than a small GEMM, and timing costs milliseconds: both are done once per problem.
// device, dtype, m, n, k, bias, tf32, workspace bytes, timed
using AlgoKey = std::tuple<int, DType, int64_t, int64_t, int64_t, bool, bool, uint64_t, bool>;
struct AlgoCache {
  std::mutex mu;
  std::map<AlgoKey, std::optional<cublasLtMatmulAlgo_t>> algos;  // nullopt: none applies
};
AlgoCache& algo_cache() {
  static AlgoCache* cache = new AlgoCache();  // never destroyed: used until process exit
  return *cache;
}
std::atomic<int64_t> g_problems_timed{0}, g_candidates_timed{0}, g_untimed_calls{0};

// The heuristic is also asked with this much workspace, and its answers that fit the call's
// workspace join the candidates: asked with a small budget it can leave out split-K
// algorithms that would fit it (measured: 128 x 512 x 512 f32 with 4 MiB offered no
// algorithm using any, with 32 MiB one using 2 MiB that was 30% faster).
constexpr uint64_t kWideQueryBytes = uint64_t{32} << 20;

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

// One product's descriptors, in the column-major view of the row-major product:
// y^T [n, m] = op_T(w as [k, n]) @ x^T [k, m]; the bias is a column vector of y^T's n rows.
struct Problem {
  MatmulDesc desc;
  Layout a, b, d;
};

Result<Problem> make_problem(const CublasLibrary& cu, std::string_view op, const LtProduct& p,
                             bool tf32) {
  const cudaDataType_t type = p.dtype == DType::BF16  ? CUDA_R_16BF
                              : p.dtype == DType::F16 ? CUDA_R_16F
                                                      : CUDA_R_32F;
  cublasLtMatmulDesc_t raw_desc = nullptr;
  PLANRT_RETURN_IF_ERROR(cublas_status(
      op, "cublasLtMatmulDescCreate",
      cu.cublasLtMatmulDescCreate(&raw_desc, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                  CUDA_R_32F)));
  Problem pr;
  pr.desc.reset(raw_desc);
  PLANRT_RETURN_IF_ERROR(set_desc(cu, op, pr.desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T));
  PLANRT_RETURN_IF_ERROR(set_desc(cu, op, pr.desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N));
  if (p.bias != nullptr) {
    PLANRT_RETURN_IF_ERROR(
        set_desc(cu, op, pr.desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS));
    PLANRT_RETURN_IF_ERROR(
        set_desc(cu, op, pr.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias));
  }
  PLANRT_ASSIGN_OR_RETURN(pr.a, make_layout(cu, op, type, p.k, p.n, p.k));
  PLANRT_ASSIGN_OR_RETURN(pr.b, make_layout(cu, op, type, p.k, p.m, p.k));
  PLANRT_ASSIGN_OR_RETURN(pr.d, make_layout(cu, op, type, p.n, p.m, p.n));
  return pr;
}

// The heuristic's top answers with at most `budget` bytes of workspace, those needing at
// most `fits` kept (an error of the query itself is "no answer": the caller falls back).
Result<std::vector<cublasLtMatmulHeuristicResult_t>> heuristic(
    const CublasLibrary& cu, std::string_view op, cublasLtHandle_t lt, const Problem& pr,
    uint64_t budget, uint64_t fits) {
  cublasLtMatmulPreference_t raw_pref = nullptr;
  PLANRT_RETURN_IF_ERROR(cublas_status(op, "cublasLtMatmulPreferenceCreate",
                                       cu.cublasLtMatmulPreferenceCreate(&raw_pref)));
  Preference pref(raw_pref);
  PLANRT_RETURN_IF_ERROR(cublas_status(
      op, "cublasLtMatmulPreferenceSetAttribute",
      cu.cublasLtMatmulPreferenceSetAttribute(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &budget, sizeof(budget))));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    PLANRT_RETURN_IF_ERROR(cublas_status(
        op, "cublasLtMatmulPreferenceSetAttribute",
        cu.cublasLtMatmulPreferenceSetAttribute(pref.get(), attr, &kAlignment, sizeof(kAlignment))));
  }
  std::vector<cublasLtMatmulHeuristicResult_t> results(kLtCandidates);
  int found = 0;
  const cublasStatus_t st =
      cu.cublasLtMatmulAlgoGetHeuristic(lt, pr.desc.get(), pr.a.get(), pr.b.get(), pr.d.get(),
                                        pr.d.get(), pref.get(), kLtCandidates, results.data(), &found);
  if (st != CUBLAS_STATUS_SUCCESS) found = 0;
  results.resize(static_cast<size_t>(std::max(found, 0)));
  std::erase_if(results, [&](const cublasLtMatmulHeuristicResult_t& r) {
    return r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > fits;
  });
  return results;
}

// Candidates in the heuristic's order: its answers within the call's workspace, then those
// of the wide query that fit it, each algorithm once.
Result<std::vector<cublasLtMatmulAlgo_t>> candidates(const CublasLibrary& cu, std::string_view op,
                                                     cublasLtHandle_t lt, const Problem& pr,
                                                     uint64_t workspace_bytes) {
  PLANRT_ASSIGN_OR_RETURN(auto own, heuristic(cu, op, lt, pr, workspace_bytes, workspace_bytes));
  std::vector<cublasLtMatmulAlgo_t> out;
  auto add = [&](const cublasLtMatmulAlgo_t& algo) {
    for (const auto& seen : out) {
      if (std::memcmp(&seen, &algo, sizeof(algo)) == 0) return;
    }
    out.push_back(algo);
  };
  for (const auto& r : own) add(r.algo);
  if (workspace_bytes > 0 && workspace_bytes < kWideQueryBytes) {
    PLANRT_ASSIGN_OR_RETURN(auto wide, heuristic(cu, op, lt, pr, kWideQueryBytes, workspace_bytes));
    for (const auto& r : wide) add(r.algo);
  }
  return out;
}

// Owners of the timing's CUDA objects (this layer sits below platform/cuda's owners); a
// graph executable destroyed while a launch of it runs is released once the launch ends.
struct GraphExecDeleter {
  void operator()(cudaGraphExec_t e) const { (void)cudaGraphExecDestroy(e); }
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const { (void)cudaEventDestroy(e); }
};
using GraphExecOwner = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter>;
using EventOwner = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;

Result<EventOwner> timing_event(std::string_view op) {
  cudaEvent_t e = nullptr;
  PLANRT_RETURN_IF_ERROR(cuda_status(op, "cudaEventCreate", cudaEventCreate(&e)));
  return EventOwner(e);
}

// Ends the capture on `stream` (always, so the stream is usable again) and instantiates
// what it recorded when `instantiate`; null when nothing is to be run.
GraphExecOwner end_capture(cudaStream_t stream, bool instantiate) {
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t exec = nullptr;
  if (err == cudaSuccess && instantiate && graph != nullptr) err = cudaGraphInstantiate(&exec, graph, 0);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // a refused capture leaves its error behind; nothing ran
    return nullptr;
  }
  return GraphExecOwner(exec);
}

struct Operands {
  const LtProduct& p;
  void* workspace;
  uint64_t workspace_bytes;
};

cublasStatus_t enqueue(const CublasLibrary& cu, cublasLtHandle_t lt, const Problem& pr,
                       const Operands& o, const cublasLtMatmulAlgo_t& algo, cudaStream_t stream) {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  return cu.cublasLtMatmul(lt, pr.desc.get(), &alpha, o.p.w, pr.a.get(), o.p.x, pr.b.get(), &beta,
                           o.p.y, pr.d.get(), o.p.y, pr.d.get(), &algo, o.workspace,
                           o.workspace_bytes, stream);
}

// Times each candidate on the call's operands (kLtTimedGemms GEMMs captured on `stream`,
// the graph replayed twice, the second timed) and returns the fastest, or nullopt when no
// candidate could be captured. A candidate whose capture fails is skipped; the stream is
// never left capturing. The GEMMs write only y and the workspace, which the real call
// overwrites next.
Result<std::optional<cublasLtMatmulAlgo_t>> fastest(const CublasLibrary& cu, std::string_view op, cublasLtHandle_t lt,
                                     const Problem& pr, const Operands& o,
                                     const std::vector<cublasLtMatmulAlgo_t>& algos,
                                     cudaStream_t stream) {
  struct Timing {
    size_t index;
    GraphExecOwner exec;
    EventOwner start, stop;
  };
  std::vector<Timing> timings;
  for (size_t i = 0; i < algos.size(); ++i) {
    PLANRT_RETURN_IF_ERROR(cuda_status(
        op, "cudaStreamBeginCapture", cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal)));
    bool ok = true;
    for (int j = 0; j < kLtTimedGemms && ok; ++j) {
      ok = enqueue(cu, lt, pr, o, algos[i], stream) == CUBLAS_STATUS_SUCCESS;
    }
    GraphExecOwner exec = end_capture(stream, ok);
    if (exec == nullptr) continue;  // this candidate cannot run here
    Timing t{i, std::move(exec), nullptr, nullptr};
    PLANRT_ASSIGN_OR_RETURN(t.start, timing_event(op));
    PLANRT_ASSIGN_OR_RETURN(t.stop, timing_event(op));
    timings.push_back(std::move(t));
  }
  // Every replay is queued before the host waits once: the first replay of each warms it
  // (instruction cache, clocks), the second is timed.
  for (Timing& t : timings) {
    PLANRT_RETURN_IF_ERROR(cuda_status(op, "cudaGraphLaunch", cudaGraphLaunch(t.exec.get(), stream)));
    PLANRT_RETURN_IF_ERROR(cuda_status(op, "cudaEventRecord", cudaEventRecord(t.start.get(), stream)));
    PLANRT_RETURN_IF_ERROR(cuda_status(op, "cudaGraphLaunch", cudaGraphLaunch(t.exec.get(), stream)));
    PLANRT_RETURN_IF_ERROR(cuda_status(op, "cudaEventRecord", cudaEventRecord(t.stop.get(), stream)));
  }
  if (timings.empty()) return std::optional<cublasLtMatmulAlgo_t>();
  PLANRT_RETURN_IF_ERROR(cuda_status(op, "cudaEventSynchronize", cudaEventSynchronize(timings.back().stop.get())));
  size_t best = timings.front().index;
  float best_ms = -1;
  for (const Timing& t : timings) {
    float ms = 0;
    PLANRT_RETURN_IF_ERROR(cuda_status(op, "cudaEventElapsedTime",
                                       cudaEventElapsedTime(&ms, t.start.get(), t.stop.get())));
    if (best_ms < 0 || ms < best_ms) best_ms = ms, best = t.index;
  }
  g_problems_timed.fetch_add(1, std::memory_order_relaxed);
  g_candidates_timed.fetch_add(static_cast<int64_t>(timings.size()), std::memory_order_relaxed);
  return std::optional<cublasLtMatmulAlgo_t>(algos[best]);
}

}  // namespace

Result<bool> gemm_nk_lt(std::string_view op, const CudaKernelContext& ctx, const LtProduct& p,
                        void* workspace, uint64_t workspace_bytes) {
  PLANRT_RETURN_IF_ERROR(cpu::check_gemm_dims(op, p.m, p.n, p.k));
  if (p.m == 0 || p.n == 0 || p.k == 0) return false;
  if (p.dtype != DType::F32 && p.dtype != DType::BF16 && p.dtype != DType::F16) return false;
  if (!aligned(p.x) || !aligned(p.w) || !aligned(p.y) || (p.bias != nullptr && !aligned(p.bias))) {
    return false;
  }
  if (workspace == nullptr) workspace_bytes = 0;
  if (ctx.cublas == nullptr) {
    return make_error(ErrorCode::InvalidArgument, "{}: the kernel context has no cuBLAS handle",
                      op);
  }
  Result<const CublasLibrary*> opened = cublas_library();
  if (!opened.ok()) return opened.status().with_context(op);
  const CublasLibrary& cu = **opened;
  // A cuBLAS handle is also a cuBLASLt handle (cuBLAS documents the cast).
  auto lt = reinterpret_cast<cublasLtHandle_t>(ctx.cublas);
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  PLANRT_RETURN_IF_ERROR(
      cublas_status(op, "cublasGetMathMode", cu.cublasGetMathMode(ctx.cublas, &math)));
  // TF32 concerns f32 operands; bf16 and f16 products run on the tensor cores regardless.
  const bool tf32 = p.dtype == DType::F32 && (math & CUBLAS_TF32_TENSOR_OP_MATH) != 0;
  int device = 0;
  PLANRT_RETURN_IF_ERROR(cuda_status(op, "cudaGetDevice", cudaGetDevice(&device)));
  PLANRT_ASSIGN_OR_RETURN(Problem pr, make_problem(cu, op, p, tf32));
  const Operands o{p, workspace, workspace_bytes};

  const bool timed = ctx.gemm_algorithm == GemmAlgorithm::Timed;
  const AlgoKey key{device, p.dtype, p.m, p.n, p.k, p.bias != nullptr, tf32, workspace_bytes, timed};
  AlgoCache& cache = algo_cache();
  std::optional<cublasLtMatmulAlgo_t> algo;
  bool cached = false;
  {
    std::lock_guard lock(cache.mu);
    auto it = cache.algos.find(key);
    if (it != cache.algos.end()) algo = it->second, cached = true;
  }
  if (!cached) {
    PLANRT_ASSIGN_OR_RETURN(auto algos, candidates(cu, op, lt, pr, workspace_bytes));
    // Timing needs a stream it may capture: not the legacy default stream, and not one the
    // caller is capturing already (its capture would record the timing launches).
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (ctx.stream != nullptr) {
      PLANRT_RETURN_IF_ERROR(cuda_status(op, "cudaStreamIsCapturing",
                                         cudaStreamIsCapturing(ctx.stream, &capturing)));
    }
    const bool can_time = ctx.stream != nullptr && ctx.stream != cudaStreamLegacy &&
                          capturing == cudaStreamCaptureStatusNone;
    std::optional<cublasLtMatmulAlgo_t> timed_choice;
    if (timed && algos.size() > 1 && can_time) {
      // Timing is an optimisation: where it fails (a candidate CUDA will not capture, an
      // event or launch error) the call still runs, on the heuristic's first answer.
      Result<std::optional<cublasLtMatmulAlgo_t>> t = fastest(cu, op, lt, pr, o, algos, ctx.stream);
      if (t.ok()) {
        timed_choice = *t;
      } else {
        (void)cudaGetLastError();  // the failed call's error, so later launch checks start clean
      }
    }
    if (algos.empty()) {
      algo = std::nullopt;
    } else if (!timed || algos.size() == 1) {
      algo = algos.front();
    } else if (timed_choice) {
      algo = timed_choice;
    } else {
      algo = algos.front();
      cached = true;  // not stored: a later ordinary call times this problem
      g_untimed_calls.fetch_add(1, std::memory_order_relaxed);
    }
    if (!cached) {
      std::lock_guard lock(cache.mu);
      algo = cache.algos.emplace(key, algo).first->second;  // a racing thread's stays
    }
  }
  if (!algo) return false;  // nothing enqueued: the caller takes its cuBLAS path
  PLANRT_RETURN_IF_ERROR(cublas_status(op, "cublasLtMatmul", enqueue(cu, lt, pr, o, *algo, ctx.stream)));
  return true;
}

LtAlgorithmStats lt_algorithm_stats() {
  LtAlgorithmStats s;
  s.problems_timed = g_problems_timed.load();
  s.candidates_timed = g_candidates_timed.load();
  s.untimed_calls = g_untimed_calls.load();
  AlgoCache& cache = algo_cache();
  std::lock_guard lock(cache.mu);
  s.cached_problems = static_cast<int64_t>(cache.algos.size());
  return s;
}

}  // namespace planrt::kernels::cuda
