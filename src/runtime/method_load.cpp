// load_method: resolve and check everything once, then place the arenas (rules 2-4) and
// init the delegate segments. Any failure returns before the Method exists; the RAII
// members of the half-built Impl give back whatever was taken.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <sys/mman.h>
#include <unistd.h>

#include <fmt/ranges.h>

#include "fb_convert.h"
#include "kernels/cpu/packed_conv.h"
#include "kernels/cpu/packed_linear.h"
#include "kernels/cpu/threading.h"
#include "kernels/op_plans.h"
#include "method_impl.h"
#include "method_meta_builder.h"
#include "planning/op_attrs.h"

namespace planrt {

using runtime_detail::size_of;
using runtime_detail::str;
using runtime_detail::to_device;
using runtime_detail::to_dim_refs;
using runtime_detail::to_dtype;
using runtime_detail::to_options;

namespace {

// The machine's physical memory, the default bound on a method's host planned bytes; 0 when
// the system does not say (no bound then).
uint64_t physical_memory_bytes() {
  static const uint64_t bytes = [] {
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_size <= 0) return uint64_t{0};
    return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  }();
  return bytes;
}

// Saturating: a file may declare many buffers near the per-buffer limit.
uint64_t add_saturating(uint64_t a, uint64_t b) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  return a > kMax - b ? kMax : a + b;
}

std::vector<uint32_t> ids_of(const flatbuffers::Vector<uint32_t>* v) {
  return v == nullptr ? std::vector<uint32_t>() : std::vector<uint32_t>(v->begin(), v->end());
}

// Loads one method; `impl` collects what later steps (and the destructor) need.
class Loader {
 public:
  Loader(Method::Impl& impl, const fb::Method& method, const LoadMethodOptions& options)
      : impl_(impl), method_(method), options_(options), file_(impl.program->file),
        name_(impl.meta.name) {}

  Status load() {
    PLANRT_RETURN_IF_ERROR(load_cpu_options());
    PLANRT_RETURN_IF_ERROR(load_values());
    PLANRT_RETURN_IF_ERROR(load_io());
    PLANRT_RETURN_IF_ERROR(check_dims_bound_by_inputs());
    PLANRT_RETURN_IF_ERROR(load_steps());
    // Everything above allocated no method memory: a bad program or an unknown op or
    // backend is reported before any arena exists.
    PLANRT_RETURN_IF_ERROR(place_arenas());
    PLANRT_RETURN_IF_ERROR(resolve_copy_allocators());
    PLANRT_RETURN_IF_ERROR(create_streams());
    PLANRT_RETURN_IF_ERROR(init_delegates());
    impl_.delegate_ran.assign(impl_.delegates.size(), false);
    impl_.stats.streams = static_cast<int64_t>(impl_.streams.size());
    impl_.synchronize_each_step = options_.synchronize_each_step;
    if (options_.profile_steps) impl_.step_times.assign(impl_.steps.size(), {});
    bind_value_memory();
    impl_.bound.assign(impl_.meta.dims.size(), -1);
    impl_.shapes.assign(impl_.values.size(), Shape());
    return {};
  }

 private:
  Status error(ErrorCode code, std::string message) const {
    return Status(code, fmt::format("method '{}': {}", name_, message));
  }

  std::string step_name(size_t k, const fb::Instruction& ins) const {
    switch (ins.kind()) {
      case fb::InstructionKind::Kernel:
        return fmt::format("instruction {} (kernel '{}', node '{}')", k, str(ins.op()), str(ins.node()));
      case fb::InstructionKind::Copy:
        return fmt::format("instruction {} (copy, node '{}')", k, str(ins.node()));
      default:
        return fmt::format("instruction {} (delegate to segment {}, node '{}')", k, ins.segment(),
                           str(ins.node()));
    }
  }

