#include "backends/option_values.h"

#include <charconv>
#include <limits>

namespace planrt::backends {

Result<bool> parse_bool_option(std::string_view key, std::string_view value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  return make_error(ErrorCode::InvalidArgument,
                    "option '{}' must be \"true\" or \"false\", not \"{}\"", key, value);
}

Result<bool> parse_gemm_algorithm_option(std::string_view key, std::string_view value) {
  if (value == "timed") return true;
  if (value == "heuristic") return false;
  return make_error(ErrorCode::InvalidArgument,
                    "option '{}' must be \"timed\" or \"heuristic\", not \"{}\"", key, value);
}

Result<bool> parse_attention_option(std::string_view key, std::string_view value) {
  if (value == "cudnn") return true;
  if (value == "planrt") return false;
  return make_error(ErrorCode::InvalidArgument,
                    "option '{}' must be \"cudnn\" or \"planrt\", not \"{}\"", key, value);
}

Result<uint64_t> parse_bytes_option(std::string_view key, std::string_view value) {
  if (value == "max") return std::numeric_limits<uint64_t>::max();
  uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || ptr != value.data() + value.size()) {
    return make_error(ErrorCode::InvalidArgument,
                      "option '{}' must be a byte count or \"max\", not \"{}\"", key, value);
  }
  return n;
}

}  // namespace planrt::backends
