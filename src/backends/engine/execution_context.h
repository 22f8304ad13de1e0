// ExecutionContext (docs/design.md §6): one engine's per-call state and its scratch strategy.
//
//   Static        scratch_bytes() (the profile max) allocated at creation from the device's
//                 registered allocator, freed with the context; installed automatically.
//   UserManaged   the caller installs scratch before each enqueue (the shared pool does).
//
// A call: prepare(inputs, outputs) binds the shapes and returns the exact requirement;
// install_scratch(ptr, bytes) refuses (InvalidArgument) a buffer smaller than that, and
// enqueue() refuses (InvalidArgument) a UserManaged call needing scratch with none
// installed. Nothing is enqueued on a refused or missing install. An install serves one
// enqueue. Not thread-safe: one call at a time (the runtime's rule for a handle).
#pragma once

#include <memory>

#include "backends/engine/runner.h"
#include "planrt/platform/device_allocator.h"

namespace planrt::engine {

enum class ScratchStrategy { Static, UserManaged };

class ExecutionContext {
 public:
  static Result<std::unique_ptr<ExecutionContext>> create(Engine engine,
                                                          std::unique_ptr<EngineRunner> runner,
                                                          Device device, ScratchStrategy strategy);
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;
  ~ExecutionContext();

  Engine& engine() { return engine_; }
  EngineRunner& runner() { return *runner_; }
  Device device() const { return device_; }
  ScratchStrategy strategy() const { return strategy_; }

  Result<uint64_t> prepare(std::span<const TensorView> inputs, std::span<const TensorView> outputs);
  Status install_scratch(void* ptr, uint64_t bytes);
  Status enqueue(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
                 void* stream);

 private:
  ExecutionContext(Engine engine, std::unique_ptr<EngineRunner> runner, Device device,
                   ScratchStrategy strategy)
      : engine_(std::move(engine)), runner_(std::move(runner)), device_(device), strategy_(strategy) {}

  Engine engine_;
  std::unique_ptr<EngineRunner> runner_;
  Device device_;
  ScratchStrategy strategy_;
  DeviceAllocator* allocator_ = nullptr;  // Static: where the private scratch came from
  void* private_scratch_ = nullptr;
  uint64_t private_bytes_ = 0;
  // The prepared call.
  std::vector<int64_t> bound_;
  const planning::EngineScratchPlan* plan_ = nullptr;
  void* installed_ = nullptr;
  uint64_t installed_bytes_ = 0;
};

namespace testing {
// The context behind an engine backend handle (tests only).
ExecutionContext& context_of(void* backend_handle);
}  // namespace testing

}  // namespace planrt::engine
