// Backends (docs/design.md §7): what runs a method's delegate segments, and the registry of them.
//
// A backend is registered under a name ("cuda", "engine") and called for every segment
// whose `backend` field is that name. Per segment, load_method calls init() once and the
// runtime calls destroy() exactly once on the handle it returned, when the Method is
// destroyed or a later step of load_method fails. execute() gets the segment's inputs and
// outputs in the order of the segment graph, as views of memory planned on the segment's
// device; output views already have their concrete shapes. `stream` is the method's
// stream on the segment's device, made by that device's allocator (DeviceAllocator::
// create_stream; nullptr for a device without streams, such as the CPU): the segment
// enqueues its work there and need not wait for it, because the runtime orders its copies
// on the same stream and synchronizes it before the host reads anything. Once per run in
// which a segment ran, after that synchronization, the runtime calls finish() on its handle
// to collect errors only finished work can reveal. A backend called directly with a null
// stream for a device that has streams chooses its own and finishes before returning.
//
// Ownership: the registry does not own backends. A registered backend must stay alive
// until it is unregistered and every Method that initialized a segment with it is gone.
// init() may keep pointers into the blob, the constants and the init context's spans only
// for its own call; the blob and constant bytes themselves outlive the handle (they belong
// to the Program, which every Method keeps alive).
// Thread safety:
// - The registry functions may be called from any thread (one lock guards the table;
//   register_backend_once checks and registers as one step). get_backend()'s pointer is
//   valid while that backend stays registered and alive.
// - What a backend must allow: methods load, run and are destroyed on any threads at once,
//   so init() and destroy() may be called concurrently with each other and with execute()
//   and finish() on other handles, and set_option()/get_option() concurrently with all of
//   them: a backend guards its own process-wide state. One handle is used by one run at a
//   time: the runtime never calls execute() or finish() on one handle from two threads at
//   once (a handle belongs to one Method, whose lock serializes its runs), nor destroy()
//   while it runs. Successive runs may come from different threads, so a handle must not
//   rely on the thread that created it (no thread-local state per handle).
// Errors: init/execute return Status with the backend's message; the runtime adds the
// method, segment and instruction.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planrt/core/device.h"
#include "planrt/core/result.h"
#include "planrt/core/tensor_view.h"
#include "planrt/runtime/tensor_spec.h"

namespace planrt {

struct BackendOption {
  std::string key;
  std::string value;
  friend bool operator==(const BackendOption&, const BackendOption&) = default;
};

// Load-time options: backend name -> key/value list, handed to that backend's init().
using BackendOptions = std::map<std::string, std::vector<BackendOption>, std::less<>>;

// A program constant (weight) as a backend sees it: host bytes, mapped from the file.
struct ConstantRef {
  std::string_view name;
  DType dtype = DType::F32;
  Shape shape;
  std::span<const uint8_t> data;
};

struct BackendInitContext {
  Device device;                          // the segment's device
  std::string_view method_name;
  std::string_view segment_name;
  std::span<const DimSpec> dims;          // the method's named dims (graph shapes refer to them)
  std::span<const BackendOption> options; // load-time options given for this backend
  uint32_t num_constants = 0;
  // The program's constant `index`; OutOfRange past num_constants.
  std::function<Result<ConstantRef>(uint32_t index)> constant;
};

// Opaque per-segment state, defined by each backend.
using BackendHandle = void*;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Result<BackendHandle> init(std::span<const uint8_t> blob,
                                     std::span<const BackendOption> compile_specs,
                                     const BackendInitContext& context) = 0;
  virtual Status execute(BackendHandle handle, std::span<const TensorView> inputs,
                         std::span<const TensorView> outputs, void* stream) = 0;
  virtual void destroy(BackendHandle handle) = 0;
  // After the stream of this run's execute calls was synchronized (see above); the default
  // has nothing to report.
  virtual Status finish(BackendHandle handle);

  // Process-wide options; the default backend has none.
  virtual Status set_option(std::string_view key, std::string_view value);
  virtual Result<std::string> get_option(std::string_view key) const;
};

// InvalidArgument for an empty name, a null backend or a name already registered.
Status register_backend(std::string name, Backend* backend);
// For a backend's own register function: ok when `backend` itself is already registered
// as `name` (so registering twice is harmless), InvalidArgument naming `name` when another
// backend holds it, else register_backend. Atomic with respect to other calls of it.
Status register_backend_once(std::string name, Backend* backend);
// NotFound when nothing is registered under `name`.
Status unregister_backend(std::string_view name);
// nullptr when nothing is registered under `name`.
Backend* get_backend(std::string_view name);
std::vector<std::string> registered_backends();
// The process-wide option of a registered backend (Backend::set_option): NotFound when
// nothing is registered under `name`, else the backend's answer.
Status set_backend_option(std::string_view name, std::string_view key, std::string_view value);

}  // namespace planrt
