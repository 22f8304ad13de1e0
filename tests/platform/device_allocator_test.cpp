#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "planrt/platform/device_allocator.h"
#include "support/device_allocator_contract.h"
#include "support/test_device.h"

namespace planrt {
namespace {

using testing::AllocatorCaseName;
using testing::DeviceAllocatorContract;
using testing::DeviceAllocatorFailureContract;
using testing::host_allocator_case;
using testing::test_allocator_case;
using testing::TestDeviceAllocator;

// The contract of device_allocator.h (support/device_allocator_contract.h) over the
// allocators that need no GPU: the built-in host allocator (64-byte alignment, OutOfMemory
// instead of bad_alloc, NotSupported for a device other than the CPU) and the test
// allocator, with its injected failures. The CUDA allocator's run:
// tests/platform/cuda/cuda_allocator_test.cpp.
INSTANTIATE_TEST_SUITE_P(HostMemory, DeviceAllocatorContract,
                         ::testing::Values(host_allocator_case(), test_allocator_case()),
                         AllocatorCaseName);
INSTANTIATE_TEST_SUITE_P(HostMemory, DeviceAllocatorFailureContract,
                         ::testing::Values(test_allocator_case()), AllocatorCaseName);

// Whether some mapping of this process covers `p` (/proc/self/maps).
bool mapped(const void* p) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto a = reinterpret_cast<uintptr_t>(p);
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi) return true;
  }
  return false;
}

// From 32 MiB the built-in host allocator maps whole pages on a huge-page boundary and
// unmaps all of them when given the block back; below, the heap's blocks.
TEST(HostAllocator, LargeBlocksAreWholeHugePageMappingsGivenBackWhole) {
  DeviceAllocator& host = host_allocator();
  constexpr size_t kMiB = size_t{1} << 20;
  for (size_t bytes : {32 * kMiB - 1, 32 * kMiB, 32 * kMiB + 1, 64 * kMiB, 34 * kMiB + 4097}) {
    Result<void*> p = host.allocate(bytes, Device::cpu());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    auto* b = static_cast<uint8_t*>(*p);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % kHostAlignment, 0u);
    b[0] = 1;
    b[bytes - 1] = 2;
    const bool large = bytes >= 32 * kMiB;
    if (large) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % (2 * kMiB), 0u) << bytes;
      // The last byte of the rounded mapping is its own, and nothing after the block.
      const size_t whole = (bytes + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);
      EXPECT_TRUE(mapped(b + whole - 1)) << bytes;
    }
    host.deallocate(*p, bytes, Device::cpu());
    if (large) {
      EXPECT_FALSE(mapped(b)) << bytes;
      EXPECT_FALSE(mapped(b + bytes - 1)) << bytes;
    }
  }
}

TEST(AllocatorRegistry, CpuAlwaysHasTheHostAllocator) {
  EXPECT_EQ(get_device_allocator(DeviceType::CPU), &host_allocator());
}

TEST(AllocatorRegistry, CudaHasNoAllocatorUntilOneIsRegistered) {
  EXPECT_EQ(get_device_allocator(DeviceType::CUDA), nullptr);
  TestDeviceAllocator cuda;
  ASSERT_TRUE(register_device_allocator(DeviceType::CUDA, &cuda).ok());
  EXPECT_EQ(get_device_allocator(DeviceType::CUDA), &cuda);
  ASSERT_TRUE(unregister_device_allocator(DeviceType::CUDA).ok());
  EXPECT_EQ(get_device_allocator(DeviceType::CUDA), nullptr);
}

TEST(AllocatorRegistry, SecondRegistrationForATypeIsRefused) {
  TestDeviceAllocator first, second;
  ASSERT_TRUE(register_device_allocator(DeviceType::CUDA, &first).ok());
  Status s = register_device_allocator(DeviceType::CUDA, &second);
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(s.message().find("already registered for cuda"), std::string::npos) << s.message();
  EXPECT_EQ(get_device_allocator(DeviceType::CUDA), &first);
  ASSERT_TRUE(unregister_device_allocator(DeviceType::CUDA).ok());
}

TEST(AllocatorRegistry, NullOrWrongTypeAllocatorIsRefused) {
  EXPECT_EQ(register_device_allocator(DeviceType::CUDA, nullptr).code(), ErrorCode::InvalidArgument);
  TestDeviceAllocator cpu_typed(DeviceType::CPU);
  Status s = register_device_allocator(DeviceType::CUDA, &cpu_typed);
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(s.message().find("cpu"), std::string::npos) << s.message();
  EXPECT_EQ(get_device_allocator(DeviceType::CUDA), nullptr);
}

TEST(AllocatorRegistry, UnregisterWithoutRegistrationIsNotFound) {
  Status s = unregister_device_allocator(DeviceType::CUDA);
  EXPECT_EQ(s.code(), ErrorCode::NotFound);
  EXPECT_NE(s.message().find("cuda"), std::string::npos);
  EXPECT_EQ(unregister_device_allocator(DeviceType::CPU).code(), ErrorCode::NotFound);
}

TEST(AllocatorRegistry, RegisteringForCpuReplacesTheHostAllocatorUntilUnregistered) {
  TestDeviceAllocator counting(DeviceType::CPU);
  ASSERT_TRUE(register_device_allocator(DeviceType::CPU, &counting).ok());
  EXPECT_EQ(get_device_allocator(DeviceType::CPU), &counting);
  ASSERT_TRUE(unregister_device_allocator(DeviceType::CPU).ok());
  EXPECT_EQ(get_device_allocator(DeviceType::CPU), &host_allocator());
}

TEST(AllocatorRegistry, ConcurrentRegistrationsLetExactlyOneWin) {
  constexpr int kThreads = 8;
  std::vector<TestDeviceAllocator> allocators(kThreads);
  std::atomic<int> wins{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      if (register_device_allocator(DeviceType::CUDA, &allocators[static_cast<size_t>(i)]).ok()) ++wins;
      (void)get_device_allocator(DeviceType::CUDA);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_NE(get_device_allocator(DeviceType::CUDA), nullptr);
  ASSERT_TRUE(unregister_device_allocator(DeviceType::CUDA).ok());
}

}  // namespace
}  // namespace planrt
