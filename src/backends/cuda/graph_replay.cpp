#include "backends/cuda/graph_replay.h"

#include <atomic>

#include "backends/cuda/segment.h"
#include "planrt/core/log.h"
#include "platform/cuda/cuda_status.h"

namespace planrt::cuda_backend {
namespace {

std::atomic<int64_t> g_captures{0};
std::atomic<int64_t> g_replays{0};
std::atomic<int64_t> g_fallbacks{0};

// What a captured graph depends on besides the segment itself: each operand's address and
// sizes (the sizes fix every dim, hence every temporary's size and every kernel's grid).
std::vector<int64_t> graph_key(std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs) {
  std::vector<int64_t> key;
  for (const auto views : {inputs, outputs}) {
    for (const TensorView& v : views) {
      key.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(v.data)));
      key.push_back(v.sizes.rank());
      for (int d = 0; d < v.sizes.rank(); ++d) key.push_back(v.sizes[d]);
    }
  }
  return key;
}

}  // namespace

GraphCounters graph_counters() {
  return {g_captures.load(), g_replays.load(), g_fallbacks.load()};
}

Status run_with_graphs(Segment& seg, std::span<const TensorView> inputs,
                       std::span<const TensorView> outputs, cudaStream_t stream) {
  std::string where = fmt::format("segment '{}'", seg.name);
  std::vector<int64_t> key = graph_key(inputs, outputs);
  for (const CapturedGraph& g : seg.graphs.captured) {
    if (g.key != key) continue;
    g_replays.fetch_add(1, std::memory_order_relaxed);
    return g.exec.launch(stream).with_context(where);
  }
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  PLANRT_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capturing),
                              where + ": cudaStreamIsCapturing", seg.device);
  if (seg.graphs.captured.size() >= kMaxGraphsPerSegment || capturing != cudaStreamCaptureStatusNone) {
    return run_eagerly(seg, inputs, outputs, stream);
  }
  // A new key runs eagerly first, and that run gives this call's outputs: the kernels make
  // their first-call choices outside the capture (the linears time their cuBLASLt
  // algorithms, kernels/cuda/gemm_lt.h, which a capturing stream cannot), and the capture
  // after it only records, for the next call with the key to replay.
  PLANRT_RETURN_IF_ERROR(run_eagerly(seg, inputs, outputs, stream));
  // From here on this call's outputs are done: a capture that fails, whatever the cause
  // (the kernels' own checks passed just now), costs only the graphs.
  Status status = cuda::cuda_error(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed),
                                   where + ": cudaStreamBeginCapture", seg.device);
  Result<cuda::GraphExec> exec = cuda::GraphExec();
  if (status.ok()) {
    status = run_eagerly(seg, inputs, outputs, stream);
    // A capture whose work failed is ended and dropped, not instantiated.
    exec = cuda::GraphExec::capture_end(stream, seg.device, status.ok());
    if (status.ok() && exec.ok()) {
      seg.graphs.captured.push_back({std::move(key), std::move(exec).value()});
      g_captures.fetch_add(1, std::memory_order_relaxed);
      return {};
    }
  }
  (void)cudaGetLastError();  // a refused capture leaves its error behind; nothing ran
  PLANRT_LOG_WARN("{}: CUDA graph capture failed ({}); running without graphs from now on", where,
                  !exec.ok() ? exec.status().to_string() : status.to_string());
  seg.graphs.failed = true;
  g_fallbacks.fetch_add(1, std::memory_order_relaxed);
  return {};
}

}  // namespace planrt::cuda_backend
