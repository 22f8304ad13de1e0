// MethodMeta: what a method needs and produces, answered from the program alone, before
// (and without) loading the method (placement rule 6, docs/design.md §3).
//
// A plain value: it copies what it reports out of the program, so it stays valid after
// the Program is gone. Thread safety: that of any value; copy and share it freely.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planrt/core/device.h"
#include "planrt/runtime/tensor_spec.h"

namespace planrt {

struct PlannedBufferInfo {
  uint64_t size_bytes = 0;
  Device device;
};

struct SegmentInfo {
  std::string name;
  std::string backend;
  Device device;
  uint32_t num_nodes = 0;
  uint64_t blob_bytes = 0;
  uint64_t scratch_bytes = 0;  // the segment graph's planned scratch (0 for cpu segments)
  // Engines: the lower bound of that plan (its largest live set); 0 if the program predates it.
  uint64_t scratch_lower_bound_bytes = 0;
  // Engine segments: the compile specs (the program's, then the segment's; the later
  // wins) turn use_shared_activation_scratch on, so the engine draws from its device's
  // shared pool (docs/design.md §6). A load-time or process-wide option is not visible here.
  bool shared_scratch = false;
  // The scratch is planned into the method's arena (docs/design.md §6, "planned scratch"): a
  // value of the method's planned buffer on this device, counted in its planned_bytes.
  bool planned_scratch = false;
};

struct PlanStatInfo {
  Device device;
  std::string planner;
  uint64_t lower_bound_bytes = 0;
  uint64_t planned_bytes = 0;
  uint32_t num_tensors = 0;
};

// What loading and running the method costs on one device.
struct MemoryEstimate {
  Device device;
  // The method's planned buffers on this device. For a host method that shares arenas
  // (the default), what is actually allocated is Program::shared_host_arena_bytes(),
  // once for all host methods.
  uint64_t planned_bytes = 0;
  // Distinct constants read on this device: by kernels (cpu) or inside delegate segments
  // placed here. Constants are mapped from the file, so on the CPU they are resident only
  // once touched; a device backend is expected to upload what it reads.
  uint64_t weights_bytes = 0;
  // Activation scratch of the segments on this device, as the program's compile specs set
  // the shared pool (docs/design.md §6): engines with a private scratch cost the sum of their
  // scratch_bytes, engines on the shared pool the largest of theirs (the pool is one
  // buffer per device, and may also serve other methods' engines), a segment whose scratch
  // is planned nothing here (it is in planned_bytes), and a cuda segment whose graph plans
  // a scratch it takes from the warm pool its own. These are
  // profile-max figures; a pool grows only to the largest call actually made.
  // Not visible here: the process-wide set_option and the load-time backend option, which
  // override the compile spec when the method is loaded (read SegmentInfo::shared_scratch
  // as "what the program asks for").
  uint64_t engine_scratch_bytes = 0;
  // CUDA devices: what the math libraries' handles add when this method is the first in the
  // process to use them on the device (the handles are shared after that): cuBLAS for any
  // cuda or engine segment there, cuDNN as well where one runs a convolution or attention
  // cuDNN may run (bf16 without a causal mask; loaded with attention=planrt, cuDNN stays
  // closed and this counts its handle too many). The figures
  // planrt measured (docs/performance.md, "Device memory beyond the plan"): a handle's
  // cost depends on the library's version, and the ledger measures the real one.
  uint64_t library_bytes = 0;
  // Some cuda segment here takes its intermediates from the warm pool (a program built
  // with --cuda-scratch pool), whose reserve no plan bounds: predicted_bytes() is then a
  // lower bound.
  bool uses_warm_pool = false;
  // CUDA devices: what the device's allocation granularity adds to the figures above.
  // cudaMalloc rounds an allocation above 1 MiB up to whole 2 MiB pages and packs smaller
  // ones into shared pages (bench/results/malloc_granularity.jsonl); so each planned buffer
  // and private engine scratch above 1 MiB and each segment's packed large weights
  // (backends/cuda/weight_cache.h, segments in the program's order) is rounded here. Not
  // modelled: the shared engine scratch pool, a stream-ordered pool that reserves in its
  // own steps.
  uint64_t page_rounding_bytes = 0;
  // What loading and running the method adds on this device, as far as the program says:
  // planned + weights + engine scratch + library handles + page rounding. Not counted:
  // kernel images the driver loads on first launch and per-delegate streams (the ledger's
  // remainder, a few MiB; docs/performance.md has it per model).
  uint64_t predicted_bytes() const {
    return planned_bytes + weights_bytes + engine_scratch_bytes + library_bytes + page_rounding_bytes;
  }
};

struct MethodMeta {
  std::string name;
  std::vector<DimSpec> dims;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  // Dense: entry i is planned buffer i.
  std::vector<PlannedBufferInfo> planned_buffers;
  std::vector<SegmentInfo> segments;
  // Distinct backend names of the delegate segments, in first-use order ("cpu" excluded).
  std::vector<std::string> backends;
  std::vector<PlanStatInfo> plan;
  // One entry per device the method touches, CPU first.
  std::vector<MemoryEstimate> memory;
  size_t num_instructions = 0;

  // True when any planned buffer is on a non-CPU device (rule 3: own arenas).
  bool uses_device_memory() const;
  // Sum of planned buffer sizes on `device`.
  uint64_t planned_bytes_on(Device device) const;
};

}  // namespace planrt
