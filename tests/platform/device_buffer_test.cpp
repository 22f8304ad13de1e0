#include <gtest/gtest.h>

#include <utility>

#include "planrt/platform/device_buffer.h"
#include "support/test_device.h"

namespace planrt {
namespace {

using testing::ScopedTestAllocator;

TEST(DeviceBuffer, AllocatesThroughTheRegisteredAllocatorAndFreesOnDestruction) {
  ScopedTestAllocator cuda;
  ASSERT_TRUE(cuda.status().ok());
  {
    Result<DeviceBuffer> b = DeviceBuffer::allocate(4096, Device::cuda(0));
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(b->nbytes(), 4096u);
    EXPECT_EQ(b->device(), Device::cuda(0));
    EXPECT_TRUE(cuda->owns(b->data(), 4096));
    EXPECT_EQ(cuda->counts().allocations, 1);
    EXPECT_EQ(cuda->counts().bytes_live, 4096);
  }
  EXPECT_EQ(cuda->counts().deallocations, 1);
  EXPECT_EQ(cuda->counts().bytes_live, 0);
  EXPECT_EQ(cuda->counts().bad_deallocations, 0);
}

TEST(DeviceBuffer, MoveTransfersOwnershipAndFreesOnce) {
  ScopedTestAllocator cuda;
  {
    Result<DeviceBuffer> a = DeviceBuffer::allocate(128, Device::cuda(0));
    ASSERT_TRUE(a.ok());
    void* p = a->data();
    DeviceBuffer b = std::move(a).value();
    EXPECT_EQ(b.data(), p);
    DeviceBuffer c;
    c = std::move(b);
    EXPECT_EQ(c.data(), p);
    EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    EXPECT_EQ(c.view().data, p);
    EXPECT_EQ(c.view().nbytes, 128u);
  }
  EXPECT_EQ(cuda->counts().allocations, 1);
  EXPECT_EQ(cuda->counts().deallocations, 1);
  EXPECT_EQ(cuda->counts().bad_deallocations, 0);
}

TEST(DeviceBuffer, ResetGivesTheMemoryBackNow) {
  ScopedTestAllocator cuda;
  Result<DeviceBuffer> b = DeviceBuffer::allocate(64, Device::cuda(0));
  ASSERT_TRUE(b.ok());
  b->reset();
  EXPECT_TRUE(b->empty());
  EXPECT_EQ(cuda->counts().deallocations, 1);
}

TEST(DeviceBuffer, ZeroBytesCallsNoAllocator) {
  ScopedTestAllocator cuda;
  Result<DeviceBuffer> b = DeviceBuffer::allocate(0, Device::cuda(0));
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->empty());
  EXPECT_EQ(cuda->counts().allocations, 0);
}

TEST(DeviceBuffer, NoAllocatorForTheDeviceIsNotSupportedNamingDeviceAndBytes) {
  Result<DeviceBuffer> b = DeviceBuffer::allocate(1234, Device::cuda(1));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), ErrorCode::NotSupported);
  EXPECT_NE(b.status().message().find("cuda:1"), std::string::npos) << b.status().message();
  EXPECT_NE(b.status().message().find("1234 bytes"), std::string::npos) << b.status().message();
}

TEST(DeviceBuffer, AllocatorFailureIsReturnedAndNothingIsHeld) {
  ScopedTestAllocator cuda;
  cuda->fail_nth_allocation(1);
  Result<DeviceBuffer> b = DeviceBuffer::allocate(256, Device::cuda(0));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), ErrorCode::OutOfMemory);
  EXPECT_EQ(cuda->counts().failed_allocations, 1);
  EXPECT_EQ(cuda->counts().bytes_live, 0);
  Result<DeviceBuffer> next = DeviceBuffer::allocate(256, Device::cuda(0));
  EXPECT_TRUE(next.ok()) << "only the first allocation was told to fail";
}

TEST(DeviceBuffer, HostBuffersComeFromTheHostAllocator) {
  Result<DeviceBuffer> b = DeviceBuffer::allocate(100, Device::cpu());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % kHostAlignment, 0u);
}

}  // namespace
}  // namespace planrt
