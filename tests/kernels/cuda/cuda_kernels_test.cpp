// The CUDA kernels' f32-only paths against the CPU kernel on fresh random inputs (relative
// error below 1e-5 with TF32 off; NaN never passes; bytes equal for data movement): the
// unfused attention, embedding, data movement, in-place elementwise; and the shared operand
// checks, device-side id errors and the TF32 option. The arithmetic kernels that also run in
// bf16 are tested once for both dtypes in kernels_in_each_dtype_test.cpp. GPU tests skip
// without a visible GPU and fail instead with PLANRT_REQUIRE_GPU=1.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cuda/cublas_library.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/operands.h"
#include "support/gpu.h"

namespace planrt::kernels::cuda {
namespace {

using testing::CudaRunner;
using testing::ExpectAgree;
using testing::attrs_of;
using testing::HostTensor;
using testing::IsError;
using testing::rnd;
using testing::kTolerance;


// No GPU needed: the op table and the CUDA registry stay in step.
TEST(CudaKernels, EveryOpHasACudaKernel) {
  for (const OpInfo& op : all_ops()) {
    EXPECT_TRUE(find_cuda_kernel(op.name).ok()) << op.name;
  }
  EXPECT_TRUE(IsError(find_cuda_kernel("conv3d").status(), ErrorCode::NotFound, {"conv3d"}));
}

TEST(CudaKernels, DeviceErrorStatusNamesTheBadId) {
  EXPECT_TRUE(device_error_status(CudaDeviceError{}).ok());
  CudaDeviceError bad;
  bad.kind = static_cast<int32_t>(DeviceErrorKind::EmbeddingIdOutOfRange);
  bad.position = 3;
  bad.value = 12;
  bad.limit = 10;
  EXPECT_TRUE(
      IsError(device_error_status(bad), ErrorCode::OutOfRange, {"ids[3] = 12", "10 rows"}));
  bad.kind = static_cast<int32_t>(DeviceErrorKind::GatherElementsIndexOutOfRange);
  bad.value = -11;
  EXPECT_TRUE(IsError(device_error_status(bad), ErrorCode::OutOfRange,
                      {"gather_elements", "indices[3] = -11", "[-10, 10)"}));
  bad.kind = static_cast<int32_t>(DeviceErrorKind::TakeIndexOutOfRange);
  EXPECT_TRUE(IsError(device_error_status(bad), ErrorCode::OutOfRange,
                      {"take: indices[3] = -11 is outside [-10, 10)"}));
}

TEST(CudaKernels, ElementwiseMayWriteOverItsInput) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  HostTensor a = rnd({1000}, 7);
  HostTensor b = rnd({1000}, 8);
  TensorView da = r.upload(a);
  TensorView db = r.upload(b);
  Result<CudaKernelFn> add = find_cuda_kernel("add");
  ASSERT_TRUE(add.ok());
  std::vector<TensorView> in{da, db};
  std::vector<TensorView> out{da};
  ASSERT_TRUE((*add)(r.ctx(), {}, in, out).ok());
  ASSERT_TRUE(r.synchronize().ok());
  HostTensor got = r.download(da);
  HostTensor want(DType::F32, {1000});
  for (int i = 0; i < 1000; ++i) want.f()[i] = a.f()[i] + b.f()[i];
  EXPECT_LT(testing::relative_error(got, want), kTolerance);
}

TEST(CudaKernels, AttentionMatchesTheCpuCausalAndNot) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  struct Case {
    int64_t sq, sk, d, dv;
  };
  uint32_t seed = 61;
  for (const Case& c : {Case{5, 5, 16, 16}, Case{3, 7, 16, 8}, Case{7, 3, 8, 12},
                        Case{1, 9, 32, 32}}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(fmt::format("Sq {} Sk {} D {} Dv {} causal {}", c.sq, c.sk, c.d, c.dv, causal));
      HostTensor q = rnd({2, 3, c.sq, c.d}, seed++);
      HostTensor k = rnd({2, 3, c.sk, c.d}, seed++);
      HostTensor v = rnd({2, 3, c.sk, c.dv}, seed++);
      ExpectAgree(r, "scaled_dot_product_attention", attrs_of({{"causal", causal}}), {q, k, v},
                  DType::F32, {2, 3, c.sq, c.dv});
      ExpectAgree(r, "scaled_dot_product_attention",
                  attrs_of({{"causal", causal}, {"scale", 0.3}}), {q, k, v}, DType::F32,
                  {2, 3, c.sq, c.dv});
    }
  }
  // No keys: zeros, as on the CPU.
  ExpectAgree(r, "scaled_dot_product_attention", {},
              {rnd({1, 2, 3, 4}, 70), rnd({1, 2, 0, 4}, 71), rnd({1, 2, 0, 5}, 72)}, DType::F32,
              {1, 2, 3, 5});
}

// fused=false at head dim 64 keeps the scores (the unfused path, f32 only) on the shapes the
// fused kernel is tested on (kernels_in_each_dtype_test.cpp): it agrees with the CPU too.
TEST(CudaKernels, UnfusedAttentionAtHeadDim64MatchesTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  for (const testing::AttentionInputs& c : testing::fused_attention_inputs(401)) {
    SCOPED_TRACE(c.label);
    ExpectAgree(r, "scaled_dot_product_attention",
                attrs_of({{"causal", c.causal}, {"fused", false}}), {c.q, c.k, c.v}, DType::F32,
                c.out);
  }
}

