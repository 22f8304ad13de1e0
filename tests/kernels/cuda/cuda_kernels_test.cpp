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
                      {"f16", "the CUDA kernel supports f32"}));
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
