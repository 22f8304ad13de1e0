// The cuda backend's segment model: what init() makes of a segment's graph blob, and the
// eager run of one call. The Backend glue (cuda_backend.cpp) and CUDA-graph replay
// (graph_replay.h) sit on top. Private to src/backends/cuda.
//
// A Segment holds the parsed graph (values, steps with their CUDA kernels, add + layer_norm
// fused where it can be), where its intermediates live, and its device resources. Where
// they live, by how the program was built:
// - planned scratch (Graph.scratch_operand, the builder's default): every intermediate at
//   its stored offset in the scratch the Delegate passes as its last output (a value of
//   the method's arena), each kernel's workspace at its step's planned offset there; a call
//   allocates nothing. Load-time option use_planned_scratch=false runs it as below instead.
// - otherwise: Planned intermediates in one scratch from the warm pool per call, Temporaries
//   from the warm pool before their first step and freed after their last, and kernel
//   workspace from the pool.
// The device resources: the pool handle, the
// device's shared cuBLAS handle, a stream for calls without one (made by the first such call:
// a stream costs ~0.5 MiB of device memory, and a method run by the runtime passes its own),
// the kernels' error record
// and the uploaded weights. Ownership: the Segment owns all of it; its destructor waits for
// its stream and gives everything back. Thread safety: one call at a time per Segment (the
// Backend contract); the device's cuBLAS handle is shared and locked by the caller.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/cuda/device_error_record.h"
#include "backends/cuda/device_resources.h"
#include "backends/cuda/graph_replay.h"
#include "backends/cuda/planned_workspace.h"
#include "backends/segment_graph.h"
#include "kernels/cuda/cuda_kernel.h"
#include "planrt/runtime/backend.h"
#include "platform/cuda/pool.h"
#include "platform/cuda/stream.h"

namespace planrt::cuda_backend {

// The kernels' per-call scratch, served by the warm pool.
class PoolTempMemory final : public kernels::cuda::CudaTempMemory {
 public:
  explicit PoolTempMemory(cuda::PoolHandle* pool) : pool_(pool) {}
  Result<void*> allocate(size_t bytes, cudaStream_t stream) override {
    return pool_->allocate(bytes, stream);
  }
  Status deallocate(void* ptr, size_t, cudaStream_t stream) override {
    return pool_->deallocate(ptr, stream);
  }

 private:
  cuda::PoolHandle* pool_;
};

// A value of the graph and, for a constant, its device copy and cache key.
struct GraphValue : SegmentValue {
  void* weight = nullptr;
  const uint8_t* weight_host = nullptr;
  size_t weight_bytes = 0;
};

struct GraphStep {
  std::string op;
  std::string node;
  kernels::cuda::CudaKernelFn fn = nullptr;
  kernels::OpAttrs attrs;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  size_t plan_step = 0;  // the graph's instruction it runs (the first of a fused pair)
  std::vector<uint32_t> allocate_before;  // Temporaries first used by this step
  std::vector<uint32_t> free_after;       // Temporaries last used by this step
};

// The backend's options (include/planrt/backends/cuda.h lists them with their defaults).
struct SegmentOptions {
  bool allow_tf32 = false;
  bool fuse_kernels = true;      // fuse_add_layer_norm; false runs every op as its own kernel
  bool use_cuda_graphs = false;  // capture each execute once per operand addresses and sizes
  bool use_planned_scratch = true;  // the Delegate's planned scratch, where the program has one
  kernels::cuda::GemmAlgorithm gemm_algorithm = kernels::cuda::GemmAlgorithm::Timed;
  bool cudnn_attention = true;  // option attention: "cudnn" or "planrt"
  cuda::PoolOptions pool;
};

// Compile specs, then load-time options: a later key wins. Unknown keys are ignored (they
// may be meant for another version of this backend). InvalidArgument naming a bad value.
Result<SegmentOptions> parse_options(std::span<const BackendOption> compile_specs,
                                     std::span<const BackendOption> load_options);

struct Segment {
  std::string name;
  int device = 0;
  std::vector<DimSpec> dims;
  std::vector<GraphValue> values;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<GraphStep> steps;
  uint64_t scratch_bytes = 0;
  bool has_planned = false;
  bool scratch_operand = false;  // the Delegate passes a planned scratch as its last output
  bool planned_scratch = false;  // ... and this segment uses it (option use_planned_scratch)
  bool fusion_safe = false;      // Graph.scratch_plan_fusion_safe
  // Planned scratch: each graph instruction's workspace in it (planning/engine_scratch.h).
  std::vector<uint64_t> workspace_offsets, workspace_bytes;
  backends::PlannedWorkspace planned_workspace;
  bool fuse = true;  // option fuse_kernels
  kernels::cuda::GemmAlgorithm gemm_algorithm = kernels::cuda::GemmAlgorithm::Timed;  // option
  bool cudnn_attention = true;  // option attention
  SegmentGraphs graphs;  // option use_cuda_graphs: the captures, replayed by graph_replay.h

  cuda::PoolHandle pool;
  std::unique_ptr<PoolTempMemory> temp;
  std::shared_ptr<backends::SharedCublas> cublas;  // shared by every segment on this device
  cuda::Stream stream;      // used when the caller gives none; created by the first such call
  cuda::Event legacy_done;  // the legacy default stream's work, waited for on `stream`
  backends::DeviceErrorRecord errors;

  // Per-call state, reused (execute never runs twice at once on one handle).
  std::vector<int64_t> bound;
  std::vector<TensorView> views;
  std::vector<TensorView> in, out;

  std::string step_name(size_t k) const;
  ~Segment();
};

// Everything that needs no device: the graph (through the shared parser,
// backends/segment_graph.h), each step's CUDA kernel (NotFound for an op without one), a
// planned scratch's stored plan verified (InvalidProgram where it does not hold), fusion
// when seg.fuse, and the Temporaries' lifetimes. `seg.planned_scratch` must be set from the
// options first (it is cleared where the graph has no planned scratch).
Status parse_graph(Segment& seg, std::span<const uint8_t> blob, const BackendInitContext& ctx);

// Device resources: pool, cuBLAS, stream, error record, the weights the graph reads (once
// per device and program constant). `seg.device` must be current.
Status init_device(Segment& seg, const BackendInitContext& ctx, bool allow_tf32,
                   const cuda::PoolOptions& pool_options);

// One call, enqueued on `stream` without waiting: operands checked against the graph (dims
// bound from their shapes; `outputs` ends with the planned scratch where the graph takes
// one), intermediates placed, every step's kernel. Everything it allocated from the pool is
// freed (stream-ordered) before it returns, also on failure.
Status run_eagerly(Segment& seg, std::span<const TensorView> inputs,
                   std::span<const TensorView> outputs, cudaStream_t stream);

}  // namespace planrt::cuda_backend
