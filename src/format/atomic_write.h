// Writing a file atomically: readers see the old file or the complete new one, never a
// partial write (a crash mid-write leaves at most a stray temporary beside the target).
//
// The bytes are given as pieces so large constants are written from where they are,
// without first being copied into one buffer. Errors are IoError naming the path and the
// OS reason; on failure the temporary is removed and the target is untouched.
// Thread-safe for distinct targets.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "planrt/core/status.h"

namespace planrt::format {

Status write_file_atomically(const std::string& path,
                             std::span<const std::span<const uint8_t>> pieces);

}  // namespace planrt::format
