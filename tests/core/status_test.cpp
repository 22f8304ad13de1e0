#include <gtest/gtest.h>

#include "planrt/core/device.h"
#include "planrt/core/dtype.h"
#include "planrt/core/log.h"
#include "planrt/core/result.h"
#include "planrt/core/tensor_view.h"

namespace planrt {
namespace {

Result<int> half_of(int x) {
  if (x % 2 != 0) return make_error(ErrorCode::InvalidArgument, "{} is odd", x);
  return x / 2;
}

Result<int> quarter_of(int x) {
  PLANRT_ASSIGN_OR_RETURN(int h, half_of(x));
  PLANRT_ASSIGN_OR_RETURN(int q, half_of(h));
  return q;
}

TEST(Status, DefaultIsOkAndErrorCarriesCodeAndMessage) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.to_string(), "Ok");
  Status err = make_error(ErrorCode::NotFound, "method '{}' not found", "forward");
  EXPECT_FALSE(err.ok());
  EXPECT_EQ(err.code(), ErrorCode::NotFound);
  EXPECT_EQ(err.message(), "method 'forward' not found");
  EXPECT_EQ(err.with_context("load").message(), "load: method 'forward' not found");
}

TEST(Result, PropagatesTheFirstError) {
  EXPECT_EQ(quarter_of(8).value(), 2);
  Result<int> r = quarter_of(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
}

TEST(Result, OkStatusWithoutValueBecomesInternalError) {
  Result<int> r{Status()};
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::Internal);
}

TEST(Device, ParsesAndPrints) {
  EXPECT_EQ(parse_device("cpu").value(), Device::cpu());
  EXPECT_EQ(parse_device("cuda").value(), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:3").value(), Device::cuda(3));
  EXPECT_EQ(to_string(Device::cuda(1)), "cuda:1");
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", "cuda:999", ""}) {
    EXPECT_FALSE(parse_device(bad).ok()) << bad;
  }
}

TEST(DType, SizesAndNames) {
  EXPECT_EQ(element_size(DType::F32), 4u);
  EXPECT_EQ(element_size(DType::BF16), 2u);
  EXPECT_EQ(element_size(DType::I64), 8u);
  EXPECT_EQ(parse_dtype("bf16").value(), DType::BF16);
  EXPECT_FALSE(parse_dtype("float").ok());
}

TEST(TensorView, ContiguousStridesAndBytes) {
  float data[24];
  TensorView v = TensorView::contiguous(data, DType::F32, Shape{2, 3, 4});
  EXPECT_EQ(v.strides, (Shape{12, 4, 1}));
  EXPECT_EQ(v.nbytes(), 96u);
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(v.sizes.size(-1), 4);
  EXPECT_TRUE(TensorView::none().is_none());
  std::vector<int64_t> too_many(kMaxRank + 1, 1);
  EXPECT_FALSE(Shape::from(too_many).ok());
}

TEST(Log, LevelParsesAndFilters) {
  LogLevel l;
  EXPECT_TRUE(parse_log_level("debug", &l));
  EXPECT_EQ(l, LogLevel::Debug);
  EXPECT_FALSE(parse_log_level("verbose", &l));
  LogLevel saved = log_level();
  set_log_level(LogLevel::Error);
  EXPECT_EQ(log_level(), LogLevel::Error);
  testing::internal::CaptureStderr();
  PLANRT_LOG_WARN("hidden {}", 1);
  PLANRT_LOG_ERROR("shown {}", 2);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "planrt [error] shown 2\n");
  set_log_level(saved);
}

}  // namespace
}  // namespace planrt
