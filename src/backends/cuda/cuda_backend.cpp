// The `cuda` backend: see include/planrt/backends/cuda.h for the behaviour and contract.
#include "planrt/backends/cuda.h"

#include <cuda_runtime.h>
#include <flatbuffers/flatbuffers.h>

#include <atomic>
#include <charconv>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/device_resources.h"
#include "backends/option_values.h"
#include "backends/segment_graph.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/kernel.h"
#include "planrt/core/log.h"
#include "planrt/format/program_generated.h"
#include "planrt/platform/cuda.h"
#include "planrt/runtime/backend.h"
#include "platform/cuda/cuda_allocator.h"
#include "platform/cuda/cuda_status.h"
#include "platform/cuda/device_guard.h"
#include "platform/cuda/fault_injection.h"
#include "platform/cuda/pool.h"
#include "platform/cuda/stream.h"
#include "runtime/fb_convert.h"
#include "planning/op_attrs.h"

namespace planrt {
namespace {

using kernels::cuda::CudaDeviceError;
using kernels::cuda::CudaKernelContext;
using kernels::cuda::CudaKernelFn;
using runtime_detail::str;
using backends::shared_cublas;
using backends::SharedCublas;
using backends::weight_cache;

constexpr uint32_t kNoValue = 0xFFFFFFFFu;

std::atomic<int64_t> g_live_segments{0};
std::atomic<int64_t> g_graph_captures{0};
std::atomic<int64_t> g_graph_replays{0};
std::atomic<int64_t> g_graph_fallbacks{0};

// ---------------------------------------------------------------- per-segment state

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
  CudaKernelFn fn = nullptr;
  kernels::OpAttrs attrs;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<uint32_t> allocate_before;  // Temporaries first used by this step
  std::vector<uint32_t> free_after;       // Temporaries last used by this step
};

// One captured execution of a segment: valid for the operand addresses and sizes it was
// captured with (the key), replayed with cudaGraphLaunch. Its temporaries are graph
// allocations (pool.h): owned by the graph, not the warm pool.
struct CapturedGraph {
  std::vector<int64_t> key;
  cudaGraphExec_t exec = nullptr;
};

// At most this many captures per segment (one per input shape and operand addresses seen);
// past it, new shapes run eagerly, so a dynamic dim cannot grow graph memory without bound.
constexpr size_t kMaxGraphsPerSegment = 8;

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
  bool fuse = true;  // option fuse_kernels
  bool use_graphs = false;  // option use_cuda_graphs
  bool graphs_failed = false;  // a capture failed: this segment runs eagerly from then on
  std::vector<CapturedGraph> graphs;

  cuda::PoolHandle pool;
  std::unique_ptr<PoolTempMemory> temp;
  std::shared_ptr<SharedCublas> cublas;  // shared by every segment on this device
  cuda::Stream stream;          // used when the caller gives none
  cuda::Event legacy_done;      // the legacy default stream's work, waited for on `stream`
  CudaDeviceError* device_errors = nullptr;  // device memory (cudaMalloc)
  // Pinned host copy of the record, written stream-ordered at the end of every execute and
  // read by finish() once the runtime has synchronized the stream.
  CudaDeviceError* host_errors = nullptr;

  // Per-call state, reused (execute never runs twice at once on one handle).
  std::vector<int64_t> bound;
  std::vector<TensorView> views;
  std::vector<TensorView> in, out;

  std::string step_name(size_t k) const {
    const GraphStep& s = steps[k];
    return fmt::format("segment '{}' step {} (op '{}', node '{}')", name, k, s.op, s.node);
  }

  ~Segment() {
    if (!stream.empty()) {
      Status s = stream.synchronize();
      if (!s.ok()) PLANRT_LOG_ERROR("segment '{}': {}", name, s.to_string());
    }
    if (device_errors != nullptr) {
      cuda::cuda_allocator().deallocate(device_errors, sizeof(CudaDeviceError), Device::cuda(device));
    }
    if (host_errors != nullptr) {
      cudaError_t err = cudaFreeHost(host_errors);
      if (err != cudaSuccess) {
        PLANRT_LOG_ERROR("segment '{}': {}", name,
                         cuda::cuda_error(err, "cudaFreeHost of the error record", device).to_string());
      }
    }
    for (const CapturedGraph& g : graphs) {
      cudaError_t err = cudaGraphExecDestroy(g.exec);
      if (err != cudaSuccess) {
        PLANRT_LOG_ERROR("segment '{}': {}", name,
                         cuda::cuda_error(err, "cudaGraphExecDestroy", device).to_string());
      }
    }
    for (const GraphValue& v : values) {
      if (v.weight != nullptr) weight_cache().release(device, v.weight_host, v.weight_bytes);
    }
  }
};

