// planrt run FILE.prog [--method NAME] [--input NAME=PATH.npy ...] [--random-inputs SEED]
//                      [--dim NAME=VALUE ...] [--iterations N] [--warmup N]
//                      [--output-dir DIR] [--backend-option BACKEND.KEY=VALUE ...]
//                      [--synchronize-each-step] [--json]
//
// Each step below fills its part of a RunReport (run_report.h); the text and --json
// printers read only that report.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "format/npy.h"
#include "planrt/backends/engine.h"
#include "planrt/importers/onnx.h"
#include "planrt/runtime/program.h"
#ifdef PLANRT_HAVE_CUDA
#include "planrt/backends/cuda.h"
#include "planrt/backends/memory_ledger.h"
#include "planrt/platform/cuda.h"
#endif
#include "progress.h"
#include "random_inputs.h"
#include "run_report.h"

namespace planrt::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// "NAME=VALUE" -> {NAME, VALUE}; nullopt when malformed.
std::optional<std::pair<std::string, std::string>> split_assignment(const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) return std::nullopt;
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

// NumPy has no bf16: a bf16 input is read from an f32 .npy and rounded to nearest even (as
// torch's .to(torch.bfloat16)); an f16 input from an f16 .npy, or from an f32 one rounded the
// same way (as .to(torch.float16)); every other input must have the method's dtype (the
// method says so if not).
Result<Tensor> read_npy_tensor(const std::string& path, DType wanted) {
  if (path.ends_with(".pb")) {
    // An ONNX TensorProto (the inputs of ONNX's own tests).
    PLANRT_ASSIGN_OR_RETURN(importers::OnnxTensorFile pb, importers::read_onnx_tensor(path));
    PLANRT_ASSIGN_OR_RETURN(Shape shape, Shape::from(pb.shape));
    return Tensor::from_view(TensorView::contiguous(pb.bytes.data(), pb.dtype, shape));
  }
  PLANRT_ASSIGN_OR_RETURN(format::HostTensor host, format::read_npy(path));
  if ((wanted != DType::BF16 && wanted != DType::F16) || host.dtype != DType::F32) {
    return Tensor::from_view(host.view());
  }
  PLANRT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(wanted, host.shape));
  auto* dst = static_cast<uint16_t*>(t.data());
  const int64_t n = host.shape.numel();
  for (int64_t i = 0; i < n; ++i) {
    float x = 0;
    std::memcpy(&x, host.data.data() + i * sizeof(float), sizeof(float));
    dst[i] = wanted == DType::BF16 ? f32_to_bf16_bits(x) : f32_to_f16_bits(x);
  }
  return t;
}

// A bf16 output is written widened to f32 (exact), for the same reason.
Status write_npy_tensor(const std::string& path, const TensorView& view) {
  format::HostTensor host{view.dtype, view.sizes, {}};
  const auto* bytes = static_cast<const uint8_t*>(view.data);
  if (view.dtype == DType::BF16) {
    host.dtype = DType::F32;
    host.data.resize(static_cast<size_t>(view.numel()) * sizeof(float));
    for (int64_t i = 0; i < view.numel(); ++i) {
      uint16_t bits = 0;
      std::memcpy(&bits, bytes + i * sizeof(bits), sizeof(bits));
      const float x = bf16_bits_to_f32(bits);
      std::memcpy(host.data.data() + i * sizeof(float), &x, sizeof(float));
    }
  } else {
    host.data.assign(bytes, bytes + view.nbytes());
  }
  return format::write_npy(path, host);
}

