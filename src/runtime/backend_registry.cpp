#include <map>
#include <mutex>

#include "planrt/runtime/backend.h"

namespace planrt {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, Backend*, std::less<>> backends;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

Status Backend::finish(BackendHandle) { return {}; }

Status Backend::set_option(std::string_view key, std::string_view) {
  return make_error(ErrorCode::NotSupported, "this backend has no option '{}'", key);
}

Result<std::string> Backend::get_option(std::string_view key) const {
  return make_error(ErrorCode::NotSupported, "this backend has no option '{}'", key);
}

Status register_backend(std::string name, Backend* backend) {
  if (name.empty()) return make_error(ErrorCode::InvalidArgument, "a backend needs a name");
  if (backend == nullptr) {
    return make_error(ErrorCode::InvalidArgument, "cannot register a null backend as '{}'", name);
  }
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (r.backends.contains(name)) {
    return make_error(ErrorCode::InvalidArgument, "a backend is already registered as '{}'", name);
  }
  r.backends.emplace(std::move(name), backend);
  return {};
}

Status unregister_backend(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.backends.find(name);
  if (it == r.backends.end()) {
    return make_error(ErrorCode::NotFound, "no backend is registered as '{}'", name);
  }
  r.backends.erase(it);
  return {};
}

Backend* get_backend(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.backends.find(name);
  return it == r.backends.end() ? nullptr : it->second;
}

std::vector<std::string> registered_backends() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, backend] : r.backends) names.push_back(name);
  return names;
}

Status set_backend_option(std::string_view name, std::string_view key, std::string_view value) {
  Backend* backend = get_backend(name);
  if (backend == nullptr) {
    return make_error(ErrorCode::NotFound, "no backend is registered as '{}'", name);
  }
  Status s = backend->set_option(key, value);
  if (!s.ok()) return s.with_context(fmt::format("backend '{}'", name));
  return s;
}

Status register_backend_once(std::string name, Backend* backend) {
  static std::mutex mu;  // check-then-register as one step
  std::lock_guard lock(mu);
  Backend* current = get_backend(name);
  if (current != nullptr && current == backend) return {};
  if (current != nullptr) {
    return make_error(ErrorCode::InvalidArgument,
                      "cannot register the {} backend: another backend is registered as \"{}\"; "
                      "unregister it first", name, name);
  }
  return register_backend(std::move(name), backend);
}

}  // namespace planrt
