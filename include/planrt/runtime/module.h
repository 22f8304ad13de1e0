// Module: the simple path. Loads a program file and runs its methods by name, loading each
// method on first use (docs/design.md §1).
//
// Ownership: move-only; owns its Program and the Methods it loaded.
// Thread safety: none. A Module is used from one thread at a time, its const members
// included (first use of a method inserts into the table they read); for concurrency use
// Program/Method directly. What it hands out follows its own type's rules: a Method* from
// method() may be used on other threads (method.h), and so may the Program that program()
// refers to (program.h), as long as the Module meanwhile neither unloads that method nor is
// moved or destroyed.
// Errors: those of Program::load, Program::load_method and Method::execute, unchanged.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planrt/core/result.h"
#include "planrt/runtime/method.h"
#include "planrt/runtime/program.h"

namespace planrt {

struct ModuleOptions {
  ProgramLoadOptions program;
  LoadMethodOptions method;  // used for every method the Module loads
};

class Module {
 public:
  static Result<Module> load(const std::string& path, const ModuleOptions& options = {});
  static Result<Module> load_bytes(std::vector<uint8_t> bytes, const ModuleOptions& options = {});

  std::vector<std::string> method_names() const { return program_.method_names(); }
  Result<MethodMeta> method_meta(std::string_view name) const { return program_.method_meta(name); }

  // Loads `name` now (a no-op when loaded).
  Status load_method(std::string_view name);
  bool is_method_loaded(std::string_view name) const;
  // Releases the method's own arenas and backend handles (rule 5); the shared host arenas
  // go when no loaded method uses them. NotFound when the method is not loaded.
  Status unload_method(std::string_view name);
  // The loaded method, loading it first if needed. Valid until it is unloaded.
  Result<Method*> method(std::string_view name);

  Result<std::vector<Tensor>> execute(std::string_view name, std::span<const TensorView> inputs);

  const Program& program() const { return program_; }

 private:
  Module(Program program, ModuleOptions options);
  Program program_;
  ModuleOptions options_;
  std::map<std::string, Method, std::less<>> methods_;
};

}  // namespace planrt