// layout "bshd" on the unfused path (head dims other than 64, or fused=false): the
// products read and write rows H * D apart, a group of heads never crossing a batch.
TEST(CudaKernels, UnfusedAttentionInBshdLayoutMatchesTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  uint32_t seed = 601;
  for (int64_t d : {int64_t{32}, int64_t{64}}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(fmt::format("D {} causal {}", d, causal));
      HostTensor q = rnd({2, 7, 3, d}, seed++);
      HostTensor k = rnd({2, 9, 3, d}, seed++);
      HostTensor v = rnd({2, 9, 3, 16}, seed++);
      ExpectAgree(r, "scaled_dot_product_attention",
                  attrs_of({{"causal", causal}, {"fused", false}, {"layout", std::string("bshd")}}),
                  {q, k, v}, DType::F32, {2, 7, 3, 16});
    }
  }
}

// The unfused path on a packed q|k|v projection (attribute heads): the products read rows
// 3 H D apart, k and v starting H D and 2 H D into each row.
TEST(CudaKernels, UnfusedAttentionOnAPackedProjectionMatchesTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  uint32_t seed = 651;
  for (int64_t d : {int64_t{32}, int64_t{64}}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(fmt::format("D {} causal {}", d, causal));
      HostTensor qkv = rnd({2, 7, 3 * 3 * d}, seed++);
      ExpectAgree(r, "scaled_dot_product_attention",
                  attrs_of({{"causal", causal}, {"fused", false}, {"layout", std::string("bshd")},
                            {"heads", int64_t{3}}}),
                  {qkv}, DType::F32, {2, 7, 3 * d});
    }
  }
}

// layout "sbhd" (a sequence-first model's [S, B, H, D] rows) on the unfused path: rows B H D
// apart, a batch's heads H D into each row; three operands and one packed projection.
TEST(CudaKernels, UnfusedAttentionInSbhdLayoutMatchesTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  uint32_t seed = 671;
  for (int64_t d : {int64_t{32}, int64_t{64}}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(fmt::format("D {} causal {}", d, causal));
      HostTensor q = rnd({7, 2, 3, d}, seed++);
      HostTensor k = rnd({9, 2, 3, d}, seed++);
      HostTensor v = rnd({9, 2, 3, 16}, seed++);
      ExpectAgree(r, "scaled_dot_product_attention",
                  attrs_of({{"causal", causal}, {"fused", false}, {"layout", std::string("sbhd")}}),
                  {q, k, v}, DType::F32, {7, 2, 3, 16});
      HostTensor qkv = rnd({7, 2, 3 * 3 * d}, seed++);
      ExpectAgree(r, "scaled_dot_product_attention",
                  attrs_of({{"causal", causal}, {"fused", false}, {"layout", std::string("sbhd")},
                            {"heads", int64_t{3}}}),
                  {qkv}, DType::F32, {7, 2, 3 * d});
    }
  }
}

TEST(CudaKernels, EmbeddingGathersRowsForI32AndI64Ids) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  HostTensor table = rnd({50, 24}, 81);
  for (DType id_type : {DType::I32, DType::I64}) {
    HostTensor ids = HostTensor::ids(id_type, {3, 7}, 82, 0, 50);
    ExpectAgree(r, "embedding", {}, {ids, table}, DType::F32, {3, 7, 24});
  }
  // A table of another dtype with 6-byte rows: moved as bytes.
  HostTensor f16 = HostTensor::random({10, 3}, 83, 0, 0, DType::F16);
  ExpectAgree(r, "embedding", {}, {HostTensor::ids(DType::I64, {9}, 84, 0, 10), f16}, DType::F16,
              {9, 3});
  EXPECT_EQ(r.device_errors().kind, 0);
}

TEST(CudaKernels, EmbeddingRecordsTheFirstBadIdAndReadsNothingOutside) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  HostTensor table = rnd({10, 4}, 91);
  HostTensor ids = HostTensor::ids(DType::I32, {6}, 92, 0, 10);
  static_cast<int32_t*>(ids.data())[2] = 12;
  static_cast<int32_t*>(ids.data())[4] = -1;
  testing::Comparison c = r.compare("embedding", {}, {ids, table}, DType::F32, {6, 4});
  EXPECT_TRUE(IsError(c.cpu, ErrorCode::OutOfRange, {"ids[2] = 12"}));
  EXPECT_TRUE(c.cuda.ok()) << c.cuda.to_string();
  EXPECT_TRUE(IsError(device_error_status(r.device_errors()), ErrorCode::OutOfRange,
                      {"ids[2] = 12", "10 rows"}));
  for (int col = 0; col < 4; ++col) {
    EXPECT_EQ(c.cuda_out.f()[2 * 4 + col], 0.0f);
    EXPECT_EQ(c.cuda_out.f()[4 * 4 + col], 0.0f);
    EXPECT_EQ(c.cuda_out.f()[0 * 4 + col],
              table.f()[static_cast<int32_t*>(ids.data())[0] * 4 + col]);
  }
}

