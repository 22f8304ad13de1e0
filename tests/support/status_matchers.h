// Assertions on error statuses, for every test binary:
//
//   EXPECT_TRUE(IsError(status, ErrorCode::InvalidArgument, {"input 0 'x'", "expected f32"}));
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string_view>

#include "planrt/core/status.h"

namespace planrt::testing {

// Success when `status` has `code` and its message contains every fragment; the failure
// says which one is missing and shows the whole status.
::testing::AssertionResult IsError(const Status& status, ErrorCode code,
                                   std::initializer_list<std::string_view> fragments = {});

}  // namespace planrt::testing
