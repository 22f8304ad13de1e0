// Lowering a checked Model to a program (docs/program-format.md): values, instructions,
// segments and planned memory of every method, and the program's constant table.
//
// Per method: inputs and outputs are Planned values on the host. cpu segments become
// Kernel instructions carrying their segment index; cuda/engine segments become one
// Delegate instruction whose blob is a nested Graph (Constant weights, Kernel instructions,
// intermediates Planned in the segment's scratch, or Temporary in a cuda segment whose
// scratch is not planned; see ScratchPlacement).
// Values that cross a segment boundary are planned on the producing segment's device;
// Copy instructions move method inputs to a device segment that reads them, and device
// values to the host where they are method outputs (right after they are produced) or
// read by a cpu kernel. A copy is named "<value>@<device>"; a method output keeps its
// own name on the host. Then each (method, device) is planned (method_plan.h).
//
// The program refers to constants (by pointer, in program order) of the rewritten copy of
// the model that LoweredProgram owns; their bytes are the caller's model's (kept alive by
// their owners) or derived by a rewrite. Errors name the method, the node and the value.
#pragma once

#include <memory>
#include <vector>

#include "builder/graph.h"
#include "builder/rewrite.h"
#include "planning/method_plan.h"
#include "planrt/core/result.h"
#include "planrt/format/program_generated.h"

namespace planrt::builder {

struct LoweredProgram {
  fb::ProgramT program;
  std::vector<const ir::Constant*> constants;  // program.constants[i] holds constants[i]
  std::unique_ptr<const ir::Model> model;      // the rewritten model `constants` point into
};

// Where delegate segments' scratch lives (docs/design.md §6). Planned: the segment's
// intermediates and kernel workspace are planned into one scratch (the §4 planner, at the
// method dims' max), and the Delegate instruction passes that scratch as one more output, a
// method value live only during the instruction (Graph.scratch_operand), so the method's
// plan overlaps it with activations dead then and nothing is allocated per call.
struct ScratchPlacement {
  // cuda segments: planned (default), or the old way: Temporaries from the warm pool per call.
  bool cuda_planned = true;
  // engines: planned, or (default) the engine's own scratch, private or pooled at load.
  bool engine_planned = false;
};

Result<LoweredProgram> lower_model(const ir::Model& model, const planning::PlanOptions& planning,
                                   const ScratchPlacement& scratch = {}, const RewriteOptions& rewrites = {});

}  // namespace planrt::builder
