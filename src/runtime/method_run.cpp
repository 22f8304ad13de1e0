// Running a loaded method: bind dims from the inputs, compute every value's shape, copy the
// inputs in, run the steps in order, copy the outputs out.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <utility>

#include "kernels/cpu/threading.h"
#include "method_impl.h"
#include "planrt/core/log.h"

namespace planrt {

std::string Method::Impl::where(size_t index) const {
  const Step& s = steps[index];
  switch (s.kind) {
    case fb::InstructionKind::Kernel:
      return fmt::format("method '{}': instruction {} (kernel '{}', node '{}')", meta.name, index,
                         s.op, s.node);
    case fb::InstructionKind::Copy:
      return fmt::format("method '{}': instruction {} (copy, node '{}')", meta.name, index, s.node);
    default:
      return fmt::format("method '{}': instruction {} (delegate to segment '{}', node '{}')",
                         meta.name, index, s.segment_name, s.node);
  }
}

std::string Method::Impl::delegate_segment_name(size_t delegate) const {
  for (const Step& s : steps) {
    if (s.kind == fb::InstructionKind::Delegate && s.delegate == delegate) return s.segment_name;
  }
  return "?";
}

TensorView Method::Impl::view_of(uint32_t id) const {
  if (id == format::kNoValue) return TensorView::none();
  const ValueSlot& v = values[id];
  return TensorView::contiguous(v.data, v.dtype, shapes[id], v.device);
}

namespace {

// Device copies go on the step's stream (null for a synchronous device). `kind` is the
// step's own, or DeviceToDevice for an input the caller passed in device memory.
Status run_copy(const Step& step, CopyKind kind, const TensorView& src, const TensorView& dst,
                void* stream) {
  if (!(src.sizes == dst.sizes)) {
    return make_error(ErrorCode::Internal, "copy from {} to {}", src.sizes.to_string(),
                      dst.sizes.to_string());
  }
  size_t n = src.nbytes();
  if (n == 0) return {};
  DeviceAllocator* a = step.copy_allocator;
  switch (kind) {
    case CopyKind::HostToHost:
      std::memcpy(dst.data, src.data, n);
      return {};
    case CopyKind::HostToDevice:
      return a->copy_host_to_device_async(dst.data, src.data, n, step.copy_device, stream);
    case CopyKind::DeviceToHost:
      return a->copy_device_to_host_async(dst.data, src.data, n, step.copy_device, stream);
    case CopyKind::DeviceToDevice:
      return a->copy_device_to_device_async(dst.data, src.data, n, step.copy_device, stream);
  }
  return make_error(ErrorCode::Internal, "unknown copy kind");
}

}  // namespace

void Method::Impl::find_inputs_read_only_by_device_copies() {
  input_read_by_copies_only.assign(inputs.size(), false);
  input_copy_device.assign(inputs.size(), std::nullopt);
  input_on_device.assign(inputs.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const uint32_t id = inputs[i];
    if (std::find(outputs.begin(), outputs.end(), id) != outputs.end()) continue;
    bool read = false;
    bool only_copies = true;
    std::optional<Device> device;
    bool one_device = true;
    for (const Step& s : steps) {
      if (std::find(s.inputs.begin(), s.inputs.end(), id) == s.inputs.end()) continue;
      read = true;
      only_copies = only_copies && s.kind == fb::InstructionKind::Copy &&
                    s.copy == CopyKind::HostToDevice;
      if (device && !(*device == s.copy_device)) one_device = false;
      device = s.copy_device;
    }
    input_read_by_copies_only[i] = read && only_copies;
    if (read && only_copies && one_device) input_copy_device[i] = device;
  }
}

Status Method::Impl::pin_device_copy_destinations() {
  if (shared_arenas) return {};  // host-only methods: no device copies
  // A shared device set's host arena is written by every method of the set: pinned by one,
  // it would be unpinned when that one goes while the others copy into it. Pageable then.
  if (shared_device_arenas) return {};
  const MemoryManager& memory = arenas->memory;
  for (const Step& s : steps) {
    if (s.kind != fb::InstructionKind::Copy || s.copy != CopyKind::DeviceToHost) continue;
    const auto* dst = static_cast<const uint8_t*>(values[s.outputs[0]].data);
    for (size_t i = 0; i < memory.num_buffers(); ++i) {
      const auto* base = static_cast<const uint8_t*>(memory.buffer(i));
      if (!memory.device(i).is_cpu() || base == nullptr || dst < base ||
          dst >= base + memory.size(i)) {
        continue;
      }
      const bool done = std::any_of(pinned_host.begin(), pinned_host.end(),
                                    [&](const PinnedHostRange& r) { return r.data() == base; });
      if (done) break;
      Result<bool> pinned = s.copy_allocator->pin_host_memory(memory.buffer(i), memory.size(i),
                                                              s.copy_device);
      if (!pinned.ok()) {
        return pinned.status().with_context(
            fmt::format("method '{}': pinning host arena {}", meta.name, i));
      }
      if (*pinned) {
        pinned_host.emplace_back(s.copy_allocator, memory.buffer(i), memory.size(i),
                                 s.copy_device);
      }
      break;
    }
  }
  return {};
}

MethodStream::~MethodStream() {
  if (handle_ == nullptr) return;
  Status s = allocator_->synchronize(handle_, device_);
  if (!s.ok()) PLANRT_LOG_ERROR("method stream on {}: {}", to_string(device_), s.to_string());
  allocator_->destroy_stream(handle_, device_);
}

Status Method::Impl::synchronize(MethodStream& stream) {
  if (!stream.pending) return {};
  stream.pending = false;
  ++stats.synchronizations;
  ++stats.last_run_synchronizations;
  Status s = stream.synchronize();
  if (!s.ok()) {
    return s.with_context(fmt::format("method '{}': waiting for its stream on {}", meta.name,
                                      to_string(stream.device())));
  }
  return {};
}

Status Method::Impl::wait_for_readers_elsewhere(MethodStream& stream) {
  const uint64_t readers = std::exchange(stream.readers_elsewhere, 0);
  for (size_t i = 0; i < streams.size() && i < kTrackedStreams; ++i) {
    if ((readers >> i & 1) == 0) continue;
    PLANRT_RETURN_IF_ERROR(synchronize(streams[i]));
  }
  return {};
}

Status Method::Impl::wait_for_host_readers(int stream) {
  const uint64_t others = static_cast<size_t>(stream) < kTrackedStreams
                              ? host_readers & ~(uint64_t{1} << stream)
                              : host_readers;
  host_readers &= ~others;
  for (size_t i = 0; i < streams.size() && i < kTrackedStreams; ++i) {
    if ((others >> i & 1) == 0) continue;
    PLANRT_RETURN_IF_ERROR(synchronize(streams[i]));
  }
  return {};
}

Status Method::Impl::synchronize_pending() {
  Status first;
  host_readers = 0;  // every reader is waited for here
  for (MethodStream& stream : streams) {
    stream.readers_elsewhere = 0;  // every reader is waited for here
    Status s = synchronize(stream);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

// A run, as ExecuTorch's executor runs a plan: bind the inputs' dims, resolve every value's
// shape, copy the inputs in, then one run_step per instruction, then finish_run.
Status Method::Impl::run_locked(std::span<const TensorView> args) {
  has_run = false;
  kernels::cpu::ThreadCountScope threads(cpu_threads);
  stats.last_run_synchronizations = 0;
  // Whatever happens below, no queued work of this run outlives it: the next run (or the
  // caller) may reuse the memory it touches.
  struct Drain {
    Method::Impl& impl;
    ~Drain() { (void)impl.synchronize_pending(); }
  } drain{*this};
  std::fill(delegate_ran.begin(), delegate_ran.end(), false);
  PLANRT_RETURN_IF_ERROR(bind_inputs(args));
  PLANRT_RETURN_IF_ERROR(resolve_shapes());
  copy_inputs_in(args);
  for (size_t k = 0; k < steps.size(); ++k) {
    PLANRT_RETURN_IF_ERROR(run_step(k, args));
  }
  PLANRT_RETURN_IF_ERROR(finish_run());
  ++stats.runs;
  has_run = true;
  return {};
}

Status Method::Impl::bind_inputs(std::span<const TensorView> args) {
  if (args.size() != inputs.size()) {
    return make_error(ErrorCode::InvalidArgument, "method '{}' takes {} inputs, got {}", meta.name,
                      inputs.size(), args.size());
  }
  std::fill(bound.begin(), bound.end(), -1);
  for (size_t i = 0; i < args.size(); ++i) {
    const TensorView& in = args[i];
    const ValueSlot& v = values[inputs[i]];
    std::string what = fmt::format("method '{}': input {} '{}'", meta.name, i, v.name);
    if (!in.is_contiguous()) {
      return make_error(ErrorCode::InvalidArgument, "{} must be contiguous", what);
    }
    input_on_device[i] = !in.device.is_cpu();
    if (input_on_device[i] && !(input_copy_device[i] && *input_copy_device[i] == in.device)) {
      return make_error(ErrorCode::InvalidArgument,
                        "{} is in {} memory, but the method reads it {}: pass a host tensor{}",
                        what, to_string(in.device),
                        input_copy_device[i] ? "on " + to_string(*input_copy_device[i]) : "on the host",
                        input_copy_device[i] ? " or one on " + to_string(*input_copy_device[i]) : "");
    }
    if (in.dtype != v.dtype) {
      return make_error(ErrorCode::InvalidArgument, "{} is {}, expected {}", what,
                        dtype_name(in.dtype), dtype_name(v.dtype));
    }
    PLANRT_RETURN_IF_ERROR(bind_dims(v.shape, in.sizes, meta.dims, what, bound));
    if (in.data == nullptr && in.nbytes() != 0) {
      return make_error(ErrorCode::InvalidArgument, "{} has no data", what);
    }
  }
  return {};
}

Status Method::Impl::resolve_shapes() {
  for (size_t id = 0; id < values.size(); ++id) {
    Result<Shape> shape = concrete_shape(values[id].shape, bound, meta.dims);
    if (!shape.ok()) {
      return shape.status().with_context(
          fmt::format("method '{}': value '{}'", meta.name, values[id].name));
    }
    shapes[id] = *shape;
  }
  return {};
}

void Method::Impl::copy_inputs_in(std::span<const TensorView> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    size_t n = args[i].nbytes();
    if (n != 0 && !input_read_by_copies_only[i]) {
      std::memcpy(values[inputs[i]].data, args[i].data, n);
    }
    if (input_on_device[i]) ++stats.inputs_from_device;
  }
}

TensorView Method::Impl::copy_source_of(uint32_t id, std::span<const TensorView> args) const {
  // A host-to-device copy's source may be reused once the call returns (DeviceAllocator),
  // so the caller's memory serves as the source for this run and is not read after it.
  TensorView v = view_of(id);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == id && input_read_by_copies_only[i]) {
      v.data = args[i].data;
      v.device = args[i].device;
    }
  }
  return v;
}