using backends::parse_bool_option;
using backends::parse_bytes_option;

struct SegmentOptions {
  bool allow_tf32 = false;
  bool fuse_kernels = true;  // fuse_add_layer_norm; false runs every op as its own kernel
  bool use_cuda_graphs = false;  // capture each execute once per shape, then replay
  cuda::PoolOptions pool;
};

// Compile specs, then load-time options: a later key wins. Unknown keys are ignored (they
// may be meant for another version of this backend).
Result<SegmentOptions> parse_options(std::span<const BackendOption> compile_specs,
                                     std::span<const BackendOption> load_options) {
  SegmentOptions out;
  for (const auto& list : {compile_specs, load_options}) {
    for (const BackendOption& o : list) {
      if (o.key == "allow_tf32") {
        PLANRT_ASSIGN_OR_RETURN(out.allow_tf32, parse_bool_option(o.key, o.value));
      } else if (o.key == "fuse_kernels") {
        PLANRT_ASSIGN_OR_RETURN(out.fuse_kernels, parse_bool_option(o.key, o.value));
      } else if (o.key == "use_cuda_graphs") {
        PLANRT_ASSIGN_OR_RETURN(out.use_cuda_graphs, parse_bool_option(o.key, o.value));
      } else if (o.key == "use_private_pool") {
        PLANRT_ASSIGN_OR_RETURN(out.pool.use_private_pool, parse_bool_option(o.key, o.value));
      } else if (o.key == "pool_release_threshold") {
        PLANRT_ASSIGN_OR_RETURN(out.pool.release_threshold, parse_bytes_option(o.key, o.value));
      }
    }
  }
  return out;
}

bool same_static_or_symbolic_shape(const GraphValue& a, const GraphValue& b) {
  if (a.dtype != b.dtype || a.shape.size() != b.shape.size()) return false;
  for (size_t d = 0; d < a.shape.size(); ++d) {
    if (a.shape[d].dim != b.shape[d].dim || a.shape[d].value != b.shape[d].value) return false;
  }
  return true;
}

// An add whose result a layer_norm reads next becomes one kernel (kernels::cuda::
// add_layer_norm: a transformer's residual add and the norm after it), saving a pass over
// the rows. Only when the add does not broadcast and the norm's output is a temporary of
// this segment: temporaries are allocated before the fused step, so that output never
// shares memory with the add's inputs, which a planned operand placed after the add could.
void fuse_add_layer_norm(Segment& seg) {
  std::vector<GraphStep> steps;
  for (size_t k = 0; k < seg.steps.size(); ++k) {
    GraphStep& add = seg.steps[k];
    if (k + 1 < seg.steps.size() && add.op == "add" && seg.steps[k + 1].op == "layer_norm") {
      GraphStep& norm = seg.steps[k + 1];
      const uint32_t sum = add.outputs[0];
      const uint32_t normed = norm.outputs[0];
      const GraphValue& out = seg.values[normed];
      const bool fits =
          norm.inputs[0] == sum && add.inputs[0] != kNoValue && add.inputs[1] != kNoValue &&
          (seg.values[sum].dtype == DType::F32 || seg.values[sum].dtype == DType::BF16) &&
          same_static_or_symbolic_shape(seg.values[add.inputs[0]], seg.values[sum]) &&
          same_static_or_symbolic_shape(seg.values[add.inputs[1]], seg.values[sum]) &&
          !out.operand && out.kind == fb::ValueKind::Temporary;
      if (fits) {
        GraphStep fused;
        fused.op = "add_layer_norm";
        fused.node = add.node + " + " + norm.node;
        fused.fn = &kernels::cuda::add_layer_norm;
        fused.attrs = std::move(norm.attrs);
        fused.inputs = {add.inputs[0], add.inputs[1]};
        fused.inputs.insert(fused.inputs.end(), norm.inputs.begin() + 1, norm.inputs.end());
        fused.outputs = {sum, normed};
        steps.push_back(std::move(fused));
        ++k;
        continue;
      }
    }
    steps.push_back(std::move(add));
  }
  seg.steps = std::move(steps);
}

