// gather_elements, take and size on the CPU (kernels/op_plans.h): ONNX's and PyTorch's
// examples, negative indices, every element size, and the errors.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernel_test_util.h"

namespace planrt::kernels {
namespace {

using testing::HostTensor;
using testing::IsError;
using testing::run_op;

OpAttrs dim_attr(int64_t d) {
  OpAttrs a;
  a.set("dim", d);
  return a;
}

TEST(GatherElements, FollowsTorchGatherAlongEachDim) {
  // ONNX's example: data [[1, 2], [3, 4]], indices [[0, 0], [1, 0]] along dim 1 -> [[1, 1], [4, 3]].
  HostTensor x = HostTensor::f32({2, 2}, {1, 2, 3, 4});
  HostTensor i = HostTensor::i64({2, 2}, {0, 0, 1, 0});
  HostTensor y(DType::F32, {2, 2});
  ASSERT_TRUE(run_op("gather_elements", dim_attr(1), {x.view(), i.view()}, {y.view()}).ok());
  EXPECT_EQ(std::vector<float>(y.f(), y.f() + 4), (std::vector<float>{1, 1, 4, 3}));
  // Along dim 0 with negative indices and a smaller index shape.
  HostTensor x3 = HostTensor::f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  HostTensor i2 = HostTensor::i32({2, 3}, {1, 2, 0, 2, 0, -3});
  HostTensor y2(DType::F32, {2, 3});
  ASSERT_TRUE(run_op("gather_elements", dim_attr(0), {x3.view(), i2.view()}, {y2.view()}).ok());
  EXPECT_EQ(std::vector<float>(y2.f(), y2.f() + 6), (std::vector<float>{4, 8, 3, 7, 2, 3}));
}

TEST(GatherElements, MovesEveryElementSizeAndRefusesAnIndexOutOfRange) {
  for (DType d : {DType::U8, DType::BF16, DType::I32, DType::I64}) {
    HostTensor x(d, {1, 4});
    const size_t es = element_size(d);
    for (size_t b = 0; b < 4 * es; ++b) x.as<uint8_t>()[b] = static_cast<uint8_t>(b + 1);
    HostTensor i = HostTensor::i64({1, 3}, {3, 0, -1});
    HostTensor y(d, {1, 3});
    ASSERT_TRUE(run_op("gather_elements", dim_attr(1), {x.view(), i.view()}, {y.view()}).ok()) << dtype_name(d);
    EXPECT_EQ(std::memcmp(y.as<uint8_t>(), x.as<uint8_t>() + 3 * es, es), 0);
    EXPECT_EQ(std::memcmp(y.as<uint8_t>() + es, x.as<uint8_t>(), es), 0);
    EXPECT_EQ(std::memcmp(y.as<uint8_t>() + 2 * es, x.as<uint8_t>() + 3 * es, es), 0);
  }
  HostTensor x = HostTensor::f32({1, 2}, {1, 2});
  HostTensor bad = HostTensor::i64({1, 1}, {2});
  HostTensor y(DType::F32, {1, 1});
  EXPECT_TRUE(IsError(run_op("gather_elements", dim_attr(1), {x.view(), bad.view()}, {y.view()}), ErrorCode::OutOfRange,
                      {"gather_elements", "indices[0] = 2", "[-2, 2)"}));
  HostTensor f = HostTensor::f32({1, 1}, {0});
  EXPECT_TRUE(IsError(run_op("gather_elements", dim_attr(1), {x.view(), f.view()}, {y.view()}), ErrorCode::NotSupported,
                      {"i32 or i64"}));
  HostTensor wide = HostTensor::i64({2, 1}, {0, 0});
  HostTensor y21(DType::F32, {2, 1});
  EXPECT_TRUE(IsError(run_op("gather_elements", dim_attr(1), {x.view(), wide.view()}, {y21.view()}),
                      ErrorCode::InvalidArgument, {"exceeds x's"}));
}

TEST(Take, ReadsTheFlatElementsAndRefusesAnIndexOutOfRange) {
  HostTensor x = HostTensor::f32({2, 3}, {10, 11, 12, 13, 14, 15});
  HostTensor i = HostTensor::i64({2, 2}, {0, 5, -1, 3});
  HostTensor y(DType::F32, {2, 2});
  ASSERT_TRUE(run_op("take", {}, {x.view(), i.view()}, {y.view()}).ok());
  EXPECT_EQ(std::vector<float>(y.f(), y.f() + 4), (std::vector<float>{10, 15, 15, 13}));
  HostTensor b(DType::Bool, {4});
  for (int k = 0; k < 4; ++k) b.as<uint8_t>()[k] = k % 2;
  HostTensor j = HostTensor::i32({3}, {1, 2, 3});
  HostTensor yb(DType::Bool, {3});
  ASSERT_TRUE(run_op("take", {}, {b.view(), j.view()}, {yb.view()}).ok());
  EXPECT_EQ(std::vector<uint8_t>(yb.as<uint8_t>(), yb.as<uint8_t>() + 3), (std::vector<uint8_t>{1, 0, 1}));
  HostTensor bad = HostTensor::i64({1}, {-7});
  HostTensor y1(DType::F32, {1});
  EXPECT_TRUE(IsError(run_op("take", {}, {x.view(), bad.view()}, {y1.view()}), ErrorCode::OutOfRange,
                      {"take", "indices[0] = -7", "[-6, 6)"}));
}

TEST(Size, WritesTheSizeOfADimAsAnI64Scalar) {
  HostTensor x(DType::F16, {3, 5, 2});
  HostTensor y(DType::I64, {});
  ASSERT_TRUE(run_op("size", dim_attr(-2), {x.view()}, {y.view()}).ok());
  EXPECT_EQ(y.as<int64_t>()[0], 5);
  EXPECT_TRUE(IsError(run_op("size", {}, {x.view()}, {y.view()}), ErrorCode::NotFound, {"'dim' is required"}));
  EXPECT_TRUE(IsError(run_op("size", dim_attr(3), {x.view()}, {y.view()}), ErrorCode::InvalidArgument, {"size"}));
  HostTensor wrong(DType::I32, {});
  EXPECT_TRUE(IsError(run_op("size", dim_attr(0), {x.view()}, {wrong.view()}), ErrorCode::InvalidArgument, {"i64"}));
}

}  // namespace
}  // namespace planrt::kernels