// gather_elements against the CPU kernel, byte for byte: every element size (1, 2, 4, 8
// bytes; x's bytes random, so every bit pattern moves), i32 and i64 indices in
// [-size, size) (negative ones count from the end), every dim (and -1), index shapes
// smaller than x's in the other dims and longer or shorter along the gathered one, rank 1,
// and enough elements for many blocks (and more indices than the check's 1024 threads).
TEST(CudaKernels, GatherElementsMatchesTheCpuForEveryElementSizeDimAndIndexType) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  uint32_t seed = 301;
  auto agree = [&](const OpAttrs& attrs, const HostTensor& x, const HostTensor& indices) {
    testing::Comparison c =
        r.compare("gather_elements", attrs, {x, indices}, x.dtype(), indices.shape());
    EXPECT_TRUE(c.cpu.ok()) << c.cpu.to_string();
    EXPECT_TRUE(c.cuda.ok()) << c.cuda.to_string();
    EXPECT_TRUE(testing::same_bytes(c.cuda_out, c.cpu_out));
  };
  const Shape x_shape{3, 4, 5};
  for (DType dt : {DType::U8, DType::Bool, DType::F16, DType::BF16, DType::F32, DType::I32,
                   DType::I64}) {
    const HostTensor x = HostTensor::random(x_shape, seed++, -1.0f, 1.0f, dt);
    for (DType index_type : {DType::I32, DType::I64}) {
      for (int64_t dim : {0, 1, 2, -1}) {
        const int d = dim < 0 ? static_cast<int>(dim) + x_shape.rank() : static_cast<int>(dim);
        const int64_t size = x_shape[d];
        // The same shape; then smaller in every other dim, 7 long along the gathered one.
        Shape smaller{2, 3, 4};
        smaller[d] = 7;
        for (const Shape& shape : {x_shape, smaller}) {
          SCOPED_TRACE(fmt::format("x {} indices {} {} dim {}", dtype_name(dt),
                                   dtype_name(index_type), shape.to_string(), dim));
          agree(attrs_of({{"dim", dim}}), x,
                HostTensor::ids(index_type, shape, seed++, -size, size));
        }
      }
    }
  }
  // Rank 1, and many blocks (64 * 1000 indices into rows of 300).
  agree({}, HostTensor::random({10}, seed, -1.0f, 1.0f, DType::I64),
        HostTensor::ids(DType::I32, {25}, seed + 1, -10, 10));
  agree(attrs_of({{"dim", int64_t{1}}}), rnd({64, 300}, seed + 2),
        HostTensor::ids(DType::I64, {64, 1000}, seed + 3, -300, 300));
  EXPECT_EQ(r.device_errors().kind, 0);
}

HostTensor index_tensor(DType dtype, const Shape& shape, const std::vector<int64_t>& values) {
  HostTensor t(dtype, shape);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::I64) {
      static_cast<int64_t*>(t.data())[i] = values[i];
    } else {
      static_cast<int32_t*>(t.data())[i] = static_cast<int32_t>(values[i]);
    }
  }
  return t;
}

// ONNX's GatherElements examples, and negative indices, against values written out.
TEST(CudaKernels, GatherElementsPicksTheElementsOnnxDefines) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  HostTensor x(DType::F32, {3, 3});
  for (int i = 0; i < 9; ++i) x.f()[i] = static_cast<float>(i + 1);
  struct Case {
    int64_t dim;
    Shape shape;
    std::vector<int64_t> indices;
    std::vector<float> want;
  };
  const Case cases[] = {
      {1, {3, 2}, {0, 0, 1, 0, 2, 2}, {1, 1, 5, 4, 9, 9}},   // along the rows
      {0, {2, 3}, {1, 2, 0, 2, 0, 0}, {4, 8, 3, 7, 2, 3}},   // ONNX's second example
      {0, {1, 3}, {-1, -3, -2}, {7, 2, 6}},                  // from the end
      {-1, {2, 1}, {-1, -3}, {3, 4}},                        // dim -1, from the end
  };
  for (DType index_type : {DType::I32, DType::I64}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} dim {} {}", dtype_name(index_type), c.dim, c.shape.to_string()));
      const HostTensor indices = index_tensor(index_type, c.shape, c.indices);
      std::vector<TensorView> in{r.upload(x), r.upload(indices)};
      std::vector<TensorView> out{r.device_output(DType::F32, c.shape)};
      Result<CudaKernelFn> fn = find_cuda_kernel("gather_elements");
      ASSERT_TRUE(fn.ok());
      ASSERT_TRUE((*fn)(r.ctx(), attrs_of({{"dim", c.dim}}), in, out).ok());
      ASSERT_TRUE(r.synchronize().ok());
      const HostTensor got = r.download(out[0]);
      for (size_t i = 0; i < c.want.size(); ++i) EXPECT_EQ(got.f()[i], c.want[i]) << i;
    }
  }
  EXPECT_EQ(r.device_errors().kind, 0);
}

