// The loaded form of a method, shared by loading (method_load.cpp) and running
// (method_run.cpp). Everything is resolved at load so a run does no lookups and no parsing.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/prepared_kernel.h"
#include "kernels/kernel.h"
#include "planrt/platform/device_allocator.h"
#include "planrt/runtime/method.h"
#include "program_state.h"

namespace planrt {

struct ValueSlot {
  fb::ValueKind kind = fb::ValueKind::Planned;
  std::string name;
  DType dtype = DType::F32;
  std::vector<DimRef> shape;
  Device device;
  uint32_t buffer = 0;     // Planned
  uint64_t offset = 0;     // Planned
  uint8_t* data = nullptr; // arena + offset, or the mapped constant
};

// A delegate segment's backend handle, destroyed exactly once.
class DelegateSlot {
 public:
  DelegateSlot(Backend* backend, BackendHandle handle) : backend_(backend), handle_(handle) {}
  // A backend may use nullptr as a valid handle, so ownership is a flag, not the pointer.
  DelegateSlot(DelegateSlot&& o) noexcept
      : backend_(o.backend_), handle_(o.handle_), owned_(std::exchange(o.owned_, false)) {}
  DelegateSlot& operator=(DelegateSlot&&) = delete;
  DelegateSlot(const DelegateSlot&) = delete;
  ~DelegateSlot() {
    if (owned_) backend_->destroy(handle_);
  }
  Backend* backend() const { return backend_; }
  BackendHandle handle() const { return handle_; }

 private:
  Backend* backend_;
  BackendHandle handle_;
  bool owned_ = true;
};

// One stream of the method on one device (DeviceAllocator::create_stream), destroyed with
// the method after its queued work has finished.
class MethodStream {
 public:
  MethodStream(Device device, DeviceAllocator* allocator, void* handle)
      : device_(device), allocator_(allocator), handle_(handle) {}
  MethodStream(MethodStream&& o) noexcept
      : pending(o.pending), readers_elsewhere(o.readers_elsewhere), device_(o.device_), allocator_(o.allocator_),
        handle_(std::exchange(o.handle_, nullptr)) {}
  MethodStream& operator=(MethodStream&&) = delete;
  MethodStream(const MethodStream&) = delete;
  ~MethodStream();

  Device device() const { return device_; }
  DeviceAllocator* allocator() const { return allocator_; }
  void* handle() const { return handle_; }
  Status synchronize() const { return allocator_->synchronize(handle_, device_); }

  bool pending = false;  // work was enqueued since the last synchronize
  // Streams (bit i: Method::Impl::streams[i]) holding a copy that reads this device's memory
  // and may not have run yet: this stream's next work waits for them first, since the plan
  // may give the copy's source to a later value of this device.
  uint64_t readers_elsewhere = 0;

 private:
  Device device_;
  DeviceAllocator* allocator_;
  void* handle_;
};

enum class CopyKind { HostToHost, HostToDevice, DeviceToHost, DeviceToDevice };

// Streams whose pending readers a run tracks, one bit each (MethodStream::readers_elsewhere,
// Method::Impl::host_readers): a method with more streams (more than 64 devices) waits for
// a copy on a stream past them right after enqueueing it, rather than tracking it. Correct
// either way; the bitmask only spares the waits.
inline constexpr size_t kTrackedStreams = 64;

struct Step {
  fb::InstructionKind kind = fb::InstructionKind::Kernel;
  std::string op;
  std::string node;
  std::vector<uint32_t> inputs;   // format::kNoValue for an absent optional operand
  std::vector<uint32_t> outputs;
  // Kernel
  kernels::KernelFn fn = nullptr;
  kernels::OpAttrs attrs;
  // A linear or conv2d over a constant weight, prepared at load (cpu.pack_weights): runs
  // instead of fn.
  std::shared_ptr<const kernels::cpu::PreparedKernel> packed;
  // Delegate: index into Method::Impl::delegates
  size_t delegate = 0;
  std::string segment_name;
  Device segment_device;
  // Copy
  CopyKind copy = CopyKind::HostToHost;
  DeviceAllocator* copy_allocator = nullptr;
  Device copy_device;
  // The method stream this step's device work goes on (index into Method::Impl::streams);
  // -1: host work, which first waits for every stream with pending work.
  int stream = -1;
  // Another stream this copy waits for first (-1: none): for a copy between two devices,
  // the source device's; for a host-to-device copy of a host value a device-to-host copy on
  // another stream wrote (two devices routed through the host), that copy's.
  int wait_stream = -1;
  // Operand views, refilled on each run (no allocation on the hot path).
  std::vector<TensorView> in_views;
  std::vector<TensorView> out_views;
};

// A host range a device's allocator page-locked (DeviceAllocator::pin_host_memory); unpinned
// when destroyed. Move-only.
class PinnedHostRange {
 public:
  PinnedHostRange(DeviceAllocator* allocator, void* ptr, size_t bytes, Device device)
      : allocator_(allocator), ptr_(ptr), bytes_(bytes), device_(device) {}
  PinnedHostRange(PinnedHostRange&& other) noexcept
      : allocator_(std::exchange(other.allocator_, nullptr)), ptr_(other.ptr_),
        bytes_(other.bytes_), device_(other.device_) {}
  PinnedHostRange(const PinnedHostRange&) = delete;
  PinnedHostRange& operator=(const PinnedHostRange&) = delete;
  PinnedHostRange& operator=(PinnedHostRange&&) = delete;
  ~PinnedHostRange() {
    if (allocator_ != nullptr) allocator_->unpin_host_memory(ptr_, bytes_, device_);
  }
  const void* data() const { return ptr_; }