// An output's file name under --output-dir. Names come from the program file, which is
// untrusted: a name that is empty, "." or "..", or holds a path separator or NUL, must not
// choose where the file goes.
Result<std::string> output_file_name(const std::string& name) {
  bool bad = name.empty() || name == "." || name == ".." ||
             name.find_first_of(std::string_view("/\\\0", 3)) != std::string::npos;
  if (bad) {
    return make_error(ErrorCode::InvalidArgument,
                      "output name '{}' cannot be used as a file name under --output-dir", name);
  }
  return name + ".npy";
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Min, max and mean of an output; none for an empty one.
std::optional<OutputStats> stats_of(const TensorView& v) {
  int64_t n = v.numel();
  if (n == 0) return std::nullopt;
  auto read = [&](int64_t i) -> double {
    switch (v.dtype) {
      case DType::F32: return static_cast<const float*>(v.data)[i];
      case DType::I32: return static_cast<const int32_t*>(v.data)[i];
      case DType::I64: return static_cast<double>(static_cast<const int64_t*>(v.data)[i]);
      case DType::BF16: return bf16_bits_to_f32(static_cast<const uint16_t*>(v.data)[i]);
      case DType::F16: return f16_bits_to_f32(static_cast<const uint16_t*>(v.data)[i]);
      case DType::U8: return static_cast<const uint8_t*>(v.data)[i];
      case DType::Bool: return static_cast<const uint8_t*>(v.data)[i] != 0 ? 1.0 : 0.0;
      default: return NAN;
    }
  };
  OutputStats s;
  s.min = s.max = read(0);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    double x = read(i);
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
    sum += x;
  }
  s.mean = sum / static_cast<double>(n);
  return s;
}

// ---- flags ----

// What the flags say, once their shape is checked.
struct RunFlags {
  std::map<std::string, std::string> input_paths;  // input name -> .npy path
  std::map<std::string, int64_t> dim_values;
  LoadMethodOptions load_options;
};

// "NAME=INTEGER" -> {NAME, INTEGER}; nullopt when malformed.
std::optional<std::pair<std::string, int64_t>> split_dim_assignment(const std::string& text) {
  auto kv = split_assignment(text);
  if (!kv) return std::nullopt;
  int64_t value = 0;
  const std::string& v = kv->second;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
  if (ec != std::errc() || ptr != v.data() + v.size()) return std::nullopt;
  return std::make_pair(kv->first, value);
}

// "BACKEND.KEY=VALUE" into the load options; false when malformed.
bool add_backend_option(const std::string& spec, BackendOptions& options) {
  auto kv = split_assignment(spec);
  if (!kv) return false;
  size_t dot = kv->first.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == kv->first.size()) return false;
  options[kv->first.substr(0, dot)].push_back({kv->first.substr(dot + 1), kv->second});
  return true;
}

// Reads no file: malformed flags are usage errors before any file is read. Returns
// kExitOk, or the exit code of the error it reported.
int parse_run_flags(const RunArgs& args, RunFlags& flags) {
  for (const std::string& spec : args.inputs) {
    auto kv = split_assignment(spec);
    if (!kv) return report_usage_error(fmt::format("--input '{}' must be NAME=PATH.npy", spec));
    flags.input_paths[kv->first] = kv->second;
  }
  for (const std::string& spec : args.dims) {
    auto dim = split_dim_assignment(spec);
    if (!dim) return report_usage_error(fmt::format("--dim '{}' must be NAME=INTEGER", spec));
    flags.dim_values[dim->first] = dim->second;
  }
  flags.load_options.synchronize_each_step = args.synchronize_each_step;
  flags.load_options.profile_steps = args.profile;
  for (const std::string& spec : args.backend_options) {
    if (!add_backend_option(spec, flags.load_options.backend_options)) {
      return report_usage_error(
          fmt::format("--backend-option '{}' must be BACKEND.KEY=VALUE (e.g. cuda.allow_tf32=true)", spec));
    }
  }
  return kExitOk;
}

// Every --input and --dim must name something the method has. Returns kExitOk, or the
// exit code of the error it reported.
int check_flags_against_method(const RunFlags& flags, const MethodMeta& meta) {
  for (const auto& [name, path] : flags.input_paths) {
    bool known = std::any_of(meta.inputs.begin(), meta.inputs.end(),
                             [&](const TensorSpec& s) { return s.name == name; });
    if (!known) {
      return report_usage_error(fmt::format("--input {}: method '{}' has no input '{}'", name,
                                            meta.name, name));
    }
  }
  for (const auto& [name, value] : flags.dim_values) {
    auto dim = std::find_if(meta.dims.begin(), meta.dims.end(),
                            [&](const DimSpec& d) { return d.name == name; });
    if (dim == meta.dims.end()) {
      return report_usage_error(fmt::format("--dim {}: method '{}' has no dim '{}'", name,
                                            meta.name, name));
    }
    // Checked here, before random inputs of that size are allocated.
    if (value < dim->min || value > dim->max) {
      return report_error(make_error(ErrorCode::OutOfRange,
                                     "--dim {}={} is outside the bounds [{}, {}] of method '{}'",
                                     name, value, dim->min, dim->max, meta.name));
    }
  }
  return kExitOk;
}

