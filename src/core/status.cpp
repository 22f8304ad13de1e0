#include "planrt/core/status.h"

namespace planrt {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::Ok: return "Ok";
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::InvalidProgram: return "InvalidProgram";
    case ErrorCode::NotFound: return "NotFound";
    case ErrorCode::OutOfMemory: return "OutOfMemory";
    case ErrorCode::NotSupported: return "NotSupported";
    case ErrorCode::IoError: return "IoError";
    case ErrorCode::OutOfRange: return "OutOfRange";
    case ErrorCode::Internal: return "Internal";
  }
  return "Unknown";
}

Status::Status(ErrorCode code, std::string message) {
  if (code == ErrorCode::Ok) return;
  rep_ = std::make_shared<const Rep>(Rep{code, std::move(message)});
}

const std::string& Status::message() const {
  static const std::string empty;
  return rep_ ? rep_->message : empty;
}

std::string Status::to_string() const {
  if (ok()) return "Ok";
  return fmt::format("{}: {}", error_code_name(rep_->code), rep_->message);
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  return Status(rep_->code, fmt::format("{}: {}", context, rep_->message));
}

}  // namespace planrt
