// The `engine` backend: see include/planrt/backends/engine.h.
#include "planrt/backends/engine.h"

#include <atomic>
#include <mutex>
#include <optional>

#include "backends/engine/execution_context.h"
#include "backends/option_values.h"
#include "backends/engine/scratch_pool.h"
#include "planrt/core/log.h"
#include "planrt/runtime/backend.h"
#ifdef PLANRT_HAVE_CUDA
#include "planrt/platform/cuda.h"
#endif

namespace planrt {
namespace {

using engine::ExecutionContext;
using engine::ScratchPool;
using engine::ScratchStrategy;

using backends::parse_bool_option;
using backends::parse_gemm_algorithm_option;

struct EngineSegment {
  std::unique_ptr<ExecutionContext> context;
  bool pooled = false;
  bool planned = false;  // the scratch is the Delegate's last output (Graph.scratch_operand)
  bool scratch_operand = false;  // the graph takes one (used or not)
  uint64_t stats_id = 0;  // ScratchPool's record of this context
};

class EngineBackend final : public Backend {
 public:
  Result<BackendHandle> init(std::span<const uint8_t> blob,
                             std::span<const BackendOption> compile_specs,
                             const BackendInitContext& context) override;
  Status execute(BackendHandle handle, std::span<const TensorView> inputs,
                 std::span<const TensorView> outputs, void* stream) override;
  void destroy(BackendHandle handle) override;
  Status finish(BackendHandle handle) override;
  Status set_option(std::string_view key, std::string_view value) override;
  Result<std::string> get_option(std::string_view key) const override;

 private:
  std::atomic<bool> shared_scratch_{false};  // the process-wide option
};

Status EngineBackend::set_option(std::string_view key, std::string_view value) {
  if (key != kSharedScratchOption) {
    return make_error(ErrorCode::NotSupported, "the engine backend has no option '{}' (it has '{}')",
                      key, kSharedScratchOption);
  }
  PLANRT_ASSIGN_OR_RETURN(bool on, parse_bool_option(key, value));
  shared_scratch_ = on;
  return {};
}

Result<std::string> EngineBackend::get_option(std::string_view key) const {
  if (key != kSharedScratchOption) {
    return make_error(ErrorCode::NotSupported, "the engine backend has no option '{}'", key);
  }
  return std::string(shared_scratch_ ? "true" : "false");
}

Result<BackendHandle> EngineBackend::init(std::span<const uint8_t> blob,
                                          std::span<const BackendOption> compile_specs,
                                          const BackendInitContext& ctx) {
  std::string where = fmt::format("engine '{}'", ctx.segment_name);
  // The option as it stands now, recorded for this context: process-wide, then the
  // program's compile spec, then the load-time option.
  bool pooled = shared_scratch_.load(std::memory_order_relaxed);
  engine::RunnerOptions runner_options;
  std::optional<bool> planned_option;
  for (const auto& list : {compile_specs, ctx.options}) {
    for (const BackendOption& o : list) {
      if (o.key == kPlannedScratchOption) {
        Result<bool> on = parse_bool_option(o.key, o.value);
        if (!on.ok()) return on.status().with_context(where);
        planned_option = *on;
        continue;
      }
      bool* target = o.key == kSharedScratchOption ? &pooled
                     : o.key == "allow_tf32"       ? &runner_options.allow_tf32
                     : o.key == "gemm_algorithm"   ? &runner_options.time_gemm_algorithms
                     : o.key == "attention"        ? &runner_options.cudnn_attention
                                                   : nullptr;
      if (target == nullptr) continue;  // other backends' keys may share the program's specs
      Result<bool> on = o.key == "gemm_algorithm" ? parse_gemm_algorithm_option(o.key, o.value)
                        : o.key == "attention"    ? backends::parse_attention_option(o.key, o.value)
                                                  : parse_bool_option(o.key, o.value);
      if (!on.ok()) return on.status().with_context(where);
      *target = *on;
    }
  }
  PLANRT_ASSIGN_OR_RETURN(SegmentGraph graph, parse_segment_graph(blob, ctx));
  const bool scratch_operand = graph.scratch_operand;
  if (planned_option.value_or(false) && !scratch_operand) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: {}=true, but the program was built without a planned scratch for it "
                      "(rebuild with `planrt build --engine-scratch planned`)",
                      where, kPlannedScratchOption);
  }
  const bool planned = scratch_operand && planned_option.value_or(true);
  if (planned) pooled = false;
  const bool cuda = ctx.device.type == DeviceType::CUDA;
  PLANRT_ASSIGN_OR_RETURN(engine::Engine e, engine::Engine::create(std::move(graph), cuda));
  // An engine that needs no scratch under any shape stays out of the pool (and its lock).
  if (e.scratch_bytes() == 0) pooled = false;
  PLANRT_ASSIGN_OR_RETURN(std::unique_ptr<engine::EngineRunner> runner,
                          engine::make_runner(e, ctx.device, ctx, runner_options));
  const uint64_t scratch = e.scratch_bytes();
  Result<std::unique_ptr<ExecutionContext>> context = ExecutionContext::create(
      std::move(e), std::move(runner), ctx.device,
      pooled || planned ? ScratchStrategy::UserManaged : ScratchStrategy::Static);
  if (!context.ok()) return context.status();
  auto seg = std::make_unique<EngineSegment>();
  seg->context = std::move(context).value();
  seg->pooled = pooled;
  seg->planned = planned;
  seg->scratch_operand = scratch_operand;
  seg->stats_id = ScratchPool::add_context(
      ctx.device, EngineContextInfo{std::string(ctx.method_name), std::string(ctx.segment_name), pooled,
                                    planned, scratch});
  return static_cast<BackendHandle>(seg.release());
}