// An empty indices tensor gives an empty output, launches nothing and records nothing, in
// any dim, even along a dim of x that is empty.
TEST(CudaKernels, GatherElementsOfNoIndicesDoesNothing) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  const HostTensor x = rnd({3, 4}, 401);
  for (DType index_type : {DType::I32, DType::I64}) {
    for (const Shape& shape : {Shape{0, 4}, Shape{3, 0}, Shape{0, 0}}) {
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(index_type), shape.to_string()));
      testing::Comparison c = r.compare("gather_elements", attrs_of({{"dim", int64_t{0}}}),
                                        {x, HostTensor(index_type, shape)}, DType::F32, shape);
      EXPECT_TRUE(c.cpu.ok()) << c.cpu.to_string();
      EXPECT_TRUE(c.cuda.ok()) << c.cuda.to_string();
    }
  }
  testing::Comparison empty_dim =
      r.compare("gather_elements", attrs_of({{"dim", int64_t{1}}}),
                {HostTensor(DType::F32, {3, 0}), HostTensor(DType::I64, {3, 0})}, DType::F32, {3, 0});
  EXPECT_TRUE(empty_dim.cuda.ok()) << empty_dim.cuda.to_string();
  EXPECT_EQ(r.device_errors().kind, 0);
}

// An index outside [-size, size) is the CPU kernel's OutOfRange; on CUDA it is recorded on
// the device (the first bad position, whatever comes later) and read back as OutOfRange
// naming the op, the position and the index; its element is zero, never a read outside x,
// and the good elements are still gathered.
TEST(CudaKernels, GatherElementsRecordsTheFirstBadIndexAndReadsNothingOutside) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  for (DType index_type : {DType::I32, DType::I64}) {
    SCOPED_TRACE(dtype_name(index_type));
    CudaRunner r;  // a fresh device error record
    const HostTensor x = rnd({4, 5}, 411);
    const HostTensor indices =
        index_tensor(index_type, {2, 5}, {0, -4, 4, 3, -5, 1, 2, -1, 9, 0});
    testing::Comparison c =
        r.compare("gather_elements", attrs_of({{"dim", int64_t{0}}}), {x, indices}, DType::F32, {2, 5});
    EXPECT_TRUE(IsError(c.cpu, ErrorCode::OutOfRange, {"gather_elements", "indices[2] = 4"}));
    EXPECT_TRUE(c.cuda.ok()) << c.cuda.to_string();
    EXPECT_TRUE(IsError(device_error_status(r.device_errors()), ErrorCode::OutOfRange,
                        {"gather_elements", "indices[2] = 4", "[-4, 4)"}));
    // Good elements: x[k][column]; bad ones (positions 2, 4 and 8) zero.
    const int64_t want_rows[] = {0, 0, -1, 3, -1, 1, 2, 3, -1, 0};
    for (int64_t i = 0; i < 10; ++i) {
      const int64_t column = i % 5;
      const float want = want_rows[i] < 0 ? 0.0f : x.f()[want_rows[i] * 5 + column];
      EXPECT_EQ(c.cuda_out.f()[i], want) << i;
    }
    // A later bad call leaves the first record as it is.
    const HostTensor later = index_tensor(index_type, {1, 1}, {-7});
    testing::Comparison again =
        r.compare("gather_elements", attrs_of({{"dim", int64_t{1}}}), {x, later}, DType::F32, {1, 1});
    EXPECT_TRUE(again.cuda.ok());
    EXPECT_TRUE(IsError(device_error_status(r.device_errors()), ErrorCode::OutOfRange,
                        {"indices[2] = 4"}));
  }
}

TEST(CudaKernels, GatherElementsRefusesBadCallsBeforeAnythingRuns) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  Result<CudaKernelFn> fn = find_cuda_kernel("gather_elements");
  ASSERT_TRUE(fn.ok());
  TensorView x = r.upload(rnd({3, 4}, 421));
  TensorView out = r.device_output(DType::F32, {3, 4});
  auto call = [&](const OpAttrs& attrs, const TensorView& indices, const TensorView& y) {
    std::vector<TensorView> in{x, indices};
    std::vector<TensorView> o{y};
    return (*fn)(r.ctx(), attrs, in, o);
  };
  EXPECT_TRUE(IsError(call({}, r.upload(HostTensor(DType::F32, {3, 4})), out),
                      ErrorCode::NotSupported, {"gather_elements", "f32", "i32 or i64"}));
  EXPECT_TRUE(IsError(call({}, r.upload(HostTensor(DType::I64, {12})), r.device_output(DType::F32, {12})),
                      ErrorCode::InvalidArgument, {"gather_elements", "x's rank"}));
  EXPECT_TRUE(IsError(call(attrs_of({{"dim", int64_t{0}}}), r.upload(HostTensor(DType::I64, {3, 5})),
                           r.device_output(DType::F32, {3, 5})),
                      ErrorCode::InvalidArgument, {"gather_elements", "dim 1"}));
  EXPECT_TRUE(IsError(call(attrs_of({{"dim", int64_t{2}}}), r.upload(HostTensor(DType::I64, {3, 4})), out),
                      ErrorCode::InvalidArgument, {"gather_elements", "dim = 2", "out of range"}));
  EXPECT_TRUE(IsError(call({}, r.upload(HostTensor(DType::I64, {3, 4})), r.device_output(DType::F16, {3, 4})),
                      ErrorCode::InvalidArgument, {"gather_elements", "output"}));
  ASSERT_TRUE(r.synchronize().ok());
  EXPECT_EQ(r.device_errors().kind, 0);
}