// ---- opening the program ----

Result<std::string> pick_method(const Program& program, const std::string& requested) {
  if (!requested.empty()) return requested;  // load_method names what exists if it doesn't
  std::vector<std::string> names = program.method_names();
  if (program.has_method("forward")) return std::string("forward");
  if (names.size() == 1) return names.front();
  return make_error(ErrorCode::InvalidArgument,
                    "the program has several methods ({}) and none is 'forward': choose one with --method",
                    fmt::join(names, ", "));
}

// The program and what its chosen method declares; the method itself is loaded later,
// after the inputs are made, so that the load can be timed and measured on its own.
struct OpenedProgram {
  Program program;
  MethodMeta meta;
};

Result<OpenedProgram> open_program(const RunArgs& args) {
#ifdef PLANRT_HAVE_CUDA
  // CUDA methods need the cuda backend and allocator; on a machine without a GPU this
  // still registers, and loading a CUDA method then says the device is missing.
  PLANRT_RETURN_IF_ERROR(register_cuda_backend());
#endif
  PLANRT_RETURN_IF_ERROR(register_engine_backend());
  PLANRT_ASSIGN_OR_RETURN(Program program, Program::load(args.program));
  PLANRT_ASSIGN_OR_RETURN(std::string method_name, pick_method(program, args.method));
  PLANRT_ASSIGN_OR_RETURN(MethodMeta meta, program.method_meta(method_name));
  return OpenedProgram{std::move(program), std::move(meta)};
}

// ---- inputs ----

// Inputs in the method's order: from .npy files, else random (dims from --dim, else each
// dim's maximum); `reports` says what each is and where it came from. Returns kExitOk, or
// the exit code of the error it reported.
int make_inputs(const RunArgs& args, const RunFlags& flags, const MethodMeta& meta,
                std::vector<Tensor>& inputs, std::vector<InputReport>& reports) {
  for (size_t i = 0; i < meta.inputs.size(); ++i) {
    const TensorSpec& spec = meta.inputs[i];
    Result<Tensor> t = Status(ErrorCode::Internal, "no input");
    std::string source;
    if (auto it = flags.input_paths.find(spec.name); it != flags.input_paths.end()) {
      t = read_npy_tensor(it->second, spec.dtype);
      source = it->second;
    } else if (args.random_inputs_seed) {
      t = random_input(spec, meta.dims, flags.dim_values, *args.random_inputs_seed + i);
      source = fmt::format("random:{}", *args.random_inputs_seed);
    } else {
      return report_usage_error(fmt::format(
          "input '{}' not given: pass --input {}=PATH.npy or --random-inputs SEED", spec.name,
          spec.name));
    }
    if (!t.ok()) return report_error(t.status().with_context(fmt::format("input '{}'", spec.name)));
    std::span<const int64_t> dims = t->shape().dims();
    reports.push_back({spec.name, t->dtype(), {dims.begin(), dims.end()}, source});
    inputs.push_back(std::move(t).value());
  }
  return kExitOk;
}

// ---- memory: what the plan says, then what is measured ----

// What the plan says per device (arenas, weights); the measured figures come later.
std::vector<DeviceMemory> planned_memory(const MethodMeta& meta) {
  std::map<Device, DeviceMemory> by_device;
  for (uint32_t i = 0; i < meta.planned_buffers.size(); ++i) {
    const PlannedBufferInfo& b = meta.planned_buffers[i];
    DeviceMemory& d = by_device[b.device];
    d.device = b.device;
    d.arenas.push_back({i, b.size_bytes});
    d.planned_bytes += b.size_bytes;
  }
  for (const MemoryEstimate& e : meta.memory) {
    by_device[e.device].device = e.device;
    by_device[e.device].weights_bytes = e.weights_bytes;
  }
  std::vector<DeviceMemory> out;
  for (auto& [device, d] : by_device) out.push_back(std::move(d));
  return out;
}