Status EngineBackend::execute(BackendHandle handle, std::span<const TensorView> inputs,
                              std::span<const TensorView> outputs, void* stream) {
  auto* seg = static_cast<EngineSegment*>(handle);
  if (seg == nullptr) return make_error(ErrorCode::InvalidArgument, "engine backend: null handle");
  ExecutionContext& ctx = *seg->context;
  // A call without a stream on a device with streams runs on the runner's own and
  // finishes before returning.
  void* s = stream;
  if (s == nullptr) {
    Result<void*> mine = ctx.runner().own_stream();
    if (!mine.ok()) return mine.status().with_context(fmt::format("engine '{}'", ctx.engine().name()));
    s = *mine;
  }
  const bool own = stream == nullptr && s != nullptr;
  // A planned scratch is the last output, after the graph's own.
  std::optional<TensorView> scratch_view;
  if (seg->scratch_operand) {
    if (outputs.empty()) {
      return make_error(ErrorCode::InvalidArgument, "engine '{}': the call passes no planned scratch",
                        ctx.engine().name());
    }
    scratch_view = outputs.back();
    outputs = outputs.first(outputs.size() - 1);
  }
  PLANRT_ASSIGN_OR_RETURN(uint64_t required, ctx.prepare(inputs, outputs));
  Status status;
  if (seg->planned) {
    if (scratch_view->nbytes() != 0 && scratch_view->device != ctx.device()) {
      return make_error(ErrorCode::InvalidArgument, "engine '{}': the planned scratch is on {}, not {}",
                        ctx.engine().name(), to_string(scratch_view->device), to_string(ctx.device()));
    }
    status = ctx.install_scratch(scratch_view->data, scratch_view->nbytes());
    if (status.ok()) status = ctx.enqueue(inputs, outputs, s);
  } else if (!seg->pooled) {
    status = ctx.enqueue(inputs, outputs, s);
  } else {
    status = ScratchPool::run(ctx.device(), required, s, [&](void* scratch, uint64_t bytes) {
      if (scratch != nullptr) PLANRT_RETURN_IF_ERROR(ctx.install_scratch(scratch, bytes));
      return ctx.enqueue(inputs, outputs, s);
    });
  }
  if (!own) return status;
  Status synced = ctx.runner().synchronize_own();
  if (!status.ok()) return status;
  PLANRT_RETURN_IF_ERROR(synced);
  return ctx.runner().finish();
}

Status EngineBackend::finish(BackendHandle handle) {
  auto* seg = static_cast<EngineSegment*>(handle);
  if (seg == nullptr) return make_error(ErrorCode::InvalidArgument, "engine backend: null handle");
  return seg->context->runner().finish();
}

void EngineBackend::destroy(BackendHandle handle) {
  auto* seg = static_cast<EngineSegment*>(handle);
  if (seg == nullptr) return;
  ScratchPool::remove_context(seg->context->device(), seg->stats_id);
  delete seg;
}

EngineBackend& the_backend() {
  static EngineBackend* backend = new EngineBackend();  // never destroyed: Methods may outlive statics
  return *backend;
}

}  // namespace

Status register_engine_backend() {
#ifdef PLANRT_HAVE_CUDA
  PLANRT_RETURN_IF_ERROR(register_cuda_allocator());
#endif
  return register_backend_once("engine", &the_backend());
}

Result<EngineScratchStats> engine_scratch_stats(Device device) {
  return ScratchPool::stats(device);
}

Status trim_engine_scratch_pool(Device device) { return ScratchPool::trim(device); }

namespace engine::testing {
ExecutionContext& context_of(void* backend_handle) {
  return *static_cast<EngineSegment*>(backend_handle)->context;
}
}  // namespace engine::testing

}  // namespace planrt
