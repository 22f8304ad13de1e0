// Status: the result of a fallible call that returns no value.
//
// Contract: planrt never throws across its API and never aborts on bad input or a
// resource failure. Every fallible call returns a Status (or a Result<T>, result.h)
// whose message names the operands, so a user can act on it without a debugger.
// Status is a small value type: cheap to copy when ok (no allocation).
//
// Thread safety: copies share one immutable code and message (a shared_ptr to const), so
// copies of one Status may be made, read and destroyed on any threads at once. Assigning to
// a Status object while another thread reads that same object is a race, as for any value.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace planrt {

enum class ErrorCode : uint8_t {
  Ok = 0,
  InvalidArgument,   // a caller passed something wrong (shape, name, option value)
  InvalidProgram,    // a program or model file is malformed or inconsistent
  NotFound,          // a named thing (method, input, constant, file) does not exist
  OutOfMemory,       // an allocation failed (host or device)
  NotSupported,      // valid, but this build or device cannot do it
  IoError,           // reading or writing a file failed
  OutOfRange,        // an index or a dim is outside its bounds
  Internal,          // a broken internal invariant that was caught rather than aborted on
};

std::string_view error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(ErrorCode code, std::string message);

  bool ok() const { return rep_ == nullptr; }
  ErrorCode code() const { return rep_ ? rep_->code : ErrorCode::Ok; }
  // Empty when ok.
  const std::string& message() const;
  // "InvalidArgument: <message>" or "Ok".
  std::string to_string() const;

  // Returns a copy whose message is "<context>: <message>"; ok stays ok.
  Status with_context(std::string_view context) const;

 private:
  struct Rep {
    ErrorCode code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;
};

// Formats with fmt: make_error(ErrorCode::InvalidArgument, "input '{}' has rank {}", name, r).
template <typename... Args>
Status make_error(ErrorCode code, fmt::format_string<Args...> f, Args&&... args) {
  return Status(code, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace planrt

// Returns early from the enclosing function when `expr` (a Status) is an error.
#define PLANRT_RETURN_IF_ERROR(expr)              \
  do {                                            \
    ::planrt::Status planrt_status_ = (expr);     \
    if (!planrt_status_.ok()) return planrt_status_; \
  } while (0)
