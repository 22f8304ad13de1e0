#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace planrt::kernels {
namespace {

using testing::HostTensor;
using testing::IsError;
using testing::kTolerance;
using testing::relative_error;
using testing::run_op;

std::vector<double> gather_reference(const HostTensor& table, std::vector<int64_t> ids) {
  const int64_t d = table.shape()[1];
  std::vector<double> ref;
  for (int64_t id : ids) {
    for (int64_t i = 0; i < d; ++i) ref.push_back(table.at(id * d + i));
  }
  return ref;
}

TEST(Embedding, Int64IdsGatherRows) {
  HostTensor table = HostTensor::random({10, 6}, 1);
  HostTensor ids = HostTensor::i64({2, 3}, {9, 0, 3, 3, 7, 1});
  HostTensor y(DType::F32, {2, 3, 6});
  ASSERT_TRUE(run_op("embedding", {}, {ids.view(), table.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, gather_reference(table, {9, 0, 3, 3, 7, 1})), kTolerance);
}

TEST(Embedding, Int32IdsGatherRows) {
  HostTensor table = HostTensor::random({5, 4}, 2);
  HostTensor ids = HostTensor::i32({3}, {4, 2, 0});
  HostTensor y(DType::F32, {3, 4});
  ASSERT_TRUE(run_op("embedding", {}, {ids.view(), table.view()}, {y.view()}).ok());
  EXPECT_LT(relative_error(y, gather_reference(table, {4, 2, 0})), kTolerance);
}

TEST(Embedding, TableOfAnyDtypeIsCopiedBytewise) {
  HostTensor table(DType::F16, {3, 2});
  for (int i = 0; i < 6; ++i) table.as<uint16_t>()[i] = static_cast<uint16_t>(100 + i);
  HostTensor ids = HostTensor::i64({2}, {2, 0});
  HostTensor y(DType::F16, {2, 2});
  ASSERT_TRUE(run_op("embedding", {}, {ids.view(), table.view()}, {y.view()}).ok());
  const uint16_t expected[] = {104, 105, 100, 101};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.as<uint16_t>()[i], expected[i]) << i;
}

TEST(Embedding, IdPastTheTableIsOutOfRangeAndNamed) {
  HostTensor table = HostTensor::random({10, 4}, 1);
  HostTensor ids = HostTensor::i64({4}, {1, 2, 3, 10});
  HostTensor y(DType::F32, {4, 4});
  EXPECT_TRUE(IsError(run_op("embedding", {}, {ids.view(), table.view()}, {y.view()}),
                      ErrorCode::OutOfRange, {"embedding", "ids[3] = 10", "10 rows"}));
}

TEST(Embedding, NegativeIdIsOutOfRange) {
  HostTensor table = HostTensor::random({10, 4}, 1);
  HostTensor ids = HostTensor::i32({2}, {0, -1});
  HostTensor y(DType::F32, {2, 4});
  EXPECT_TRUE(IsError(run_op("embedding", {}, {ids.view(), table.view()}, {y.view()}),
                      ErrorCode::OutOfRange, {"ids[1] = -1"}));
}

TEST(Embedding, FloatIdsAreNotSupported) {
  HostTensor table = HostTensor::random({10, 4}, 1);
  HostTensor ids = HostTensor::random({2}, 2);
  HostTensor y(DType::F32, {2, 4});
  EXPECT_TRUE(IsError(run_op("embedding", {}, {ids.view(), table.view()}, {y.view()}),
                      ErrorCode::NotSupported, {"embedding", "ids have dtype f32"}));
}

TEST(Embedding, TableOfWrongRankIsRejected) {
  HostTensor table = HostTensor::random({10}, 1);
  HostTensor ids = HostTensor::i64({2}, {0, 1});
  HostTensor y(DType::F32, {2});
  EXPECT_TRUE(IsError(run_op("embedding", {}, {ids.view(), table.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"embedding", "table f32 [10]"}));
}

TEST(Embedding, WrongOutputShapeOrDtypeIsRejected) {
  HostTensor table = HostTensor::random({10, 4}, 1);
  HostTensor ids = HostTensor::i64({2}, {0, 1});
  HostTensor wrong_shape(DType::F32, {2, 5});
  EXPECT_TRUE(IsError(run_op("embedding", {}, {ids.view(), table.view()}, {wrong_shape.view()}),
                      ErrorCode::InvalidArgument, {"output is f32 [2, 5]", "expected f32 [2, 4]"}));
  HostTensor wrong_dtype(DType::I64, {2, 4});
  EXPECT_TRUE(IsError(run_op("embedding", {}, {ids.view(), table.view()}, {wrong_dtype.view()}),
                      ErrorCode::InvalidArgument, {"output is i64 [2, 4]"}));
}

}  // namespace
}  // namespace planrt::kernels
