// The `engine` backend (docs/design.md §6): runs a method's engine segments — compiled graphs with
// an optimization profile and an activation-scratch requirement planned at build time —
// on the CPU (CPU kernels) or on CUDA (CUDA kernels, CUDA builds), and the opt-in shared
// per-device activation-scratch pool.
//
//   planrt::register_engine_backend();
//   Method m = *program.load_method("forward");   // each engine segment: one context
//
// Scratch, per execution context (one per engine segment of a loaded method):
// - private (the default): scratch_bytes() (the plan at the profile max) allocated when the
//   context is created, freed with it. N engines cost the sum of their requirements.
// - pooled (use_shared_activation_scratch): the context draws from one buffer per device,
//   grown to the largest requirement any call on that device has made — the exact
//   requirement of the shapes the call bound, not the profile max. N engines cost the
//   largest. Each context records at creation whether it is pooled; changing the option
//   later affects only contexts created afterwards. An engine that needs no scratch under
//   any shape stays private (and takes no lock); a call whose shapes need zero bytes
//   installs nothing and grows nothing.
// - planned (the program built with `planrt build --engine-scratch planned`,
//   BuildOptions::plan_engine_scratch): the scratch is a value of the method's own arena,
//   planned by the builder at the profile max and live only during the engine's Delegate
//   instruction (Graph.scratch_operand), so it shares bytes with activations dead then; the
//   context holds nothing and takes no lock, and the engine can run inside a CUDA graph
//   capture. Load-time option use_planned_scratch=false runs such a program's engines private
//   or pooled instead (its arena still holds the planned bytes); true on a program built
//   without it is InvalidArgument naming the engine.
// The ordering that keeps pooled runs correct under concurrency, growth, capture refusal
// and trim are described in src/backends/engine/scratch_pool.h.
//
// Options, the later winning: the process-wide option (set_backend_option("engine",
// "use_shared_activation_scratch", "true"|"false")), then the program's compile spec
// (`planrt build --shared-scratch`), then the load-time option (LoadMethodOptions::
// backend_options["engine"], `planrt run --backend-option engine.use_shared_activation_scratch=...`).
// A value other than true/false/1/0 is InvalidArgument naming the key (at set_option, or
// at load for a spec or load option). CUDA engines also read "allow_tf32", "gemm_algorithm"
// and "attention" as the cuda backend does.
//
// Capture: a pooled run on a stream that is capturing a CUDA graph is refused with
// NotSupported before anything the capture cannot take. A capture live on ANOTHER stream
// cannot be detected (CUDA has no such query): keep pooled runs out of the process while
// capturing under the global mode. cudaDeviceReset() destroys the pool's buffer and event:
// do not reset a device that pooled engines use.
//
// Thread safety: every function here may be called from any thread, while methods with
// engines load, run and are destroyed on others. Contexts follow the runtime's rule (one
// execute per handle at a time, distinct handles concurrently, backend.h): pooled runs on
// one device take turns on its buffer under the device's lock, from the claim through the
// handoff record, and private contexts take no lock. trim_engine_scratch_pool and
// engine_scratch_stats take the same lock, so a trim waits for a pooled run in progress on
// that device. The process-wide option is an atomic read once per context, at its creation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "planrt/core/device.h"
#include "planrt/core/result.h"

namespace planrt {

inline constexpr std::string_view kSharedScratchOption = "use_shared_activation_scratch";
inline constexpr std::string_view kPlannedScratchOption = "use_planned_scratch";

// Registers the backend under the name "engine" (and, in CUDA builds, the CUDA allocator).
// Idempotent; InvalidArgument when another backend holds the name.
Status register_engine_backend();

// One live execution context (an engine segment of a loaded method).
struct EngineContextInfo {
  std::string method;
  std::string segment;
  bool pooled = false;
  bool planned = false;        // its scratch is a value of the method's arena
  uint64_t scratch_bytes = 0;  // its requirement over the profile (held privately unless pooled or planned)
};

struct EngineScratchStats {
  Device device;
  std::vector<EngineContextInfo> contexts;  // live, in creation order
  // The pool.
  uint64_t pool_capacity_bytes = 0;    // the buffer now (0 before the first pooled run, after a trim)
  uint64_t pool_high_water_bytes = 0;  // the largest it has been
  int64_t pool_growths = 0;
  int64_t pool_trims = 0;
  int64_t pooled_runs = 0;
  // Live contexts on the device.
  int64_t pooled_contexts = 0;
  uint64_t pooled_private_equivalent_bytes = 0;  // what their private scratch would cost
  int64_t private_contexts = 0;
  uint64_t private_scratch_bytes = 0;            // held by private contexts now
  int64_t planned_contexts = 0;
  uint64_t planned_scratch_bytes = 0;            // their requirements (in their methods' arenas)
};

// Statistics of `device` (zeros before the engine backend used it).
Result<EngineScratchStats> engine_scratch_stats(Device device);

// Gives the pool's buffer on `device` back (waiting for pooled work already enqueued).
// The next pooled run grows it again. On the CPU the pool, like private scratch, draws from
// the allocator registered for the CPU at the time of the growth and gives each buffer back
// to the allocator it came from: trim before unregistering an allocator it may have used.
Status trim_engine_scratch_pool(Device device);

}  // namespace planrt