Status Method::Impl::wait_before(const Step& s) {
  // Host work reads what device work wrote: wait for it first. A copy between devices
  // waits for the source device's stream, a host-to-device copy for the stream whose copy
  // wrote its source; device work waits for the other devices' copies still to read its
  // memory, and a device-to-host copy for other streams' copies still to read host memory.
  if (s.stream < 0) return synchronize_pending();
  PLANRT_RETURN_IF_ERROR(wait_for_readers_elsewhere(streams[static_cast<size_t>(s.stream)]));
  if (s.kind == fb::InstructionKind::Copy && s.copy == CopyKind::DeviceToHost) {
    PLANRT_RETURN_IF_ERROR(wait_for_host_readers(s.stream));
  }
  if (s.wait_stream >= 0) {
    PLANRT_RETURN_IF_ERROR(synchronize(streams[static_cast<size_t>(s.wait_stream)]));
  }
  return {};
}

Status Method::Impl::run_step(size_t k, std::span<const TensorView> args) {
  Step& s = steps[k];
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    s.in_views[i] = s.kind == fb::InstructionKind::Copy ? copy_source_of(s.inputs[i], args)
                                                        : view_of(s.inputs[i]);
  }
  for (size_t i = 0; i < s.outputs.size(); ++i) s.out_views[i] = view_of(s.outputs[i]);
  Status status = wait_before(s);
  if (!status.ok()) return status.with_context(where(k));
  void* stream = nullptr;
  if (s.stream >= 0) {
    MethodStream& ms = streams[static_cast<size_t>(s.stream)];
    stream = ms.handle();
    ms.pending = true;
  }
  const bool timed = !step_times.empty();
  const auto started = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  switch (s.kind) {
    case fb::InstructionKind::Kernel:
      status = s.packed ? s.packed->run(s.attrs, s.in_views, s.out_views)
                        : s.fn(s.attrs, s.in_views, s.out_views);
      break;
    case fb::InstructionKind::Copy:
      status = run_copy_step(s, stream);
      break;
    default: {
      const DelegateSlot& d = delegates[s.delegate];
      delegate_ran[s.delegate] = true;
      status = d.backend()->execute(d.handle(), s.in_views, s.out_views, stream);
      break;
    }
  }
  if (!status.ok()) return status.with_context(where(k));
  if (synchronize_each_step && s.stream >= 0) {
    status = synchronize(streams[static_cast<size_t>(s.stream)]);
    if (status.ok() && s.kind == fb::InstructionKind::Delegate) {
      const DelegateSlot& d = delegates[s.delegate];
      delegate_ran[s.delegate] = false;
      status = d.backend()->finish(d.handle());
    }
    if (!status.ok()) return status.with_context(where(k));
  }
  if (timed) {
    // After the per-step wait, when there is one: then a device step's time is its work.
    step_times[k].ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - started).count();
    ++step_times[k].calls;
  }
  return {};
}

