// CUDA-graph replay of cuda segments (backend option use_cuda_graphs): the first execute of
// a segment with a given key (each operand's address and sizes, which fix every dim, every
// temporary's size and every kernel's grid) runs eagerly, then is captured and instantiated
// (the eager run lets kernels make first-call choices, such as the linears' timed cuBLASLt
// algorithms, outside a capture); every later execute with the key launches the graph, one
// launch instead of one per kernel.
// Private to src/backends/cuda.
//
// Relaxed capture mode: a library's first-use setup inside the capture (cuBLAS allocating
// its workspace) is allowed rather than invalidating the capture. Temporaries become graph
// allocations (platform/cuda/pool.h), owned by the graph. A capture that CUDA refuses is
// logged, counted (graph_fallbacks) and the segment runs eagerly from then on; an error of
// the kernels' own checks is returned as eagerly. A stream the caller is already capturing
// is not captured again (eager enqueueing, which the caller's capture records). At most
// kMaxGraphsPerSegment captures per segment; past it, new keys run eagerly, so a dynamic
// dim cannot grow graph memory without bound.
// Thread safety: one call at a time per segment (the caller holds the device's cuBLAS
// lock); the counters are atomic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <vector>

#include "planrt/core/tensor_view.h"
#include "platform/cuda/graph.h"

namespace planrt::cuda_backend {

struct Segment;

inline constexpr size_t kMaxGraphsPerSegment = 8;

// One captured execution of a segment, valid for the key it was captured with.
struct CapturedGraph {
  std::vector<int64_t> key;
  cuda::GraphExec exec;
};

struct SegmentGraphs {
  bool enabled = false;  // option use_cuda_graphs
  bool failed = false;   // a capture failed: this segment runs eagerly from then on
  std::vector<CapturedGraph> captured;
};

// Replays the graph of this call's key, capturing it first when it is new.
Status run_with_graphs(Segment& seg, std::span<const TensorView> inputs,
                       std::span<const TensorView> outputs, cudaStream_t stream);

struct GraphCounters {
  int64_t captures = 0, replays = 0, fallbacks = 0;
};
GraphCounters graph_counters();  // process-wide, since start

}  // namespace planrt::cuda_backend
