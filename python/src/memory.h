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

// Adds, for each CUDA device `meta` uses that `baselines` lacks, its used bytes now
// (cudaMemGetInfo): the baselines of the report's ledgers, taken by a Module just before it
// loads the first method that uses the device (so opening a program, or running its CPU
// methods, starts no CUDA context). Nothing without CUDA; a device that cannot be queried
// is left out. Called without the GIL.
void add_device_baselines(const MethodMeta& meta, std::map<Device, uint64_t>& baselines);

// The report of `program` with `loaded` (its methods now loaded), each CUDA device's ledger
// against its baseline. Called with the GIL held.
pybind11::dict memory_report(const Program& program,
                             const std::vector<std::shared_ptr<const Method>>& loaded,
                             const std::map<Device, uint64_t>& baselines);

void register_memory(pybind11::module_& m);

}  // namespace planrt::python