// take against the CPU kernel, byte for byte: every element size (x's bytes random), i32
// and i64 indices over all of [-numel, numel) (negative ones count from the end), index
// shapes of other ranks than x's (a scalar too), and enough indices for many blocks (and
// more than the check's 1024 threads).
TEST(CudaKernels, TakeMatchesTheCpuForEveryElementSizeAndIndexType) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  uint32_t seed = 501;
  auto agree = [&](const HostTensor& x, const HostTensor& indices) {
    testing::Comparison c = r.compare("take", {}, {x, indices}, x.dtype(), indices.shape());
    EXPECT_TRUE(c.cpu.ok()) << c.cpu.to_string();
    EXPECT_TRUE(c.cuda.ok()) << c.cuda.to_string();
    EXPECT_TRUE(testing::same_bytes(c.cuda_out, c.cpu_out));
  };
  for (DType dt : {DType::U8, DType::Bool, DType::F16, DType::BF16, DType::F32, DType::I32,
                   DType::I64}) {
    for (const Shape& x_shape : {Shape{3, 4, 5}, Shape{7}}) {
      const HostTensor x = HostTensor::random(x_shape, seed++, -1.0f, 1.0f, dt);
      const int64_t numel = x_shape.numel();
      for (DType index_type : {DType::I32, DType::I64}) {
        for (const Shape& shape : {Shape{2, 3}, Shape{9}, Shape{}, Shape{2, 2, 2, 2}}) {
          SCOPED_TRACE(fmt::format("x {} {} indices {} {}", dtype_name(dt), x_shape.to_string(),
                                   dtype_name(index_type), shape.to_string()));
          agree(x, HostTensor::ids(index_type, shape, seed++, -numel, numel));
        }
      }
    }
  }
  // Many blocks: 64 * 1000 indices into 300 * 7 elements.
  agree(rnd({300, 7}, seed), HostTensor::ids(DType::I64, {64, 1000}, seed + 1, -2100, 2100));
  agree(HostTensor::random({300, 7}, seed + 2, -1.0f, 1.0f, DType::F16),
        HostTensor::ids(DType::I32, {64, 1000}, seed + 3, -2100, 2100));
  EXPECT_EQ(r.device_errors().kind, 0);
}

// Written-out values: the first, the last and negative positions of a [2, 3] x.
TEST(CudaKernels, TakePicksTheFlatPositionsTorchDefines) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  HostTensor x(DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i) x.f()[i] = static_cast<float>(10 * (i + 1));
  for (DType index_type : {DType::I32, DType::I64}) {
    SCOPED_TRACE(dtype_name(index_type));
    const HostTensor indices = index_tensor(index_type, {2, 3}, {0, 5, -1, -6, 3, -4});
    std::vector<TensorView> in{r.upload(x), r.upload(indices)};
    std::vector<TensorView> out{r.device_output(DType::F32, {2, 3})};
    Result<CudaKernelFn> fn = find_cuda_kernel("take");
    ASSERT_TRUE(fn.ok());
    ASSERT_TRUE((*fn)(r.ctx(), {}, in, out).ok());
    ASSERT_TRUE(r.synchronize().ok());
    const HostTensor got = r.download(out[0]);
    const float want[] = {10, 60, 60, 10, 40, 30};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(got.f()[i], want[i]) << i;
  }
  EXPECT_EQ(r.device_errors().kind, 0);
}

// No indices: an empty output, nothing launched or recorded, even from an empty x.
TEST(CudaKernels, TakeOfNoIndicesDoesNothing) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  for (DType index_type : {DType::I32, DType::I64}) {
    for (const Shape& x_shape : {Shape{3, 4}, Shape{0}, Shape{2, 0}}) {
      for (const Shape& shape : {Shape{0}, Shape{2, 0}}) {
        SCOPED_TRACE(fmt::format("{} x {} indices {}", dtype_name(index_type),
                                 x_shape.to_string(), shape.to_string()));
        testing::Comparison c = r.compare("take", {}, {HostTensor(DType::F32, x_shape),
                                                       HostTensor(index_type, shape)},
                                          DType::F32, shape);
        EXPECT_TRUE(c.cpu.ok()) << c.cpu.to_string();
        EXPECT_TRUE(c.cuda.ok()) << c.cuda.to_string();
      }
    }
  }
  ASSERT_TRUE(r.synchronize().ok());
  EXPECT_EQ(r.device_errors().kind, 0);
}

// An index outside [-numel, numel) is the CPU kernel's OutOfRange; on CUDA it is recorded on
// the device (the first bad position) and read back as OutOfRange with take's message; its
// element is zero (never a read outside x) and the good ones are still taken. A later bad
// call leaves the first record as it is.
TEST(CudaKernels, TakeRecordsTheFirstBadIndexAndReadsNothingOutside) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  for (DType index_type : {DType::I32, DType::I64}) {
    SCOPED_TRACE(dtype_name(index_type));
    CudaRunner r;  // a fresh device error record
    const HostTensor x = rnd({2, 3}, 511);
    const HostTensor indices = index_tensor(index_type, {7}, {0, -6, 6, 5, -7, -1, 100});
    testing::Comparison c = r.compare("take", {}, {x, indices}, DType::F32, {7});
    EXPECT_TRUE(IsError(c.cpu, ErrorCode::OutOfRange, {"take: indices[2] = 6 is outside [-6, 6)"}));
    EXPECT_TRUE(c.cuda.ok()) << c.cuda.to_string();
    EXPECT_TRUE(IsError(device_error_status(r.device_errors()), ErrorCode::OutOfRange,
                        {"take: indices[2] = 6 is outside [-6, 6)"}));
    const int64_t want[] = {0, 0, -1, 5, -1, 5, -1};  // flat positions; -1: zero
    for (int64_t i = 0; i < 7; ++i) {
      EXPECT_EQ(c.cuda_out.f()[i], want[i] < 0 ? 0.0f : x.f()[want[i]]) << i;
    }
    testing::Comparison again =
        r.compare("take", {}, {x, index_tensor(index_type, {1}, {-9})}, DType::F32, {1});
    EXPECT_TRUE(again.cuda.ok());
    EXPECT_TRUE(IsError(device_error_status(r.device_errors()), ErrorCode::OutOfRange,
                        {"indices[2] = 6", "[-6, 6)"}));
  }
}

