// The build-time dtype table (kernels/dtype_support.h): what the builder refuses before a
// program runs. The CPU computes f32 only (plus the typed family's and cumsum's integer
// forms); CUDA computes f16 wherever it computes bf16. Each refusal names the op, the input,
// its dtype and what the kernel takes. The CPU kernels themselves refuse the same inputs
// when they run (checked for f16 here on a few ops).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/dtype_support.h"

namespace planrt::kernels {
namespace {

using testing::HostTensor;
using testing::IsError;
using testing::run_op;

// The arithmetic ops whose CUDA kernels have 16-bit paths (every input of one dtype).
constexpr const char* kArithmetic[] = {"linear",  "matmul",     "layer_norm", "rms_norm",    "softmax",
                                       "log_softmax", "gelu",   "silu",       "relu",        "reduce_sum",
                                       "reduce_mean", "argmax", "conv2d",     "max_pool2d",  "clip",
                                       "scaled_dot_product_attention"};

TEST(DtypeSupport, CudaTakesF16WhereverItTakesBf16) {
  for (const char* op : kArithmetic) {
    SCOPED_TRACE(op);
    for (DType d : {DType::F32, DType::BF16, DType::F16}) {
      const std::vector<DType> two{d, d};
      EXPECT_TRUE(check_kernel_dtypes(KernelBackend::Cuda, op, two).ok()) << dtype_name(d);
    }
    const std::vector<DType> ints{DType::I32};
    EXPECT_TRUE(IsError(check_kernel_dtypes(KernelBackend::Cuda, op, ints), ErrorCode::NotSupported,
                        {op, "has dtype i32", "the CUDA kernel supports f32, f16 and bf16"}));
  }
  const std::vector<DType> half{DType::F16};
  EXPECT_TRUE(check_kernel_dtypes(KernelBackend::Cuda, "cumsum", half).ok());
  const std::vector<DType> bytes{DType::U8};
  EXPECT_TRUE(IsError(check_kernel_dtypes(KernelBackend::Cuda, "cumsum", bytes), ErrorCode::NotSupported,
                      {"cumsum", "u8", "f32, f16, bf16, i32 and i64"}));
}

TEST(DtypeSupport, TheCpuRefusesF16AndBf16ArithmeticNamingTheOpAndTheDtype) {
  for (const char* op : kArithmetic) {
    SCOPED_TRACE(op);
    for (DType d : {DType::F16, DType::BF16}) {
      const std::vector<DType> in{d};
      const std::string says = std::string("has dtype ") + std::string(dtype_name(d));
      EXPECT_TRUE(IsError(check_kernel_dtypes(KernelBackend::Cpu, op, in), ErrorCode::NotSupported,
                          {op, says, "the CPU kernel supports f32"}));
    }
    const std::vector<DType> f32{DType::F32};
    EXPECT_TRUE(check_kernel_dtypes(KernelBackend::Cpu, op, f32).ok());
  }
  // Elements that only move, and the typed elementwise family, take f16 on the CPU too.
  for (const char* op : {"reshape", "permute", "concat", "embedding", "cast", "where", "isnan"}) {
    SCOPED_TRACE(op);
    const std::vector<DType> in{DType::F16};
    EXPECT_TRUE(check_kernel_dtypes(KernelBackend::Cpu, op, in).ok());
  }
}

// The CPU kernels refuse f16 when they run, in the table's words.
TEST(DtypeSupport, TheCpuKernelsRefuseF16AsTheTableSays) {
  HostTensor x(DType::F16, {2, 8});  // zeros: only the dtype matters
  HostTensor w(DType::F16, {4, 8});
  HostTensor y(DType::F16, {2, 4});
  const std::vector<DType> linear_in{DType::F16, DType::F16};
  const Status table = check_kernel_dtypes(KernelBackend::Cpu, "linear", linear_in);
  EXPECT_TRUE(IsError(run_op("linear", {}, {x.view(), w.view()}, {y.view()}), ErrorCode::NotSupported,
                      {"linear", "f16", "the CPU kernel supports f32"}));
  EXPECT_TRUE(IsError(table, ErrorCode::NotSupported, {"linear", "x has dtype f16", "the CPU kernel supports f32"}));
  HostTensor s(DType::F16, {2, 8});
  EXPECT_TRUE(IsError(run_op("softmax", {}, {x.view()}, {s.view()}), ErrorCode::NotSupported, {"softmax", "f16"}));
}

}  // namespace
}  // namespace planrt::kernels
