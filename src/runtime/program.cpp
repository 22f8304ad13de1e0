#include "planrt/runtime/program.h"

#include "planrt/core/log.h"

#include <algorithm>

#include <fmt/ranges.h>

#include "fb_convert.h"
#include "method_impl.h"
#include "method_meta_builder.h"
#include "program_state.h"

namespace planrt {

// The builder refuses what a default load refuses for its size (format::verify_sizes with
// format::ReadLimits{}): the two defaults must be one.
static_assert(ProgramLoadOptions{}.max_planned_buffer_bytes == format::ReadLimits{}.max_planned_buffer_bytes);


using runtime_detail::find_method;
using runtime_detail::str;
using runtime_detail::to_device;

namespace {

bool is_host_method(const fb::Method& m) {
  if (m.planned_buffers() == nullptr) return true;
  return std::all_of(m.planned_buffers()->begin(), m.planned_buffers()->end(),
                     [](const fb::PlannedBuffer* b) { return to_device(b->device()).is_cpu(); });
}

Status method_not_found(const fb::Program& program, std::string_view name) {
  std::vector<std::string_view> names;
  if (program.methods() != nullptr) {
    for (const fb::Method* m : *program.methods()) names.push_back(str(m->name()));
  }
  return make_error(ErrorCode::NotFound, "method '{}' not found; the program has: {}", name,
                    fmt::join(names, ", "));
}

}  // namespace

Program::State::State(format::ProgramFile f) : file(std::move(f)) {
  const fb::Program& program = file.program();
  if (program.methods() == nullptr) return;
  for (const fb::Method* m : *program.methods()) {
    if (!is_host_method(*m) && m->planned_buffers() != nullptr) {
      for (const fb::PlannedBuffer* b : *m->planned_buffers()) {
        uint64_t& size = shared_device_sizes[to_device(b->device())];
        size = std::max(size, b->size_bytes());
      }
    }
    if (!is_host_method(*m) || m->planned_buffers() == nullptr) continue;
    const auto& buffers = *m->planned_buffers();
    if (shared_sizes.size() < buffers.size()) shared_sizes.resize(buffers.size(), 0);
    for (size_t i = 0; i < buffers.size(); ++i) {
      shared_sizes[i] = std::max(shared_sizes[i], buffers.Get(static_cast<uint32_t>(i))->size_bytes());
    }
  }
}

Result<std::shared_ptr<ArenaSet>> Program::State::acquire_shared_host(std::string_view method_name) {
  std::lock_guard lock(mu_);
  if (auto live = shared_host_.lock()) return live;
  std::vector<Device> devices(shared_sizes.size(), Device::cpu());
  Result<MemoryManager> memory = MemoryManager::create(shared_sizes, devices, method_name);
  if (!memory.ok()) {
    return memory.status().with_context("allocating the program's shared host arenas");
  }
  auto set = std::make_shared<ArenaSet>();
  set->memory = std::move(memory).value();
  shared_host_ = set;
  PLANRT_LOG_DEBUG("allocated the shared host arenas ({} buffers) for host method '{}'",
                   shared_sizes.size(), method_name);
  return set;
}

Result<std::shared_ptr<ArenaSet>> Program::State::acquire_shared_device(std::string_view method_name) {
  std::lock_guard lock(mu_);
  if (auto live = shared_device_.lock()) return live;
  std::vector<uint64_t> sizes;
  std::vector<Device> devices;
  for (const auto& [device, size] : shared_device_sizes) {
    devices.push_back(device);
    sizes.push_back(size);
  }
  Result<MemoryManager> memory = MemoryManager::create(sizes, devices, method_name);
  if (!memory.ok()) {
    return memory.status().with_context("allocating the program's shared device arenas");
  }
  auto set = std::make_shared<ArenaSet>();
  set->memory = std::move(memory).value();
  set->refuse_overlap = true;
  shared_device_ = set;
  PLANRT_LOG_DEBUG("allocated the shared device arenas ({} devices) for method '{}'", sizes.size(),
                   method_name);
  return set;
}

bool Program::State::shared_host_alive() const {
  std::lock_guard lock(mu_);
  return !shared_host_.expired();
}

Program::Program(std::shared_ptr<State> state) : state_(std::move(state)) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;

Result<Program> Program::load(const std::string& path, const ProgramLoadOptions& options) {
  format::ReadLimits limits;
  limits.max_planned_buffer_bytes = options.max_planned_buffer_bytes;
  PLANRT_ASSIGN_OR_RETURN(format::ProgramFile file, format::ProgramFile::open(path, limits));
  PLANRT_LOG_INFO("loaded program '{}': {} method(s), {} bytes of constants (mapped)", path,
                  file.program().methods() ? file.program().methods()->size() : 0,
                  file.constants_bytes());
  return Program(std::make_shared<State>(std::move(file)));
}

Result<Program> Program::load_bytes(std::vector<uint8_t> bytes, const ProgramLoadOptions& options,
                                    const std::string& base_dir) {
  format::ReadLimits limits;
  limits.max_planned_buffer_bytes = options.max_planned_buffer_bytes;
  PLANRT_ASSIGN_OR_RETURN(format::ProgramFile file,
                          format::ProgramFile::from_bytes(std::move(bytes), base_dir, limits));
  return Program(std::make_shared<State>(std::move(file)));
}

std::vector<std::string> Program::method_names() const {
  std::vector<std::string> names;
  const fb::Program& program = state_->file.program();
  if (program.methods() == nullptr) return names;
  for (const fb::Method* m : *program.methods()) names.emplace_back(str(m->name()));
  return names;
}

bool Program::has_method(std::string_view name) const {
  return find_method(state_->file.program(), name) != nullptr;
}

Result<MethodMeta> Program::method_meta(std::string_view name) const {
  const fb::Method* m = find_method(state_->file.program(), name);
  if (m == nullptr) return method_not_found(state_->file.program(), name);
  return runtime_detail::build_method_meta(state_->file, *m);
}

uint64_t Program::constants_bytes() const { return state_->file.constants_bytes(); }

uint64_t Program::shared_host_arena_bytes() const {
  uint64_t total = 0;
  for (uint64_t s : state_->shared_sizes) total += s;
  return total;
}

bool Program::shared_host_arenas_allocated() const { return state_->shared_host_alive(); }

Result<Method> Program::load_method(std::string_view name, const LoadMethodOptions& options) const {
  const fb::Method* m = find_method(state_->file.program(), name);
  if (m == nullptr) return method_not_found(state_->file.program(), name);
  PLANRT_ASSIGN_OR_RETURN(std::unique_ptr<Method::Impl> impl, load_method_impl(state_, *m, options));
  PLANRT_LOG_DEBUG("loaded method '{}' ({} instructions, {} planned buffer(s))", name,
                   m->instructions() ? m->instructions()->size() : 0,
                   m->planned_buffers() ? m->planned_buffers()->size() : 0);
  return Method(std::move(impl));
}

}  // namespace planrt
