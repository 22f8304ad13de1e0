// build_program and the BuiltProgram handle (builder.h).
#include <new>

#include <fmt/format.h>

#include "builder/graph.h"
#include "builder/lower.h"
#include "format/fb_types.h"
#include "format/program_verifier.h"
#include "format/safetensors.h"
#include "format/writer.h"
#include "planrt/builder/builder.h"

namespace planrt::builder {

struct BuiltProgram::Impl {
  fb::ProgramT program;
  std::vector<std::span<const uint8_t>> bytes;   // one per program constant
  std::vector<std::shared_ptr<const void>> owners;  // keep `bytes` alive
  bool external = false;
};

namespace {

// The engine backend's option key (include/planrt/backends/engine.h, kSharedScratchOption;
// the builder sits below the backends and cannot include it).
constexpr std::string_view kSharedScratchSpec = "use_shared_activation_scratch";

// "dir/out.prog" -> "out.safetensors": the weights file beside the program, by name.
std::string weights_file_name(const std::string& program_path) {
  std::string name = program_path.substr(program_path.rfind('/') + 1);  // npos + 1 == 0
  if (auto dot = name.rfind('.'); dot != std::string::npos && dot > 0) name.resize(dot);
  return name + ".safetensors";
}

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

}  // namespace

BuiltProgram::BuiltProgram(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BuiltProgram::BuiltProgram(BuiltProgram&&) noexcept = default;
BuiltProgram& BuiltProgram::operator=(BuiltProgram&&) noexcept = default;
BuiltProgram::~BuiltProgram() = default;

const fb::ProgramT& BuiltProgram::program() const { return impl_->program; }

std::vector<PlanSummary> BuiltProgram::plans() const {
  std::vector<PlanSummary> out;
  for (const auto& m : impl_->program.methods) {
    for (const auto& p : m->plan) {
      PlanSummary s;
      s.method = m->name;
      s.device = format::to_device(p->device.get()).value_or(Device::cpu());
      s.planner = p->planner;
      s.lower_bound_bytes = p->lower_bound_bytes;
      s.planned_bytes = p->planned_bytes;
      s.num_tensors = p->num_tensors;
      out.push_back(std::move(s));
    }
  }
  return out;
}

size_t BuiltProgram::num_constants() const { return impl_->bytes.size(); }

uint64_t BuiltProgram::constants_bytes() const {
  uint64_t total = 0;
  for (const auto& b : impl_->bytes) total += b.size();
  return total;
}

Status BuiltProgram::write(const std::string& path) const {
  try {
    fb::ProgramT program = impl_->program;
    if (!impl_->external) return format::write_program(std::move(program), impl_->bytes, path);
    std::string weights = weights_file_name(path);
    std::vector<format::SafetensorsTensor> tensors;
    for (size_t i = 0; i < program.constants.size(); ++i) {
      const fb::ConstantT& c = *program.constants[i];
      tensors.push_back({c.name, format::to_dtype(c.dtype).value_or(DType::F32), c.shape, impl_->bytes[i]});
    }
    PLANRT_RETURN_IF_ERROR(format::write_safetensors(directory_of(path) + weights, tensors,
                                                     {{"producer", program.producer}}));
    program.external_constants = weights;
    return format::write_program(std::move(program), {}, path);
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::OutOfMemory, "out of memory while writing program '{}'", path);
  }
}

Result<std::vector<uint8_t>> BuiltProgram::serialize() const {
  if (impl_->external) {
    return make_error(ErrorCode::InvalidArgument,
                      "a program with external weights is written with write(path), which also "
                      "writes its weights file");
  }
  try {
    return format::serialize_program(impl_->program, impl_->bytes);
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::OutOfMemory, "out of memory while serializing the program");
  }
}

Result<BuiltProgram> build_program(const Model& model, const BuildOptions& options) {
  try {
    planning::PlanOptions planner;
    planner.kind = options.no_reuse ? planning::PlannerKind::NoReuse : planning::PlannerKind::GreedyBySize;
    planner.search_budget_ms = options.plan_time_budget_ms;
    if (options.shared_scratch && options.plan_engine_scratch) {
      return make_error(ErrorCode::InvalidArgument,
                        "engine scratch cannot be both pooled (shared_scratch) and planned "
                        "(plan_engine_scratch): pick one");
    }
    ScratchPlacement scratch{options.plan_cuda_scratch, options.plan_engine_scratch};
    RewriteOptions rewrites;
    rewrites.channels_last = options.channels_last;
    rewrites.merge_equal_constants = !options.external_weights;
    PLANRT_ASSIGN_OR_RETURN(LoweredProgram lowered, lower_model(model.graph(), planner, scratch, rewrites));
    auto impl = std::make_unique<BuiltProgram::Impl>();
    impl->program = std::move(lowered.program);
    impl->program.producer = options.producer;
    if (options.shared_scratch) {
      auto spec = std::make_unique<fb::KeyValueT>();
      spec->key = std::string(kSharedScratchSpec);
      spec->value = "true";
      impl->program.compile_specs.push_back(std::move(spec));
    }
    // What a default load would refuse for its size is refused here, with its message.
    PLANRT_RETURN_IF_ERROR(format::verify_sizes(impl->program, format::ReadLimits{})
                               .with_context("the program would not load"));
    impl->external = options.external_weights;
    for (const ir::Constant* c : lowered.constants) {
      if (c->bytes.size() != c->nbytes()) {
        return make_error(ErrorCode::Internal, "constant '{}' has {} bytes, expected {}", c->name,
                          c->bytes.size(), c->nbytes());
      }
      impl->bytes.push_back(c->bytes);
      impl->owners.push_back(c->owner);
    }
    return BuiltProgram(std::move(impl));
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::OutOfMemory, "out of memory while building the program");
  }
}

}  // namespace planrt::builder