// The blob is checked and parsed by the shared parser (backends/segment_graph.h); what is
// this backend's own is the kernel of each step (fused where it can) and when each
// Temporary lives.
Status parse_graph(Segment& seg, std::span<const uint8_t> blob, const BackendInitContext& ctx) {
  PLANRT_ASSIGN_OR_RETURN(SegmentGraph g, parse_segment_graph(blob, ctx));
  seg.scratch_bytes = g.scratch_bytes;
  seg.inputs = g.inputs;
  seg.outputs = g.outputs;
  for (SegmentValue& v : g.values) {
    GraphValue gv;
    static_cast<SegmentValue&>(gv) = std::move(v);
    if (gv.kind == fb::ValueKind::Planned) seg.has_planned = true;
    seg.values.push_back(std::move(gv));
  }
  for (size_t k = 0; k < g.steps.size(); ++k) {
    SegmentStep& st = g.steps[k];
    Result<CudaKernelFn> fn = kernels::cuda::find_cuda_kernel(st.op);
    if (!fn.ok()) {
      return make_error(ErrorCode::NotFound, "{}: unknown op '{}' (no CUDA kernel)", g.step_name(k), st.op);
    }
    GraphStep step;
    step.op = std::move(st.op);
    step.node = std::move(st.node);
    step.fn = *fn;
    step.attrs = std::move(st.attrs);
    step.inputs = std::move(st.inputs);
    step.outputs = std::move(st.outputs);
    seg.steps.push_back(std::move(step));
  }
  if (seg.fuse) fuse_add_layer_norm(seg);
  const size_t n = seg.values.size();
  // Lifetimes of the Temporaries: allocated before the first step touching them, freed
  // after the last (stream-ordered, so the pool reuses the block for later ones).
  std::vector<int64_t> first(n, -1), last(n, -1);
  for (size_t k = 0; k < seg.steps.size(); ++k) {
    for (const auto* ids : {&seg.steps[k].inputs, &seg.steps[k].outputs}) {
      for (uint32_t id : *ids) {
        if (id == kNoValue) continue;
        if (first[id] < 0) first[id] = static_cast<int64_t>(k);
        last[id] = static_cast<int64_t>(k);
      }
    }
  }
  for (size_t id = 0; id < n; ++id) {
    const GraphValue& v = seg.values[id];
    if (v.operand || v.kind != fb::ValueKind::Temporary || first[id] < 0) continue;
    seg.steps[static_cast<size_t>(first[id])].allocate_before.push_back(static_cast<uint32_t>(id));
    seg.steps[static_cast<size_t>(last[id])].free_after.push_back(static_cast<uint32_t>(id));
  }
  return {};
}