Status Method::Impl::run_copy_step(const Step& s, void* stream) {
  Status status;
  CopyKind kind = s.copy;
  if (kind == CopyKind::HostToDevice && !s.in_views[0].device.is_cpu()) {
    // The caller's device memory: ordered after the caller's own work on the device.
    kind = CopyKind::DeviceToDevice;
    status = s.copy_allocator->wait_for_caller(stream, s.copy_device);
  }
  if (status.ok()) status = run_copy(s, kind, s.in_views[0], s.out_views[0], stream);
  if (!status.ok()) return status;
  if (s.stream >= 0 && s.copy != CopyKind::DeviceToHost) {
    // The source's memory may be reused next, by the source device's work or by a
    // device-to-host copy on another stream: they wait for this stream. A stream past the
    // tracked ones (kTrackedStreams) is waited for here instead.
    const bool from_device = s.copy == CopyKind::DeviceToDevice && s.wait_stream >= 0;
    const bool from_host = s.copy == CopyKind::HostToDevice && kind == CopyKind::HostToDevice;
    if ((from_device || from_host) && static_cast<size_t>(s.stream) >= kTrackedStreams) {
      PLANRT_RETURN_IF_ERROR(synchronize(streams[static_cast<size_t>(s.stream)]));
    } else if (from_device) {
      streams[static_cast<size_t>(s.wait_stream)].readers_elsewhere |= uint64_t{1} << s.stream;
    } else if (from_host) {
      host_readers |= uint64_t{1} << s.stream;
    }
  }
  if (kind != CopyKind::HostToHost) {
    (kind == CopyKind::HostToDevice   ? stats.host_to_device_bytes
     : kind == CopyKind::DeviceToHost ? stats.device_to_host_bytes
                                      : stats.device_to_device_bytes) += s.in_views[0].nbytes();
  }
  return {};
}