void read_scratch_stats(std::vector<DeviceMemory>& memory) {
  for (DeviceMemory& d : memory) {
    Result<EngineScratchStats> s = engine_scratch_stats(d.device);
    if (!s.ok()) continue;
    d.scratch.stats = *s;
    d.scratch.known = s->pooled_contexts + s->private_contexts > 0 || s->pool_high_water_bytes > 0;
  }
}

#ifdef PLANRT_HAVE_CUDA
// Device-used bytes of every CUDA device in `memory`; `field` selects the figure to fill.
void read_device_used(std::vector<DeviceMemory>& memory, uint64_t DeviceFigures::*field) {
  for (DeviceMemory& d : memory) {
    if (d.device.type != DeviceType::CUDA) continue;
    Result<CudaDeviceMemory> m = cuda_device_memory(d.device);
    if (!m.ok()) continue;  // no GPU: loading already said so
    d.figures.known = true;
    d.figures.total = m->total_bytes;
    d.figures.*field = m->used_bytes();
  }
}

// The ledger after the runs, against the device's use before the load.
void read_ledger(std::vector<DeviceMemory>& memory) {
  for (DeviceMemory& d : memory) {
    if (d.device.type != DeviceType::CUDA || !d.figures.known) continue;
    Result<DeviceMemoryLedger> l = device_memory_ledger(d.device, d.figures.used_before_load);
    if (!l.ok()) continue;
    d.ledger.known = true;
    for (const DeviceMemoryLine& line : l->lines) d.ledger.lines.push_back({line.name, line.bytes, line.detail});
    d.ledger.measured_bytes = l->measured_bytes();
    d.ledger.named_bytes = l->named_bytes();
    d.ledger.remainder_bytes = l->remainder_bytes();
  }
}

void read_pool_stats(std::vector<DeviceMemory>& memory) {
  for (DeviceMemory& d : memory) {
    if (d.device.type != DeviceType::CUDA) continue;
    Result<CudaPoolStats> p = cuda_pool_stats(d.device);
    if (!p.ok() || !p->pool_created) continue;
    d.figures.pool_known = true;
    d.figures.pool_reserved = p->reserved_bytes;
    d.figures.pool_reserved_high = p->reserved_high_bytes;
    d.figures.pool_used = p->used_bytes;
    d.figures.pool_used_high = p->used_high_bytes;
    d.figures.pool_allocations = p->allocations;
    d.figures.private_pool = p->private_pool;
  }
}
#endif

// ---- loading the method and timing its runs ----

// Loads the method, timing the load and (CUDA) reading the device's used memory on
// either side of it.
Result<Method> load_measured(const OpenedProgram& opened, const LoadMethodOptions& options,
                             RunReport& report) {
#ifdef PLANRT_HAVE_CUDA
  read_device_used(report.memory, &DeviceFigures::used_before_load);
#endif
  Clock::time_point start = Clock::now();
  Result<Method> method = opened.program.load_method(opened.meta.name, options);
  if (!method.ok()) return method;
  report.load_ms = ms_since(start);
#ifdef PLANRT_HAVE_CUDA
  read_device_used(report.memory, &DeviceFigures::used_after_load);
#endif
  return method;
}

// The warm-up runs, then the timed ones behind a progress bar. It reports a failed run
// itself, while the bar still stands, so the error line comes before the bar's end.
// Returns kExitOk, or the exit code of the error it reported.
int time_runs(Method& method, std::span<const TensorView> inputs, const RunArgs& args,
              LatencyReport& latency, std::vector<StepProfile>& profile_after_warmup) {
  for (int64_t i = 0; i < args.warmup; ++i) {
    Status s = method.run(inputs);
    if (!s.ok()) return report_error(s);
  }
  profile_after_warmup = method.step_profile();
  std::vector<double> times;
  ProgressBar bar("running", static_cast<uint64_t>(args.iterations));
  for (int64_t i = 0; i < args.iterations; ++i) {
    Clock::time_point start = Clock::now();
    Status s = method.run(inputs);
    times.push_back(ms_since(start));
    if (!s.ok()) return report_error(s);
    bar.update(static_cast<uint64_t>(i + 1));
  }
  latency = {percentile(times, 0.5), percentile(times, 0.9), args.iterations, args.warmup, times};
  return kExitOk;
}