// Each case's (x shape, dim, want).
struct SizeCase {
  Shape shape;
  int64_t dim;
  int64_t want;
};
const SizeCase kSizeCases[] = {
    {{2, 3, 5}, 0, 2},  {{2, 3, 5}, 1, 3},     {{2, 3, 5}, 2, 5},
    {{2, 3, 5}, -1, 5}, {{2, 3, 5}, -3, 2},    {{7}, 0, 7},
    {{7}, -1, 7},       {{4, 0, 2}, 1, 0},     {{1, 1, 1, 1, 1, 1, 1, 123456}, -1, 123456},
};

int64_t read_i64(const HostTensor& t) { return *static_cast<const int64_t*>(t.data()); }

// size writes x's size along dim (negative from the end) as an i64 scalar, whatever x's
// dtype, agreeing with the CPU kernel.
TEST(CudaKernels, SizeWritesTheDimsSizeAsAnI64Scalar) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  uint32_t seed = 521;
  for (DType dt : {DType::F32, DType::U8, DType::I64}) {
    for (const SizeCase& c : kSizeCases) {
      SCOPED_TRACE(fmt::format("{} {} dim {}", dtype_name(dt), c.shape.to_string(), c.dim));
      testing::Comparison cmp =
          r.compare("size", attrs_of({{"dim", c.dim}}),
                    {HostTensor::random(c.shape, seed++, -1.0f, 1.0f, dt)}, DType::I64, {});
      ASSERT_TRUE(cmp.cpu.ok()) << cmp.cpu.to_string();
      ASSERT_TRUE(cmp.cuda.ok()) << cmp.cuda.to_string();
      EXPECT_EQ(read_i64(cmp.cuda_out), c.want);
      EXPECT_EQ(read_i64(cmp.cpu_out), c.want);
    }
  }
  // Bad calls fail before anything runs: no dim, a dim out of range, a scalar x, an output
  // that is not an i64 scalar.
  Result<CudaKernelFn> fn = find_cuda_kernel("size");
  ASSERT_TRUE(fn.ok());
  TensorView x = r.upload(rnd({2, 3}, seed));
  auto call = [&](const OpAttrs& attrs, const TensorView& in, const TensorView& y) {
    std::vector<TensorView> i{in};
    std::vector<TensorView> o{y};
    return (*fn)(r.ctx(), attrs, i, o);
  };
  const TensorView scalar = r.device_output(DType::I64, {});
  EXPECT_TRUE(IsError(call({}, x, scalar), ErrorCode::NotFound, {"size", "dim"}));
  EXPECT_FALSE(call(attrs_of({{"dim", int64_t{2}}}), x, scalar).ok());
  EXPECT_FALSE(call(attrs_of({{"dim", int64_t{0}}}), r.upload(rnd({}, seed)), scalar).ok());
  EXPECT_FALSE(call(attrs_of({{"dim", int64_t{0}}}), x, r.device_output(DType::I32, {})).ok());
  EXPECT_FALSE(call(attrs_of({{"dim", int64_t{0}}}), x, r.device_output(DType::I64, {1})).ok());
  ASSERT_TRUE(r.synchronize().ok());
  EXPECT_EQ(read_i64(r.download(scalar)), -1);  // still the 0xff fill: nothing written
}

// size on a stream being captured: no synchronous copy or host sync breaks the capture, and
// replaying the graph writes the value.
TEST(CudaKernels, SizeIsCapturedInACudaGraph) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  Result<CudaKernelFn> fn = find_cuda_kernel("size");
  ASSERT_TRUE(fn.ok());
  std::vector<TensorView> in{r.upload(rnd({4, 9, 2}, 531))};
  std::vector<TensorView> out{r.device_output(DType::I64, {})};
  ASSERT_TRUE(r.synchronize().ok());
  ASSERT_EQ(cudaStreamBeginCapture(r.stream(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status called = (*fn)(r.ctx(), attrs_of({{"dim", int64_t{-2}}}), in, out);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(r.stream(), &graph), cudaSuccess);
  ASSERT_TRUE(called.ok()) << called.to_string();
  EXPECT_EQ(read_i64(r.download(out[0])), -1);  // captured, not run
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, r.stream()), cudaSuccess);
  ASSERT_TRUE(r.synchronize().ok());
  EXPECT_EQ(read_i64(r.download(out[0])), 9);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// A permute that keeps the innermost dim in place moves 16-byte runs when the rows allow
