// Fuzz target: program file bytes -> Program::load_bytes -> method_meta and load_method for
// every method -> execute each on the CPU with inputs of the declared shapes, filled with
// zeros and then with garbage. docs/design.md §3: no file, however corrupt, may crash, abort or hang.
//
// Devices: in a build without CUDA a cuda:N planned buffer is served from host memory by
// the test allocator and a "cuda" segment by FuzzDeviceBackend below, so the runtime's
// device path (device arenas, copies on a stream, delegate calls) runs too. Engine
// segments run in the real engine backend, with the CPU kernels.
//
// Limits: the planned memory a fuzzed file may make the loader allocate is capped through
// the API (ProgramLoadOptions, LoadMethodOptions), and inputs above kMaxInputBytes are not
// run, so an out-of-memory or a slow run is a finding only where the library does not
// bound what the file asks for.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/segment_graph.h"
#include "fuzz/fuzz_check.h"
#include "planrt/backends/engine.h"
#include "planrt/runtime/program.h"
#include "support/test_device.h"

namespace planrt::fuzz {
namespace {

// 16 MiB: the seeds plan under 64 KiB; a larger cap only spends each execution zero-filling
// arenas (a 48 MiB one took 0.76 s under ASan, and a starved run counted it a timeout).
constexpr uint64_t kMaxPlannedBytes = uint64_t{16} << 20;
constexpr uint64_t kMaxInputBytes = uint64_t{1} << 20;

// PLANRT_FUZZ_VERBOSE=1 prints why each step refused an input: how to check that a seed
// gets as far as execute (the replayer runs the target the same way).
void note(const Status& status, std::string_view step) {
  static const bool verbose = std::getenv("PLANRT_FUZZ_VERBOSE") != nullptr;
  if (verbose) {
    std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(step.size()), step.data(),
                 status.ok() ? "ok" : status.to_string().c_str());
  }
}

// Stands in for the cuda backend where there is none: init is the library's own check of
// a segment graph (parse_segment_graph, what the cuda and engine backends run first), and
// execute checks each operand against the graph (bind_dims) and zero-fills the outputs,
// so AddressSanitizer sees any operand view the runtime places outside its arena.
class FuzzDeviceBackend final : public Backend {
 public:
  Result<BackendHandle> init(std::span<const uint8_t> blob, std::span<const BackendOption>,
                             const BackendInitContext& context) override {
    PLANRT_ASSIGN_OR_RETURN(SegmentGraph graph, parse_segment_graph(blob, context));
    return static_cast<BackendHandle>(new SegmentGraph(std::move(graph)));
  }

  Status execute(BackendHandle handle, std::span<const TensorView> inputs,
                 std::span<const TensorView> outputs, void* stream) override {
    const auto& graph = *static_cast<const SegmentGraph*>(handle);
    if (inputs.size() != graph.inputs.size() || outputs.size() != graph.outputs.size()) {
      return make_error(ErrorCode::InvalidArgument, "segment '{}': {} inputs and {} outputs, expected {} and {}",
                        graph.name, inputs.size(), outputs.size(), graph.inputs.size(),
                        graph.outputs.size());
    }
    std::vector<int64_t> bound(graph.dims.size(), -1);
    auto bind = [&](std::span<const TensorView> views, std::span<const uint32_t> ids) -> Status {
      for (size_t i = 0; i < views.size(); ++i) {
        PLANRT_RETURN_IF_ERROR(
            bind_dims(graph.values[ids[i]].shape, views[i].sizes, graph.dims, "operand", bound));
      }
      return {};
    };
    PLANRT_RETURN_IF_ERROR(bind(inputs, graph.inputs));
    PLANRT_RETURN_IF_ERROR(bind(outputs, graph.outputs));
    std::vector<TensorView> targets(outputs.begin(), outputs.end());
    auto zero_fill = [targets] {
      for (const TensorView& v : targets) {
        if (v.data != nullptr) std::memset(v.data, 0, v.nbytes());
      }
    };
    // The test allocator's streams run their work when synchronized, as a device would.
    if (stream != nullptr) {
      static_cast<testing::TestStream*>(stream)->enqueue(zero_fill);
    } else {
      zero_fill();
    }
    return {};
  }