// What the runs left behind: the device's used memory and warm pool (CUDA), the run
// counters, the engines' scratch.
void read_after_runs(const Method& method, RunReport& report) {
#ifdef PLANRT_HAVE_CUDA
  read_device_used(report.memory, &DeviceFigures::used_after_run);
  read_pool_stats(report.memory);
  read_ledger(report.memory);
#endif
  report.run_stats = method.run_stats();
  report.profile = method.step_profile();
  for (DeviceMemory& d : report.memory) {
    if (d.device.is_cpu()) d.packed_weights_bytes = method.packed_weight_bytes();
  }
  read_scratch_stats(report.memory);
}

// ---- outputs ----

Status create_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return make_error(ErrorCode::IoError, "cannot create output directory '{}': {}", dir,
                      ec.message());
  }
  return Status();
}

// Writes `view` as DIR/NAME.npy and returns that path. `written` holds the file names
// written so far: two outputs of one name would overwrite each other.
Result<std::string> write_output(const std::string& dir, const std::string& name,
                                 const TensorView& view, std::set<std::string>& written) {
  PLANRT_ASSIGN_OR_RETURN(std::string file_name, output_file_name(name));
  if (!written.insert(file_name).second) {
    return make_error(ErrorCode::InvalidArgument,
                      "two outputs are named '{}': --output-dir cannot hold both", name);
  }
  std::string path = (std::filesystem::path(dir) / file_name).string();
  PLANRT_RETURN_IF_ERROR(write_npy_tensor(path, view));
  return path;
}

// Each output's shape and figures, and with --output-dir its file, in the method's order.
Status summarize_outputs(std::span<const TensorView> outputs, const MethodMeta& meta,
                         const std::string& output_dir, std::vector<OutputReport>& reports) {
  if (!output_dir.empty()) {
    PLANRT_RETURN_IF_ERROR(create_output_dir(output_dir));
  }
  std::set<std::string> written;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorView& v = outputs[i];
    std::span<const int64_t> dims = v.sizes.dims();
    OutputReport o{meta.outputs[i].name, v.dtype, {dims.begin(), dims.end()}, stats_of(v), {}};
    if (!output_dir.empty()) {
      PLANRT_ASSIGN_OR_RETURN(o.path, write_output(output_dir, o.name, v, written));
    }
    reports.push_back(std::move(o));
  }
  return Status();
}

}  // namespace

int run_run(const RunArgs& args) {
  RunFlags flags;
  if (int rc = parse_run_flags(args, flags); rc != kExitOk) return rc;
  Result<OpenedProgram> opened = open_program(args);
  if (!opened.ok()) return report_error(opened.status());
  const MethodMeta& meta = opened->meta;
  if (int rc = check_flags_against_method(flags, meta); rc != kExitOk) return rc;

  RunReport report;
  report.program = args.program;
  report.method = meta.name;
  std::vector<Tensor> inputs;
  if (int rc = make_inputs(args, flags, meta, inputs, report.inputs); rc != kExitOk) return rc;
  std::vector<TensorView> views;
  for (const Tensor& t : inputs) views.push_back(t.view());

  report.memory = planned_memory(meta);
  Result<Method> method = load_measured(*opened, flags.load_options, report);
  if (!method.ok()) return report_error(method.status());
  std::vector<StepProfile> warm_profile;
  if (int rc = time_runs(*method, views, args, report.latency, warm_profile); rc != kExitOk) return rc;
  // Views into the method's planned memory: valid while `method` lives.
  Result<std::vector<TensorView>> outputs = method->outputs();
  if (!outputs.ok()) return report_error(outputs.status());
  read_after_runs(*method, report);
  // The timed runs only: a first run makes the CPU kernels' primitives.
  for (size_t k = 0; k < report.profile.size() && k < warm_profile.size(); ++k) {
    report.profile[k].calls -= warm_profile[k].calls;
    report.profile[k].total_ms -= warm_profile[k].total_ms;
  }
  Status summarized = summarize_outputs(*outputs, meta, args.output_dir, report.outputs);
  if (!summarized.ok()) return report_error(summarized);

  report.shared_host_arenas = method->shares_memory_arenas();
  report.shared_host_arena_bytes = opened->program.shared_host_arena_bytes();
  report.constants_bytes = opened->program.constants_bytes();
  if (args.json) {
    print_json(report);
  } else {
    print_text(report);
  }
  return kExitOk;
}

}  // namespace planrt::cli
