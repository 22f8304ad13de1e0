// planrt run FILE.prog [--method NAME] [--input NAME=PATH.npy ...] [--random-inputs SEED]
//                      [--dim NAME=VALUE ...] [--iterations N] [--warmup N]
//                      [--output-dir DIR] [--backend-option BACKEND.KEY=VALUE ...]
//                      [--synchronize-each-step] [--json]
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "format_bytes.h"
#include "format/npy.h"
#include "planrt/backends/engine.h"
#include "planrt/runtime/program.h"
#ifdef PLANRT_HAVE_CUDA
#include "planrt/backends/cuda.h"
#include "planrt/platform/cuda.h"
#endif
#include "progress.h"
#include "random_inputs.h"

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
// torch's .to(torch.bfloat16)); every other input must have the method's dtype (the method
// says so if not).
Result<Tensor> read_npy_tensor(const std::string& path, DType wanted) {
  PLANRT_ASSIGN_OR_RETURN(format::HostTensor host, format::read_npy(path));
  if (wanted != DType::BF16 || host.dtype != DType::F32) return Tensor::from_view(host.view());
  PLANRT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(DType::BF16, host.shape));
  auto* dst = static_cast<uint16_t*>(t.data());
  const int64_t n = host.shape.numel();
  for (int64_t i = 0; i < n; ++i) {
    float x = 0;
    std::memcpy(&x, host.data.data() + i * sizeof(float), sizeof(float));
    dst[i] = f32_to_bf16_bits(x);
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

struct OutputStats {
  double min = 0, max = 0, mean = 0;
  bool has_stats = false;
};

OutputStats stats_of(const TensorView& v) {
  OutputStats s;
  int64_t n = v.numel();
  if (n == 0) return s;
  auto read = [&](int64_t i) -> double {
    switch (v.dtype) {
      case DType::F32: return static_cast<const float*>(v.data)[i];
      case DType::I32: return static_cast<const int32_t*>(v.data)[i];
      case DType::I64: return static_cast<double>(static_cast<const int64_t*>(v.data)[i]);
      case DType::BF16: return bf16_bits_to_f32(static_cast<const uint16_t*>(v.data)[i]);
      default: return NAN;
    }
  };
  if (v.dtype == DType::F16) return s;
  s.has_stats = true;
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

Result<std::string> pick_method(const Program& program, const std::string& requested) {
  if (!requested.empty()) return requested;  // load_method names what exists if it doesn't
  std::vector<std::string> names = program.method_names();
  if (program.has_method("forward")) return std::string("forward");
  if (names.size() == 1) return names.front();
  return make_error(ErrorCode::InvalidArgument,
                    "the program has several methods ({}) and none is 'forward': choose one with --method",
                    fmt::join(names, ", "));
}

// What the device itself says (cudaMemGetInfo) and the warm pool's figures; CUDA only.
struct DeviceFigures {
  bool known = false;
  uint64_t used_before_load = 0, used_after_load = 0, used_after_run = 0, total = 0;
  bool pool_known = false;
  uint64_t pool_reserved = 0, pool_reserved_high = 0, pool_used = 0, pool_used_high = 0;
  int64_t pool_allocations = 0;
  bool private_pool = true;
};

// The engine backend's scratch on a device: private contexts, the shared pool.
struct ScratchFigures {
  bool known = false;
  EngineScratchStats stats;
};

struct DeviceMemory {
  Device device;
  ScratchFigures scratch;
  std::vector<std::pair<uint32_t, uint64_t>> arenas;  // buffer index, bytes
  uint64_t planned_bytes = 0;
  uint64_t weights_bytes = 0;
  DeviceFigures figures;
};

// "BACKEND.KEY=VALUE" into the load options; false when malformed.
bool add_backend_option(const std::string& spec, BackendOptions& options) {
  auto kv = split_assignment(spec);
  if (!kv) return false;
  size_t dot = kv->first.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == kv->first.size()) return false;
  options[kv->first.substr(0, dot)].push_back({kv->first.substr(dot + 1), kv->second});
  return true;
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

std::vector<DeviceMemory> memory_report(const MethodMeta& meta) {
  std::map<Device, DeviceMemory> by_device;
  for (uint32_t i = 0; i < meta.planned_buffers.size(); ++i) {
    const PlannedBufferInfo& b = meta.planned_buffers[i];
    DeviceMemory& d = by_device[b.device];
    d.device = b.device;
    d.arenas.emplace_back(i, b.size_bytes);
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

}  // namespace

int run_run(const RunArgs& args) {
  // Command-line shape first: malformed flags are usage errors before any file is read.
  std::map<std::string, std::string> input_paths;
  for (const std::string& spec : args.inputs) {
    auto kv = split_assignment(spec);
    if (!kv) return report_usage_error(fmt::format("--input '{}' must be NAME=PATH.npy", spec));
    input_paths[kv->first] = kv->second;
  }
  std::map<std::string, int64_t> dim_values;
  for (const std::string& spec : args.dims) {
    auto kv = split_assignment(spec);
    int64_t value = 0;
    if (kv) {
      const std::string& v = kv->second;
      auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
      if (ec != std::errc() || ptr != v.data() + v.size()) kv.reset();
    }
    if (!kv) return report_usage_error(fmt::format("--dim '{}' must be NAME=INTEGER", spec));
    dim_values[kv->first] = value;
  }
  LoadMethodOptions load_options;
  load_options.synchronize_each_step = args.synchronize_each_step;
  for (const std::string& spec : args.backend_options) {
    if (!add_backend_option(spec, load_options.backend_options)) {
      return report_usage_error(
          fmt::format("--backend-option '{}' must be BACKEND.KEY=VALUE (e.g. cuda.allow_tf32=true)", spec));
    }
  }

#ifdef PLANRT_HAVE_CUDA
  // CUDA methods need the cuda backend and allocator; on a machine without a GPU this
  // still registers, and loading a CUDA method then says the device is missing.
  if (Status s = register_cuda_backend(); !s.ok()) return report_error(s);
#endif
  if (Status s = register_engine_backend(); !s.ok()) return report_error(s);
  Result<Program> program = Program::load(args.program);
  if (!program.ok()) return report_error(program.status());
  Result<std::string> method_name = pick_method(*program, args.method);
  if (!method_name.ok()) return report_error(method_name.status());
  Result<MethodMeta> meta = program->method_meta(*method_name);
  if (!meta.ok()) return report_error(meta.status());

  for (const auto& [name, path] : input_paths) {
    bool known = std::any_of(meta->inputs.begin(), meta->inputs.end(),
                             [&](const TensorSpec& s) { return s.name == name; });
    if (!known) {
      return report_usage_error(fmt::format("--input {}: method '{}' has no input '{}'", name,
                                            meta->name, name));
    }
  }
  for (const auto& [name, value] : dim_values) {
    auto dim = std::find_if(meta->dims.begin(), meta->dims.end(),
                            [&](const DimSpec& d) { return d.name == name; });
    if (dim == meta->dims.end()) {
      return report_usage_error(fmt::format("--dim {}: method '{}' has no dim '{}'", name,
                                            meta->name, name));
    }
    // Checked here, before random inputs of that size are allocated.
    if (value < dim->min || value > dim->max) {
      return report_error(make_error(ErrorCode::OutOfRange,
                                     "--dim {}={} is outside the bounds [{}, {}] of method '{}'",
                                     name, value, dim->min, dim->max, meta->name));
    }
  }

  // Inputs: from .npy files, else random (dims from --dim, else each dim's maximum).
  std::vector<Tensor> inputs;
  nlohmann::json inputs_json = nlohmann::json::array();
  for (size_t i = 0; i < meta->inputs.size(); ++i) {
    const TensorSpec& spec = meta->inputs[i];
    Result<Tensor> t = Status(ErrorCode::Internal, "no input");
    std::string source;
    if (auto it = input_paths.find(spec.name); it != input_paths.end()) {
      t = read_npy_tensor(it->second, spec.dtype);
      source = it->second;
    } else if (args.random_inputs_seed) {
      t = random_input(spec, meta->dims, dim_values, *args.random_inputs_seed + i);
      source = fmt::format("random:{}", *args.random_inputs_seed);
    } else {
      return report_usage_error(fmt::format(
          "input '{}' not given: pass --input {}=PATH.npy or --random-inputs SEED", spec.name,
          spec.name));
    }
    if (!t.ok()) return report_error(t.status().with_context(fmt::format("input '{}'", spec.name)));
    inputs_json.push_back({{"name", spec.name},
                           {"dtype", dtype_name(t->dtype())},
                           {"shape", t->shape().dims()},
                           {"source", source}});
    inputs.push_back(std::move(t).value());
  }
  std::vector<TensorView> views;
  for (const Tensor& t : inputs) views.push_back(t.view());

  std::vector<DeviceMemory> memory = memory_report(*meta);
#ifdef PLANRT_HAVE_CUDA
  read_device_used(memory, &DeviceFigures::used_before_load);
#endif
  Clock::time_point load_start = Clock::now();
  Result<Method> method = program->load_method(*method_name, load_options);
  if (!method.ok()) return report_error(method.status());
  double load_ms = ms_since(load_start);
#ifdef PLANRT_HAVE_CUDA
  read_device_used(memory, &DeviceFigures::used_after_load);
#endif

  for (int64_t i = 0; i < args.warmup; ++i) {
    Status s = method->run(views);
    if (!s.ok()) return report_error(s);
  }
  std::vector<double> times;
  {
    ProgressBar bar("running", static_cast<uint64_t>(args.iterations));
    for (int64_t i = 0; i < args.iterations; ++i) {
      Clock::time_point start = Clock::now();
      Status s = method->run(views);
      times.push_back(ms_since(start));
      if (!s.ok()) return report_error(s);
      bar.update(static_cast<uint64_t>(i + 1));
    }
  }
  Result<std::vector<TensorView>> outputs = method->outputs();
  if (!outputs.ok()) return report_error(outputs.status());
#ifdef PLANRT_HAVE_CUDA
  read_device_used(memory, &DeviceFigures::used_after_run);
  read_pool_stats(memory);
#endif
  MethodRunStats run_stats = method->run_stats();
  read_scratch_stats(memory);

  if (!args.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.output_dir, ec);
    if (ec) {
      return report_error(make_error(ErrorCode::IoError, "cannot create output directory '{}': {}",
                                     args.output_dir, ec.message()));
    }
  }
  nlohmann::json outputs_json = nlohmann::json::array();
  std::set<std::string> written;
  for (size_t i = 0; i < outputs->size(); ++i) {
    const TensorView& v = (*outputs)[i];
    const std::string& name = meta->outputs[i].name;
    OutputStats st = stats_of(v);
    nlohmann::json o = {{"name", name}, {"dtype", dtype_name(v.dtype)}, {"shape", v.sizes.dims()}};
    if (st.has_stats) {
      o["min"] = st.min;
      o["max"] = st.max;
      o["mean"] = st.mean;
    }
    if (!args.output_dir.empty()) {
      Result<std::string> file_name = output_file_name(name);
      if (!file_name.ok()) return report_error(file_name.status());
      if (!written.insert(*file_name).second) {
        return report_error(make_error(ErrorCode::InvalidArgument,
                                       "two outputs are named '{}': --output-dir cannot hold both",
                                       name));
      }
      std::string path = (std::filesystem::path(args.output_dir) / *file_name).string();
      Status s = write_npy_tensor(path, v);
      if (!s.ok()) return report_error(s);
      o["path"] = path;
    }
    outputs_json.push_back(std::move(o));
  }

  double median = percentile(times, 0.5), p90 = percentile(times, 0.9);
  bool shared = method->shares_memory_arenas();

  if (args.json) {
    nlohmann::json devices = nlohmann::json::array();
    for (const DeviceMemory& d : memory) {
      nlohmann::json arenas = nlohmann::json::array();
      for (auto [index, bytes] : d.arenas) {
        arenas.push_back({{"index", index}, {"size_bytes", bytes},
                          {"shared", d.device.is_cpu() && shared}});
      }
      nlohmann::json dj = {{"device", to_string(d.device)},
                           {"planned_bytes", d.planned_bytes},
                           {"weights_bytes", d.weights_bytes},
                           {"total_bytes", d.planned_bytes + d.weights_bytes},
                           {"arenas", arenas}};
      const DeviceFigures& f = d.figures;
      if (f.known) {
        dj["device_total_bytes"] = f.total;
        dj["device_used_before_load_bytes"] = f.used_before_load;
        dj["device_used_after_load_bytes"] = f.used_after_load;
        dj["device_used_after_run_bytes"] = f.used_after_run;
      }
      if (f.pool_known) {
        dj["pool"] = {{"private", f.private_pool},
                      {"reserved_bytes", f.pool_reserved},
                      {"reserved_high_bytes", f.pool_reserved_high},
                      {"used_bytes", f.pool_used},
                      {"used_high_bytes", f.pool_used_high},
                      {"allocations", f.pool_allocations}};
      }
      const EngineScratchStats& es = d.scratch.stats;
      dj["scratch_private_bytes"] = es.private_scratch_bytes;
      dj["scratch_pool_capacity_bytes"] = es.pool_capacity_bytes;
      dj["scratch_pool_high_water_bytes"] = es.pool_high_water_bytes;
      nlohmann::json contexts = nlohmann::json::array();
      for (const EngineContextInfo& c : es.contexts) {
        contexts.push_back({{"method", c.method}, {"segment", c.segment}, {"pooled", c.pooled},
                            {"scratch_bytes", c.scratch_bytes}});
      }
      dj["scratch"] = {{"contexts", contexts},
                       {"private_contexts", es.private_contexts},
                       {"pooled_contexts", es.pooled_contexts},
                       {"pool_growths", es.pool_growths},
                       {"pooled_private_equivalent_bytes", es.pooled_private_equivalent_bytes},
                       {"pooled_runs", es.pooled_runs}};
      devices.push_back(std::move(dj));
    }
    nlohmann::json j = {
        {"program", args.program},
        {"method", meta->name},
        {"inputs", inputs_json},
        {"outputs", outputs_json},
        {"load_ms", load_ms},
        {"latency_ms",
         {{"median", median}, {"p90", p90}, {"iterations", args.iterations}, {"warmup", args.warmup}}},
        {"streams", run_stats.streams},
        {"synchronizations_per_run", run_stats.last_run_synchronizations},
        {"memory",
         {{"devices", devices},
          {"shared_host_arenas", shared},
          {"shared_host_arena_bytes", program->shared_host_arena_bytes()},
          {"constants_bytes", program->constants_bytes()}}}};
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }

  fmt::print("method {} of {} (loaded in {:.2f} ms)\n", meta->name, args.program, load_ms);
  for (const nlohmann::json& in : inputs_json) {
    fmt::print("  input  {} {} {} ({})\n", in["name"].get<std::string>(),
               in["dtype"].get<std::string>(), in["shape"].dump(),
               in["source"].get<std::string>());
  }
  for (const nlohmann::json& o : outputs_json) {
    fmt::print("  output {} {} {}", o["name"].get<std::string>(), o["dtype"].get<std::string>(),
               o["shape"].dump());
    if (o.contains("mean")) {
      fmt::print("  min {:.6g}  max {:.6g}  mean {:.6g}", o["min"].get<double>(),
                 o["max"].get<double>(), o["mean"].get<double>());
    }
    if (o.contains("path")) fmt::print("  -> {}", o["path"].get<std::string>());
    fmt::print("\n");
  }
  fmt::print("latency over {} iterations ({} warm-up): median {:.3f} ms, p90 {:.3f} ms\n",
             args.iterations, args.warmup, median, p90);
  if (run_stats.streams > 0) {
    fmt::print("device work on {} stream(s); the host waited {} time(s) per run\n", run_stats.streams,
               run_stats.last_run_synchronizations);
  }
  fmt::print("memory\n");
  uint64_t total = 0;
  for (const DeviceMemory& d : memory) {
    fmt::print("  {:<7} weights {:>12}  planned {:>12}\n", to_string(d.device),
               format_bytes(d.weights_bytes), format_bytes(d.planned_bytes));
    for (auto [index, bytes] : d.arenas) {
      fmt::print("          arena #{:<3} {:>12}  {}\n", index, format_bytes(bytes),
                 d.device.is_cpu() && shared ? "shared with the program's other host methods"
                                             : "own");
    }
    if (d.scratch.known) {
      const EngineScratchStats& es = d.scratch.stats;
      fmt::print("          engine scratch: {} private context(s) hold {}; {} pooled context(s) share "
                 "{} (high-water {}, {} growth(s)) where private scratch would cost {}\n",
                 es.private_contexts, format_bytes(es.private_scratch_bytes), es.pooled_contexts,
                 format_bytes(es.pool_capacity_bytes), format_bytes(es.pool_high_water_bytes),
                 es.pool_growths, format_bytes(es.pooled_private_equivalent_bytes));
      for (const EngineContextInfo& c : es.contexts) {
        fmt::print("            {:<20} {:>12}  {}\n", c.segment, format_bytes(c.scratch_bytes),
                   c.pooled ? "pooled" : "private");
      }
    }
    const DeviceFigures& f = d.figures;
    if (f.pool_known) {
      fmt::print("          {} pool: reserved {} (high {}), in use {} (high {}), {} allocations\n",
                 f.private_pool ? "warm" : "default", format_bytes(f.pool_reserved),
                 format_bytes(f.pool_reserved_high), format_bytes(f.pool_used),
                 format_bytes(f.pool_used_high), f.pool_allocations);
    }
    if (f.known) {
      // fmt, not "+" + std::string: GCC 12 at -O3 (the Release build bench/compare.sh
      // makes) reports a false -Wrestrict in that operator+, an error under -Werror.
      auto delta = [](uint64_t a, uint64_t b) {
        return a >= b ? fmt::format("+{}", format_bytes(a - b))
                      : fmt::format("-{}", format_bytes(b - a));
      };
      fmt::print("          device used (cudaMemGetInfo, all processes): {} before load, {} after "
                 "load ({}), {} after the runs ({})\n",
                 format_bytes(f.used_before_load), format_bytes(f.used_after_load),
                 delta(f.used_after_load, f.used_before_load), format_bytes(f.used_after_run),
                 delta(f.used_after_run, f.used_before_load));
    }
    total += d.weights_bytes + d.planned_bytes;
  }
  fmt::print("  total   {:>12} (weights are mapped from the file, resident once read)\n",
             format_bytes(total));
  if (shared) {
    fmt::print("  the shared host arenas hold {} for all host methods of the program\n",
               format_bytes(program->shared_host_arena_bytes()));
  }
  return kExitOk;
}

}  // namespace planrt::cli
