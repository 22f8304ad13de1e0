#include "support/status_matchers.h"

#include <string>

namespace planrt::testing {

::testing::AssertionResult IsError(const Status& status, ErrorCode code,
                                   std::initializer_list<std::string_view> fragments) {
  if (status.code() != code) {
    return ::testing::AssertionFailure()
           << "expected " << error_code_name(code) << ", got " << status.to_string();
  }
  for (std::string_view f : fragments) {
    if (status.message().find(f) == std::string::npos) {
      return ::testing::AssertionFailure() << "message lacks '" << f << "': " << status.to_string();
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace planrt::testing
