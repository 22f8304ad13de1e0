#include "backends/engine/execution_context.h"

#include "planrt/platform/device_allocator.h"

namespace planrt::engine {

Result<std::unique_ptr<ExecutionContext>> ExecutionContext::create(
    Engine engine, std::unique_ptr<EngineRunner> runner, Device device, ScratchStrategy strategy) {
  std::unique_ptr<ExecutionContext> ctx(
      new ExecutionContext(std::move(engine), std::move(runner), device, strategy));
  if (strategy == ScratchStrategy::Static && ctx->engine_.scratch_bytes() != 0) {
    DeviceAllocator* allocator = get_device_allocator(device.type);
    if (allocator == nullptr) {
      return make_error(ErrorCode::NotSupported, "engine '{}': no allocator is registered for {}",
                        ctx->engine_.name(), to_string(device));
    }
    Result<void*> p = allocator->allocate(ctx->engine_.scratch_bytes(), device);
    if (!p.ok()) {
      return p.status().with_context(fmt::format("engine '{}': private activation scratch",
                                                 ctx->engine_.name()));
    }
    ctx->allocator_ = allocator;
    ctx->private_scratch_ = *p;
    ctx->private_bytes_ = ctx->engine_.scratch_bytes();
  }
  return ctx;
}

ExecutionContext::~ExecutionContext() {
  // The runner first: it waits for work of its own still reading the scratch.
  runner_.reset();
  if (private_scratch_ != nullptr) allocator_->deallocate(private_scratch_, private_bytes_, device_);
}

Result<uint64_t> ExecutionContext::prepare(std::span<const TensorView> inputs,
                                           std::span<const TensorView> outputs) {
  plan_ = nullptr;
  installed_ = nullptr;
  installed_bytes_ = 0;
  PLANRT_RETURN_IF_ERROR(engine_.bind(inputs, outputs, bound_));
  PLANRT_ASSIGN_OR_RETURN(plan_, engine_.plan_for(bound_));
  return plan_->scratch_bytes;
}

Status ExecutionContext::install_scratch(void* ptr, uint64_t bytes) {
  if (plan_ == nullptr) {
    return make_error(ErrorCode::InvalidArgument,
                      "engine '{}': install_scratch before prepare", engine_.name());
  }
  if (bytes < plan_->scratch_bytes || (ptr == nullptr && plan_->scratch_bytes != 0)) {
    return make_error(ErrorCode::InvalidArgument,
                      "engine '{}': the installed scratch holds {} bytes, but the bound shapes "
                      "need {}", engine_.name(), bytes, plan_->scratch_bytes);
  }
  installed_ = ptr;
  installed_bytes_ = bytes;
  return {};
}

Status ExecutionContext::enqueue(std::span<const TensorView> inputs,
                                 std::span<const TensorView> outputs, void* stream) {
  if (plan_ == nullptr) {
    return make_error(ErrorCode::InvalidArgument, "engine '{}': enqueue before prepare",
                      engine_.name());
  }
  void* scratch = installed_;
  if (strategy_ == ScratchStrategy::Static) {
    // The bound shapes' plan is at most the profile max's (engine_scratch.h); checked, so a
    // plan that is not never writes past the private buffer.
    if (plan_->scratch_bytes > private_bytes_) {
      const uint64_t needed = plan_->scratch_bytes;
      plan_ = nullptr;
      return make_error(ErrorCode::Internal,
                        "engine '{}': the call's scratch plan needs {} bytes, above the private {}",
                        engine_.name(), needed, private_bytes_);
    }
    scratch = private_scratch_;
  } else if (plan_->scratch_bytes != 0 && installed_ == nullptr) {
    return make_error(ErrorCode::InvalidArgument,
                      "engine '{}': the call needs {} bytes of scratch and none is installed",
                      engine_.name(), plan_->scratch_bytes);
  }
  const planning::EngineScratchPlan* plan = plan_;
  plan_ = nullptr;  // an install serves one enqueue
  installed_ = nullptr;
  installed_bytes_ = 0;
  return runner_->run(engine_, *plan, scratch, bound_, inputs, outputs, stream);
}

}  // namespace planrt::engine