Status Method::Impl::finish_run() {
  // The end of a run: the host may read every output now, and segments report what only
  // finished work reveals.
  PLANRT_RETURN_IF_ERROR(synchronize_pending());
  for (size_t i = 0; i < delegates.size(); ++i) {
    if (!delegate_ran[i]) continue;
    Status status = delegates[i].backend()->finish(delegates[i].handle());
    if (!status.ok()) {
      return status.with_context(fmt::format("method '{}': segment '{}'", meta.name,
                                             delegate_segment_name(i)));
    }
  }
  return {};
}

Status Method::Impl::copy_out_locked(std::span<const TensorView> dst) const {
  if (!has_run) {
    return make_error(ErrorCode::InvalidArgument, "method '{}' has not run yet", meta.name);
  }
  if (dst.size() != outputs.size()) {
    return make_error(ErrorCode::InvalidArgument, "method '{}' has {} outputs, got {} destinations",
                      meta.name, outputs.size(), dst.size());
  }
  for (size_t i = 0; i < dst.size(); ++i) {
    TensorView src = view_of(outputs[i]);
    const TensorView& d = dst[i];
    if (!d.device.is_cpu() || !d.is_contiguous() || d.dtype != src.dtype || !(d.sizes == src.sizes) ||
        (d.data == nullptr && src.nbytes() != 0)) {
      return make_error(ErrorCode::InvalidArgument,
                        "method '{}': output {} '{}' is {} {}; the destination must be a "
                        "contiguous host {} {} (got {} {} on {})",
                        meta.name, i, values[outputs[i]].name, dtype_name(src.dtype),
                        src.sizes.to_string(), dtype_name(src.dtype), src.sizes.to_string(),
                        dtype_name(d.dtype), d.sizes.to_string(), to_string(d.device));
    }
    if (src.nbytes() != 0) std::memcpy(d.data, src.data, src.nbytes());
  }
  return {};
}

