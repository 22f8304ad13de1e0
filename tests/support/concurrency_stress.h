// The concurrency stress of issue 6 (item 4), shared by its two runs:
// tests/runtime/concurrency_stress_test.cpp (CPU CI: the `cuda` segment on the test
// allocator and backend; under ThreadSanitizer in the tsan lane) and
// tests/runtime/cuda/concurrency_stress_cuda_test.cpp (the GPU lane: the real CUDA
// allocator, `cuda` backend and CUDA engines; under compute-sanitizer).
//
// T threads run the M methods of one loaded Program for many iterations, and every output
// must be bit-identical to a serial run of the same input. The program (model_json) has four
// methods over one set of weights:
//   host_mlp     CPU kernels                       a host method (shares the host arenas)
//   host_norm    CPU kernels, larger buffers       a host method
//   engines      two engine segments on            a method on that device, pooled or
//                `engines_device` with a CPU       private scratch as loaded
//                kernel between them
//   device_mlp   a "cuda" segment on cuda:0        a device-tagged method: own arenas, its
//                between two CPU kernels           work on the method's streams
//
// What each thread holds, by the contracts in the public headers:
// - the Program, shared by every thread (its const accessors and load_method may be called
//   concurrently);
// - one shared instance of each method, used by every thread (a Method serializes its runs);
// - its own instance of each method, loaded concurrently with the other threads' loads and
//   unloaded and loaded again while they run; by thread, with its own or the shared host
//   arenas and with pooled or private engine scratch, so pooled and private engines and
//   arena sets run side by side;
// - thread 0 also trims the engines' scratch pool on options.pool_device and reads its
//   statistics every 50 iterations, and thread 1 flips the engine backend's process-wide
//   pool option as often (so runs of fewer than 50 iterations do neither) (those functions may be called from any thread while pooled runs are in
//   flight); every thread reads the Program's and its Methods' const accessors between runs;
// - every 5 runs host_mlp, host_norm or engines of a second Program (the same bytes) loaded
//   for one run and destroyed: nothing holds that Program's shared host arena set for long,
//   so the threads create and release it under each other's feet.
// Six input sizes (S from 1 to 48), so pooled engines grow the pool while others run on it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "planrt/core/device.h"
#include "planrt/core/result.h"
#include "planrt/runtime/program.h"

namespace planrt::stress {

// The model description; `engines_device` is "cpu" or "cuda:N".
std::string model_json(std::string_view engines_device);
// model_json(engines_device) built and serialized: the program both stress tests load.
Result<std::vector<uint8_t>> program_bytes(std::string_view engines_device);
// host_mlp, host_norm, engines, device_mlp.
const std::vector<std::string>& method_names();

struct Options {
  int threads = 4;
  int iterations = 10000;              // per thread
  Device pool_device = Device::cpu();  // where the engines run (trimmed by thread 0)
};

struct Counts {
  int64_t runs = 0;            // every execute, the transient ones included
  int64_t transient_runs = 0;  // runs of a method loaded for that run
  int64_t mismatches = 0;      // outputs that differ from the serial run
  int64_t errors = 0;          // failed loads, runs, stats or option calls
  int64_t reloads = 0;
  int64_t trims = 0;
  std::string first_failure;   // empty when there was none
  // Engine contexts on options.pool_device once the threads are done, before the shared
  // instances go: only the shared 'engines' method's two pooled engines should be left.
  int64_t pooled_contexts_left = -1;
  int64_t private_contexts_left = -1;
};

// The serial run (engines private), then the threads. An error before the threads start
// (the serial run or the shared instances) is returned; everything after is counted.
Result<Counts> run(const Program& program, const Program& transient, const Options& options);

// A positive integer from the environment, else `fallback`.
int env_int(const char* name, int fallback);

}  // namespace planrt::stress
