// `planrt inspect --steps`: a method's instructions as the runtime will run them, and inside
// each delegate segment the steps of its graph, every value with its kind, dtype and shape
// and, where planned, its buffer and offset. What the builder made of a model (the fusions,
// the rewrites, which reshapes are views: a reshape output at its input's offset, marked
// "view") is visible without reading the FlatBuffers. Reads the file only; prints to stdout.
#pragma once

#include <string_view>

#include "format/program_file.h"

namespace planrt::cli {

// The steps of method `name` of `file` (a method the file does not hold prints nothing).
void print_method_steps(const format::ProgramFile& file, std::string_view name);

}  // namespace planrt::cli
