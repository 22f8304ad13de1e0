// Program: a verified program file, the methods it holds, and the entry point to load them
// (docs/design.md §3).
//
// load() maps (or takes) the file and verifies it completely (format::ProgramFile); it
// allocates no method memory (placement rule 1), so a program whose methods need a device
// this machine lacks still loads, lists its methods and answers method_meta(). Constants
// stay in the mapping and are used in place, never copied, except the weights of host
// linears, which each loaded method reorders once for oneDNN (load option cpu.pack_weights;
// Method::packed_weight_bytes counts them).
//
// Ownership: move-only; the file and the shared host arenas live in state that loaded
// Methods share, so Methods may outlive the Program object.
// Thread safety: every const accessor, load_method included, may be called from several
// threads at once: the verified file is only read, and the shared host arena set is found or
// created under a lock. Concurrent loads call the backends' init() concurrently (backend.h
// says what a backend must allow). Moving, assigning or destroying a Program must not race
// with other calls on that object; the Methods it loaded do not depend on it (see above).
// Errors: load: IoError / InvalidProgram naming what is wrong. method_meta/load_method:
// NotFound naming the method and listing the program's methods; see load_method below.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "planrt/core/result.h"
#include "planrt/runtime/method.h"
#include "planrt/runtime/method_meta.h"

namespace planrt {

struct ProgramLoadOptions {
  // The largest single planned buffer a file may declare; larger is InvalidProgram.
  uint64_t max_planned_buffer_bytes = uint64_t{1} << 40;
};

class Program {
 public:
  static Result<Program> load(const std::string& path, const ProgramLoadOptions& options = {});
  // From bytes in memory; external constants are resolved relative to `base_dir`.
  static Result<Program> load_bytes(std::vector<uint8_t> bytes,
                                    const ProgramLoadOptions& options = {},
                                    const std::string& base_dir = ".");

  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  ~Program();

  std::vector<std::string> method_names() const;
  bool has_method(std::string_view name) const;
  Result<MethodMeta> method_meta(std::string_view name) const;
  // Total bytes of the program's constants (mapped, not resident until read).
  uint64_t constants_bytes() const;
  // What the shared host arena set costs when any host method is loaded with sharing on:
  // the sum over buffer indices of the largest host-method size at that index.
  uint64_t shared_host_arena_bytes() const;
  // True while a loaded Method holds the shared host arenas.
  bool shared_host_arenas_allocated() const;

  // Loads `name` (rules 2-5, method.h): resolves every kernel op and parses its attributes,
  // checks kernels touch only CPU values, looks up every delegate backend, allocates the
  // arenas (device first), inits the delegate segments, and for a host method attaches the
  // shared host arenas. Errors: NotFound (method; an unknown op naming the node; an
  // unregistered backend naming backend, segment and method), InvalidProgram (a kernel on a
  // device value, an op with the wrong operand count), OutOfMemory when the planned bytes on
  // a device exceed LoadMethodOptions::max_planned_bytes_per_device (naming method, device,
  // bytes and limit; checked before any allocation), NotSupported / OutOfMemory from the
  // arenas naming method, buffer index, device and bytes. A failure leaves nothing
  // allocated and methods loaded before keep working.
  Result<Method> load_method(std::string_view name, const LoadMethodOptions& options = {}) const;

  struct State;

 private:
  explicit Program(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace planrt
