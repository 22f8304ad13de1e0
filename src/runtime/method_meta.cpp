#include <algorithm>
#include <map>
#include <set>

#include "fb_convert.h"
#include "kernels/workspace.h"
#include "planning/op_attrs.h"
#include "method_meta_builder.h"
#include "platform/device_pages.h"

namespace planrt {

bool MethodMeta::uses_device_memory() const {
  return std::any_of(planned_buffers.begin(), planned_buffers.end(),
                     [](const PlannedBufferInfo& b) { return !b.device.is_cpu(); });
}

uint64_t MethodMeta::planned_bytes_on(Device device) const {
  uint64_t total = 0;
  for (const PlannedBufferInfo& b : planned_buffers) {
    if (b.device == device) total += b.size_bytes;
  }
  return total;
}

namespace runtime_detail {
namespace {

TensorSpec spec_of(const fb::Method& method, uint32_t id) {
  const fb::Value* v = method.values()->Get(id);
  return TensorSpec{std::string(str(v->name())), to_dtype(v->dtype()), to_dim_refs(v->shape())};
}

// What a math library's handle adds on a CUDA device (MemoryEstimate::library_bytes):
// measured with cudaMemGetInfo on an H200 with CUDA 13 (cuBLAS 13.1 without its default
// workspace, cuDNN 9): bench/results/library_memory.jsonl.
constexpr uint64_t kCublasHandleBytes = uint64_t{4} << 20;
constexpr uint64_t kCudnnHandleBytes = uint64_t{8} << 20;

using device_pages::kPackedAlignment;
using device_pages::kPackedAtOrBelow;
using device_pages::page_rounding;
using device_pages::round_up;

// Whether a delegate graph runs an op, and whether it takes intermediates from the warm pool (a cuda graph with Temporary values beyond its operands).
bool graph_has_op(const fb::Graph& g, std::string_view op) {
  if (g.instructions() == nullptr) return false;
  return std::any_of(g.instructions()->begin(), g.instructions()->end(),
                     [&](const fb::Instruction* i) { return str(i->op()) == op; });
}

// Whether a CUDA delegate graph opens cuDNN: a convolution, or attention cuDNN may run
// (kernels/workspace.h, the backends' own test; the option attention=planrt leaves it
// closed, which this over-counts by the handle). An instruction whose attributes do not
// parse counts as opening it (loading reports the error).
bool graph_opens_cudnn(const fb::Graph& g) {
  if (graph_has_op(g, "conv2d")) return true;
  if (g.instructions() == nullptr || g.values() == nullptr) return false;
  return std::any_of(g.instructions()->begin(), g.instructions()->end(), [&](const fb::Instruction* i) {
    if (i->inputs() == nullptr || i->inputs()->size() == 0 || i->inputs()->Get(0) >= g.values()->size()) return false;
    const DType q_dtype = to_dtype(g.values()->Get(i->inputs()->Get(0))->dtype());
    // Without attributes first (op and dtype alone), so only bf16 attention has its parsed.
    if (!kernels::attention_may_run_on_cudnn(str(i->op()), kernels::OpAttrs{}, q_dtype)) return false;
    Result<kernels::OpAttrs> attrs = planning::parse_op_attrs(*i);
    return !attrs.ok() || kernels::attention_may_run_on_cudnn(str(i->op()), *attrs, q_dtype);
  });
}

bool graph_uses_pool(const fb::Graph& g) {
  if (g.scratch_operand()) return false;
  // Kernel workspace comes from the pool too where the scratch is not planned.
  if (graph_has_op(g, "matmul") || graph_has_op(g, "scaled_dot_product_attention")) return true;
  if (g.values() == nullptr) return false;
  std::set<uint32_t> operands;
  for (const auto* ids : {g.inputs(), g.outputs()}) {
    if (ids != nullptr) operands.insert(ids->begin(), ids->end());
  }
  for (uint32_t i = 0; i < g.values()->size(); ++i) {
    if (g.values()->Get(i)->kind() == fb::ValueKind::Temporary && !operands.contains(i)) return true;
  }
  return !g.scratch_operand() && g.scratch_bytes() > 0;
}

// The engine backend's option key (planrt/backends/engine.h kSharedScratchOption; the
// runtime does not depend on a backend).
constexpr std::string_view kSharedScratchSpec = "use_shared_activation_scratch";

// The compile specs' answer for use_shared_activation_scratch, `current` when they do not
// say. A value the backend would refuse at load ("maybe") changes nothing here.
bool shared_scratch_spec(const flatbuffers::Vector<flatbuffers::Offset<fb::KeyValue>>* specs, bool current) {
  if (specs == nullptr) return current;
  for (const fb::KeyValue* kv : *specs) {
    if (str(kv->key()) != kSharedScratchSpec) continue;
    std::string_view v = str(kv->value());
    if (v == "true" || v == "1") current = true;
    if (v == "false" || v == "0") current = false;
  }
  return current;
}

}  // namespace

MethodMeta build_method_meta(const format::ProgramFile& file, const fb::Method& method) {
  const fb::Program& program = file.program();
  MethodMeta meta;
  meta.name = std::string(str(method.name()));
  meta.dims = to_dim_specs(method.dims());
  if (method.inputs() != nullptr) {
    for (uint32_t id : *method.inputs()) meta.inputs.push_back(spec_of(method, id));
  }
  if (method.outputs() != nullptr) {
    for (uint32_t id : *method.outputs()) meta.outputs.push_back(spec_of(method, id));
  }
  if (method.planned_buffers() != nullptr) {
    meta.planned_buffers.reserve(method.planned_buffers()->size());
    for (const fb::PlannedBuffer* b : *method.planned_buffers()) {
      meta.planned_buffers.push_back({b->size_bytes(), to_device(b->device())});
    }
  }
  if (method.plan() != nullptr) {
    for (const fb::PlanStat* p : *method.plan()) {
      meta.plan.push_back({to_device(p->device()), std::string(str(p->planner())),
                           p->lower_bound_bytes(), p->planned_bytes(), p->num_tensors()});
    }
  }
  meta.num_instructions = size_of(method.instructions());

  // Distinct constants per device, so a weight read twice is counted once.
  std::map<Device, std::set<uint32_t>> constants_on;
  std::map<Device, MemoryEstimate> memory;
  memory[Device::cpu()].device = Device::cpu();
  for (const PlannedBufferInfo& b : meta.planned_buffers) {
    MemoryEstimate& m = memory[b.device];
    m.device = b.device;
    m.planned_bytes += b.size_bytes;
    if (b.device.type == DeviceType::CUDA) m.page_rounding_bytes += page_rounding(b.size_bytes);
  }
  if (method.values() != nullptr) {
    for (const fb::Value* v : *method.values()) {
      if (v->kind() == fb::ValueKind::Constant) constants_on[Device::cpu()].insert(v->constant());
    }
  }
  const bool program_shared = shared_scratch_spec(program.compile_specs(), false);
  std::map<Device, uint64_t> pooled_max;  // per device: the largest pooled engine's scratch
  if (method.segments() != nullptr) {
    for (const fb::Segment* s : *method.segments()) {
      SegmentInfo info{std::string(str(s->name())), std::string(str(s->backend())),
                       to_device(s->device()), s->num_nodes(), size_of(s->blob()), 0, 0, false};
      const fb::Graph* graph = size_of(s->blob()) != 0 ? s->blob_nested_root() : nullptr;
      if (graph != nullptr) {
        info.scratch_bytes = graph->scratch_bytes();
        info.scratch_lower_bound_bytes = graph->scratch_lower_bound_bytes();
        info.planned_scratch = graph->scratch_operand();
        if (graph->values() != nullptr) {
          // A device segment uploads the large constants it is the first to read as one
          // allocation (the weight cache's packing).
          uint64_t packed = 0;
          for (const fb::Value* v : *graph->values()) {
            if (v->kind() != fb::ValueKind::Constant) continue;
            const bool first = constants_on[info.device].insert(v->constant()).second;
            const uint64_t bytes = v->constant() < size_of(program.constants())
                                       ? program.constants()->Get(v->constant())->size_bytes()
                                       : 0;
            if (first && bytes > kPackedAtOrBelow) packed = round_up(packed, kPackedAlignment) + bytes;
          }
          if (info.device.type == DeviceType::CUDA) memory[info.device].page_rounding_bytes += page_rounding(packed);
        }
      }
      MemoryEstimate& m = memory[info.device];
      m.device = info.device;
      if (info.device.type == DeviceType::CUDA && graph != nullptr) {
        m.library_bytes = std::max(m.library_bytes, kCublasHandleBytes);
        if (graph_opens_cudnn(*graph)) m.library_bytes = kCublasHandleBytes + kCudnnHandleBytes;
        if (info.backend == "cuda" && graph_uses_pool(*graph)) m.uses_warm_pool = true;
      }
      info.shared_scratch = info.backend == "engine" && !info.planned_scratch &&
                            shared_scratch_spec(s->compile_specs(), program_shared);
      if (info.planned_scratch) {
        // In the method's planned buffer on this device.
      } else if (info.shared_scratch) {
        pooled_max[info.device] = std::max(pooled_max[info.device], info.scratch_bytes);
      } else {
        m.engine_scratch_bytes += info.scratch_bytes;
        if (info.device.type == DeviceType::CUDA) m.page_rounding_bytes += page_rounding(info.scratch_bytes);
      }
      if (info.backend != "cpu" &&
          std::find(meta.backends.begin(), meta.backends.end(), info.backend) == meta.backends.end()) {
        meta.backends.push_back(info.backend);
      }
      meta.segments.push_back(std::move(info));
    }
  }
  size_t num_constants = size_of(program.constants());
  for (const auto& [device, ids] : constants_on) {
    MemoryEstimate& m = memory[device];
    m.device = device;
    for (uint32_t id : ids) {
      if (id < num_constants) m.weights_bytes += program.constants()->Get(id)->size_bytes();
    }
  }
  // The shared scratch pool's buffer comes from a stream-ordered pool, whose reservation
  // steps are not cudaMalloc's (malloc_granularity.jsonl's "pool" rows): no rounding here.
  for (const auto& [device, bytes] : pooled_max) memory[device].engine_scratch_bytes += bytes;
  for (auto& [device, m] : memory) meta.memory.push_back(m);  // std::map: CPU sorts first
  return meta;
}

}  // namespace runtime_detail
}  // namespace planrt
