// Human-readable byte counts for the CLI ("512 B", "1.50 KiB", "24.00 MiB").
#pragma once

#include <cstdint>
#include <string>

namespace planrt::cli {

std::string format_bytes(uint64_t bytes);
// A difference: "+1.50 MiB", "-512 B".
std::string format_signed_bytes(int64_t bytes);

}  // namespace planrt::cli