  void destroy(BackendHandle handle) override { delete static_cast<SegmentGraph*>(handle); }
};

void register_backends() {
  require(register_engine_backend().ok(), "the engine backend registers");
#ifndef PLANRT_HAVE_CUDA
  // Process lifetime: every Method of every input is gone before exit.
  static testing::ScopedTestAllocator device_memory(DeviceType::CUDA);
  static FuzzDeviceBackend device_backend;
  require(device_memory.status().ok(), "the test allocator registers for cuda");
  require(register_backend("cuda", &device_backend).ok(), "the stand-in cuda backend registers");
#endif
}

// Every input of `meta` at dims `bound`, each filled with `fill`; false when a shape cannot
// be made or the inputs would exceed kMaxInputBytes.
bool make_inputs(const MethodMeta& meta, std::span<const int64_t> bound, uint8_t fill,
                 std::vector<std::vector<uint8_t>>& storage, std::vector<TensorView>& views) {
  uint64_t total = 0;
  for (const TensorSpec& spec : meta.inputs) {
    Result<Shape> shape = concrete_shape(spec.shape, bound, meta.dims);
    if (!shape.ok()) return false;
    uint64_t bytes = element_size(spec.dtype);
    for (int64_t d : shape->dims()) {
      if (d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) return false;
    }
    total += bytes;
    if (bytes > kMaxInputBytes || total > kMaxInputBytes) return false;
    storage.emplace_back(bytes, fill);
    views.push_back(TensorView::contiguous(storage.back().data(), spec.dtype, *shape));
  }
  return true;
}

void execute_with(Method& method, std::span<const int64_t> bound, uint8_t fill) {
  const MethodMeta& meta = method.meta();
  std::vector<std::vector<uint8_t>> storage;
  storage.reserve(meta.inputs.size());  // views point into it
  std::vector<TensorView> inputs;
  if (!make_inputs(meta, bound, fill, storage, inputs)) return;
  Result<std::vector<Tensor>> outputs = method.execute(inputs);
  note(outputs.status(), "execute " + method.name());
  if (!outputs.ok()) return;
  require(outputs->size() == meta.outputs.size(), "execute returns one tensor per declared output");
  for (size_t i = 0; i < outputs->size(); ++i) {
    require((*outputs)[i].dtype() == meta.outputs[i].dtype, "an output has its declared dtype");
  }
}

// Zeros at every dim's minimum, then garbage (all bits set: NaNs, index -1) one above it,
// then another garbage (0x41: large positive indices) at the minimum.
void execute_method(Method& method) {
  const MethodMeta& meta = method.meta();
  std::vector<int64_t> lowest;
  std::vector<int64_t> above_lowest;
  for (const DimSpec& d : meta.dims) {
    lowest.push_back(d.min);
    above_lowest.push_back(d.min < d.max ? d.min + 1 : d.min);
  }
  execute_with(method, lowest, 0x00);
  execute_with(method, above_lowest, 0xFF);
  execute_with(method, lowest, 0x41);
}

}  // namespace
}  // namespace planrt::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace planrt;
  static const bool registered = (fuzz::register_backends(), true);
  (void)registered;

  ProgramLoadOptions load_options;
  load_options.max_planned_buffer_bytes = fuzz::kMaxPlannedBytes;
  // External weights resolve against tests/fuzz/data, which holds the weights file of the
  // seed built with --external-weights (external.safetensors).
  Result<Program> program = Program::load_bytes(std::vector<uint8_t>(data, data + size),
                                                load_options, PLANRT_FUZZ_DATA_DIR);
  fuzz::note(program.status(), "load");
  if (!program.ok()) return 0;
  (void)program->constants_bytes();
  (void)program->shared_host_arena_bytes();

  LoadMethodOptions method_options;
  method_options.max_planned_bytes_per_device = fuzz::kMaxPlannedBytes;
  // Loaded together, so host methods share their arenas as they do in a server.
  std::vector<Method> methods;
  for (const std::string& name : program->method_names()) {
    Result<MethodMeta> meta = program->method_meta(name);
    fuzz::require(meta.ok(), "a method of a verified program answers method_meta");
    Result<Method> method = program->load_method(name, method_options);
    fuzz::note(method.status(), "load_method " + name);
    if (method.ok()) methods.push_back(std::move(method).value());
  }
  for (Method& method : methods) fuzz::execute_method(method);
  return 0;
}
