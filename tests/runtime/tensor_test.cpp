#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "planrt/runtime/tensor.h"
#include "planrt/runtime/tensor_spec.h"

namespace planrt {
namespace {

TEST(Tensor, ZerosIsZeroFilledAndAligned) {
  Result<Tensor> t = Tensor::zeros(DType::F32, {3, 5});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->nbytes(), 60u);
  EXPECT_EQ(t->numel(), 15);
  for (float v : t->values<float>()) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data()) % 64, 0u);
  EXPECT_TRUE(t->view().is_contiguous());
}

TEST(Tensor, NegativeOrOverflowingShapeIsRefused) {
  EXPECT_EQ(Tensor::zeros(DType::F32, {2, -1}).status().code(), ErrorCode::InvalidArgument);
  int64_t big = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_EQ(Tensor::zeros(DType::I64, {big, big}).status().code(), ErrorCode::InvalidArgument);
}

TEST(Tensor, FromValuesChecksCountAndElementSize) {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  Result<Tensor> t = Tensor::from_values<float>(DType::F32, {2, 3}, v);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->values<float>()[5], 6.0f);
  EXPECT_EQ(Tensor::from_values<float>(DType::F32, {2, 2}, v).status().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(Tensor::from_values<float>(DType::I64, {2, 3}, v).status().code(), ErrorCode::InvalidArgument);
}

TEST(Tensor, FromViewCopiesAndRefusesDeviceOrStridedViews) {
  std::vector<int32_t> v = {1, 2, 3, 4};
  TensorView view = TensorView::contiguous(v.data(), DType::I32, {4});
  Result<Tensor> t = Tensor::from_view(view);
  ASSERT_TRUE(t.ok());
  v[0] = 99;
  EXPECT_EQ(t->values<int32_t>()[0], 1);
  TensorView dev = view;
  dev.device = Device::cuda(0);
  EXPECT_EQ(Tensor::from_view(dev).status().code(), ErrorCode::InvalidArgument);
  TensorView strided = TensorView::contiguous(v.data(), DType::I32, {2, 2});
  strided.strides = Shape{1, 2};
  EXPECT_EQ(Tensor::from_view(strided).status().code(), ErrorCode::InvalidArgument);
}

TEST(Tensor, CopyToChecksDtypeAndShape) {
  Result<Tensor> t = Tensor::from_values<float>(DType::F32, {2}, std::vector<float>{7, 8});
  ASSERT_TRUE(t.ok());
  std::vector<float> out(2);
  ASSERT_TRUE(t->copy_to(TensorView::contiguous(out.data(), DType::F32, {2})).ok());
  EXPECT_EQ(out[1], 8.0f);
  EXPECT_EQ(t->copy_to(TensorView::contiguous(out.data(), DType::F32, {1})).code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(t->copy_to(TensorView::contiguous(out.data(), DType::I32, {2})).code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(t->copy_to(TensorView::contiguous(nullptr, DType::F32, {2})).code(), ErrorCode::InvalidArgument);
}

class DimBinding : public ::testing::Test {
 protected:
  std::vector<DimSpec> dims_ = {{"B", 1, 8}, {"S", 2, 64}};
  std::vector<int64_t> bound_ = {-1, -1};
  // [B, 2*S, 3]
  std::vector<DimRef> shape_ = {{1, 0}, {2, 1}, {3, -1}};
};

TEST_F(DimBinding, BindsMultipliedDimsAndComputesShapes) {
  ASSERT_TRUE(bind_dims(shape_, Shape{4, 10, 3}, dims_, "x", bound_).ok());
  EXPECT_EQ(bound_, (std::vector<int64_t>{4, 5}));
  Result<Shape> s = concrete_shape(std::vector<DimRef>{{1, 1}, {4, 0}}, bound_, dims_);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (Shape{5, 16}));
  EXPECT_EQ(shape_string(shape_, dims_), "[B, 2*S, 3]");
}

TEST_F(DimBinding, SizeNotAMultipleIsInvalidArgument) {
  Status s = bind_dims(shape_, Shape{4, 9, 3}, dims_, "x", bound_);
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(s.message().find("not a multiple of 2"), std::string::npos) << s.message();
}

TEST_F(DimBinding, DisagreeingInputsAreInvalidArgument) {
  ASSERT_TRUE(bind_dims(shape_, Shape{4, 10, 3}, dims_, "x", bound_).ok());
  Status s = bind_dims(shape_, Shape{3, 10, 3}, dims_, "input 1 'z'", bound_);
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(s.message().find("input 1 'z' dim 0 gives B = 3, but an earlier tensor gave B = 4"),
            std::string::npos)
      << s.message();
}

TEST_F(DimBinding, OutOfBoundsIsOutOfRange) {
  Status s = bind_dims(shape_, Shape{4, 2, 3}, dims_, "x", bound_);  // S = 1 < 2
  EXPECT_EQ(s.code(), ErrorCode::OutOfRange);
  EXPECT_NE(s.message().find("S = 1 is outside its bounds [2, 64]"), std::string::npos) << s.message();
}

TEST_F(DimBinding, MalformedRefsAndUnboundDimsAreErrors) {
  std::vector<DimRef> bad_dim = {{1, 7}};
  EXPECT_EQ(bind_dims(bad_dim, Shape{1}, dims_, "x", bound_).code(), ErrorCode::InvalidProgram);
  std::vector<DimRef> zero_mult = {{0, 0}};
  EXPECT_EQ(bind_dims(zero_mult, Shape{1}, dims_, "x", bound_).code(), ErrorCode::InvalidProgram);
  Result<Shape> unbound = concrete_shape(shape_, bound_, dims_);
  EXPECT_EQ(unbound.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(unbound.status().message().find("named dim B is not bound"), std::string::npos);
}

}  // namespace
}  // namespace planrt
