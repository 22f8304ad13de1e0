// The eager run of one call of a cuda segment: operands checked and bound, every value's
// view, the scratch (planned, or from the warm pool with the temporaries), each step's kernel.
#include <algorithm>

#include "backends/cuda/segment.h"
#include "format/program_file.h"

namespace planrt::cuda_backend {
namespace {

using format::kNoValue;
using Allocations = std::vector<std::pair<uint32_t, void*>>;  // value id (kNoValue: scratch)

// Frees what `live` holds, stream-ordered; the first error wins over none.
Status free_all(Segment& seg, Allocations& live, cudaStream_t stream) {
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

// Every value's view at the bound dims: operands and constants get their memory now,
// Planned values their offset in the scratch (the Delegate's planned one, else one from the
// pool), Temporaries when their first step comes.
Status bind_views(Segment& seg, std::span<const TensorView> inputs,
                  std::span<const TensorView> outputs, const TensorView* planned,
                  cudaStream_t stream, Allocations& live) {
  Device device = Device::cuda(seg.device);
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
  // A passed planned scratch is checked even where the graph has no Planned values: its
  // kernels' workspaces are in it too (a workspace-only segment).
  if (planned != nullptr && seg.scratch_bytes != 0 &&
      (planned->nbytes() < seg.scratch_bytes || planned->data == nullptr || planned->device != device)) {
    return make_error(ErrorCode::InvalidArgument,
                      "segment '{}': the planned scratch passed holds {} bytes on {}, but the "
                      "graph needs {} on {}", seg.name, planned->nbytes(), to_string(planned->device),
                      seg.scratch_bytes, to_string(device));
  }
  if (!seg.has_planned || seg.scratch_bytes == 0) return {};
  void* base = nullptr;
  if (planned != nullptr) {
    base = planned->data;
  } else {
    Result<void*> scratch = seg.pool.allocate(seg.scratch_bytes, stream);
    if (!scratch.ok()) {
      return scratch.status().with_context(fmt::format("segment '{}': scratch", seg.name));
    }
    live.emplace_back(kNoValue, *scratch);
    base = *scratch;
  }
  for (size_t id = 0; id < seg.values.size(); ++id) {
    const GraphValue& v = seg.values[id];
    if (v.kind == fb::ValueKind::Planned && !v.operand) {
      seg.views[id].data = static_cast<uint8_t*>(base) + v.offset;
    }
  }
  return {};
}

// Step k's kernel, its Temporaries allocated before and freed after; with a planned scratch
// at `planned_base`, its workspace at the offset planned for it.
Status run_step(Segment& seg, size_t k, const kernels::cuda::CudaKernelContext& ctx,
                uint8_t* planned_base, cudaStream_t stream, Allocations& live) {
  const GraphStep& s = seg.steps[k];
  if (planned_base != nullptr) {
    const uint64_t bytes = seg.workspace_bytes[s.plan_step];
    seg.planned_workspace.reset(bytes == 0 ? nullptr : planned_base + seg.workspace_offsets[s.plan_step],
                                bytes);
  }
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
  return {};
}

Status run(Segment& seg, std::span<const TensorView> inputs, std::span<const TensorView> outputs,
           cudaStream_t stream, Allocations& live) {
  std::fill(seg.bound.begin(), seg.bound.end(), -1);
  // The planned scratch, where the graph takes one, is the last output (not the graph's).
  const TensorView* planned = nullptr;
  if (seg.scratch_operand) {
    if (outputs.empty()) {
      return make_error(ErrorCode::InvalidArgument, "segment '{}': the call passes no planned scratch", seg.name);
    }
    if (seg.planned_scratch) planned = &outputs.back();
    outputs = outputs.first(outputs.size() - 1);
  }
  PLANRT_RETURN_IF_ERROR(check_operands(seg, inputs, seg.inputs, "input", seg.bound));
  PLANRT_RETURN_IF_ERROR(check_operands(seg, outputs, seg.outputs, "output", seg.bound));
  PLANRT_RETURN_IF_ERROR(bind_views(seg, inputs, outputs, planned, stream, live));
  uint8_t* planned_base = planned != nullptr ? static_cast<uint8_t*>(planned->data) : nullptr;
  kernels::cuda::CudaKernelContext ctx;
  ctx.stream = stream;
  ctx.cublas = seg.cublas->handle.get();
  ctx.cudnn = &seg.cublas->cudnn;
  ctx.temp = planned_base != nullptr ? static_cast<kernels::cuda::CudaTempMemory*>(&seg.planned_workspace)
                                     : seg.temp.get();
  ctx.device_errors = seg.errors.device();
  ctx.gemm_algorithm = seg.gemm_algorithm;
  ctx.cudnn_attention = seg.cudnn_attention;
  for (size_t k = 0; k < seg.steps.size(); ++k) {
    PLANRT_RETURN_IF_ERROR(run_step(seg, k, ctx, planned_base, stream, live));
  }
  return {};
}

}  // namespace

Status run_eagerly(Segment& seg, std::span<const TensorView> inputs,
                   std::span<const TensorView> outputs, cudaStream_t stream) {
  Allocations live;
  live.reserve(seg.values.size() + 1);
  Status status = run(seg, inputs, outputs, stream, live);
  Status freed = free_all(seg, live, stream);
  if (status.ok() && !freed.ok()) {
    status = freed.with_context(fmt::format("segment '{}': freeing temporaries", seg.name));
  }
  return status;
}

}  // namespace planrt::cuda_backend
