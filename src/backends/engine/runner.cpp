// The CPU runner and the device-neutral view binding.
#include "backends/engine/runner.h"

namespace planrt::engine {
namespace detail {

Status bind_views(const Engine& engine, const planning::EngineScratchPlan& plan, void* scratch,
                  std::span<const int64_t> bound, std::span<const TensorView> inputs,
                  std::span<const TensorView> outputs, std::span<void* const> constant_data,
                  Device device, std::vector<TensorView>& views) {
  const SegmentGraph& g = engine.graph();
  views.resize(g.values.size());
  for (size_t id = 0; id < g.values.size(); ++id) {
    const SegmentValue& v = g.values[id];
    Result<Shape> shape = concrete_shape(v.shape, bound, g.dims);
    if (!shape.ok()) {
      return shape.status().with_context(fmt::format("engine '{}': value '{}'", g.name, v.name));
    }
    void* data = nullptr;
    if (v.kind == fb::ValueKind::Constant) {
      data = constant_data[id];
    } else if (v.kind == fb::ValueKind::Planned && !v.operand && scratch != nullptr) {
      data = static_cast<uint8_t*>(scratch) + plan.value_offsets[id];
    }
    views[id] = TensorView::contiguous(data, v.dtype, *shape, device);
  }
  for (size_t i = 0; i < inputs.size(); ++i) views[g.inputs[i]].data = inputs[i].data;
  for (size_t i = 0; i < outputs.size(); ++i) views[g.outputs[i]].data = outputs[i].data;
  return {};
}

}  // namespace detail

namespace {

class CpuRunner final : public EngineRunner {
 public:
  static Result<std::unique_ptr<EngineRunner>> create(const Engine& engine,
                                                      const BackendInitContext& ctx) {
    auto r = std::make_unique<CpuRunner>();
    const SegmentGraph& g = engine.graph();
    for (size_t k = 0; k < g.steps.size(); ++k) {
      Result<kernels::KernelFn> fn = kernels::find_cpu_kernel(g.steps[k].op);
      if (!fn.ok()) return fn.status().with_context(g.step_name(k));
      r->fns_.push_back(*fn);
    }
    r->constants_.assign(g.values.size(), nullptr);
    for (size_t id = 0; id < g.values.size(); ++id) {
      const SegmentValue& v = g.values[id];
      if (v.kind != fb::ValueKind::Constant) continue;
      PLANRT_ASSIGN_OR_RETURN(ConstantRef c, segment_constant(g.name, g.dims, v, ctx));
      r->constants_[id] = const_cast<uint8_t*>(c.data.data());  // the kernels only read it
    }
    return std::unique_ptr<EngineRunner>(std::move(r));
  }

  Status run(const Engine& engine, const planning::EngineScratchPlan& plan, void* scratch,
             std::span<const int64_t> bound, std::span<const TensorView> inputs,
             std::span<const TensorView> outputs, void*) override {
    const SegmentGraph& g = engine.graph();
    PLANRT_RETURN_IF_ERROR(detail::bind_views(engine, plan, scratch, bound, inputs, outputs,
                                              constants_, Device::cpu(), views_));
    for (size_t k = 0; k < g.steps.size(); ++k) {
      const SegmentStep& s = g.steps[k];
      in_.clear();
      out_.clear();
      for (uint32_t id : s.inputs) in_.push_back(id == format::kNoValue ? TensorView::none() : views_[id]);
      for (uint32_t id : s.outputs) out_.push_back(views_[id]);
      Status st = fns_[k](s.attrs, in_, out_);
      if (!st.ok()) return st.with_context(g.step_name(k));
    }
    return {};
  }

 private:
  std::vector<kernels::KernelFn> fns_;
  std::vector<void*> constants_;
  std::vector<TensorView> views_, in_, out_;
};

}  // namespace

Result<std::unique_ptr<EngineRunner>> make_runner(const Engine& engine, Device device,
                                                  const BackendInitContext& context,
                                                  const RunnerOptions& options) {
  if (device.is_cpu()) return CpuRunner::create(engine, context);
  if (device.type == DeviceType::CUDA) {
    return detail::make_cuda_runner(engine, device.index, context, options);
  }
  return make_error(ErrorCode::NotSupported, "engine '{}': engines run on cpu or cuda, not {}",
                    engine.name(), to_string(device));
}

#ifndef PLANRT_HAVE_CUDA
namespace detail {
Result<std::unique_ptr<EngineRunner>> make_cuda_runner(const Engine& engine, int device,
                                                       const BackendInitContext&,
                                                       const RunnerOptions&) {
  return make_error(ErrorCode::NotSupported,
                    "engine '{}' is for cuda:{}, but this build of planrt has no CUDA support",
                    engine.name(), device);
}
}  // namespace detail
#endif

}  // namespace planrt::engine
