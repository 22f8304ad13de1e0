// Memory planning of a lowered method (DESIGN §4) and of an engine segment's scratch.
//
// Lifetimes come from the instruction order: a method input lives from instruction 0, a
// method output to the last instruction, every other value from the instruction that
// writes it to the last one that reads it. Each planned buffer of the method (one per
// device, host first, set up by the lowering) is planned on its own with plan_memory
// (alignment 64 on the host, 256 on CUDA) at every dim's max; the result is written back
// into the values' offsets, the buffers' sizes and one PlanStat per buffer.
//
// verify_method_plan recomputes the lifetimes from the instructions and runs verify_plan
// on every buffer, so a test can check any lowered method independently of how it was
// planned. Errors name the method and the value.
#pragma once

#include <cstdint>
#include <vector>

#include "builder/planner.h"
#include "planrt/core/device.h"
#include "planrt/core/result.h"
#include "planrt/format/program_generated.h"

namespace planrt::builder {

uint64_t plan_alignment(Device device);

// The Planned values of one planned buffer with their lifetimes and max-shape sizes.
struct BufferTensors {
  uint32_t buffer = 0;
  Device device;
  std::vector<uint32_t> values;
  std::vector<TensorLifetime> lifetimes;
};

Result<std::vector<BufferTensors>> collect_buffer_tensors(const fb::MethodT& method);
Status plan_method(fb::MethodT& method, PlannerKind kind);
Status verify_method_plan(const fb::MethodT& method);

// Plans the Planned values of an engine segment's graph into its scratch (buffer 0) and
// sets scratch_bytes. `dims` are the method's.
Status plan_graph_scratch(fb::GraphT& graph, const std::vector<std::unique_ptr<fb::DimSpecT>>& dims,
                          PlannerKind kind);

}  // namespace planrt::builder
