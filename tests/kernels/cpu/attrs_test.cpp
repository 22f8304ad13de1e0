#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace planrt::kernels {
namespace {

using testing::IsError;

TEST(OpAttrs, AbsentAttributesTakeTheFallback) {
  OpAttrs attrs;
  EXPECT_FALSE(attrs.has("dim"));
  EXPECT_EQ(*attrs.get_int("dim", -1), -1);
  EXPECT_EQ(*attrs.get_float("eps", 1e-5), 1e-5);
  EXPECT_TRUE(*attrs.get_bool("causal", true));
  EXPECT_EQ(*attrs.get_string("approximate", "none"), "none");
}

TEST(OpAttrs, PresentAttributesReturnTheirValue) {
  OpAttrs attrs;
  attrs.set("dim", int64_t{2});
  attrs.set("eps", 0.5);
  attrs.set("causal", true);
  attrs.set("approximate", std::string("tanh"));
  attrs.set("dims", std::vector<int64_t>{0, 2, 1});
  EXPECT_TRUE(attrs.has("dim"));
  EXPECT_EQ(*attrs.get_int("dim", 0), 2);
  EXPECT_EQ(*attrs.get_float("eps", 0.0), 0.5);
  EXPECT_TRUE(*attrs.get_bool("causal", false));
  EXPECT_EQ(*attrs.get_string("approximate", "none"), "tanh");
  EXPECT_EQ(*attrs.get_ints("dims"), (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(attrs.values().size(), 5u);
}

TEST(OpAttrs, SetReplacesAnEarlierValue) {
  OpAttrs attrs;
  attrs.set("dim", int64_t{1});
  attrs.set("dim", int64_t{3});
  EXPECT_EQ(*attrs.get_int("dim", 0), 3);
}

TEST(OpAttrs, FloatAcceptsAnInt) {
  OpAttrs attrs;
  attrs.set("scale", int64_t{2});
  EXPECT_EQ(*attrs.get_float("scale", 1.0), 2.0);
}

TEST(OpAttrs, WrongTypeIsAnErrorNamingTheAttribute) {
  OpAttrs attrs;
  attrs.set("dim", std::string("1"));
  attrs.set("eps", std::string("small"));
  attrs.set("causal", int64_t{1});
  attrs.set("approximate", true);
  attrs.set("dims", int64_t{0});
  attrs.set("size", 1.5);
  EXPECT_TRUE(IsError(attrs.get_int("dim", 0).status(), ErrorCode::InvalidArgument,
                      {"'dim'", "a string", "expected an int"}));
  EXPECT_TRUE(IsError(attrs.get_int("size", 0).status(), ErrorCode::InvalidArgument,
                      {"'size'", "a float"}));
  EXPECT_TRUE(IsError(attrs.get_float("eps", 0).status(), ErrorCode::InvalidArgument,
                      {"'eps'", "expected a float"}));
  EXPECT_TRUE(IsError(attrs.get_bool("causal", false).status(), ErrorCode::InvalidArgument,
                      {"'causal'", "an int", "expected a bool"}));
  EXPECT_TRUE(IsError(attrs.get_string("approximate", "").status(), ErrorCode::InvalidArgument,
                      {"'approximate'", "a bool"}));
  EXPECT_TRUE(IsError(attrs.get_ints("dims").status(), ErrorCode::InvalidArgument,
                      {"'dims'", "expected a list of ints"}));
}

TEST(OpAttrs, MissingIntListIsNotFound) {
  OpAttrs attrs;
  EXPECT_TRUE(IsError(attrs.get_ints("dims").status(), ErrorCode::NotFound, {"'dims'"}));
}

}  // namespace
}  // namespace planrt::kernels
