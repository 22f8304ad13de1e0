// The CUDA device allocator, device guard, Stream and Event. GPU tests skip without a GPU.
// The allocator's DeviceAllocator contract is the shared suite of
// support/device_allocator_contract.h; what is CUDA's own (device memory on the right
// device, the guard, cleared errors) is here.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "planrt/platform/cuda.h"
#include "planrt/platform/device_buffer.h"
#include "platform/cuda/cuda_allocator.h"
#include "platform/cuda/device_guard.h"
#include "platform/cuda/fault_injection.h"
#include "platform/cuda/stream.h"
#include "support/device_allocator_contract.h"
#include "support/gpu.h"
#include "support/test_device.h"

namespace planrt {
namespace {

using testing::DeviceAllocatorContract;
using testing::DeviceAllocatorFailureContract;

constexpr size_t kMiB = size_t{1} << 20;

int current_device() {
  int d = -1;
  EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
  return d;
}

// The CUDA allocator under the DeviceAllocator contract: cuda_allocator.h documents
// InvalidArgument for a device that is not CUDA; cudaMalloc aligns to 256 bytes; failures
// are injected through fault_injection.h (process-wide, disarmed after each test).
testing::AllocatorCase cuda_allocator_case() {
  testing::AllocatorCase c;
  c.name = "CudaAllocator";
  c.make = [] { return testing::borrowed(cuda::cuda_allocator()); };
  c.device = Device::cuda(0);
  c.foreign = Device::cpu();
  c.foreign_code = ErrorCode::InvalidArgument;
  c.alignment = 256;
  c.absurd_bytes = size_t{1} << 50;  // 1 PiB
  c.knows_total_memory = true;
  c.needs_gpu = true;
  c.fail_nth_allocation = [](DeviceAllocator&, int64_t n) { cuda::testing::fail_nth_allocation(n); };
  c.verify = [](DeviceAllocator&) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a CUDA error was left for unrelated code";
  };
  return c;
}

INSTANTIATE_TEST_SUITE_P(Cuda, DeviceAllocatorContract, ::testing::Values(cuda_allocator_case()),
                         testing::AllocatorCaseName);
INSTANTIATE_TEST_SUITE_P(Cuda, DeviceAllocatorFailureContract,
                         ::testing::Values(cuda_allocator_case()), testing::AllocatorCaseName);

// Needs no GPU: registration only.
TEST(CudaAllocatorRegistration, IsIdempotentAndRefusesToReplaceAnotherAllocator) {
  (void)unregister_device_allocator(DeviceType::CUDA);
  {
    testing::ScopedTestAllocator other(DeviceType::CUDA);
    ASSERT_TRUE(other.status().ok()) << other.status().to_string();
    Status s = register_cuda_allocator();
    EXPECT_EQ(s.code(), ErrorCode::InvalidArgument) << s.to_string();
    EXPECT_EQ(get_device_allocator(DeviceType::CUDA), &other.allocator());
  }
  ASSERT_TRUE(register_cuda_allocator().ok());
  ASSERT_TRUE(register_cuda_allocator().ok());
  EXPECT_EQ(get_device_allocator(DeviceType::CUDA), &cuda::cuda_allocator());
  EXPECT_TRUE(unregister_device_allocator(DeviceType::CUDA).ok());
}

// The bytes' round trip through the allocator's copies: the contract's
// CopiesMoveBytesThroughDeviceMemory (3 MiB + 17 among its sizes).
TEST(CudaAllocator, RegisteredAllocatorGivesDeviceMemoryOnTheDevice) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  ASSERT_TRUE(register_cuda_allocator().ok());
  const size_t n = 3 * kMiB + 17;  // not a multiple of anything convenient
  Result<DeviceBuffer> a = DeviceBuffer::allocate(n, Device::cuda(0));
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, a->data()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);  // device memory, not host
  EXPECT_EQ(attr.device, 0);
}