  Status load_values() {
    size_t num_buffers = impl_.meta.planned_buffers.size();
    size_t num_constants = size_of(file_.program().constants());
    if (method_.values() == nullptr) return {};
    impl_.values.reserve(method_.values()->size());
    for (const fb::Value* v : *method_.values()) {
      size_t id = impl_.values.size();
      ValueSlot slot;
      slot.kind = v->kind();
      slot.name = std::string(str(v->name()));
      slot.dtype = to_dtype(v->dtype());
      slot.shape = to_dim_refs(v->shape());
      for (size_t d = 0; d < slot.shape.size(); ++d) {
        const DimRef& r = slot.shape[d];
        bool ok = r.is_static() ? r.value >= 0
                                : (static_cast<size_t>(r.dim) < impl_.meta.dims.size() && r.value > 0);
        if (!ok) {
          return error(ErrorCode::InvalidProgram,
                       fmt::format("value {} '{}' has a malformed dim {} (value {}, dim {})", id,
                                   slot.name, d, r.value, r.dim));
        }
      }
      switch (v->kind()) {
        case fb::ValueKind::Planned:
          if (v->buffer() >= num_buffers) {
            return error(ErrorCode::InvalidProgram,
                         fmt::format("value {} '{}' is in planned buffer {}, but there are {}", id,
                                     slot.name, v->buffer(), num_buffers));
          }
          slot.buffer = v->buffer();
          slot.offset = v->offset();
          slot.device = impl_.meta.planned_buffers[v->buffer()].device;
          break;
        case fb::ValueKind::Constant: {
          if (v->constant() >= num_constants) {
            return error(ErrorCode::InvalidProgram,
                         fmt::format("value {} '{}' is constant {}, but there are {}", id,
                                     slot.name, v->constant(), num_constants));
          }
          // Kernels take mutable views; constants are only ever read (outputs must be Planned).
          slot.data = const_cast<uint8_t*>(file_.constant_data(v->constant()).data());
          slot.device = Device::cpu();
          break;
        }
        default:
          return error(ErrorCode::InvalidProgram,
                       fmt::format("value {} '{}' is a Temporary, which only a segment graph may hold",
                                   id, slot.name));
      }
      impl_.values.push_back(std::move(slot));
    }
    return {};
  }

