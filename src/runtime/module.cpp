#include "planrt/runtime/module.h"

namespace planrt {

Module::Module(Program program, ModuleOptions options)
    : program_(std::move(program)), options_(std::move(options)) {}

Result<Module> Module::load(const std::string& path, const ModuleOptions& options) {
  PLANRT_ASSIGN_OR_RETURN(Program program, Program::load(path, options.program));
  return Module(std::move(program), options);
}

Result<Module> Module::load_bytes(std::vector<uint8_t> bytes, const ModuleOptions& options) {
  PLANRT_ASSIGN_OR_RETURN(Program program, Program::load_bytes(std::move(bytes), options.program));
  return Module(std::move(program), options);
}

Status Module::load_method(std::string_view name) {
  Result<Method*> m = method(name);
  return m.ok() ? Status() : m.status();
}

bool Module::is_method_loaded(std::string_view name) const { return methods_.contains(name); }

Status Module::unload_method(std::string_view name) {
  auto it = methods_.find(name);
  if (it == methods_.end()) {
    return make_error(ErrorCode::NotFound, "method '{}' is not loaded", name);
  }
  methods_.erase(it);
  return {};
}

Result<Method*> Module::method(std::string_view name) {
  if (auto it = methods_.find(name); it != methods_.end()) return &it->second;
  PLANRT_ASSIGN_OR_RETURN(Method m, program_.load_method(name, options_.method));
  auto [it, inserted] = methods_.emplace(std::string(name), std::move(m));
  return &it->second;
}

Result<std::vector<Tensor>> Module::execute(std::string_view name,
                                            std::span<const TensorView> inputs) {
  PLANRT_ASSIGN_OR_RETURN(Method * m, method(name));
  return m->execute(inputs);
}

}  // namespace planrt
