#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include "planrt/platform/device_allocator.h"
#include "support/test_device.h"

namespace planrt {
namespace {

using testing::TestDeviceAllocator;

TEST(HostAllocator, Returns64ByteAlignedMemory) {
  DeviceAllocator& host = host_allocator();
  for (size_t n : {1u, 63u, 64u, 1000u}) {
    Result<void*> p = host.allocate(n, Device::cpu());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % kHostAlignment, 0u) << n;
    host.deallocate(*p, n, Device::cpu());
  }
}

TEST(HostAllocator, ReturnsOutOfMemoryInsteadOfThrowing) {
  size_t huge = std::numeric_limits<size_t>::max() / 2;
  Result<void*> p = host_allocator().allocate(huge, Device::cpu());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::OutOfMemory);
  EXPECT_NE(p.status().message().find(std::to_string(huge)), std::string::npos)
      << p.status().message();
}

TEST(HostAllocator, RefusesANonCpuDevice) {
  Result<void*> p = host_allocator().allocate(16, Device::cuda(0));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::NotSupported);
  EXPECT_NE(p.status().message().find("cuda:0"), std::string::npos);
}

TEST(HostAllocator, CopiesMoveBytes) {
  DeviceAllocator& host = host_allocator();
  int a[4] = {1, 2, 3, 4};
  int b[4] = {};
  ASSERT_TRUE(host.copy_host_to_device(b, a, sizeof(a), Device::cpu()).ok());
  EXPECT_EQ(b[3], 4);
  int c[4] = {};
  ASSERT_TRUE(host.copy_device_to_host(c, b, sizeof(b), Device::cpu()).ok());
  EXPECT_EQ(c[2], 3);
  int d[4] = {};
  ASSERT_TRUE(host.copy_device_to_device(d, c, sizeof(c), Device::cpu()).ok());
  EXPECT_EQ(d[1], 2);
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