// Device resources: weights, pool, cuBLAS, stream, error record. `seg.device` is current.
Status init_device(Segment& seg, const BackendInitContext& ctx, bool allow_tf32,
                   const cuda::PoolOptions& pool_options) {
  std::string where = fmt::format("segment '{}' on cuda:{}", seg.name, seg.device);
  PLANRT_ASSIGN_OR_RETURN(seg.pool, cuda::PoolHandle::acquire(seg.device, pool_options));
  seg.temp = std::make_unique<PoolTempMemory>(&seg.pool);
  Result<std::shared_ptr<SharedCublas>> cublas = shared_cublas(seg.device, allow_tf32);
  if (!cublas.ok()) return cublas.status().with_context(where);
  seg.cublas = std::move(cublas).value();
  PLANRT_ASSIGN_OR_RETURN(seg.stream, cuda::Stream::create(seg.device));
  PLANRT_ASSIGN_OR_RETURN(seg.legacy_done, cuda::Event::create(seg.device));
  PLANRT_ASSIGN_OR_RETURN(void* err, cuda::cuda_allocator().allocate(sizeof(CudaDeviceError),
                                                                     Device::cuda(seg.device)));
  seg.device_errors = static_cast<CudaDeviceError*>(err);
  PLANRT_CUDA_RETURN_IF_ERROR(cudaMemset(seg.device_errors, 0, sizeof(CudaDeviceError)),
                              where + ": clearing the error record", seg.device);
  void* host_record = nullptr;
  PLANRT_CUDA_RETURN_IF_ERROR(cuda::malloc_host(&host_record, sizeof(CudaDeviceError)),
                              where + ": the pinned error record", seg.device);
  seg.host_errors = static_cast<CudaDeviceError*>(host_record);
  *seg.host_errors = CudaDeviceError{};
  // Weights this graph reads: once per device and program constant (the cache).
  for (GraphValue& v : seg.values) {
    if (v.kind != fb::ValueKind::Constant) continue;
    Result<ConstantRef> c = segment_constant(seg.name, seg.dims, v, ctx);
    if (!c.ok()) return c.status().with_context(where);
    if (c->data.empty()) continue;
    Result<void*> p = weight_cache().acquire(seg.device, c->data, c->name);
    if (!p.ok()) return p.status().with_context(where);
    v.weight = *p;
    v.weight_host = c->data.data();
    v.weight_bytes = c->data.size();
  }
  return {};
}

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
  Result<SegmentOptions> options = parse_options(compile_specs, context.options);
  if (!options.ok()) return options.status().with_context(fmt::format("segment '{}'", seg->name));
  seg->fuse = options->fuse_kernels;
  seg->use_graphs = options->use_cuda_graphs;
  // Everything that needs no device first: a bad graph or an unknown op is reported the
  // same with or without a GPU.
  PLANRT_RETURN_IF_ERROR(parse_graph(*seg, blob, context));

  std::string where = fmt::format("segment '{}' on cuda:{}", seg->name, seg->device);
  Status dev = cuda::check_cuda_device(seg->device);
  if (!dev.ok()) return dev.with_context(where);
  Result<cuda::DeviceGuard> guard = cuda::DeviceGuard::set(seg->device);
  if (!guard.ok()) return guard.status().with_context(where);
  // From here the Segment's destructor gives back whatever was taken.
  Status s = init_device(*seg, context, options->allow_tf32, options->pool);
  if (!s.ok()) return s.with_context(where);
  seg->bound.assign(seg->dims.size(), -1);
  seg->views.resize(seg->values.size());
  ++g_live_segments;
  return static_cast<BackendHandle>(seg.release());
}

// Frees what `live` holds, stream-ordered; the first error wins over none.
Status free_all(Segment& seg, std::vector<std::pair<uint32_t, void*>>& live, cudaStream_t stream) {
  Status first;
  for (auto& [id, p] : live) {
    if (p == nullptr) continue;
    Status s = seg.pool.deallocate(p, stream);
    if (!s.ok() && first.ok()) first = s;
    p = nullptr;
  }
  live.clear();
  return first;
}

Status check_operands(const Segment& seg, std::span<const TensorView> views,
                      const std::vector<uint32_t>& ids, std::string_view what,
                      std::span<int64_t> bound) {
  for (size_t i = 0; i < views.size(); ++i) {
    const TensorView& t = views[i];
    const GraphValue& v = seg.values[ids[i]];
    std::string name = fmt::format("segment '{}' {} {} '{}'", seg.name, what, i, v.name);
    if (t.nbytes() != 0 && (t.device != Device::cuda(seg.device) || !t.is_contiguous())) {
      return make_error(ErrorCode::InvalidArgument, "{} must be contiguous memory on cuda:{} (got {})",
                        name, seg.device, to_string(t.device));
    }
    if (t.dtype != v.dtype) {
      return make_error(ErrorCode::InvalidArgument, "{} is {}, expected {}", name,
                        dtype_name(t.dtype), dtype_name(v.dtype));
    }
    PLANRT_RETURN_IF_ERROR(bind_dims(v.shape, t.sizes, seg.dims, name, bound));
  }
  return {};
}