// it (the head split and merge of attention); rows that do not (odd widths, operands off
// alignment) take the element-wise path. Both must agree with the CPU, for every size.
TEST(CudaKernels, PermuteKeepingTheInnermostDimMatchesTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  uint32_t seed = 141;
  const OpAttrs swap = attrs_of({{"dims", std::vector<int64_t>{0, 2, 1, 3}}});
  for (DType dt : {DType::F32, DType::F16, DType::I64, DType::BF16}) {
    for (int64_t width : {64, 8, 6, 3}) {
      SCOPED_TRACE(fmt::format("{} width {}", dtype_name(dt), width));
      HostTensor x = HostTensor::random({2, 37, 5, width}, seed++, -1.0f, 1.0f, dt);
      ExpectAgree(r, "permute", swap, {x}, dt, {2, 5, 37, width});
      // One element off 16-byte alignment (elements themselves stay aligned).
      const size_t offset = element_size(dt);
      TensorView off = r.upload(x, offset);
      TensorView out = r.device_output(dt, {2, 5, 37, width}, offset);
      Result<CudaKernelFn> permute = find_cuda_kernel("permute");
      ASSERT_TRUE(permute.ok());
      std::vector<TensorView> in{off};
      std::vector<TensorView> o{out};
      ASSERT_TRUE((*permute)(r.ctx(), swap, in, o).ok());
      ASSERT_TRUE(r.synchronize().ok());
      testing::Comparison ref = r.compare("permute", swap, {x}, dt, {2, 5, 37, width});
      EXPECT_TRUE(testing::same_bytes(r.download(out), ref.cpu_out));
    }
  }
}

TEST(CudaKernels, DataMovementMatchesTheCpuForEveryElementSize) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  uint32_t seed = 101;
  for (DType dt : {DType::F32, DType::F16, DType::I64, DType::I32, DType::BF16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    HostTensor x = HostTensor::random({2, 3, 5}, seed++, -1.0f, 1.0f, dt);
    ExpectAgree(r, "reshape", {}, {x}, dt, {6, 5});
    ExpectAgree(r, "permute", attrs_of({{"dims", std::vector<int64_t>{2, 0, 1}}}), {x}, dt,
                {5, 2, 3});
    ExpectAgree(r, "transpose", attrs_of({{"dim0", int64_t{0}}, {"dim1", int64_t{-1}}}), {x}, dt,
                {5, 3, 2});
    HostTensor y = HostTensor::random({2, 4, 5}, seed++, -1.0f, 1.0f, dt);
    HostTensor z = HostTensor::random({2, 1, 5}, seed++, -1.0f, 1.0f, dt);
    ExpectAgree(r, "concat", attrs_of({{"dim", int64_t{1}}}), {x, y, z}, dt, {2, 8, 5});
    ExpectAgree(r, "concat", attrs_of({{"dim", int64_t{-1}}}), {x, x}, dt, {2, 3, 10});
    ExpectAgree(r, "slice",
                attrs_of({{"dim", int64_t{2}}, {"start", int64_t{-4}}, {"end", int64_t{4}}}),
                {x}, dt, {2, 3, 3});
    ExpectAgree(r, "slice", attrs_of({{"dim", int64_t{1}}, {"start", int64_t{1}}}), {x}, dt,
                {2, 2, 5});
  }
}

TEST(CudaKernels, BadOperandsAreRejectedBeforeAnythingRuns) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  Result<CudaKernelFn> add = find_cuda_kernel("add");
  Result<CudaKernelFn> matmul = find_cuda_kernel("matmul");
  ASSERT_TRUE(add.ok() && matmul.ok());
  TensorView a = r.upload(rnd({2, 3}, 111));
  TensorView b = r.upload(rnd({4}, 112));
  TensorView out = r.device_output(DType::F32, {2, 3});
  HostTensor before = r.download(out);
  auto call = [&](CudaKernelFn fn, std::vector<TensorView> in, std::vector<TensorView> o) {
    return fn(r.ctx(), {}, in, o);
  };
  EXPECT_TRUE(IsError(call(*add, {a, b}, {out}), ErrorCode::InvalidArgument,
                      {"add", "do not broadcast"}));
  EXPECT_TRUE(IsError(call(*matmul, {a, b}, {out}), ErrorCode::InvalidArgument,
                      {"matmul", "inner dims differ"}));
  EXPECT_TRUE(IsError(call(*add, {a}, {out}), ErrorCode::InvalidArgument, {"got 1 inputs"}));
  HostTensor host = rnd({2, 3}, 113);
  EXPECT_TRUE(IsError(call(*add, {a, host.view()}, {out}), ErrorCode::InvalidArgument,
                      {"b is on cpu", "CUDA kernel"}));
  TensorView half = r.upload(HostTensor::random({2, 3}, 114, 0, 0, DType::F16));
  EXPECT_TRUE(IsError(call(*add, {a, half}, {out}), ErrorCode::NotSupported,
                      {"b has dtype f16 but a has f32", "the CUDA kernel needs one dtype"}));
  TensorView wrong_out = r.device_output(DType::F32, {3, 2});
  EXPECT_TRUE(IsError(call(*add, {a, a}, {wrong_out}), ErrorCode::InvalidArgument,
                      {"output is f32 [3, 2], expected f32 [2, 3]"}));
  TensorView strided = a;
  strided.strides = Shape{1, 2};
  EXPECT_TRUE(IsError(call(*add, {strided, a}, {out}), ErrorCode::InvalidArgument,
                      {"the CUDA kernel needs contiguous"}));
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  TensorView elsewhere = a;
  elsewhere.device = Device::cuda(device + 1);
  EXPECT_TRUE(IsError(call(*add, {elsewhere, a}, {out}), ErrorCode::InvalidArgument,
                      {"current device"}));
  ASSERT_TRUE(r.synchronize().ok());
  EXPECT_TRUE(testing::same_bytes(r.download(out), before)) << "a rejected call wrote its output";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaKernels, GemmsWithoutAHandleOrScratchFailCleanly) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  CudaRunner r;
  TensorView x = r.upload(rnd({2, 4}, 121));
  TensorView w = r.upload(rnd({3, 4}, 122));
  TensorView out = r.device_output(DType::F32, {2, 3});
  CudaKernelContext no_blas = r.ctx();
  no_blas.cublas = nullptr;
  Result<CudaKernelFn> linear = find_cuda_kernel("linear");
  ASSERT_TRUE(linear.ok());
  std::vector<TensorView> in{x, w};
  std::vector<TensorView> o{out};
  EXPECT_TRUE(IsError((*linear)(no_blas, {}, in, o), ErrorCode::InvalidArgument, {"cuBLAS"}));
  // A fused activation is the host's (the builder fuses it into host linears only).
  OpAttrs gelu;
  gelu.set("activation", std::string("gelu"));
  EXPECT_TRUE(IsError((*linear)(r.ctx(), gelu, in, o), ErrorCode::NotSupported, {"runs on the host only"}));
  CudaKernelContext no_temp = r.ctx();
  no_temp.temp = nullptr;
  Result<CudaKernelFn> sdpa = find_cuda_kernel("scaled_dot_product_attention");
  ASSERT_TRUE(sdpa.ok());
  TensorView q = r.upload(rnd({1, 2, 4}, 123));
  TensorView attn = r.device_output(DType::F32, {1, 2, 4});
  std::vector<TensorView> qkv{q, q, q};
  std::vector<TensorView> ao{attn};
  EXPECT_TRUE(IsError((*sdpa)(no_temp, {}, qkv, ao), ErrorCode::InvalidArgument,
                      {"temporary memory"}));
}

