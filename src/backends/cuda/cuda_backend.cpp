// The `cuda` backend's Backend glue: see include/planrt/backends/cuda.h for the behaviour
// and contract. The segment model and its eager run are segment.h; CUDA-graph replay is
// graph_replay.h.
#include "planrt/backends/cuda.h"

#include <cuda_runtime.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "backends/cuda/device_resources.h"
#include "backends/cuda/graph_replay.h"
#include "backends/cuda/segment.h"
#include "planrt/core/log.h"
#include "planrt/runtime/backend.h"
#include "platform/cuda/cuda_allocator.h"
#include "platform/cuda/cuda_status.h"
#include "platform/cuda/device_guard.h"

namespace planrt {
namespace {

using cuda_backend::Segment;
using cuda_backend::SegmentOptions;

std::atomic<int64_t> g_live_segments{0};

class CudaBackend final : public Backend {
 public:
  Result<BackendHandle> init(std::span<const uint8_t> blob,
                             std::span<const BackendOption> compile_specs,
                             const BackendInitContext& context) override;
  Status execute(BackendHandle handle, std::span<const TensorView> inputs,
                 std::span<const TensorView> outputs, void* stream) override;
  void destroy(BackendHandle handle) override;
  Status finish(BackendHandle handle) override;
};

Result<BackendHandle> CudaBackend::init(std::span<const uint8_t> blob,
                                        std::span<const BackendOption> compile_specs,
                                        const BackendInitContext& context) {
  auto seg = std::make_unique<Segment>();
  seg->name = std::string(context.segment_name);
  if (context.device.type != DeviceType::CUDA) {
    return make_error(ErrorCode::InvalidArgument, "segment '{}': the cuda backend runs on CUDA "
                      "devices, not {}", seg->name, to_string(context.device));
  }
  seg->device = context.device.index;
  seg->dims.assign(context.dims.begin(), context.dims.end());
  Result<SegmentOptions> options = cuda_backend::parse_options(compile_specs, context.options);
  if (!options.ok()) return options.status().with_context(fmt::format("segment '{}'", seg->name));
  seg->fuse = options->fuse_kernels;
  seg->gemm_algorithm = options->gemm_algorithm;
  seg->cudnn_attention = options->cudnn_attention;
  seg->planned_scratch = options->use_planned_scratch;
  seg->graphs.enabled = options->use_cuda_graphs;
  // Everything that needs no device first: a bad graph or an unknown op is reported the
  // same with or without a GPU.
  PLANRT_RETURN_IF_ERROR(cuda_backend::parse_graph(*seg, blob, context));

  std::string where = fmt::format("segment '{}' on cuda:{}", seg->name, seg->device);
  Status dev = cuda::check_cuda_device(seg->device);
  if (!dev.ok()) return dev.with_context(where);
  Result<cuda::DeviceGuard> guard = cuda::DeviceGuard::set(seg->device);
  if (!guard.ok()) return guard.status().with_context(where);
  // From here the Segment's destructor gives back whatever was taken.
  Status s = cuda_backend::init_device(*seg, context, options->allow_tf32, options->pool);
  if (!s.ok()) return s.with_context(where);
  seg->bound.assign(seg->dims.size(), -1);
  seg->views.resize(seg->values.size());
  ++g_live_segments;
  return static_cast<BackendHandle>(seg.release());
}

Status CudaBackend::execute(BackendHandle handle, std::span<const TensorView> inputs,
                            std::span<const TensorView> outputs, void* stream) {
  auto* seg = static_cast<Segment*>(handle);
  if (seg == nullptr) return make_error(ErrorCode::InvalidArgument, "cuda backend: null handle");
  const size_t n_outputs = seg->outputs.size() + (seg->scratch_operand ? 1 : 0);
  if (inputs.size() != seg->inputs.size() || outputs.size() != n_outputs) {
    return make_error(ErrorCode::InvalidArgument,
                      "segment '{}' takes {} inputs and {} outputs{}, got {} and {}", seg->name,
                      seg->inputs.size(), seg->outputs.size(),
                      seg->scratch_operand ? " plus its planned scratch" : "", inputs.size(),
                      outputs.size());
  }
  Result<cuda::DeviceGuard> guard = cuda::DeviceGuard::set(seg->device);
  if (!guard.ok()) return guard.status().with_context(fmt::format("segment '{}'", seg->name));
  bool own = stream == nullptr;
  std::string where = fmt::format("segment '{}'", seg->name);
  if (own) {
    // Made on the first call without a stream, not at init: the runtime always passes one.
    Status made = seg->stream.create_if_empty(seg->device);
    if (!made.ok()) return made.with_context(where + ": creating its own stream");
  }
  cudaStream_t s = own ? seg->stream.get() : static_cast<cudaStream_t>(stream);
  if (own) {
    // The runtime's host-to-device copies are cudaMemcpy on the legacy default stream; a
    // pageable one may return before its DMA lands, and our stream is non-blocking.
    Status r = seg->legacy_done.record(cudaStreamLegacy);
    if (r.ok()) r = seg->legacy_done.wait_on(s);
    if (!r.ok()) return r.with_context(where + ": waiting for the default stream");
  }
  Status status;
  {
    // The device's one cuBLAS handle (a replayed graph's GEMMs use its workspace too).
    std::lock_guard cublas_lock(seg->cublas->mu);
    status = seg->graphs.enabled && !seg->graphs.failed
                 ? cuda_backend::run_with_graphs(*seg, inputs, outputs, s)
                 : cuda_backend::run_eagerly(*seg, inputs, outputs, s);
  }
  // The kernels' error record comes back to pinned memory in stream order; finish() reads
  // it once the stream has been synchronized.
  Status read_back = seg->errors.copy_to_host(s, where);
  if (status.ok() && !read_back.ok()) status = read_back;
  if (!own) return status;
  // Called directly without a stream: finish here, so the caller's synchronous copies right
  // after read finished outputs.
  Status synced = seg->stream.synchronize();
  if (!status.ok()) return status;
  if (!synced.ok()) return synced.with_context(where);
  return finish(handle);
}

Status CudaBackend::finish(BackendHandle handle) {
  auto* seg = static_cast<Segment*>(handle);
  if (seg == nullptr) return make_error(ErrorCode::InvalidArgument, "cuda backend: null handle");
  if (!seg->errors.has_error()) return {};
  std::string where = fmt::format("segment '{}'", seg->name);
  Result<cuda::DeviceGuard> guard = cuda::DeviceGuard::set(seg->device);
  if (!guard.ok()) return guard.status().with_context(where);
  return seg->errors.take(seg->stream.get(), where);
}

void CudaBackend::destroy(BackendHandle handle) {
  if (handle == nullptr) return;
  auto* seg = static_cast<Segment*>(handle);
  Result<cuda::DeviceGuard> guard = cuda::DeviceGuard::set(seg->device);
  if (!guard.ok()) PLANRT_LOG_ERROR("segment '{}': {}", seg->name, guard.status().to_string());
  delete seg;
  --g_live_segments;
}

CudaBackend& the_backend() {
  static CudaBackend* backend = new CudaBackend();  // never destroyed: Methods may outlive statics
  return *backend;
}

}  // namespace

Status register_cuda_backend() {
  PLANRT_RETURN_IF_ERROR(register_cuda_allocator());
  return register_backend_once("cuda", &the_backend());
}

CudaBackendStats cuda_backend_stats() {
  CudaBackendStats s;
  s.live_segments = g_live_segments.load();
  const cuda_backend::GraphCounters graphs = cuda_backend::graph_counters();
  s.graph_captures = graphs.captures;
  s.graph_replays = graphs.replays;
  s.graph_fallbacks = graphs.fallbacks;
  backends::weight_cache().stats(s);
  return s;
}

}  // namespace planrt