Status run(Segment& seg, std::span<const TensorView> inputs, std::span<const TensorView> outputs,
           cudaStream_t stream, std::vector<std::pair<uint32_t, void*>>& live) {
  std::fill(seg.bound.begin(), seg.bound.end(), -1);
  PLANRT_RETURN_IF_ERROR(check_operands(seg, inputs, seg.inputs, "input", seg.bound));
  PLANRT_RETURN_IF_ERROR(check_operands(seg, outputs, seg.outputs, "output", seg.bound));
  Device device = Device::cuda(seg.device);
  // Shapes of every value; operands and constants get their memory now, Temporaries when
  // their first step comes.
  for (size_t id = 0; id < seg.values.size(); ++id) {
    const GraphValue& v = seg.values[id];
    Result<Shape> shape = concrete_shape(v.shape, seg.bound, seg.dims);
    if (!shape.ok()) {
      return shape.status().with_context(fmt::format("segment '{}': value '{}'", seg.name, v.name));
    }
    void* data = v.kind == fb::ValueKind::Constant ? v.weight : nullptr;
    seg.views[id] = TensorView::contiguous(data, v.dtype, *shape, device);
  }
  for (size_t i = 0; i < inputs.size(); ++i) seg.views[seg.inputs[i]].data = inputs[i].data;
  for (size_t i = 0; i < outputs.size(); ++i) seg.views[seg.outputs[i]].data = outputs[i].data;
  if (seg.has_planned && seg.scratch_bytes != 0) {
    Result<void*> scratch = seg.pool.allocate(seg.scratch_bytes, stream);
    if (!scratch.ok()) {
      return scratch.status().with_context(fmt::format("segment '{}': scratch", seg.name));
    }
    live.emplace_back(kNoValue, *scratch);
    for (size_t id = 0; id < seg.values.size(); ++id) {
      const GraphValue& v = seg.values[id];
      if (v.kind == fb::ValueKind::Planned && !v.operand) {
        seg.views[id].data = static_cast<uint8_t*>(*scratch) + v.offset;
      }
    }
  }
  CudaKernelContext ctx;
  ctx.stream = stream;
  ctx.cublas = seg.cublas->handle.get();
  ctx.temp = seg.temp.get();
  ctx.device_errors = seg.device_errors;
  for (size_t k = 0; k < seg.steps.size(); ++k) {
    const GraphStep& s = seg.steps[k];
    for (uint32_t id : s.allocate_before) {
      size_t nbytes = seg.views[id].nbytes();
      if (nbytes == 0) continue;
      Result<void*> p = seg.pool.allocate(nbytes, stream);
      if (!p.ok()) {
        return p.status().with_context(
            fmt::format("{}: temporary '{}'", seg.step_name(k), seg.values[id].name));
      }
      live.emplace_back(id, *p);
      seg.views[id].data = *p;
    }
    seg.in.clear();
    seg.out.clear();
    for (uint32_t id : s.inputs) seg.in.push_back(id == kNoValue ? TensorView::none() : seg.views[id]);
    for (uint32_t id : s.outputs) seg.out.push_back(seg.views[id]);
    Status st = s.fn(ctx, s.attrs, seg.in, seg.out);
    if (!st.ok()) return st.with_context(seg.step_name(k));
    for (uint32_t id : s.free_after) {
      for (auto& [lid, p] : live) {
        if (lid != id || p == nullptr) continue;
        Status fs = seg.pool.deallocate(p, stream);
        p = nullptr;
        if (!fs.ok()) {
          return fs.with_context(
              fmt::format("{}: freeing temporary '{}'", seg.step_name(k), seg.values[id].name));
        }
      }
    }
  }
  return {};
}

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

Status run_eagerly(Segment& seg, std::span<const TensorView> inputs,
                   std::span<const TensorView> outputs, cudaStream_t stream) {
  std::vector<std::pair<uint32_t, void*>> live;
  live.reserve(seg.values.size() + 1);
  Status status = run(seg, inputs, outputs, stream, live);
  Status freed = free_all(seg, live, stream);
  if (status.ok() && !freed.ok()) {
    status = freed.with_context(fmt::format("segment '{}': freeing temporaries", seg.name));
  }
  return status;
}