// A handle adds no default workspace to the device (cuBLAS 13.1 on an H200: 68 MiB for the
// first handle with it, 4 MiB without). Device-wide figures: the cuda tests run serially.
TEST(CudaKernels, ACublasHandleAllocatesNoDefaultWorkspace) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  if (std::getenv("CUBLAS_WORKSPACE_CONFIG") != nullptr) {
    GTEST_SKIP() << "CUBLAS_WORKSPACE_CONFIG was set by the caller";
  }
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // the context first: it is not the handle's
  auto used = [] {
    size_t free_b = 0, total_b = 0;
    EXPECT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
    return static_cast<int64_t>(total_b - free_b);
  };
  Result<CublasHandle> warm = CublasHandle::create();  // the library's own one-time state
  ASSERT_TRUE(warm.ok()) << warm.status().to_string();
  const int64_t before = used();
  Result<CublasHandle> handle = CublasHandle::create();
  ASSERT_TRUE(handle.ok()) << handle.status().to_string();
  const int64_t after = used();
  EXPECT_LT(after - before, int64_t{8} << 20) << "a second handle took " << (after - before) << " bytes";
  EXPECT_EQ(std::getenv("CUBLAS_WORKSPACE_CONFIG"), nullptr) << "the environment is left as it was";
}

TEST(CudaKernels, Tf32IsOffByDefaultAndAnOptionTurnsItOn) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  Result<CublasHandle> plain = CublasHandle::create();
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  cublasMath_t mode = CUBLAS_TF32_TENSOR_OP_MATH;
  ASSERT_EQ(cublas_library_if_open()->cublasGetMathMode(plain->get(), &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_DEFAULT_MATH);
  Result<bool> plain_tf32 = plain->allow_tf32();
  ASSERT_TRUE(plain_tf32.ok());
  EXPECT_FALSE(*plain_tf32);

  CudaRunner r(CublasOptions{.allow_tf32 = true});
  ASSERT_EQ(cublas_library_if_open()->cublasGetMathMode(r.ctx().cublas, &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_TF32_TENSOR_OP_MATH);
  Result<bool> tf32 = r.cublas().allow_tf32();
  ASSERT_TRUE(tf32.ok());
  EXPECT_TRUE(*tf32);
  // A large GEMM with TF32 stays within 1e-2 of the f32 CPU result.
  HostTensor x = rnd({512, 1024}, 131);
  HostTensor w = rnd({768, 1024}, 132);
  testing::Comparison c = r.compare("linear", {}, {x, w}, DType::F32, {512, 768});
  ASSERT_TRUE(c.cpu.ok() && c.cuda.ok()) << c.cuda.to_string();
  EXPECT_LT(c.error, 1e-2);

  // Switching back gives full f32 again.
  ASSERT_TRUE(r.cublas().set_allow_tf32(false).ok());
  ASSERT_EQ(cublas_library_if_open()->cublasGetMathMode(r.ctx().cublas, &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_DEFAULT_MATH);
  testing::Comparison full = r.compare("linear", {}, {x, w}, DType::F32, {512, 768});
  EXPECT_LT(full.error, kTolerance);
}

}  // namespace
}  // namespace planrt::kernels::cuda