  Status check_io(const std::vector<uint32_t>& ids, std::string_view what) const {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] >= impl_.values.size()) {
        return error(ErrorCode::InvalidProgram,
                     fmt::format("{} {} is value {}, but there are {}", what, i, ids[i],
                                 impl_.values.size()));
      }
      const ValueSlot& v = impl_.values[ids[i]];
      if (v.kind != fb::ValueKind::Planned || !v.device.is_cpu()) {
        return error(ErrorCode::InvalidProgram,
                     fmt::format("{} {} '{}' must be planned in a CPU buffer (it is on {})", what, i,
                                 v.name, to_string(v.device)));
      }
    }
    return {};
  }

  Status load_io() {
    impl_.inputs = ids_of(method_.inputs());
    impl_.outputs = ids_of(method_.outputs());
    PLANRT_RETURN_IF_ERROR(check_io(impl_.inputs, "input"));
    return check_io(impl_.outputs, "output");
  }

  // Every shape must be computable from the inputs alone.
  Status check_dims_bound_by_inputs() const {
    std::vector<bool> bound(impl_.meta.dims.size(), false);
    for (uint32_t id : impl_.inputs) {
      for (const DimRef& r : impl_.values[id].shape) {
        if (!r.is_static()) bound[static_cast<size_t>(r.dim)] = true;
      }
    }
    for (const ValueSlot& v : impl_.values) {
      for (const DimRef& r : v.shape) {
        if (!r.is_static() && !bound[static_cast<size_t>(r.dim)]) {
          return error(ErrorCode::InvalidProgram,
                       fmt::format("value '{}' refers to dim '{}', which no input determines",
                                   v.name, impl_.meta.dims[static_cast<size_t>(r.dim)].name));
        }
      }
    }
    return {};
  }

  Status check_operand(size_t k, const fb::Instruction& ins, uint32_t id, bool is_output,
                       bool optional) const {
    if (id == format::kNoValue && optional) return {};
    if (id >= impl_.values.size()) {
      return error(ErrorCode::InvalidProgram,
                   fmt::format("{}: operand value {} is out of range ({} values)",
                               step_name(k, ins), id, impl_.values.size()));
    }
    const ValueSlot& v = impl_.values[id];
    if (is_output && v.kind != fb::ValueKind::Planned) {
      return error(ErrorCode::InvalidProgram,
                   fmt::format("{} writes value '{}', which is not planned memory",
                               step_name(k, ins), v.name));
    }
    return {};
  }

  Status load_kernel(size_t k, const fb::Instruction& ins, Step& step) {
    const kernels::OpInfo* info = kernels::find_op(step.op);
    Result<kernels::KernelFn> fn = kernels::find_cpu_kernel(step.op);
    if (info == nullptr || !fn.ok()) {
      return error(ErrorCode::NotFound,
                   fmt::format("{}: unknown op '{}'", step_name(k, ins), step.op));
    }
    auto n_in = static_cast<int>(step.inputs.size());
    auto n_out = static_cast<int>(step.outputs.size());
    if (n_in < info->min_inputs || (info->max_inputs >= 0 && n_in > info->max_inputs) ||
        n_out < info->num_outputs || n_out > info->num_outputs + info->optional_outputs) {
      return error(ErrorCode::InvalidProgram,
                   fmt::format("{}: {} inputs and {} outputs; op '{}' takes {}..{} inputs and {}..{} "
                               "outputs",
                               step_name(k, ins), n_in, n_out, step.op, info->min_inputs,
                               info->max_inputs, info->num_outputs,
                               info->num_outputs + info->optional_outputs));
    }
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      PLANRT_RETURN_IF_ERROR(check_operand(k, ins, step.inputs[i], false, true));
    }
    for (uint32_t id : step.outputs) PLANRT_RETURN_IF_ERROR(check_operand(k, ins, id, true, false));
    for (const std::vector<uint32_t>* ids : {&step.inputs, &step.outputs}) {
      for (uint32_t id : *ids) {
        if (id == format::kNoValue || impl_.values[id].device.is_cpu()) continue;
        return error(ErrorCode::InvalidProgram,
                     fmt::format("{} touches value '{}' on {}; kernels run on CPU values only",
                                 step_name(k, ins), impl_.values[id].name,
                                 to_string(impl_.values[id].device)));
      }
    }
    step.fn = *fn;
    Result<kernels::OpAttrs> attrs = planning::parse_op_attrs(ins);
    if (!attrs.ok()) return attrs.status().with_context(fmt::format("method '{}': {}", name_, step_name(k, ins)));
    step.attrs = std::move(attrs).value();
    if (impl_.pack_weights && step.op == "linear") PLANRT_RETURN_IF_ERROR(pack_linear(k, ins, step));
    if (impl_.pack_weights && step.op == "conv2d") PLANRT_RETURN_IF_ERROR(pack_conv(k, ins, step));
    return {};
  }

  // A host conv2d whose weight is a constant and whose input has fixed channels and image
  // size runs oneDNN's convolution on a prepared weight (kernels/cpu/packed_conv.h); anything
  // oneDNN declines keeps the plain kernel. Only a failed allocation fails the load.
  Status pack_conv(size_t k, const fb::Instruction& ins, Step& step) {
    if (step.inputs.size() < 2 || step.inputs[1] == format::kNoValue) return {};
    const ValueSlot& w = impl_.values[step.inputs[1]];
    if (w.kind != fb::ValueKind::Constant || w.dtype != DType::F32) return {};
    // Views at batch 1 (dim 0 may be named; every other dim must be fixed) for the plan.
    auto view_of = [&](uint32_t id, const void* data) -> std::optional<TensorView> {
      if (id == format::kNoValue) return TensorView::none();
      const ValueSlot& v = impl_.values[id];
      std::vector<int64_t> sizes;
      for (size_t d = 0; d < v.shape.size(); ++d) {
        if (!v.shape[d].is_static() && d != 0) return std::nullopt;
        sizes.push_back(v.shape[d].is_static() ? v.shape[d].value : 1);
      }
      Result<Shape> shape = Shape::from(sizes);
      if (!shape.ok()) return std::nullopt;
      return TensorView::contiguous(const_cast<void*>(data), v.dtype, *shape, Device::cpu());
    };
    std::vector<TensorView> ins_views, out_views;
    for (uint32_t id : step.inputs) {
      std::optional<TensorView> v = view_of(id, id == step.inputs[1] ? w.data : nullptr);
      if (!v) return {};
      ins_views.push_back(*v);
    }
    std::optional<TensorView> y = view_of(step.outputs[0], nullptr);
    if (!y) return {};
    out_views.push_back(*y);
    Result<kernels::Conv2dPlan> plan = kernels::plan_conv2d(step.attrs, ins_views, out_views);
    if (!plan.ok()) return plan.status().with_context(fmt::format("method '{}': {}", name_, step_name(k, ins)));
    const uint64_t bytes = ins_views[1].nbytes();
    if (file_.constant_data(method_.values()->Get(step.inputs[1])->constant()).size() != bytes) return {};
    // The largest batch the method runs (its input's dim 0 at the dim's bound).
    const ValueSlot& x = impl_.values[step.inputs[0]];
    int64_t max_batch = x.shape.empty() ? 1 : x.shape[0].value;
    if (!x.shape.empty() && !x.shape[0].is_static()) {
      const auto d = static_cast<size_t>(x.shape[0].dim);
      max_batch = d < impl_.meta.dims.size() ? x.shape[0].value * impl_.meta.dims[d].max : 1;
    }
    return adopt_packed(k, ins, step,
                        kernels::cpu::PackedConv::create(step.attrs, *plan, ins_views[1], weight_arena(), max_batch),
                        w.data, bytes);
  }

  // A prepared kernel runs instead of the plain one; NotSupported (oneDNN declined) keeps
  // the plain kernel, any other failure fails the load.
  template <typename Packed>
  Status adopt_packed(size_t k, const fb::Instruction& ins, Step& step, Result<std::unique_ptr<Packed>> packed,
                      const void* weight, uint64_t bytes) {
    if (!packed.ok()) {
      if (packed.status().code() == ErrorCode::NotSupported) return {};
      return packed.status().with_context(fmt::format("method '{}': {}", name_, step_name(k, ins)));
    }
    impl_.packed_weight_bytes += (*packed)->packed_bytes();
    step.packed = std::move(packed).value();
    release_resident_pages(weight, bytes);
    return {};
  }

  // A host linear whose weight is a constant of static shape gets the weight reordered for
  // oneDNN's matmul (kernels/cpu/packed_linear.h); a weight oneDNN would not reorder keeps the
  // plain kernel. Only a failed allocation fails the load.
  Status pack_linear(size_t k, const fb::Instruction& ins, Step& step) {
    if (step.inputs.size() < 2 || step.inputs[1] == format::kNoValue) return {};
    const ValueSlot& w = impl_.values[step.inputs[1]];
    if (w.kind != fb::ValueKind::Constant || w.dtype != DType::F32 || w.shape.size() != 2 ||
        !w.shape[0].is_static() || !w.shape[1].is_static()) {
      return {};
    }
    const uint32_t constant = method_.values()->Get(step.inputs[1])->constant();
    const uint64_t bytes = file_.constant_data(constant).size();
    if (bytes != static_cast<uint64_t>(w.shape[0].value * w.shape[1].value) * sizeof(float)) return {};
    // A weight several linears read (tied layers: the builder stores equal constants once)
    // is packed once and its copy shared, so the method holds it once, as the program does.
    if (auto it = packed_linears_.find(constant); it != packed_linears_.end()) {
      step.packed = it->second;
      return {};
    }
    TensorView view = TensorView::contiguous(w.data, DType::F32, Shape({w.shape[0].value, w.shape[1].value}),
                                             Device::cpu());
    PLANRT_RETURN_IF_ERROR(adopt_packed(k, ins, step, kernels::cpu::PackedLinear::create(view, weight_arena()), w.data, bytes));
    if (step.packed) packed_linears_.emplace(constant, step.packed);
    return {};
  }

  // The packed copy replaces the stored weight, whose pages packing just made resident:
  // ask the kernel to reclaim them (MADV_PAGEOUT), so the weights are not held twice. A hint
  // that never loses data: mapped file pages come back from the file if anything reads them
  // again, and heap pages (a program loaded from bytes) stay or go to swap. Only whole pages
  // inside the range; a kernel without the hint (before Linux 5.4) refuses it, which changes
  // nothing here.
  static void release_resident_pages(const void* data, uint64_t bytes) {
#ifdef MADV_PAGEOUT
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
    const auto end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
    if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#else
    (void)data;
    (void)bytes;
#endif
  }

  Status load_copy(size_t k, const fb::Instruction& ins, Step& step) {
    if (step.inputs.size() != 1 || step.outputs.size() != 1) {
      return error(ErrorCode::InvalidProgram,
                   fmt::format("{} has {} inputs and {} outputs, expected 1 and 1",
                               step_name(k, ins), step.inputs.size(), step.outputs.size()));
    }
    PLANRT_RETURN_IF_ERROR(check_operand(k, ins, step.inputs[0], false, false));
    PLANRT_RETURN_IF_ERROR(check_operand(k, ins, step.outputs[0], true, false));
    const ValueSlot& src = impl_.values[step.inputs[0]];
    const ValueSlot& dst = impl_.values[step.outputs[0]];
    if (src.dtype != dst.dtype || src.shape.size() != dst.shape.size() ||
        !std::equal(src.shape.begin(), src.shape.end(), dst.shape.begin(),
                    [](const DimRef& a, const DimRef& b) { return a.value == b.value && a.dim == b.dim; })) {
      return error(ErrorCode::InvalidProgram,
                   fmt::format("{} copies '{}' ({} {}) to '{}' ({} {})", step_name(k, ins), src.name,
                               dtype_name(src.dtype), shape_string(src.shape, impl_.meta.dims),
                               dst.name, dtype_name(dst.dtype), shape_string(dst.shape, impl_.meta.dims)));
    }
    Device device = dst.device;
    if (src.device.is_cpu()) {
      step.copy = dst.device.is_cpu() ? CopyKind::HostToHost : CopyKind::HostToDevice;
    } else if (dst.device.is_cpu()) {
      step.copy = CopyKind::DeviceToHost;
      device = src.device;
    } else if (src.device.type == dst.device.type) {
      step.copy = CopyKind::DeviceToDevice;
    } else {
      return error(ErrorCode::NotSupported,
                   fmt::format("{} copies between {} and {}", step_name(k, ins),
                               to_string(src.device), to_string(dst.device)));
    }
    step.copy_device = device;
    return {};
  }

  // After the arenas: a missing allocator is then reported by the arena that needs it,
  // naming the buffer and its bytes (rule 3), rather than by the first copy.
  Status resolve_copy_allocators() {
    for (size_t k = 0; k < impl_.steps.size(); ++k) {
      Step& step = impl_.steps[k];
      if (step.kind != fb::InstructionKind::Copy || step.copy == CopyKind::HostToHost) continue;
      step.copy_allocator = get_device_allocator(step.copy_device.type);
      if (step.copy_allocator == nullptr) {
        return error(ErrorCode::NotSupported,
                     fmt::format("instruction {} (copy, node '{}'): no allocator is registered for {}",
                                 k, step.node, to_string(step.copy_device)));
      }
    }
    return {};
  }

  // The method stream of `device` (created on first use); -1 for the host, and for a device
  // whose allocator has no streams (its work is synchronous).
  Result<int> stream_for(Device device) {
    if (device.is_cpu()) return -1;
    for (size_t i = 0; i < impl_.streams.size(); ++i) {
      if (impl_.streams[i].device() == device) return static_cast<int>(i);
    }
    if (std::find(synchronous_.begin(), synchronous_.end(), device) != synchronous_.end()) return -1;
    DeviceAllocator* allocator = get_device_allocator(device.type);
    if (allocator == nullptr) return -1;  // nothing on it allocates: the backend reports it
    Result<void*> handle = allocator->create_stream(device);
    if (!handle.ok()) {
      return handle.status().with_context(
          fmt::format("method '{}': creating its stream on {}", name_, to_string(device)));
    }
    if (*handle == nullptr) {
      synchronous_.push_back(device);
      return -1;
    }
    impl_.streams.emplace_back(device, allocator, *handle);
    return static_cast<int>(impl_.streams.size() - 1);
  }

  // The stream of the device-to-host copy that last wrote step k's (host) source before
  // step k; -1 when host work wrote it, or nothing did (an input). Streams of earlier steps
  // are already assigned.
  int stream_of_host_writer(size_t k) const {
    const uint32_t id = impl_.steps[k].inputs[0];
    for (size_t j = k; j-- > 0;) {
      const Step& w = impl_.steps[j];
      if (std::find(w.outputs.begin(), w.outputs.end(), id) == w.outputs.end()) continue;
      return w.kind == fb::InstructionKind::Copy && w.copy == CopyKind::DeviceToHost ? w.stream : -1;
    }
    return -1;
  }

  // Device work goes on the method's stream of its device: copies on the device they
  // touch (a device-to-device copy on the destination's, after the source's; a host-to-device
  // copy after the device-to-host copy on another stream that wrote its source), segments
  // on their own.
  Status create_streams() {
    for (size_t k = 0; k < impl_.steps.size(); ++k) {
      Step& step = impl_.steps[k];
      if (step.kind == fb::InstructionKind::Copy && step.copy != CopyKind::HostToHost) {
        PLANRT_ASSIGN_OR_RETURN(step.stream, stream_for(step.copy_device));
        Device src = impl_.values[step.inputs[0]].device;
        if (step.copy == CopyKind::DeviceToDevice && src != step.copy_device) {
          PLANRT_ASSIGN_OR_RETURN(step.wait_stream, stream_for(src));
        } else if (step.copy == CopyKind::HostToDevice) {
          step.wait_stream = stream_of_host_writer(k);
          if (step.wait_stream == step.stream) step.wait_stream = -1;  // in stream order
        }
      } else if (step.kind == fb::InstructionKind::Delegate) {
        PLANRT_ASSIGN_OR_RETURN(step.stream, stream_for(step.segment_device));
      }
    }
    return {};
  }

  Status load_delegate(size_t k, const fb::Instruction& ins, Step& step) {
    size_t num_segments = size_of(method_.segments());
    if (ins.segment() < 0 || static_cast<size_t>(ins.segment()) >= num_segments) {
      return error(ErrorCode::InvalidProgram,
                   fmt::format("{} calls segment {}, but there are {}", step_name(k, ins),
                               ins.segment(), num_segments));
    }
    auto seg_index = static_cast<uint32_t>(ins.segment());
    const fb::Segment& seg = *method_.segments()->Get(seg_index);
    Device device = to_device(seg.device());
    step.segment_name = std::string(str(seg.name()));
    step.segment_device = device;
    for (const std::vector<uint32_t>* ids : {&step.inputs, &step.outputs}) {
      for (uint32_t id : *ids) {
        PLANRT_RETURN_IF_ERROR(check_operand(k, ins, id, ids == &step.outputs, false));
        const ValueSlot& v = impl_.values[id];
        if (v.kind != fb::ValueKind::Planned || v.device != device) {
          return error(ErrorCode::InvalidProgram,
                       fmt::format("{} passes value '{}' on {} to segment '{}' on {}; delegate "
                                   "operands are planned on the segment's device",
                                   step_name(k, ins), v.name, to_string(v.device),
                                   step.segment_name, to_string(device)));
        }
      }
    }
    auto [it, inserted] = segment_to_delegate_.emplace(seg_index, pending_.size());
    if (inserted) {
      std::string backend_name(str(seg.backend()));
      Backend* backend = get_backend(backend_name);
      if (backend == nullptr) {
        return error(ErrorCode::NotFound,
                     fmt::format("backend '{}' of segment {} '{}' is not registered (registered: {})",
                                 backend_name, seg_index, step.segment_name,
                                 fmt::join(registered_backends(), ", ")));
      }
      pending_.push_back({seg_index, backend});
    }
    step.delegate = it->second;
    return {};
  }

  Status load_steps() {
    if (method_.instructions() == nullptr) return {};
    impl_.steps.reserve(method_.instructions()->size());
    size_t k = 0;
    for (const fb::Instruction* ins : *method_.instructions()) {
      Step step;
      step.kind = ins->kind();
      step.op = std::string(str(ins->op()));
      step.node = std::string(str(ins->node()));
      step.inputs = ids_of(ins->inputs());
      step.outputs = ids_of(ins->outputs());
      switch (ins->kind()) {
        case fb::InstructionKind::Kernel: PLANRT_RETURN_IF_ERROR(load_kernel(k, *ins, step)); break;
        case fb::InstructionKind::Copy: PLANRT_RETURN_IF_ERROR(load_copy(k, *ins, step)); break;
        case fb::InstructionKind::Delegate: PLANRT_RETURN_IF_ERROR(load_delegate(k, *ins, step)); break;
        default:
          return error(ErrorCode::InvalidProgram,
                       fmt::format("instruction {} has unknown kind {}", k, static_cast<int>(ins->kind())));
      }
      step.in_views.resize(step.inputs.size());
      step.out_views.resize(step.outputs.size());
      impl_.steps.push_back(std::move(step));
      ++k;
    }
    return {};
  }

  // 0: no bound on `device` (see LoadMethodOptions::max_planned_bytes_per_device).
  uint64_t limit_on(Device device) const {
    if (options_.max_planned_bytes_per_device != 0) return options_.max_planned_bytes_per_device;
    if (device.is_cpu()) return physical_memory_bytes();
    DeviceAllocator* allocator = get_device_allocator(device.type);
    return allocator != nullptr ? allocator->total_memory(device) : 0;
  }

  Status check_limit(Device device, uint64_t bytes, std::string_view what) const {
    uint64_t limit = limit_on(device);
    if (limit == 0 || bytes <= limit) return {};
    return error(ErrorCode::OutOfMemory,
                 fmt::format("{} on {} total {} bytes, above the limit of {} bytes "
                             "(LoadMethodOptions::max_planned_bytes_per_device{}); nothing was "
                             "allocated",
                             what, to_string(device), bytes, limit,
                             options_.max_planned_bytes_per_device != 0 ? ""
                             : device.is_cpu() ? ", by default the machine's physical memory"
                                               : ", by default the device's total memory"));
  }

  // Before any arena: the sizes are the file's, and only a bound checked here keeps a
  // hostile file from making the loader allocate (and zero-fill) more than it could need.
  Status check_planned_limits(bool shared) const {
    std::map<Device, uint64_t> per_device;
    for (const PlannedBufferInfo& b : impl_.meta.planned_buffers) {
      per_device[b.device] = add_saturating(per_device[b.device], b.size_bytes);
    }
    for (const auto& [device, bytes] : per_device) {
      PLANRT_RETURN_IF_ERROR(check_limit(device, bytes, "its planned buffers"));
    }
    if (shared) {
      uint64_t total = 0;
      for (uint64_t size : impl_.program->shared_sizes) total = add_saturating(total, size);
      PLANRT_RETURN_IF_ERROR(check_limit(
          Device::cpu(), total,
          "the program's shared host arenas (the largest host-method size at each buffer index; "
          "load with share_memory_arenas = false to size arenas for this method alone)"));
    }
    return {};
  }

  // The host kernels' load-time options, given as backend "cpu" (the kernels that run on
  // the host, outside any delegate, and the engines placed on the CPU): num_threads, a count
  // or "auto" (kernels/cpu/threading.h has the default and the environment variables).
  Status load_cpu_options() {
    auto it = options_.backend_options.find("cpu");
    if (it == options_.backend_options.end()) return {};
    for (const BackendOption& option : it->second) {
      if (option.key == "num_threads") {
        Result<int> n = kernels::cpu::parse_num_threads(option.value);
        if (!n.ok()) return n.status().with_context(fmt::format("method '{}': option cpu.num_threads", name_));
        impl_.cpu_threads = *n;
      } else if (option.key == "pack_weights") {
        if (option.value != "true" && option.value != "1" && option.value != "false" && option.value != "0") {
          return error(ErrorCode::InvalidArgument,
                       fmt::format("option cpu.pack_weights: '{}' is not true|1|false|0", option.value));
        }
        impl_.pack_weights = option.value == "true" || option.value == "1";
      } else {
        return error(ErrorCode::InvalidArgument,
                     fmt::format("unknown option 'cpu.{}': the cpu options are num_threads, pack_weights",
                                 option.key));
      }
    }
    return {};
  }

  Status place_arenas() {
    const MethodMeta& meta = impl_.meta;
    std::vector<uint64_t> sizes;
    std::vector<Device> devices;
    for (const PlannedBufferInfo& b : meta.planned_buffers) {
      sizes.push_back(b.size_bytes);
      devices.push_back(b.device);
    }
    impl_.buffer_in_set.resize(sizes.size());
    for (uint32_t i = 0; i < sizes.size(); ++i) impl_.buffer_in_set[i] = i;
    if (meta.uses_device_memory() && options_.share_device_arenas) return place_shared_device_arenas();
    // Rule 3: a device method shares only when asked; rule 2: host methods share unless told not to.
    bool own = meta.uses_device_memory() || !options_.share_memory_arenas;
    PLANRT_RETURN_IF_ERROR(check_planned_limits(!own));
    if (own) {
      PLANRT_ASSIGN_OR_RETURN(MemoryManager memory, MemoryManager::create(sizes, devices, name_));
      impl_.arenas = std::make_shared<ArenaSet>();
      impl_.arenas->memory = std::move(memory);
      impl_.shared_arenas = false;
      return {};
    }
    PLANRT_ASSIGN_OR_RETURN(impl_.arenas, impl_.program->acquire_shared_host(name_));
    impl_.shared_arenas = true;
    const MemoryManager& shared = impl_.arenas->memory;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (i >= shared.num_buffers() || shared.size(i) < sizes[i]) {
        return error(ErrorCode::Internal,
                     fmt::format("planned buffer {} ({} bytes) does not fit the shared host arena",
                                 i, sizes[i]));
      }
    }
    return {};
  }

  // share_device_arenas: the program's one set, one arena per device, each the largest any
  // device method plans there; this method's buffer on device d is the set's arena of d.
  Status place_shared_device_arenas() {
    const MethodMeta& meta = impl_.meta;
    const auto& sizes = impl_.program->shared_device_sizes;
    std::set<Device> seen;
    for (uint32_t i = 0; i < meta.planned_buffers.size(); ++i) {
      const Device d = meta.planned_buffers[i].device;
      if (!seen.insert(d).second) {
        return error(ErrorCode::InvalidArgument,
                     fmt::format("share_device_arenas: the method plans two buffers on {}, and a "
                                 "shared set holds one arena per device", to_string(d)));
      }
      auto it = sizes.find(d);
      if (it == sizes.end() || it->second < meta.planned_buffers[i].size_bytes) {
        return error(ErrorCode::Internal,
                     fmt::format("planned buffer {} does not fit the shared device arenas", i));
      }
      impl_.buffer_in_set[i] = static_cast<uint32_t>(std::distance(sizes.begin(), it));
    }
    for (const auto& [device, bytes] : sizes) {
      PLANRT_RETURN_IF_ERROR(check_limit(
          device, bytes,
          "the program's shared device arenas (the largest any method with device memory plans "
          "on this device; load without share_device_arenas to size arenas for this method alone)"));
    }
    PLANRT_ASSIGN_OR_RETURN(impl_.arenas, impl_.program->acquire_shared_device(name_));
    impl_.shared_device_arenas = true;
    return {};
  }

  Status init_delegates() {
    const fb::Program& program = file_.program();
    std::vector<BackendOption> program_specs = to_options(program.compile_specs());
    const format::ProgramFile* file = &file_;
    for (const Pending& p : pending_) {
      const fb::Segment& seg = *method_.segments()->Get(p.segment);
      std::string backend_name(str(seg.backend()));
      std::string segment_name(str(seg.name()));
      // The program's specs, then the segment's: a later key wins.
      std::vector<BackendOption> specs = program_specs;
      std::vector<BackendOption> seg_specs = to_options(seg.compile_specs());
      specs.insert(specs.end(), seg_specs.begin(), seg_specs.end());
      std::span<const BackendOption> load_options;
      if (auto it = options_.backend_options.find(backend_name); it != options_.backend_options.end()) {
        load_options = it->second;
      }
      BackendInitContext ctx;
      ctx.device = to_device(seg.device());
      ctx.method_name = name_;
      ctx.segment_name = segment_name;
      ctx.dims = impl_.meta.dims;
      ctx.options = load_options;
      ctx.num_constants = static_cast<uint32_t>(size_of(program.constants()));
      ctx.constant = [file](uint32_t index) -> Result<ConstantRef> {
        const fb::Program& prog = file->program();
        if (index >= size_of(prog.constants())) {
          return make_error(ErrorCode::OutOfRange, "constant {} is out of range ({} constants)",
                            index, size_of(prog.constants()));
        }
        const fb::Constant* c = prog.constants()->Get(index);
        ConstantRef ref;
        ref.name = str(c->name());
        ref.dtype = to_dtype(c->dtype());
        if (c->shape() != nullptr) {
          std::vector<int64_t> dims(c->shape()->begin(), c->shape()->end());
          PLANRT_ASSIGN_OR_RETURN(ref.shape, Shape::from(dims));
        }
        ref.data = file->constant_data(index);
        return ref;
      };
      std::span<const uint8_t> blob;
      if (seg.blob() != nullptr) blob = {seg.blob()->data(), seg.blob()->size()};
      Result<BackendHandle> handle = p.backend->init(blob, specs, ctx);
      if (!handle.ok()) {
        return handle.status().with_context(fmt::format(
            "method '{}': segment {} '{}' (backend '{}') init", name_, p.segment, segment_name,
            backend_name));
      }
      impl_.delegates.emplace_back(p.backend, *handle);
    }
    return {};
  }

  void bind_value_memory() {
    const MemoryManager& memory = impl_.arenas->memory;
    for (ValueSlot& v : impl_.values) {
      if (v.kind != fb::ValueKind::Planned) continue;
      auto* base = static_cast<uint8_t*>(memory.buffer(impl_.buffer_in_set[v.buffer]));
      v.data = base == nullptr ? nullptr : base + v.offset;
    }
  }

  struct Pending {
    uint32_t segment;
    Backend* backend;
  };

  Method::Impl& impl_;
  const fb::Method& method_;
  const LoadMethodOptions& options_;
  const format::ProgramFile& file_;
  const std::string& name_;
  std::map<uint32_t, size_t> segment_to_delegate_;
  // Where the method's packed weights lie (made on the first one).
  const std::shared_ptr<kernels::cpu::PackedWeightArena>& weight_arena() {
    if (!weight_arena_) weight_arena_ = std::make_shared<kernels::cpu::PackedWeightArena>();
    return weight_arena_;
  }
  std::shared_ptr<kernels::cpu::PackedWeightArena> weight_arena_;
  // constant index -> its packed linear, shared by every step reading that weight
  std::map<uint32_t, std::shared_ptr<const kernels::cpu::PreparedKernel>> packed_linears_;
  std::vector<Pending> pending_;
  std::vector<Device> synchronous_;  // devices whose allocator has no streams
};

}  // namespace

Result<std::unique_ptr<Method::Impl>> load_method_impl(std::shared_ptr<Program::State> state,
                                                       const fb::Method& method,
                                                       const LoadMethodOptions& options) {
  auto impl = std::make_unique<Method::Impl>();
  impl->program = std::move(state);
  impl->meta = runtime_detail::build_method_meta(impl->program->file, method);
  PLANRT_RETURN_IF_ERROR(Loader(*impl, method, options).load());
  impl->find_inputs_read_only_by_device_copies();
  PLANRT_RETURN_IF_ERROR(impl->pin_device_copy_destinations());
  return impl;
}

}  // namespace planrt