 private:
  DeviceAllocator* allocator_;
  void* ptr_;
  size_t bytes_;
  Device device_;
};

struct Method::Impl {
  // Declared first so it is destroyed last: everything below points into the file.
  std::shared_ptr<Program::State> program;
  MethodMeta meta;
  std::vector<ValueSlot> values;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<Step> steps;
  std::shared_ptr<ArenaSet> arenas;
  bool shared_arenas = false;         // the program's host set (rule 2)
  bool shared_device_arenas = false;  // the program's device set (share_device_arenas)
  // Per planned buffer of the method, its index in `arenas` (the identity unless sharing
  // device arenas, whose set has one buffer per device).
  std::vector<uint32_t> buffer_in_set;
  // The host arenas device-to-host copies write, pinned by the device's allocator so those
  // copies run as DMA. After `arenas`: unpinned before the memory is freed (and after the
  // streams, declared later, have drained).
  std::vector<PinnedHostRange> pinned_host;
  // After `arenas`, so handles are destroyed while the memory they saw still exists.
  std::vector<DelegateSlot> delegates;

  // Streams, one per non-host device the method's copies and segments use. Declared after
  // the delegates and arenas so they are destroyed first, each waiting for its queued work.
  std::vector<MethodStream> streams;
  // Streams (bit i: streams[i]) holding a host-to-device copy that may not have read its
  // host source yet: a device-to-host copy on another stream waits for them before it
  // writes host bytes the plan may have given to that source too.
  uint64_t host_readers = 0;
  std::vector<bool> delegate_ran;  // per delegate, during a run
  bool synchronize_each_step = false;
  // Per step, when loaded with profile_steps: calls and nanoseconds over all runs.
  struct StepTime {
    int64_t calls = 0;
    int64_t ns = 0;
  };
  std::vector<StepTime> step_times;
  // Threads of the host kernels during a run (option cpu.num_threads); 0: the default.
  int cpu_threads = 0;
  // Host linears reorder their constant weights at load (option cpu.pack_weights).
  bool pack_weights = true;
  uint64_t packed_weight_bytes = 0;  // what those copies hold
  MethodRunStats stats;
  // Per method input: true when only host-to-device copies read it (and it is no output).
  // run() copies such an input to the device straight from the caller's memory, which
  // saves a host memcpy into its planned buffer per run. Set at load by find_inputs_read_only_by_device_copies().
  std::vector<bool> input_read_by_copies_only;
  // Per method input: the device every copy reading it goes to, when it is read only by
  // host-to-device copies to one device. An input the caller passes in that device's memory
  // is copied device to device instead (no host round trip). Set with the flags above.
  std::vector<std::optional<Device>> input_copy_device;
  // Per method input, during a run: true when the caller passed it in device memory.
  std::vector<bool> input_on_device;
  void find_inputs_read_only_by_device_copies();
  // Pins each own host arena a device-to-host copy writes (once per arena).
  Status pin_device_copy_destinations();

  // State of the last run.
  std::vector<int64_t> bound;  // per named dim, -1 unbound
  std::vector<Shape> shapes;   // per value
  bool has_run = false;

  // The error prefix of step `index`.
  std::string where(size_t index) const;
  TensorView view_of(uint32_t id) const;
  std::string delegate_segment_name(size_t delegate) const;
  // Waits for every stream with pending work (counted in stats).
  Status synchronize_pending();
  Status synchronize(MethodStream& stream);
  // Waits for the streams whose copies read `stream`'s device (readers_elsewhere).
  Status wait_for_readers_elsewhere(MethodStream& stream);
  // Waits for the streams other than `stream` in host_readers.
  Status wait_for_host_readers(int stream);
  // Runs with the arena lock held: bind_inputs, resolve_shapes, copy_inputs_in, one run_step
  // per instruction, finish_run.
  Status run_locked(std::span<const TensorView> inputs);
  // Checks each input (count, device, dtype, data) and binds the named dims its sizes give.
  Status bind_inputs(std::span<const TensorView> args);
  // Every value's concrete shape under the bound dims.
  Status resolve_shapes();
  // Copies into their planned buffers the inputs that are not read straight from the
  // caller's memory (input_read_by_copies_only).
  void copy_inputs_in(std::span<const TensorView> args);
  // Instruction k: its operand views, the waits its stream needs, then the kernel, copy or
  // delegate; per-step synchronization and timing when loaded with them.
  Status run_step(size_t k, std::span<const TensorView> args);
  Status wait_before(const Step& s);
  Status run_copy_step(const Step& s, void* stream);
  // The view a copy reads for value `id`: the caller's memory for an input read only by
  // host-to-device copies.
  TensorView copy_source_of(uint32_t id, std::span<const TensorView> args) const;
  // Waits for every stream and lets the delegates that ran report (Backend::finish).
  Status finish_run();
  Status copy_out_locked(std::span<const TensorView> dst) const;
};

// Loads `method` of the program (Program::load_method's work).
Result<std::unique_ptr<Method::Impl>> load_method_impl(std::shared_ptr<Program::State> state,
                                                       const fb::Method& method,
                                                       const LoadMethodOptions& options);

}  // namespace planrt
