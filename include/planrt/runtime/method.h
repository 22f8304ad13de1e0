// Method: a loaded method of a Program, ready to execute (docs/design.md §3, §7).
//
// Memory (placement rules 2, 3, 5):
// - A host method (every planned buffer on the CPU) shares, by default, one set of host
//   arenas with every other host method of the same Program: one arena per buffer index,
//   sized when the first host method is loaded to the largest size any host method of the
//   program asks for at that index, and released when the last Method using it is
//   destroyed. Host methods therefore overwrite each other's intermediate values, never
//   what execute() returned (outputs are copied out). LoadMethodOptions::
//   share_memory_arenas = false gives the method arenas of its own instead.
// - A method with any device-tagged buffer always gets its own arenas, device first.
// - Destroying (unloading) a Method releases its own arenas and its backend handles.
//
// Ownership: move-only. A Method keeps its Program's file (mapping, constants) alive, so it
// may outlive the Program object it came from. Registered allocators and backends it used
// must outlive it.
// Streams (docs/design.md §7): a method with device work gets one stream per device from that
// device's allocator at load; its copies and delegate segments are enqueued there in program
// order and the host waits only where it must: before a host step that follows device work,
// and once at the end of a run. run_stats() counts those waits.
// Thread safety (held by tests/runtime/concurrency_stress_test.cpp, also under TSan):
// - A Method may be shared between threads. execute, run, outputs, copy_outputs_into and
//   run_stats take the lock of the method's arena set, so calls on one Method, and on the
//   host methods sharing one arena set (rule 2), are serialized rather than racing. Methods
//   with arenas of their own (device methods, share_memory_arenas = false) run in parallel;
//   pooled engines among them take turns on the pool's buffer (planrt/backends/engine.h).
//   Methods loaded with share_device_arenas are the exception: a run (execute or run) that
//   would overlap another run on their shared set, of any method of it or of the same one,
//   is refused with InvalidArgument instead of waiting.
// - name(), meta(), shares_memory_arenas() and shares_device_arenas() read what loading
//   fixed and take no lock.
// - outputs()' views, and the planned memory copy_outputs_into() reads, hold the last run's
//   values only until the next run of any method sharing the arena set: a caller reading
//   them while another thread may run such a method serializes the two itself. execute()
//   returns copies and needs none of that.
// - Moving, assigning or destroying a Method must not race with any other call on it.
//   Loading, running and destroying other Methods of the same Program meanwhile is fine,
//   the arena set they share included (it goes with the last Method holding it).
// Errors: execute/run return InvalidArgument (wrong input count, dtype, rank, static dim,
// dims that disagree across inputs, a non-contiguous input, an input in device memory the
// method does not read on that device), OutOfRange (a dim
// outside its bounds, naming input, dim, value and bounds), or the failing instruction's
// error prefixed with the method, instruction index, op and node.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "planrt/core/result.h"
#include "planrt/core/tensor_view.h"
#include "planrt/runtime/backend.h"
#include "planrt/runtime/method_meta.h"
#include "planrt/runtime/tensor.h"

