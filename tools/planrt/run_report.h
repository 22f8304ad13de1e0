// What one `planrt run` measured, and its two printers. The run fills a RunReport; the
// text and --json printers each read it and nothing else, so they cannot disagree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planrt/backends/engine.h"
#include "planrt/core/device.h"
#include "planrt/core/dtype.h"
#include "planrt/runtime/method.h"

namespace planrt::cli {

struct InputReport {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::string source;  // the .npy path, or "random:SEED"
};

struct OutputStats {
  double min = 0, max = 0, mean = 0;
};

struct OutputReport {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::optional<OutputStats> stats;  // none for an empty or f16 output
  std::string path;                  // where --output-dir wrote it; empty when not written
};

// Over the timed runs only; the warm-up runs are untimed.
struct LatencyReport {
  double median_ms = 0, p90_ms = 0;
  int64_t iterations = 0, warmup = 0;
  std::vector<double> samples_ms;  // each timed run, in order (--json's "samples")
};

// What the device itself says (cudaMemGetInfo) and the warm pool's figures; CUDA only.
struct DeviceFigures {
  bool known = false;
  uint64_t used_before_load = 0, used_after_load = 0, used_after_run = 0, total = 0;
  bool pool_known = false;
  uint64_t pool_reserved = 0, pool_reserved_high = 0, pool_used = 0, pool_used_high = 0;
  int64_t pool_allocations = 0;
  bool private_pool = true;
};

// The engine backend's scratch on a device: private contexts, the shared pool.
struct ScratchFigures {
  bool known = false;
  EngineScratchStats stats;
};

struct PlannedArena {
  uint32_t index = 0;  // the planned buffer's index in the method
  uint64_t size_bytes = 0;
};

// The device-memory ledger after the runs (planrt/backends/memory_ledger.h, CUDA devices):
// named lines beside the measured delta since before the load.
struct LedgerFigures {
  struct Line {
    std::string name;
    uint64_t bytes = 0;
    std::string detail;
  };
  bool known = false;
  std::vector<Line> lines;
  int64_t measured_bytes = 0;
  uint64_t named_bytes = 0;
  int64_t remainder_bytes = 0;
};

// One device's memory: what the plan says (arenas, weights), then what was measured.
struct DeviceMemory {
  Device device;
  ScratchFigures scratch;
  std::vector<PlannedArena> arenas;
  uint64_t planned_bytes = 0;
  uint64_t weights_bytes = 0;
  // CPU: the weights the method reordered at load for the matrix products (cpu.pack_weights).
  uint64_t packed_weights_bytes = 0;
  DeviceFigures figures;
  LedgerFigures ledger;

  uint64_t total_bytes() const { return planned_bytes + weights_bytes + packed_weights_bytes; }
};

struct RunReport {
  std::string program;  // the file, as given on the command line
  std::string method;
  std::vector<InputReport> inputs;    // in the method's input order
  std::vector<OutputReport> outputs;  // in the method's output order
  double load_ms = 0;
  LatencyReport latency;
  MethodRunStats run_stats;
  std::vector<DeviceMemory> memory;  // one per device the method plans or weighs on
  bool shared_host_arenas = false;   // the method uses the program's shared host arenas
  uint64_t shared_host_arena_bytes = 0;
  uint64_t constants_bytes = 0;
  // Per step, with --profile (Method::step_profile); empty otherwise.
  std::vector<StepProfile> profile;
};

// One JSON object (docs/cli.md lists its fields), then a newline, on stdout.
void print_json(const RunReport& report);
// The human-readable report on stdout.
void print_text(const RunReport& report);

}  // namespace planrt::cli
