// Memory figures for Python, as dicts: a Module's report (per device: weights, planned
// arenas, engine scratch, the warm pool, what the device says it has in use) and the
// process-wide pools' statistics, with their trims.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <pybind11/pybind11.h>

#include "planrt/runtime/method.h"
#include "planrt/runtime/program.h"

namespace planrt::python {

// Each CUDA device the program's methods use and its used bytes now (cudaMemGetInfo): the
// baselines of the report's ledgers, taken when a Module opens its program. Empty without
// CUDA; a device that cannot be queried is left out.
std::map<Device, uint64_t> device_baselines(const Program& program);

// The report of `program` with `loaded` (its methods now loaded), each CUDA device's ledger
// against its baseline. Called with the GIL held.
pybind11::dict memory_report(const Program& program,
                             const std::vector<std::shared_ptr<const Method>>& loaded,
                             const std::map<Device, uint64_t>& baselines);

void register_memory(pybind11::module_& m);

}  // namespace planrt::python
