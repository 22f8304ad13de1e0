#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/elementwise_ops.h"

namespace planrt::kernels {
namespace {

using testing::IsError;

TEST(OpTable, ListsEveryOpOfTheModelFormatWithItsArity) {
  struct Expected {
    const char* name;
    int min_inputs, max_inputs;
  };
  const Expected expected[] = {
      {"linear", 2, 3},     {"matmul", 2, 2},
      {"add", 2, 2},        {"sub", 2, 2},
      {"mul", 2, 2},        {"div", 2, 2},
      {"layer_norm", 1, 3}, {"rms_norm", 1, 2},
      {"softmax", 1, 1},    {"gelu", 1, 1},
      {"relu", 1, 1},       {"silu", 1, 1},
      {"reshape", 1, 1},    {"permute", 1, 1},
      {"transpose", 1, 1},  {"scaled_dot_product_attention", 1, 4},
      {"embedding", 2, 2},  {"concat", 1, -1},
      {"slice", 1, 1},      {"sqrt", 1, 1},
      {"neg", 1, 1},        {"exp", 1, 1},
      {"erf", 1, 1},        {"tanh", 1, 1},
      {"sigmoid", 1, 1},    {"pow", 2, 2},
      {"reduce_mean", 1, 1},  {"conv2d", 2, 3},
      {"max_pool2d", 1, 1}, {"avg_pool2d", 1, 1},
      {"clip", 1, 1},       {"hard_sigmoid", 1, 1},
      {"hard_swish", 1, 1}, {"pad", 1, 1},
      {"expand", 1, 1},     {"gather_elements", 2, 2},
      {"size", 1, 1},       {"take", 2, 2},
      {"reduce_sum", 1, 1}, {"reduce_max", 1, 1},
      {"reduce_min", 1, 1}, {"reduce_prod", 1, 1},
      {"argmax", 1, 1},     {"argmin", 1, 1},
      {"cumsum", 1, 1},     {"log_softmax", 1, 1},
      {"resize", 1, 1},
  };
  // The typed elementwise family (elementwise_ops.h) is in the op table with its arity.
  size_t family = 0;
  for (const ElementwiseOp& e : elementwise_ops()) {
    const OpInfo* op = find_op(e.name);
    ASSERT_NE(op, nullptr) << e.name;
    EXPECT_EQ(op->min_inputs, e.arity) << e.name;
    EXPECT_EQ(op->max_inputs, e.arity) << e.name;
    EXPECT_EQ(op->num_outputs, 1) << e.name;
    ++family;
  }
  EXPECT_EQ(all_ops().size(), std::size(expected) + family);
  // The name list the back ends expand (PLANRT_ELEMENTWISE_OPS) is the table's.
  std::vector<std::string_view> listed;
#define PLANRT_LISTED(op) listed.push_back(#op);
  PLANRT_ELEMENTWISE_OPS(PLANRT_LISTED)
#undef PLANRT_LISTED
  ASSERT_EQ(listed.size(), elementwise_ops().size());
  for (size_t i = 0; i < listed.size(); ++i) EXPECT_EQ(listed[i], elementwise_ops()[i].name);
  for (const Expected& e : expected) {
    const OpInfo* op = find_op(e.name);
    ASSERT_NE(op, nullptr) << e.name;
    EXPECT_EQ(op->name, e.name);
    EXPECT_EQ(op->min_inputs, e.min_inputs) << e.name;
    EXPECT_EQ(op->max_inputs, e.max_inputs) << e.name;
    EXPECT_EQ(op->num_outputs, 1) << e.name;
    // Only conv2d takes a second, optional output: its planned workspace.
    EXPECT_EQ(op->optional_outputs, std::string_view(e.name) == "conv2d" ? 1 : 0) << e.name;
  }
}

TEST(OpTable, OpNamesAreUnique) {
  std::set<std::string_view> names;
  for (const OpInfo& op : all_ops()) EXPECT_TRUE(names.insert(op.name).second) << op.name;
}

TEST(OpTable, UnknownOpIsNull) {
  EXPECT_EQ(find_op("conv3d"), nullptr);
  EXPECT_EQ(find_op(""), nullptr);
  EXPECT_EQ(find_op("Linear"), nullptr);
}

TEST(OpTable, EveryOpHasACpuKernel) {
  for (const OpInfo& op : all_ops()) {
    Result<KernelFn> fn = find_cpu_kernel(op.name);
    ASSERT_TRUE(fn.ok()) << op.name << ": " << fn.status().to_string();
    EXPECT_NE(*fn, nullptr) << op.name;
  }
}

TEST(OpTable, UnknownOpHasNoCpuKernel) {
  Result<KernelFn> fn = find_cpu_kernel("conv3d");
  EXPECT_TRUE(IsError(fn.status(), ErrorCode::NotFound, {"conv3d"}));
}

}  // namespace
}  // namespace planrt::kernels