// OutOfMemory naming the bytes, and the next allocation working: the contract's
// AnImpossibleSizeIsOutOfMemoryNamingItAndTheNextAllocationWorks (with 1 PiB).
TEST(CudaAllocator, OutOfMemoryNamesTheDeviceAndClearsTheCudaError) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  const size_t absurd = size_t{1} << 50;  // 1 PiB
  DeviceAllocator& a = cuda::cuda_allocator();
  Result<void*> p = a.allocate(absurd, Device::cuda(0));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("cuda:0"), std::string::npos) << p.status().message();
  // The error was cleared: it does not leak into an unrelated later check.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  Result<void*> q = a.allocate(kMiB, Device::cuda(0));
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(cudaMemset(*q, 0, kMiB), cudaSuccess);
  a.deallocate(*q, kMiB, Device::cuda(0));
}

TEST(CudaAllocator, DeviceThatDoesNotExistIsAnErrorNamingIt) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  Result<void*> p = cuda::cuda_allocator().allocate(kMiB, Device::cuda(count));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::InvalidArgument) << p.status().to_string();
  EXPECT_NE(p.status().message().find("cuda:" + std::to_string(count)), std::string::npos)
      << p.status().message();
  EXPECT_NE(p.status().message().find(std::to_string(kMiB)), std::string::npos)
      << p.status().message();
  // A device that is not CUDA: the contract's ADeviceOfAnotherTypeIsRefusedNamingIt.
}

TEST(DeviceGuard, RefusesAMissingDeviceAndLeavesTheCurrentOne) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  auto g = cuda::DeviceGuard::set(count);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), ErrorCode::InvalidArgument) << g.status().to_string();
  EXPECT_NE(g.status().message().find("cuda:" + std::to_string(count) + " does not exist"),
            std::string::npos)
      << g.status().message();
  EXPECT_EQ(current_device(), 0);
  {
    auto same = cuda::DeviceGuard::set(0);
    ASSERT_TRUE(same.ok()) << same.status().to_string();
    EXPECT_EQ(current_device(), 0);
  }
  EXPECT_EQ(current_device(), 0);
}

TEST(DeviceGuard, SwitchesAndRestoresTheCurrentDevice) {
  PLANRT_REQUIRE_GPUS_OR_SKIP(2);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  {
    auto g = cuda::DeviceGuard::set(1);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(current_device(), 1);
    auto moved = std::move(g).value();  // the moved-from guard must not restore twice
    EXPECT_EQ(current_device(), 1);
  }
  EXPECT_EQ(current_device(), 0);
  // The allocator's guard: allocating on cuda:1 leaves cuda:0 current.
  Result<void*> p = cuda::cuda_allocator().allocate(kMiB, Device::cuda(1));
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(current_device(), 0);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, *p), cudaSuccess);
  EXPECT_EQ(attr.device, 1);
  cuda::cuda_allocator().deallocate(*p, kMiB, Device::cuda(1));
  EXPECT_EQ(current_device(), 0);
}

TEST(StreamAndEvent, CreateOrderAndMove) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  auto s = cuda::Stream::create(0);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto e = cuda::Event::create(0);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  cuda::Stream stream = std::move(s).value();
  cuda::Event event = std::move(e).value();
  ASSERT_FALSE(stream.empty());
  cudaStream_t raw = stream.get();
  cuda::Stream other = std::move(stream);
  EXPECT_TRUE(stream.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(other.get(), raw);

  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, kMiB), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 0x5a, kMiB, other.get()), cudaSuccess);
  ASSERT_TRUE(event.record(other.get()).ok());
  ASSERT_TRUE(event.synchronize().ok());
  EXPECT_EQ(cudaEventQuery(event.get()), cudaSuccess);
  uint8_t host = 0;
  ASSERT_EQ(cudaMemcpy(&host, static_cast<uint8_t*>(d) + kMiB - 1, 1, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(host, 0x5a);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
  ASSERT_TRUE(other.synchronize().ok());
}

TEST(StreamAndEvent, CreationOnAMissingDeviceIsAnErrorNamingIt) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  auto s = cuda::Stream::create(count);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("cuda:" + std::to_string(count)), std::string::npos);
  auto e = cuda::Event::create(count);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("cuda:" + std::to_string(count)), std::string::npos);
}

}  // namespace
}  // namespace planrt
