// Memory figures for Python, as dicts: a Module's report (per device: weights, planned
// arenas, engine scratch, the warm pool, what the device says it has in use) and the
// process-wide pools' statistics, with their trims.
#pragma once

#include <memory>
#include <vector>

#include <pybind11/pybind11.h>

#include "planrt/runtime/method.h"
#include "planrt/runtime/program.h"

namespace planrt::python {

// The report of `program` with `loaded` (its methods now loaded). Called with the GIL held.
pybind11::dict memory_report(const Program& program,
                             const std::vector<std::shared_ptr<const Method>>& loaded);

void register_memory(pybind11::module_& m);

}  // namespace planrt::python