Method::Method(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Method::Method(Method&&) noexcept = default;
Method& Method::operator=(Method&&) noexcept = default;
Method::~Method() = default;

const std::string& Method::name() const { return impl_->meta.name; }
const MethodMeta& Method::meta() const { return impl_->meta; }
bool Method::shares_memory_arenas() const { return impl_->shared_arenas; }
bool Method::shares_device_arenas() const { return impl_->shared_device_arenas; }
uint64_t Method::packed_weight_bytes() const { return impl_->packed_weight_bytes; }

namespace {

// Held for a run: the arena set's lock, and on a shared device set the mark of the run in
// progress, cleared when the run ends.
class RunGuard {
 public:
  RunGuard() = default;
  RunGuard(RunGuard&& other) noexcept
      : lock_(std::move(other.lock_)), marked_(std::exchange(other.marked_, nullptr)) {}
  RunGuard& operator=(RunGuard&&) = delete;
  ~RunGuard() {
    if (marked_ == nullptr) return;
    {
      // The mark first: a run arriving now marks itself and waits the moment until the
      // lock below goes, rather than being refused.
      std::lock_guard names(marked_->running_mu);
      marked_->running.clear();
    }
    lock_.unlock();
  }

  std::unique_lock<std::mutex> lock_;
  ArenaSet* marked_ = nullptr;
};

// A host set's runs wait for each other; a shared device set refuses a run while another is
// in progress (LoadMethodOptions::share_device_arenas). The mark, not the lock, says a run is
// in progress: outputs(), run_stats() and copy_outputs_into() hold the lock briefly and make
// a run wait for them, never fail.
Result<RunGuard> lock_for_run(const Method::Impl& impl) {
  ArenaSet& set = *impl.arenas;
  RunGuard guard;
  if (set.refuse_overlap) {
    std::lock_guard names(set.running_mu);
    if (!set.running.empty()) {
      return make_error(ErrorCode::InvalidArgument,
                        "method '{}' shares its device arenas (share_device_arenas) with method '{}', "
                        "which is running: runs of methods sharing device arenas may not overlap",
                        impl.meta.name, set.running);
    }
    set.running = impl.meta.name;
    guard.marked_ = &set;
  }
  guard.lock_ = std::unique_lock(set.run_mu);
  return guard;
}

}  // namespace

Status Method::run(std::span<const TensorView> inputs) {
  PLANRT_ASSIGN_OR_RETURN(RunGuard guard, lock_for_run(*impl_));
  return impl_->run_locked(inputs);
}

Result<std::vector<Tensor>> Method::execute(std::span<const TensorView> inputs) {
  PLANRT_ASSIGN_OR_RETURN(RunGuard guard, lock_for_run(*impl_));
  PLANRT_RETURN_IF_ERROR(impl_->run_locked(inputs));
  std::vector<Tensor> out;
  out.reserve(impl_->outputs.size());
  for (size_t i = 0; i < impl_->outputs.size(); ++i) {
    Result<Tensor> t = Tensor::from_view(impl_->view_of(impl_->outputs[i]));
    if (!t.ok()) {
      return t.status().with_context(fmt::format("method '{}': output {} '{}'", impl_->meta.name, i,
                                                 impl_->values[impl_->outputs[i]].name));
    }
    out.push_back(std::move(t).value());
  }
  return out;
}

Result<std::vector<TensorView>> Method::outputs() const {
  std::lock_guard lock(impl_->arenas->run_mu);
  if (!impl_->has_run) {
    return make_error(ErrorCode::InvalidArgument, "method '{}' has not run yet", impl_->meta.name);
  }
  std::vector<TensorView> views;
  for (uint32_t id : impl_->outputs) views.push_back(impl_->view_of(id));
  return views;
}

MethodRunStats Method::run_stats() const {
  std::lock_guard lock(impl_->arenas->run_mu);
  return impl_->stats;
}

std::vector<StepProfile> Method::step_profile() const {
  std::lock_guard lock(impl_->arenas->run_mu);
  std::vector<StepProfile> out;
  out.reserve(impl_->step_times.size());
  for (size_t k = 0; k < impl_->step_times.size(); ++k) {
    const Step& s = impl_->steps[k];
    StepProfile p;
    p.node = s.node;
    switch (s.kind) {
      case fb::InstructionKind::Kernel:
        p.kind = "kernel";
        p.op = s.op;
        break;
      case fb::InstructionKind::Copy:
        p.kind = "copy";
        p.op = s.copy == CopyKind::HostToDevice   ? "host_to_device"
               : s.copy == CopyKind::DeviceToHost ? "device_to_host"
               : s.copy == CopyKind::DeviceToDevice ? "device_to_device"
                                                    : "host_to_host";
        break;
      default:
        p.kind = "delegate";
        p.op = s.segment_name;
        break;
    }
    p.calls = impl_->step_times[k].calls;
    p.total_ms = static_cast<double>(impl_->step_times[k].ns) / 1e6;
    out.push_back(std::move(p));
  }
  return out;
}

Status Method::copy_outputs_into(std::span<const TensorView> dst) const {
  std::lock_guard lock(impl_->arenas->run_mu);
  return impl_->copy_out_locked(dst);
}

}  // namespace planrt
