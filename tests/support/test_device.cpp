#include "support/test_device.h"

#include <cstring>
#include <iterator>
#include <memory>
#include <utility>

#include "format/program_file.h"
#include "kernels/kernel.h"
#include "planrt/format/program_generated.h"
#include "planrt/platform/device_buffer.h"
#include "runtime/fb_convert.h"
#include "planning/op_attrs.h"

namespace planrt::testing {

// ---------------------------------------------------------------- TestDeviceAllocator

void TestStream::enqueue(std::function<void()> work) {
  std::lock_guard lock(mu_);
  queue_.push_back(std::move(work));
}

void TestStream::drain() {
  std::vector<std::function<void()>> work;
  {
    std::lock_guard lock(mu_);
    work.swap(queue_);
  }
  for (auto& w : work) w();
}

size_t TestStream::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

TestDeviceAllocator::~TestDeviceAllocator() {
  for (TestStream* s : streams_) delete s;
  // Leaked device memory is a test failure elsewhere (counts); free it so ASan stays quiet.
  for (auto& [ptr, info] : live_) host_allocator().deallocate(const_cast<uint8_t*>(ptr), info.first, Device::cpu());
}

Result<void*> TestDeviceAllocator::allocate(size_t nbytes, Device device) {
  std::lock_guard lock(mu_);
  ++calls_;
  if (device.type != type_) {
    ++counts_.failed_allocations;
    return make_error(ErrorCode::NotSupported, "the test {} allocator cannot allocate on {}",
                      device_type_name(type_), to_string(device));
  }
  if (fail_at_ != 0 && calls_ == fail_at_) {
    ++counts_.failed_allocations;
    return make_error(ErrorCode::OutOfMemory, "test allocator: allocation {} of {} bytes on {} fails",
                      calls_, nbytes, to_string(device));
  }
  if (nbytes == 0) return static_cast<void*>(nullptr);
  Result<void*> p = host_allocator().allocate(nbytes, Device::cpu());
  if (!p.ok()) {
    ++counts_.failed_allocations;
    return p.status();
  }
  live_[static_cast<const uint8_t*>(*p)] = {nbytes, device};
  ++counts_.allocations;
  counts_.bytes_allocated += static_cast<int64_t>(nbytes);
  counts_.bytes_live += static_cast<int64_t>(nbytes);
  return *p;
}

void TestDeviceAllocator::deallocate(void* ptr, size_t nbytes, Device device) {
  if (ptr == nullptr) return;
  std::lock_guard lock(mu_);
  auto it = live_.find(static_cast<const uint8_t*>(ptr));
  if (it == live_.end() || it->second.first != nbytes || it->second.second != device) {
    ++counts_.bad_deallocations;
    return;
  }
  host_allocator().deallocate(ptr, nbytes, Device::cpu());
  live_.erase(it);
  ++counts_.deallocations;
  counts_.bytes_live -= static_cast<int64_t>(nbytes);
}

bool TestDeviceAllocator::owns(const void* ptr, size_t nbytes) const {
  std::lock_guard lock(mu_);
  auto p = static_cast<const uint8_t*>(ptr);
  auto it = live_.upper_bound(p);
  if (it == live_.begin()) return false;
  --it;
  return p >= it->first && p + nbytes <= it->first + it->second.first;
}

Status TestDeviceAllocator::check_range(const void* p, size_t nbytes, Device device,
                                        const char* what) const {
  if (device.type != type_) {
    return make_error(ErrorCode::InvalidArgument, "test allocator: {} on {}", what, to_string(device));
  }
  if (!owns(p, nbytes)) {
    return make_error(ErrorCode::InvalidArgument,
                      "test allocator: {} of {} bytes is not in memory this allocator handed out",
                      what, nbytes);
  }
  return {};
}

void TestDeviceAllocator::count_copy(int64_t AllocatorCounts::*counter, size_t nbytes) {
  std::lock_guard lock(mu_);
  ++(counts_.*counter);
  counts_.bytes_copied += static_cast<int64_t>(nbytes);
}

Status TestDeviceAllocator::copy_host_to_device(void* dst, const void* src, size_t nbytes,
                                                Device device) {
  PLANRT_RETURN_IF_ERROR(check_range(dst, nbytes, device, "host-to-device destination"));
  std::memcpy(dst, src, nbytes);
  count_copy(&AllocatorCounts::copies_h2d, nbytes);
  return {};
}

Status TestDeviceAllocator::copy_device_to_host(void* dst, const void* src, size_t nbytes,
                                                Device device) {
  PLANRT_RETURN_IF_ERROR(check_range(src, nbytes, device, "device-to-host source"));
  std::memcpy(dst, src, nbytes);
  count_copy(&AllocatorCounts::copies_d2h, nbytes);
  return {};
}

Status TestDeviceAllocator::copy_device_to_device(void* dst, const void* src, size_t nbytes,
                                                  Device device) {
  PLANRT_RETURN_IF_ERROR(check_range(src, nbytes, device, "device-to-device source"));
  PLANRT_RETURN_IF_ERROR(check_range(dst, nbytes, device, "device-to-device destination"));
  std::memmove(dst, src, nbytes);
  count_copy(&AllocatorCounts::copies_d2d, nbytes);
  return {};
}

Result<void*> TestDeviceAllocator::create_stream(Device device) {
  if (device.type != type_) {
    return make_error(ErrorCode::InvalidArgument, "test allocator: a stream on {}", to_string(device));
  }
  if (fail_next_stream_.exchange(false)) {
    return make_error(ErrorCode::Internal, "test allocator: stream creation told to fail");
  }
  if (!use_streams_) return static_cast<void*>(nullptr);
  auto* stream = new TestStream(device);
  std::lock_guard lock(mu_);
  streams_.insert(stream);
  ++counts_.streams_created;
  return static_cast<void*>(stream);
}

TestStream* TestDeviceAllocator::live_stream(void* stream) {
  std::lock_guard lock(mu_);
  auto* s = static_cast<TestStream*>(stream);
  if (streams_.count(s) == 0) {
    ++counts_.bad_stream_uses;
    return nullptr;
  }
  return s;
}

void TestDeviceAllocator::destroy_stream(void* stream, Device) {
  if (stream == nullptr) return;
  TestStream* s = live_stream(stream);
  if (s == nullptr) return;
  s->drain();  // queued work finishes, as on a real device
  std::lock_guard lock(mu_);
  streams_.erase(s);
  ++counts_.streams_destroyed;
  delete s;
}

Status TestDeviceAllocator::synchronize(void* stream, Device device) {
  if (stream == nullptr) return {};
  TestStream* s = live_stream(stream);
  if (s == nullptr || s->device() != device) {
    return make_error(ErrorCode::InvalidArgument, "test allocator: synchronize on a stream it "
                      "does not own on {}", to_string(device));
  }
  s->drain();
  std::lock_guard lock(mu_);
  ++counts_.synchronizations;
  return {};
}

Status TestDeviceAllocator::copy_host_to_device_async(void* dst, const void* src, size_t nbytes,
                                                      Device device, void* stream) {
  if (stream == nullptr) return copy_host_to_device(dst, src, nbytes, device);
  TestStream* s = live_stream(stream);
  if (s == nullptr) return make_error(ErrorCode::InvalidArgument, "test allocator: unknown stream");
  PLANRT_RETURN_IF_ERROR(check_range(dst, nbytes, device, "host-to-device destination"));
  bool pinned_source = false;
  {
    std::lock_guard lock(mu_);
    const auto* p = static_cast<const uint8_t*>(src);
    auto it = pinned_.upper_bound(p);
    pinned_source = it != pinned_.begin() && p + nbytes <= std::prev(it)->first + std::prev(it)->second;
  }
  if (pinned_source) {  // DMA from pinned memory: read when the stream runs
    s->enqueue([dst, src, nbytes] { std::memcpy(dst, src, nbytes); });
    count_copy(&AllocatorCounts::copies_h2d, nbytes);
    return {};
  }
  // The source may be overwritten once the call returns: stage it now, land it later.
  auto staged = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(src),
                                                       static_cast<const uint8_t*>(src) + nbytes);
  s->enqueue([dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  count_copy(&AllocatorCounts::copies_h2d, nbytes);
  return {};
}

Result<bool> TestDeviceAllocator::pin_host_memory(void* ptr, size_t nbytes, Device) {
  if (!pin_host_ || ptr == nullptr || nbytes == 0) return false;
  std::lock_guard lock(mu_);
  if (!pinned_.emplace(static_cast<const uint8_t*>(ptr), nbytes).second) return false;
  ++counts_.pins;
  return true;
}

void TestDeviceAllocator::unpin_host_memory(void* ptr, size_t nbytes, Device) {
  std::lock_guard lock(mu_);
  auto it = pinned_.find(static_cast<const uint8_t*>(ptr));
  if (it == pinned_.end() || it->second != nbytes) {
    ++counts_.bad_unpins;
    return;
  }
  pinned_.erase(it);
  ++counts_.unpins;
}

Status TestDeviceAllocator::copy_device_to_host_async(void* dst, const void* src, size_t nbytes,
                                                      Device device, void* stream) {
  if (stream == nullptr) return copy_device_to_host(dst, src, nbytes, device);
  TestStream* s = live_stream(stream);
  if (s == nullptr) return make_error(ErrorCode::InvalidArgument, "test allocator: unknown stream");
  PLANRT_RETURN_IF_ERROR(check_range(src, nbytes, device, "device-to-host source"));
  s->enqueue([dst, src, nbytes] { std::memcpy(dst, src, nbytes); });
  count_copy(&AllocatorCounts::copies_d2h, nbytes);
  return {};
}

Status TestDeviceAllocator::copy_device_to_device_async(void* dst, const void* src, size_t nbytes,
                                                        Device device, void* stream) {
  if (stream == nullptr) return copy_device_to_device(dst, src, nbytes, device);
  TestStream* s = live_stream(stream);
  if (s == nullptr) return make_error(ErrorCode::InvalidArgument, "test allocator: unknown stream");
  PLANRT_RETURN_IF_ERROR(check_range(src, nbytes, device, "device-to-device source"));
  PLANRT_RETURN_IF_ERROR(check_range(dst, nbytes, device, "device-to-device destination"));
  s->enqueue([dst, src, nbytes] { std::memmove(dst, src, nbytes); });
  count_copy(&AllocatorCounts::copies_d2d, nbytes);
  return {};
}

void TestDeviceAllocator::fail_nth_allocation(int64_t n) {
  std::lock_guard lock(mu_);
  fail_at_ = n == 0 ? 0 : calls_ + n;
}

AllocatorCounts TestDeviceAllocator::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

ScopedTestAllocator::ScopedTestAllocator(DeviceType type)
    : allocator_(type), status_(register_device_allocator(type, &allocator_)) {}

ScopedTestAllocator::~ScopedTestAllocator() {
  if (status_.ok()) (void)unregister_device_allocator(allocator_.device_type());
}

// ---------------------------------------------------------------- TestDeviceBackend

namespace {

using runtime_detail::size_of;

struct GraphValue {
  fb::ValueKind kind;
  DType dtype;
  std::vector<DimRef> shape;
  uint64_t offset = 0;                // Planned: into the scratch
  const uint8_t* constant = nullptr;  // Constant
};

struct GraphStep {
  std::string op;
  kernels::KernelFn fn;
  kernels::OpAttrs attrs;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
};

struct GraphHandle {
  std::string name;
  std::vector<DimSpec> dims;
  std::vector<GraphValue> values;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<GraphStep> steps;
  uint64_t scratch_bytes = 0;
  bool scratch_operand = false;  // the last output is the planned scratch (Graph.scratch_operand)
  Status deferred;  // the first error of work run from a stream, for finish()
};

// One call's memory and views, kept alive until its kernels have run.
struct PreparedCall {
  DeviceBuffer scratch;
  std::vector<DeviceBuffer> temporaries;
  std::vector<TensorView> views;
};

Status run_steps(const GraphHandle& g, const PreparedCall& call) {
  std::vector<TensorView> in, out;
  for (size_t k = 0; k < g.steps.size(); ++k) {
    const GraphStep& s = g.steps[k];
    in.clear();
    out.clear();
    for (uint32_t id : s.inputs) in.push_back(id == format::kNoValue ? TensorView::none() : call.views[id]);
    for (uint32_t id : s.outputs) out.push_back(call.views[id]);
    Status st = s.fn(s.attrs, in, out);
    if (!st.ok()) return st.with_context(fmt::format("segment '{}' step {} ('{}')", g.name, k, s.op));
  }
  return {};
}

}  // namespace

Result<BackendHandle> TestDeviceBackend::init(std::span<const uint8_t> blob,
                                              std::span<const BackendOption> compile_specs,
                                              const BackendInitContext& context) {
  {
    std::lock_guard lock(mu_);
    last_options_.assign(context.options.begin(), context.options.end());
    last_compile_specs_.assign(compile_specs.begin(), compile_specs.end());
    if (fail_next_init_) {
      fail_next_init_ = false;
      return make_error(ErrorCode::Internal, "test backend: init told to fail");
    }
  }
  flatbuffers::Verifier verifier(blob.data(), blob.size());
  if (blob.empty() || !verifier.VerifyBuffer<fb::Graph>(nullptr)) {
    return make_error(ErrorCode::InvalidArgument, "segment '{}': the blob is not a Graph",
                      context.segment_name);
  }
  const fb::Graph* graph = flatbuffers::GetRoot<fb::Graph>(blob.data());
  auto handle = std::make_unique<GraphHandle>();
  handle->name = std::string(context.segment_name);
  handle->dims.assign(context.dims.begin(), context.dims.end());
  handle->scratch_bytes = graph->scratch_bytes();
  handle->scratch_operand = graph->scratch_operand();
  if (graph->values() != nullptr) {
    for (const fb::Value* v : *graph->values()) {
      GraphValue gv{v->kind(), runtime_detail::to_dtype(v->dtype()),
                    runtime_detail::to_dim_refs(v->shape()), v->offset(), nullptr};
      if (v->kind() == fb::ValueKind::Constant) {
        PLANRT_ASSIGN_OR_RETURN(ConstantRef c, context.constant(v->constant()));
        gv.constant = c.data.data();
      }
      handle->values.push_back(std::move(gv));
    }
  }
  if (graph->inputs() != nullptr) handle->inputs.assign(graph->inputs()->begin(), graph->inputs()->end());
  if (graph->outputs() != nullptr) handle->outputs.assign(graph->outputs()->begin(), graph->outputs()->end());
  if (graph->instructions() != nullptr) {
    for (const fb::Instruction* ins : *graph->instructions()) {
      GraphStep step;
      step.op = std::string(runtime_detail::str(ins->op()));
      PLANRT_ASSIGN_OR_RETURN(step.fn, kernels::find_cpu_kernel(step.op));
      PLANRT_ASSIGN_OR_RETURN(step.attrs, planning::parse_op_attrs(*ins));
      if (ins->inputs() != nullptr) step.inputs.assign(ins->inputs()->begin(), ins->inputs()->end());
      if (ins->outputs() != nullptr) step.outputs.assign(ins->outputs()->begin(), ins->outputs()->end());
      handle->steps.push_back(std::move(step));
    }
  }
  std::lock_guard lock(mu_);
  ++counts_.inits;
  return static_cast<BackendHandle>(handle.release());
}

Status TestDeviceBackend::execute(BackendHandle h, std::span<const TensorView> inputs,
                                  std::span<const TensorView> outputs, void* stream) {
  auto* g = static_cast<GraphHandle*>(h);
  if (execute_hook_) execute_hook_();
  {
    std::lock_guard lock(mu_);
    ++counts_.executes;
    if (stream != nullptr) ++counts_.executes_on_stream;
  }
  const size_t scratch_operands = g->scratch_operand ? 1 : 0;
  if (inputs.size() != g->inputs.size() || outputs.size() != g->outputs.size() + scratch_operands) {
    return make_error(ErrorCode::InvalidArgument, "segment '{}' takes {} inputs and {} outputs, got {} and {}",
                      g->name, g->inputs.size(), g->outputs.size() + scratch_operands, inputs.size(),
                      outputs.size());
  }
  if (device_memory_ != nullptr) {
    for (const auto* views : {&inputs, &outputs}) {
      for (const TensorView& v : *views) {
        if (v.nbytes() != 0 && !device_memory_->owns(v.data, v.nbytes())) {
          return make_error(ErrorCode::InvalidArgument,
                            "segment '{}': an operand of {} bytes is not backed by device memory",
                            g->name, v.nbytes());
        }
      }
    }
  }
  // Bind dims from every operand, then size the graph's own values.
  std::vector<int64_t> bound(g->dims.size(), -1);
  std::vector<uint8_t*> data(g->values.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    PLANRT_RETURN_IF_ERROR(bind_dims(g->values[g->inputs[i]].shape, inputs[i].sizes, g->dims,
                                     "segment input", bound));
    data[g->inputs[i]] = static_cast<uint8_t*>(inputs[i].data);
  }
  for (size_t i = 0; i < g->outputs.size(); ++i) {
    PLANRT_RETURN_IF_ERROR(bind_dims(g->values[g->outputs[i]].shape, outputs[i].sizes, g->dims,
                                     "segment output", bound));
    data[g->outputs[i]] = static_cast<uint8_t*>(outputs[i].data);
  }
  auto call = std::make_shared<PreparedCall>();
  uint8_t* scratch = nullptr;
  if (g->scratch_operand) {
    // The method's planned scratch: nothing is allocated for the call.
    const TensorView& planned = outputs.back();
    if (planned.nbytes() < g->scratch_bytes) {
      return make_error(ErrorCode::InvalidArgument, "segment '{}': planned scratch of {} bytes, needs {}",
                        g->name, planned.nbytes(), g->scratch_bytes);
    }
    scratch = static_cast<uint8_t*>(planned.data);
  } else {
    PLANRT_ASSIGN_OR_RETURN(call->scratch,
                            DeviceBuffer::allocate(host_allocator(), g->scratch_bytes, Device::cpu()));
    scratch = static_cast<uint8_t*>(call->scratch.data());
  }
  call->views.resize(g->values.size());
  for (size_t id = 0; id < g->values.size(); ++id) {
    const GraphValue& v = g->values[id];
    PLANRT_ASSIGN_OR_RETURN(Shape shape, concrete_shape(v.shape, bound, g->dims));
    if (data[id] == nullptr) {
      if (v.kind == fb::ValueKind::Constant) {
        data[id] = const_cast<uint8_t*>(v.constant);
      } else if (v.kind == fb::ValueKind::Planned) {
        data[id] = scratch == nullptr ? nullptr : scratch + v.offset;
      } else {
        size_t nbytes = static_cast<size_t>(shape.numel()) * element_size(v.dtype);
        PLANRT_ASSIGN_OR_RETURN(DeviceBuffer t,
                                DeviceBuffer::allocate(host_allocator(), nbytes, Device::cpu()));
        data[id] = static_cast<uint8_t*>(t.data());
        call->temporaries.push_back(std::move(t));
      }
    }
    // The memory is host memory whatever device it stands for: the CPU kernels may read it.
    call->views[id] = TensorView::contiguous(data[id], v.dtype, shape, Device::cpu());
  }
  if (stream == nullptr) return run_steps(*g, *call);
  static_cast<TestStream*>(stream)->enqueue([g, call] {
    Status st = run_steps(*g, *call);
    if (!st.ok() && g->deferred.ok()) g->deferred = st;
  });
  return {};
}

Status TestDeviceBackend::finish(BackendHandle h) {
  auto* g = static_cast<GraphHandle*>(h);
  {
    std::lock_guard lock(mu_);
    ++counts_.finishes;
  }
  return std::exchange(g->deferred, Status());
}

void TestDeviceBackend::destroy(BackendHandle h) {
  delete static_cast<GraphHandle*>(h);
  std::lock_guard lock(mu_);
  ++counts_.destroys;
}

std::vector<BackendOption> TestDeviceBackend::last_options() const {
  std::lock_guard lock(mu_);
  return last_options_;
}

std::vector<BackendOption> TestDeviceBackend::last_compile_specs() const {
  std::lock_guard lock(mu_);
  return last_compile_specs_;
}

BackendCounts TestDeviceBackend::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

ScopedTestBackend::ScopedTestBackend(std::string name, const TestDeviceAllocator* device_memory)
    : name_(std::move(name)), backend_(device_memory), status_(register_backend(name_, &backend_)) {}

ScopedTestBackend::~ScopedTestBackend() {
  if (status_.ok()) (void)unregister_backend(name_);
}

}  // namespace planrt::testing
