// Where each planned tensor of a program sits and when it is alive: the data behind
// `planrt inspect --plot`, read from the verified file (MethodMeta reports sizes, not
// placements).
//
// Lifetimes are recomputed from the instruction order the way the builder plans them: a
// tensor lives from the first instruction that touches it to the last; method inputs from
// instruction 0, outputs to the last instruction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/program_file.h"
#include "planrt/core/device.h"
#include "planrt/core/result.h"

namespace planrt::cli {

struct PlacedTensor {
  uint32_t value = 0;
  std::string name;
  uint64_t offset = 0;
  uint64_t size_bytes = 0;  // at the dims' maxima
  int64_t first_use = 0;
  int64_t last_use = 0;
};

// One planned buffer of one method, with what lives in it.
struct BufferLayout {
  std::string method;
  uint32_t index = 0;
  Device device;
  uint64_t size_bytes = 0;
  uint64_t lower_bound_bytes = 0;  // of the plan for this (method, device); 0 if none
  int64_t num_instructions = 0;
  std::vector<PlacedTensor> tensors;
};

Result<std::vector<BufferLayout>> plan_layouts(const format::ProgramFile& file);

}  // namespace planrt::cli
