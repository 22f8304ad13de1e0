#include "memory.h"

#include <algorithm>
#include <map>
#include <string>

#include <pybind11/stl.h>

#include "errors.h"
#include "planrt/backends/engine.h"
#ifdef PLANRT_HAVE_CUDA
#include "planrt/backends/memory_ledger.h"
#include "planrt/platform/cuda.h"
#endif

namespace py = pybind11;

namespace planrt::python {
namespace {

Device parse(const std::string& text) { return unwrap(parse_device(text)); }

py::dict scratch_dict(const EngineScratchStats& s) {
  py::list contexts;
  for (const EngineContextInfo& c : s.contexts) {
    py::dict d;
    d["method"] = c.method;
    d["segment"] = c.segment;
    d["pooled"] = c.pooled;
    d["scratch_bytes"] = c.scratch_bytes;
    contexts.append(d);
  }
  py::dict d;
  d["device"] = to_string(s.device);
  d["contexts"] = contexts;
  d["pool_capacity_bytes"] = s.pool_capacity_bytes;
  d["pool_high_water_bytes"] = s.pool_high_water_bytes;
  d["pool_growths"] = s.pool_growths;
  d["pool_trims"] = s.pool_trims;
  d["pooled_runs"] = s.pooled_runs;
  d["pooled_contexts"] = s.pooled_contexts;
  d["pooled_private_equivalent_bytes"] = s.pooled_private_equivalent_bytes;
  d["private_contexts"] = s.private_contexts;
  d["private_scratch_bytes"] = s.private_scratch_bytes;
  d["planned_contexts"] = s.planned_contexts;
  d["planned_scratch_bytes"] = s.planned_scratch_bytes;
  return d;
}

#ifdef PLANRT_HAVE_CUDA
py::dict pool_dict(const CudaPoolStats& p) {
  py::dict d;
  d["device"] = to_string(p.device);
  d["pool_created"] = p.pool_created;
  d["private_pool"] = p.private_pool;
  d["release_threshold"] = p.release_threshold;
  d["reserved_bytes"] = p.reserved_bytes;
  d["reserved_high_bytes"] = p.reserved_high_bytes;
  d["used_bytes"] = p.used_bytes;
  d["used_high_bytes"] = p.used_high_bytes;
  d["allocations"] = p.allocations;
  d["frees"] = p.frees;
  d["trims"] = p.trims;
  d["users"] = p.users;
  return d;
}

py::dict ledger_dict(const DeviceMemoryLedger& l) {
  py::list lines;
  for (const DeviceMemoryLine& line : l.lines) {
    py::dict d;
    d["name"] = line.name;
    d["bytes"] = line.bytes;
    d["detail"] = line.detail;
    lines.append(d);
  }
  py::dict d;
  d["device"] = to_string(l.device);
  d["baseline_used_bytes"] = l.baseline_used_bytes;
  d["used_bytes"] = l.used_bytes;
  d["measured_bytes"] = l.measured_bytes();
  d["lines"] = lines;
  d["named_bytes"] = l.named_bytes();
  d["remainder_bytes"] = l.remainder_bytes();
  return d;
}
#endif

#ifndef PLANRT_HAVE_CUDA
[[noreturn]] void no_cuda() {
  fail(ErrorCode::NotSupported, "this planrt was built without CUDA (PLANRT_CUDA=OFF or no nvcc)");
}
#endif

}  // namespace

void add_device_baselines([[maybe_unused]] const MethodMeta& meta,
                          [[maybe_unused]] std::map<Device, uint64_t>& baselines) {
#ifdef PLANRT_HAVE_CUDA
  for (const MemoryEstimate& e : meta.memory) {
    if (e.device.type != DeviceType::CUDA || baselines.count(e.device)) continue;
    Result<CudaDeviceMemory> used = cuda_device_memory(e.device);
    if (used.ok()) baselines[e.device] = used->used_bytes();  // no usable device: no ledger
  }
#endif
}

py::dict memory_report(const Program& program, const std::vector<std::shared_ptr<const Method>>& loaded,
                       [[maybe_unused]] const std::map<Device, uint64_t>& baselines) {
  struct Figures {
    uint64_t weights = 0, planned = 0, packed_weights = 0;
  };
  std::map<Device, Figures> devices;
  bool shares_host_arenas = false;
  py::dict methods;
  for (const auto& method : loaded) {
    const MethodMeta& meta = method->meta();
    for (const MemoryEstimate& e : meta.memory) {
      Figures& f = devices[e.device];
      // Methods of one program on one device share their weights (one upload per constant):
      // the largest method's figure, not the sum.
      f.weights = std::max(f.weights, e.weights_bytes);
      if (!(e.device.is_cpu() && method->shares_memory_arenas())) f.planned += e.planned_bytes;
    }
    shares_host_arenas = shares_host_arenas || method->shares_memory_arenas();
    // Each method owns the copies it reordered (cpu.pack_weights): a sum.
    if (method->packed_weight_bytes() > 0) devices[Device::cpu()].packed_weights += method->packed_weight_bytes();
    py::dict m;
    py::list estimates;
    for (const MemoryEstimate& e : meta.memory) {
      py::dict est;
      est["device"] = to_string(e.device);
      est["planned_bytes"] = e.planned_bytes;
      est["weights_bytes"] = e.weights_bytes;
      est["engine_scratch_bytes"] = e.engine_scratch_bytes;
      estimates.append(est);
    }
    m["estimate"] = estimates;
    m["loaded"] = true;
    m["shares_host_arenas"] = method->shares_memory_arenas();
    m["packed_weights_bytes"] = method->packed_weight_bytes();
    methods[py::str(meta.name)] = m;
  }
  // Methods not loaded yet (a Module loads a method on its first run): their estimate, and
  // their devices with what is held there now (nothing of theirs), so that a report taken
  // before the first run lists what the program will use rather than nothing.
  for (const std::string& name : program.method_names()) {
    if (methods.contains(py::str(name))) continue;
    Result<MethodMeta> meta = program.method_meta(name);
    if (!meta.ok()) continue;
    py::list estimates;
    for (const MemoryEstimate& e : meta->memory) {
      (void)devices[e.device];
      py::dict est;
      est["device"] = to_string(e.device);
      est["planned_bytes"] = e.planned_bytes;
      est["weights_bytes"] = e.weights_bytes;
      est["engine_scratch_bytes"] = e.engine_scratch_bytes;
      estimates.append(est);
    }
    py::dict m;
    m["estimate"] = estimates;
    m["loaded"] = false;
    methods[py::str(name)] = m;
  }
  if (shares_host_arenas) devices[Device::cpu()].planned += program.shared_host_arena_bytes();

  py::list out;
  for (const auto& [device, f] : devices) {
    py::dict d;
    d["device"] = to_string(device);
    d["weights_bytes"] = f.weights;
    d["planned_bytes"] = f.planned;
    d["packed_weights_bytes"] = f.packed_weights;
    Result<EngineScratchStats> scratch = engine_scratch_stats(device);
    d["engine_scratch"] = scratch.ok() ? py::object(scratch_dict(*scratch)) : py::object(py::none());
    d["warm_pool"] = py::none();
    d["device_used_bytes"] = py::none();
    d["device_total_bytes"] = py::none();
    d["ledger"] = py::none();
#ifdef PLANRT_HAVE_CUDA
    if (device.type == DeviceType::CUDA) {
      Result<CudaPoolStats> pool = cuda_pool_stats(device);
      if (pool.ok()) d["warm_pool"] = pool_dict(*pool);
      Result<CudaDeviceMemory> used = cuda_device_memory(device);
      if (used.ok()) {
        d["device_used_bytes"] = used->used_bytes();
        d["device_total_bytes"] = used->total_bytes;
      }
      auto baseline = baselines.find(device);
      if (baseline != baselines.end()) {
        Result<DeviceMemoryLedger> ledger = device_memory_ledger(device, baseline->second);
        if (ledger.ok()) d["ledger"] = ledger_dict(*ledger);
      }
    }
#endif
    out.append(d);
  }
  py::dict report;
  report["devices"] = out;
  report["methods"] = methods;
  report["constants_bytes"] = program.constants_bytes();
  report["shared_host_arena_bytes"] = program.shared_host_arena_bytes();
  report["shared_host_arenas_allocated"] = program.shared_host_arenas_allocated();
  return report;
}

void register_memory(py::module_& m) {
  m.def("engine_scratch_stats", [](const std::string& device) {
    return scratch_dict(unwrap(engine_scratch_stats(parse(device))));
  }, py::arg("device") = "cpu",
        "The engine backend's scratch on `device`: live contexts, private bytes, the shared pool.");
  m.def("trim_engine_scratch_pool", [](const std::string& device) {
    const Device d = parse(device);
    py::gil_scoped_release release;
    check(trim_engine_scratch_pool(d));
  }, py::arg("device") = "cpu", "Gives the shared engine scratch pool's buffer on `device` back.");
  m.def("warm_pool_stats", [](const std::string& device) -> py::dict {
#ifdef PLANRT_HAVE_CUDA
    return pool_dict(unwrap(cuda_pool_stats(parse(device))));
#else
    (void)device;
    no_cuda();
#endif
  }, py::arg("device") = "cuda:0",
        "The warm CUDA pool of `device`: reserved and used bytes (now and highest), allocations.");
  m.def("trim_warm_pool", [](const std::string& device) {
#ifdef PLANRT_HAVE_CUDA
    const Device d = parse(device);
    py::gil_scoped_release release;
    check(trim_cuda_pool(d));
#else
    (void)device;
    no_cuda();
#endif
  }, py::arg("device") = "cuda:0",
        "Gives what the warm pool of `device` holds and nobody uses back to the driver.");
  m.def("device_memory", [](const std::string& device) -> py::dict {
#ifdef PLANRT_HAVE_CUDA
    CudaDeviceMemory mem = unwrap(cuda_device_memory(parse(device)));
    py::dict d;
    d["device"] = to_string(mem.device);
    d["free_bytes"] = mem.free_bytes;
    d["total_bytes"] = mem.total_bytes;
    d["used_bytes"] = mem.used_bytes();
    return d;
#else
    (void)device;
    no_cuda();
#endif
  }, py::arg("device") = "cuda:0",
        "What the device itself says (cudaMemGetInfo): free, total and used bytes, all processes.");
  m.def("device_memory_ledger", [](const std::string& device, uint64_t baseline_used_bytes) -> py::dict {
#ifdef PLANRT_HAVE_CUDA
    return ledger_dict(unwrap(device_memory_ledger(parse(device), baseline_used_bytes)));
#else
    (void)device;
    (void)baseline_used_bytes;
    no_cuda();
#endif
  }, py::arg("device"), py::arg("baseline_used_bytes"),
        "Every device byte planrt holds on `device`, by owner (weights, arenas, engine scratch, "
        "pools, library handles, CUDA graphs), and what remains of the device's use since "
        "`baseline_used_bytes` (device_memory(device)['used_bytes'] taken before the work).");
}

}  // namespace planrt::python
