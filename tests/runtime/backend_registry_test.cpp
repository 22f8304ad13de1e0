#include <gtest/gtest.h>

#include <algorithm>

#include "planrt/runtime/backend.h"
#include "support/test_device.h"

namespace planrt {
namespace {

TEST(BackendRegistry, RegisteredBackendIsFoundUntilUnregistered) {
  testing::TestDeviceBackend backend;
  EXPECT_EQ(get_backend("fake"), nullptr);
  ASSERT_TRUE(register_backend("fake", &backend).ok());
  EXPECT_EQ(get_backend("fake"), &backend);
  // Other tests of this binary may have registered the built-in backends: look for ours.
  std::vector<std::string> names = registered_backends();
  EXPECT_EQ(std::count(names.begin(), names.end(), "fake"), 1);
  ASSERT_TRUE(unregister_backend("fake").ok());
  EXPECT_EQ(get_backend("fake"), nullptr);
}

TEST(BackendRegistry, DuplicateNullOrUnnamedRegistrationIsRefused) {
  testing::TestDeviceBackend a, b;
  ASSERT_TRUE(register_backend("fake", &a).ok());
  Status dup = register_backend("fake", &b);
  EXPECT_EQ(dup.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(dup.message().find("'fake'"), std::string::npos);
  EXPECT_EQ(get_backend("fake"), &a);
  EXPECT_EQ(register_backend("other", nullptr).code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(register_backend("", &b).code(), ErrorCode::InvalidArgument);
  ASSERT_TRUE(unregister_backend("fake").ok());
}

TEST(BackendRegistry, RegisterOnceAcceptsTheSameBackendAgainButNoOther) {
  testing::TestDeviceBackend a, b;
  ASSERT_TRUE(register_backend_once("fake", &a).ok());
  EXPECT_TRUE(register_backend_once("fake", &a).ok());
  Status other = register_backend_once("fake", &b);
  EXPECT_EQ(other.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(other.message().find("\"fake\""), std::string::npos) << other.to_string();
  EXPECT_EQ(get_backend("fake"), &a);
  EXPECT_EQ(register_backend_once("other", nullptr).code(), ErrorCode::InvalidArgument);
  ASSERT_TRUE(unregister_backend("fake").ok());
}

TEST(BackendRegistry, UnregisteringAnUnknownNameIsNotFound) {
  Status s = unregister_backend("nobody");
  EXPECT_EQ(s.code(), ErrorCode::NotFound);
  EXPECT_NE(s.message().find("'nobody'"), std::string::npos);
}

TEST(BackendRegistry, DefaultOptionsAreNotSupportedNamingTheKey) {
  testing::TestDeviceBackend backend;
  Status set = backend.set_option("pool", "on");
  EXPECT_EQ(set.code(), ErrorCode::NotSupported);
  EXPECT_NE(set.message().find("'pool'"), std::string::npos);
  EXPECT_EQ(backend.get_option("pool").status().code(), ErrorCode::NotSupported);
}

}  // namespace
}  // namespace planrt
