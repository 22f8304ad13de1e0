// The checks every kernel shares (kernels/cpu/checks.cpp), exercised through real ops.
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace planrt::kernels {
namespace {

using testing::HostTensor;
using testing::IsError;
using testing::run_op;

TEST(OperandChecks, WrongInputCountNamesTheOpAndTheCounts) {
  HostTensor a = HostTensor::random({3}, 1);
  HostTensor y(DType::F32, {3});
  EXPECT_TRUE(IsError(run_op("add", {}, {a.view()}, {y.view()}), ErrorCode::InvalidArgument,
                      {"add", "got 1 inputs", "expected 2 to 2"}));
  EXPECT_TRUE(IsError(run_op("relu", {}, {a.view(), a.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"relu", "got 2 inputs"}));
  EXPECT_TRUE(IsError(run_op("concat", {}, {}, {y.view()}), ErrorCode::InvalidArgument,
                      {"concat", "at least 1"}));
}

TEST(OperandChecks, WrongOutputCountIsAnError) {
  HostTensor a = HostTensor::random({3}, 1);
  HostTensor y(DType::F32, {3});
  EXPECT_TRUE(IsError(run_op("relu", {}, {a.view()}, {}), ErrorCode::InvalidArgument,
                      {"relu", "got 0 outputs", "expected 1"}));
  EXPECT_TRUE(IsError(run_op("relu", {}, {a.view()}, {y.view(), y.view()}),
                      ErrorCode::InvalidArgument, {"got 2 outputs"}));
}

TEST(OperandChecks, AbsentRequiredInputIsNamed) {
  HostTensor w = HostTensor::random({4, 3}, 1);
  HostTensor y(DType::F32, {2, 4});
  EXPECT_TRUE(IsError(run_op("linear", {}, {TensorView::none(), w.view()}, {y.view()}),
                      ErrorCode::InvalidArgument, {"linear", "required input x is absent"}));
  HostTensor x = HostTensor::random({2, 3}, 2);
  EXPECT_TRUE(IsError(run_op("linear", {}, {x.view(), w.view()}, {TensorView::none()}),
                      ErrorCode::InvalidArgument, {"linear", "output is absent"}));
}

TEST(OperandChecks, DeviceTensorIsRejected) {
  HostTensor a = HostTensor::random({3}, 1);
  HostTensor y(DType::F32, {3});
  TensorView on_gpu = a.view();
  on_gpu.device = Device::cuda(1);
  EXPECT_TRUE(IsError(run_op("relu", {}, {on_gpu}, {y.view()}), ErrorCode::InvalidArgument,
                      {"relu", "x is on cuda:1"}));
}

TEST(OperandChecks, NonContiguousTensorIsRejected) {
  HostTensor a = HostTensor::random({2, 3}, 1);
  HostTensor y(DType::F32, {2, 3});
  TensorView strided = a.view();
  strided.strides = Shape{1, 2};
  EXPECT_TRUE(IsError(run_op("relu", {}, {strided}, {y.view()}), ErrorCode::InvalidArgument,
                      {"relu", "x of shape [2, 3]", "strides [1, 2]"}));
}

TEST(OperandChecks, MissingDataAndNegativeSizesAreRejected) {
  HostTensor y(DType::F32, {3});
  TensorView no_data = TensorView::contiguous(nullptr, DType::F32, {3});
  EXPECT_TRUE(IsError(run_op("relu", {}, {no_data}, {y.view()}), ErrorCode::InvalidArgument,
                      {"relu", "x of shape [3] has no data"}));
  HostTensor a = HostTensor::random({3}, 1);
  TensorView negative = a.view();
  negative.sizes = Shape{-3};
  negative.strides = Shape{1};
  EXPECT_TRUE(IsError(run_op("relu", {}, {negative}, {y.view()}), ErrorCode::InvalidArgument,
                      {"relu", "negative size"}));
}

TEST(OperandChecks, EmptyTensorsNeedNoData) {
  TensorView x = TensorView::contiguous(nullptr, DType::F32, {0, 4});
  TensorView y = TensorView::contiguous(nullptr, DType::F32, {0, 4});
  EXPECT_TRUE(run_op("relu", {}, {x}, {y}).ok());
}

}  // namespace
}  // namespace planrt::kernels
