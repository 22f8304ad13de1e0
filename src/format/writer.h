// Writing a .prog file (the layout program_file.h describes).
//
// The builder fills an fb::ProgramT (the FlatBuffers object API) and hands the constant
// bytes alongside; the writer lays the constants into the aligned data segment, filling in
// each Constant's offset and size_bytes, and stamps format_version. With
// program.external_constants set, no segment is written and `constants` must be empty.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "planrt/core/result.h"
#include "planrt/format/program_generated.h"

namespace planrt::format {

// constants[i] holds the bytes of program.constants[i].
Result<std::vector<uint8_t>> serialize_program(fb::ProgramT program,
                                               std::span<const std::span<const uint8_t>> constants);
Status write_program(fb::ProgramT program, std::span<const std::span<const uint8_t>> constants,
                     const std::string& path);

}  // namespace planrt::format