// use_cuda_graphs: the first execute with a given key is captured (the same enqueueing as
// run_eagerly, on `stream`) and instantiated; that and every
// later execute with the key launch the graph: one launch instead of one per kernel.
// Relaxed capture mode: a library's first-use setup inside the capture (cuBLAS allocating
// its workspace) is allowed rather than invalidating the capture. A
// capture that fails for a reason of CUDA's (a call the capture refuses) is logged and the
// segment runs eagerly from then on; an error of the kernels' own checks is returned as
// eagerly. A stream the caller is already capturing is not captured again (eager
// enqueueing, which the caller's capture records).
Status run_with_graphs(Segment& seg, std::span<const TensorView> inputs,
                       std::span<const TensorView> outputs, cudaStream_t stream) {
  std::string where = fmt::format("segment '{}'", seg.name);
  std::vector<int64_t> key = graph_key(inputs, outputs);
  for (const CapturedGraph& g : seg.graphs) {
    if (g.key != key) continue;
    g_graph_replays.fetch_add(1, std::memory_order_relaxed);
    PLANRT_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(g.exec, stream), where + ": cudaGraphLaunch",
                                seg.device);
    return {};
  }
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  PLANRT_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capturing),
                              where + ": cudaStreamIsCapturing", seg.device);
  if (seg.graphs.size() >= kMaxGraphsPerSegment || capturing != cudaStreamCaptureStatusNone) {
    return run_eagerly(seg, inputs, outputs, stream);
  }
  PLANRT_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed),
                              where + ": cudaStreamBeginCapture", seg.device);
  Status status = run_eagerly(seg, inputs, outputs, stream);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = ended;
  if (status.ok() && err == cudaSuccess) err = cudaGraphInstantiate(&exec, graph, 0);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  if (status.ok() && err == cudaSuccess) {
    seg.graphs.push_back({std::move(key), exec});
    g_graph_captures.fetch_add(1, std::memory_order_relaxed);
    PLANRT_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec, stream), where + ": cudaGraphLaunch",
                                seg.device);
    return {};
  }
  (void)cudaGetLastError();  // a refused capture leaves its error behind; nothing ran
  // The kernels' own checks (a bad operand, an unsupported dtype) fail the same eagerly.
  if (!status.ok() && status.code() != ErrorCode::Internal) return status;
  // Else CUDA refused something in the capture. Nothing was enqueued for real (a capture
  // only records), so the work runs eagerly now.
  PLANRT_LOG_WARN("{}: CUDA graph capture failed ({}); running without graphs from now on",
                  where, err != cudaSuccess ? cudaGetErrorString(err) : status.to_string());
  seg.graphs_failed = true;
  g_graph_fallbacks.fetch_add(1, std::memory_order_relaxed);
  return run_eagerly(seg, inputs, outputs, stream);
}

Status CudaBackend::execute(BackendHandle handle, std::span<const TensorView> inputs,
                            std::span<const TensorView> outputs, void* stream) {
  auto* seg = static_cast<Segment*>(handle);
  if (seg == nullptr) return make_error(ErrorCode::InvalidArgument, "cuda backend: null handle");
  if (inputs.size() != seg->inputs.size() || outputs.size() != seg->outputs.size()) {
    return make_error(ErrorCode::InvalidArgument,
                      "segment '{}' takes {} inputs and {} outputs, got {} and {}", seg->name,
                      seg->inputs.size(), seg->outputs.size(), inputs.size(), outputs.size());
  }
  Result<cuda::DeviceGuard> guard = cuda::DeviceGuard::set(seg->device);
  if (!guard.ok()) return guard.status().with_context(fmt::format("segment '{}'", seg->name));
  bool own = stream == nullptr;
  cudaStream_t s = own ? seg->stream.get() : static_cast<cudaStream_t>(stream);
  std::string where = fmt::format("segment '{}'", seg->name);
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
    status = seg->use_graphs && !seg->graphs_failed ? run_with_graphs(*seg, inputs, outputs, s)
                                                    : run_eagerly(*seg, inputs, outputs, s);
  }
  // The kernels' error record comes back to pinned memory in stream order; finish() reads
  // it once the stream has been synchronized.
  cudaError_t err = cudaMemcpyAsync(seg->host_errors, seg->device_errors, sizeof(CudaDeviceError),
                                    cudaMemcpyDeviceToHost, s);
  if (status.ok() && err != cudaSuccess) {
    status = cuda::cuda_error(err, where + ": reading the kernels' error record", seg->device);
  }
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
  CudaDeviceError record = *seg->host_errors;
  if (record.kind == 0) return {};
  // Clear both copies so the next call starts clean; the stream is idle here.
  *seg->host_errors = CudaDeviceError{};
  std::string where = fmt::format("segment '{}'", seg->name);
  Result<cuda::DeviceGuard> guard = cuda::DeviceGuard::set(seg->device);
  if (!guard.ok()) return guard.status().with_context(where);
  cudaError_t err = cudaMemsetAsync(seg->device_errors, 0, sizeof(CudaDeviceError), seg->stream.get());
  if (err == cudaSuccess) err = cudaStreamSynchronize(seg->stream.get());
  if (err != cudaSuccess) {
    PLANRT_LOG_ERROR("{}", cuda::cuda_error(err, where + ": clearing the error record", seg->device)
                               .to_string());
  }
  return kernels::cuda::device_error_status(record).with_context(where);
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
  s.graph_captures = g_graph_captures.load();
  s.graph_replays = g_graph_replays.load();
  s.graph_fallbacks = g_graph_fallbacks.load();
  weight_cache().stats(s);
  return s;
}

}  // namespace planrt
