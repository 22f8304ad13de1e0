// Running a loaded method: bind dims from the inputs, compute every value's shape, copy the
// inputs in, run the steps in order, copy the outputs out.
#include <cstring>
#include <mutex>

#include "method_impl.h"

namespace planrt {

std::string Method::Impl::where(size_t index) const {
  const Step& s = steps[index];
  switch (s.kind) {
    case fb::InstructionKind::Kernel:
      return fmt::format("method '{}': instruction {} (kernel '{}', node '{}')", meta.name, index,
                         s.op, s.node);
    case fb::InstructionKind::Copy:
      return fmt::format("method '{}': instruction {} (copy, node '{}')", meta.name, index, s.node);
    default:
      return fmt::format("method '{}': instruction {} (delegate to segment '{}', node '{}')",
                         meta.name, index, s.segment_name, s.node);
  }
}

TensorView Method::Impl::view_of(uint32_t id) const {
  if (id == format::kNoValue) return TensorView::none();
  const ValueSlot& v = values[id];
  return TensorView::contiguous(v.data, v.dtype, shapes[id], v.device);
}

namespace {

Status run_copy(const Step& step, const TensorView& src, const TensorView& dst) {
  if (!(src.sizes == dst.sizes)) {
    return make_error(ErrorCode::Internal, "copy from {} to {}", src.sizes.to_string(),
                      dst.sizes.to_string());
  }
  size_t n = src.nbytes();
  if (n == 0) return {};
  switch (step.copy) {
    case CopyKind::HostToHost:
      std::memcpy(dst.data, src.data, n);
      return {};
    case CopyKind::HostToDevice:
      return step.copy_allocator->copy_host_to_device(dst.data, src.data, n, step.copy_device);
    case CopyKind::DeviceToHost:
      return step.copy_allocator->copy_device_to_host(dst.data, src.data, n, step.copy_device);
    case CopyKind::DeviceToDevice:
      return step.copy_allocator->copy_device_to_device(dst.data, src.data, n, step.copy_device);
  }
  return make_error(ErrorCode::Internal, "unknown copy kind");
}

}  // namespace

Status Method::Impl::run_locked(std::span<const TensorView> args) {
  has_run = false;
  if (args.size() != inputs.size()) {
    return make_error(ErrorCode::InvalidArgument, "method '{}' takes {} inputs, got {}", meta.name,
                      inputs.size(), args.size());
  }
  std::fill(bound.begin(), bound.end(), -1);
  for (size_t i = 0; i < args.size(); ++i) {
    const TensorView& in = args[i];
    const ValueSlot& v = values[inputs[i]];
    std::string what = fmt::format("method '{}': input {} '{}'", meta.name, i, v.name);
    if (!in.device.is_cpu() || !in.is_contiguous()) {
      return make_error(ErrorCode::InvalidArgument,
                        "{} must be a contiguous host tensor (got one on {})", what,
                        to_string(in.device));
    }
    if (in.dtype != v.dtype) {
      return make_error(ErrorCode::InvalidArgument, "{} is {}, expected {}", what,
                        dtype_name(in.dtype), dtype_name(v.dtype));
    }
    PLANRT_RETURN_IF_ERROR(bind_dims(v.shape, in.sizes, meta.dims, what, bound));
    if (in.data == nullptr && in.nbytes() != 0) {
      return make_error(ErrorCode::InvalidArgument, "{} has no data", what);
    }
  }
  for (size_t id = 0; id < values.size(); ++id) {
    Result<Shape> shape = concrete_shape(values[id].shape, bound, meta.dims);
    if (!shape.ok()) {
      return shape.status().with_context(
          fmt::format("method '{}': value '{}'", meta.name, values[id].name));
    }
    shapes[id] = *shape;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    size_t n = args[i].nbytes();
    if (n != 0) std::memcpy(values[inputs[i]].data, args[i].data, n);
  }
  for (size_t k = 0; k < steps.size(); ++k) {
    Step& s = steps[k];
    for (size_t i = 0; i < s.inputs.size(); ++i) s.in_views[i] = view_of(s.inputs[i]);
    for (size_t i = 0; i < s.outputs.size(); ++i) s.out_views[i] = view_of(s.outputs[i]);
    Status status;
    switch (s.kind) {
      case fb::InstructionKind::Kernel:
        status = s.fn(s.attrs, s.in_views, s.out_views);
        break;
      case fb::InstructionKind::Copy:
        status = run_copy(s, s.in_views[0], s.out_views[0]);
        break;
      default: {
        const DelegateSlot& d = delegates[s.delegate];
        status = d.backend()->execute(d.handle(), s.in_views, s.out_views, nullptr);
        break;
      }
    }
    if (!status.ok()) return status.with_context(where(k));
  }
  has_run = true;
  return {};
}

Status Method::Impl::copy_out_locked(std::span<const TensorView> dst) const {
  if (!has_run) {
    return make_error(ErrorCode::InvalidArgument, "method '{}' has not run yet", meta.name);
  }
  if (dst.size() != outputs.size()) {
    return make_error(ErrorCode::InvalidArgument, "method '{}' has {} outputs, got {} destinations",
                      meta.name, outputs.size(), dst.size());
  }
  for (size_t i = 0; i < dst.size(); ++i) {
    TensorView src = view_of(outputs[i]);
    const TensorView& d = dst[i];
    if (!d.device.is_cpu() || !d.is_contiguous() || d.dtype != src.dtype || !(d.sizes == src.sizes) ||
        (d.data == nullptr && src.nbytes() != 0)) {
      return make_error(ErrorCode::InvalidArgument,
                        "method '{}': output {} '{}' is {} {}; the destination must be a "
                        "contiguous host {} {} (got {} {} on {})",
                        meta.name, i, values[outputs[i]].name, dtype_name(src.dtype),
                        src.sizes.to_string(), dtype_name(src.dtype), src.sizes.to_string(),
                        dtype_name(d.dtype), d.sizes.to_string(), to_string(d.device));
    }
    if (src.nbytes() != 0) std::memcpy(d.data, src.data, src.nbytes());
  }
  return {};
}

Method::Method(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Method::Method(Method&&) noexcept = default;
Method& Method::operator=(Method&&) noexcept = default;
Method::~Method() = default;

const std::string& Method::name() const { return impl_->meta.name; }
const MethodMeta& Method::meta() const { return impl_->meta; }
bool Method::shares_memory_arenas() const { return impl_->shared_arenas; }

Status Method::run(std::span<const TensorView> inputs) {
  std::lock_guard lock(impl_->arenas->run_mu);
  return impl_->run_locked(inputs);
}

Result<std::vector<Tensor>> Method::execute(std::span<const TensorView> inputs) {
  std::lock_guard lock(impl_->arenas->run_mu);
  PLANRT_RETURN_IF_ERROR(impl_->run_locked(inputs));
  std::vector<Tensor> out;
  out.reserve(impl_->outputs.size());
  for (size_t i = 0; i < impl_->outputs.size(); ++i) {
    Result<Tensor> t = Tensor::from_view(impl_->view_of(impl_->outputs[i]));
    if (!t.ok()) {
      return t.status().with_context(fmt::format("method '{}': output {} '{}'", impl_->meta.name, i,
                                                 impl_->values[impl_->outputs[i]].name));
    }
    out.push_back(std::move(t).value());
  }
  return out;
}

Result<std::vector<TensorView>> Method::outputs() const {
  std::lock_guard lock(impl_->arenas->run_mu);
  if (!impl_->has_run) {
    return make_error(ErrorCode::InvalidArgument, "method '{}' has not run yet", impl_->meta.name);
  }
  std::vector<TensorView> views;
  for (uint32_t id : impl_->outputs) views.push_back(impl_->view_of(id));
  return views;
}

Status Method::copy_outputs_into(std::span<const TensorView> dst) const {
  std::lock_guard lock(impl_->arenas->run_mu);
  return impl_->copy_out_locked(dst);
}

}  // namespace planrt
