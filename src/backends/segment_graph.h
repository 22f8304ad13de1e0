// SegmentGraph: a delegate segment's Graph blob (program.fbs), verified and parsed into
// plain values once at init, for the backends that run one (cuda, engine). Nothing here
// touches a device.
//
// What parse_segment_graph checks (InvalidProgram naming the segment, and for a step its
// index, op and node): the blob is a Graph; every value id in range; dims referred to by
// shapes exist; constants exist in the program and match the value's dtype and shape;
// only Kernel instructions; each op known to the op table with an operand count it
// accepts; no step writes a constant; the profile (engines) names existing dims with
// 0 <= min <= max. Attributes are parsed once (kernels::OpAttrs).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "format/program_file.h"
#include "kernels/kernel.h"
#include "planrt/format/program_generated.h"
#include "planrt/runtime/backend.h"

namespace planrt {

struct SegmentValue {
  std::string name;
  fb::ValueKind kind = fb::ValueKind::Temporary;
  DType dtype = DType::F32;
  std::vector<DimRef> shape;
  uint64_t offset = 0;    // Planned: into the segment's scratch
  uint32_t constant = 0;  // Constant: the program's constant index
  bool operand = false;   // a graph input or output: the caller's memory
};

struct SegmentStep {
  std::string op;
  std::string node;
  kernels::OpAttrs attrs;
  std::vector<uint32_t> inputs;   // format::kNoValue: an absent optional operand
  std::vector<uint32_t> outputs;
};

struct ProfileDim {
  uint32_t dim = 0;
  int64_t min = 0;
  int64_t max = 0;
};

struct SegmentGraph {
  std::string name;  // the segment's, for messages
  std::vector<DimSpec> dims;  // the method's
  std::vector<SegmentValue> values;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<SegmentStep> steps;
  std::vector<ProfileDim> profile;
  uint64_t scratch_bytes = 0;
  bool scratch_operand = false;           // the Delegate passes the scratch (program.fbs)
  bool scratch_plan_fusion_safe = false;  // add + layer_norm may run as one kernel
  const fb::Graph* graph = nullptr;  // the verified blob (lives as long as the program)

  std::string step_name(size_t k) const;
};

Result<SegmentGraph> parse_segment_graph(std::span<const uint8_t> blob,
                                         const BackendInitContext& context);

// The constant behind `value` (a Constant value of segment `segment`, whose shapes refer to
// `dims`), checked against its dtype and shape.
Result<ConstantRef> segment_constant(std::string_view segment, std::span<const DimSpec> dims,
                                     const SegmentValue& value, const BackendInitContext& context);

}  // namespace planrt
