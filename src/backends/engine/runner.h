// EngineRunner: what runs an engine's steps on one device, with every intermediate at its
// planned offset in the installed scratch and each step's workspace there too. One runner
// per execution context (it may hold per-context device state: uploaded weights, a stream,
// an error record).
//
//   make_runner(engine, device, context)   CPU: the CPU kernels, synchronous, stream unused.
//                                          CUDA (CUDA builds): the CUDA kernels, enqueued on
//                                          the stream (a null stream: the runner's own, and
//                                          it finishes before returning).
// Errors name the engine and the step. finish() reports what only finished work reveals
// (the CUDA kernels' data-dependent errors), after the caller synchronized the stream.
#pragma once

#include <memory>
#include <span>

#include "backends/engine/engine.h"

namespace planrt::engine {

class EngineRunner {
 public:
  virtual ~EngineRunner() = default;
  // `scratch` holds at least plan.scratch_bytes bytes (may be null when that is 0).
  virtual Status run(const Engine& engine, const planning::EngineScratchPlan& plan, void* scratch,
                     std::span<const int64_t> bound, std::span<const TensorView> inputs,
                     std::span<const TensorView> outputs, void* stream) = 0;
  virtual Status finish() { return {}; }
  // The runner's own stream, for a call that brings none (nullptr: the device has none);
  // a CUDA runner creates it on the first such call (a stream costs device memory, and a
  // method run by the runtime always passes one).
  virtual Result<void*> own_stream() { return static_cast<void*>(nullptr); }
  // Waits for the work on own_stream().
  virtual Status synchronize_own() { return {}; }
};

struct RunnerOptions {
  bool allow_tf32 = false;  // CUDA: cuBLAS TF32 math, as the cuda backend's option
  bool time_gemm_algorithms = true;  // CUDA: option gemm_algorithm, as the cuda backend's
  bool cudnn_attention = true;       // CUDA: option attention, as the cuda backend's
};

Result<std::unique_ptr<EngineRunner>> make_runner(const Engine& engine, Device device,
                                                  const BackendInitContext& context,
                                                  const RunnerOptions& options);

namespace detail {
// The CUDA runner (cuda/cuda_engine.cpp); NotSupported in builds without CUDA.
Result<std::unique_ptr<EngineRunner>> make_cuda_runner(const Engine& engine, int device,
                                                       const BackendInitContext& context,
                                                       const RunnerOptions& options);
// Views of every graph value for one call: operands from the caller, constants from
// `constant_data`, Planned values in the scratch. Fills `views`.
Status bind_views(const Engine& engine, const planning::EngineScratchPlan& plan, void* scratch,
                  std::span<const int64_t> bound, std::span<const TensorView> inputs,
                  std::span<const TensorView> outputs, std::span<void* const> constant_data,
                  Device device, std::vector<TensorView>& views);
}  // namespace detail

}  // namespace planrt::engine