namespace planrt {

struct LoadMethodOptions {
  BackendOptions backend_options;
  // Host methods share one set of host arenas (rule 2). Off: this method gets its own.
  bool share_memory_arenas = true;
  // Methods with device memory (rule 3) share one arena set per program, opt-in: one arena
  // per device, sized to the largest any device method of the program plans there, so N
  // loads cost the largest method, not the sum (encoder/decoder, prefill/decode, several
  // loads of one method). Their runs must not overlap: a run started while another method
  // of the set is running is refused with InvalidArgument naming both, never serialized
  // and never a race. Loaded with the option only: methods loaded without it keep their
  // own arenas. A method with two planned buffers on one device cannot share
  // (InvalidArgument). As for host sharing, a method's outputs() views are overwritten by
  // the next run of any method of the set; execute() returns copies.
  bool share_device_arenas = false;
  // Debugging: wait for the device after every device step and collect each segment's
  // errors right there, so an asynchronous failure names the step that caused it (the
  // way CUDA_LAUNCH_BLOCKING does). Costs one host wait per device step.
  bool synchronize_each_step = false;
  // Profiling: time every step of every run (a host kernel, a copy, a delegate call) on the
  // host's steady clock, read by Method::step_profile(). Costs two clock reads per step;
  // off, nothing. Device work is asynchronous: a device step's time is what enqueuing it
  // took, unless synchronize_each_step also waits for it.
  bool profile_steps = false;
  // The most planned-buffer bytes this load may allocate on any one device (the sum of the
  // method's planned buffers there; for a host method sharing arenas, the larger of that
  // and the shared set's total). Sizes come from the file, which is untrusted: without a
  // bound a file could ask for terabytes the host allocator would hand out lazily and the
  // zero-fill would then fault in. Above the limit load_method returns OutOfMemory naming
  // the method, the device, the planned bytes and the limit, before allocating anything.
  // 0 (the default): the device's total memory: for the CPU the machine's physical memory,
  // for another device what its allocator's total_memory() says (CUDA: cudaMemGetInfo's
  // total; asking creates the device's CUDA context, even for a load then refused); an
  // allocator that does not know (0) leaves that device unbounded here, and its
  // allocate() fails what it cannot serve. Non-zero: that limit on every device, the CPU
  // included.
  uint64_t max_planned_bytes_per_device = 0;
};

struct MethodRunStats {
  int64_t runs = 0;                  // completed runs
  int64_t synchronizations = 0;      // stream synchronizations, all runs
  int64_t last_run_synchronizations = 0;
  int64_t streams = 0;               // streams the method owns
  // Bytes the method's copies moved, all runs (host-to-host copies not counted).
  uint64_t host_to_device_bytes = 0;
  uint64_t device_to_host_bytes = 0;
  uint64_t device_to_device_bytes = 0;
  int64_t inputs_from_device = 0;    // inputs the caller passed in device memory, all runs
};

// One step of a method and the time its runs spent in it (LoadOptions::profile_steps).
struct StepProfile {
  std::string kind;  // "kernel", "copy" or "delegate"
  // The kernel's op; a copy's direction (host_to_device, device_to_host, device_to_device,
  // host_to_host); a delegate's segment name.
  std::string op;
  std::string node;  // the instruction's node name, as the program names it
  int64_t calls = 0;
  double total_ms = 0;
};

class Method {
 public:
  Method(Method&&) noexcept;
  Method& operator=(Method&&) noexcept;
  ~Method();

  const std::string& name() const;
  const MethodMeta& meta() const;
  // True when this method uses the program's shared host arenas.
  bool shares_memory_arenas() const;
  // True when it was loaded with share_device_arenas and uses the program's shared set.
  bool shares_device_arenas() const;

  // Binds dims, copies `inputs` (contiguous views, in the method's input order) in, runs
  // every instruction and returns the outputs as owned tensors. An input that only a copy to
  // a device reads goes to the device straight from `inputs` (no host copy first), and may
  // then already be in that device's memory: it is copied device to device, after the work
  // the caller enqueued on the device before the call (DeviceAllocator::wait_for_caller),
  // with no host round trip. Every other input is a host view. Either way `inputs` are read
  // during the call only.
  Result<std::vector<Tensor>> execute(std::span<const TensorView> inputs);

  // The loop the CLI times: everything execute() does except copying the outputs out.
  Status run(std::span<const TensorView> inputs);
  // Views of the outputs of the last run(), in planned memory (see thread safety above).
  // InvalidArgument when the method has not run yet.
  Result<std::vector<TensorView>> outputs() const;
  // Copies the last run's outputs into `dst` (contiguous host views of matching dtype/shape).
  Status copy_outputs_into(std::span<const TensorView> dst) const;

  // Counters of this method's runs (see Streams above).
  MethodRunStats run_stats() const;
  // Every step, in the order a run takes them, with its calls and time over all runs so
  // far (warm-up runs included); empty unless loaded with LoadOptions::profile_steps.
  std::vector<StepProfile> step_profile() const;
  // Host bytes of the constant weights this method reordered at load for the CPU kernels'
  // matrix products (load option cpu.pack_weights, on by default): copies it owns beside the
  // program's constants, which those products no longer read.
  uint64_t packed_weight_bytes() const;

  struct Impl;

 private:
  friend class Program;
  explicit Method(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace planrt
