// HostPages (core/host_pages.h): whole pages, huge-page aligned from kHugePageBytes up,
// zeroed, writable to the last byte; a 0-byte or unmappable request is an error, not an abort;
// moves transfer ownership.
#include "core/host_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "support/status_matchers.h"

namespace planrt {
namespace {

using testing::IsError;

TEST(HostPages, SmallMappingsAreWholePagesZeroedAndWritable) {
  Result<HostPages> p = HostPages::map(100);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_NE(p->data(), nullptr);
  EXPECT_GE(p->size(), 100u);
  EXPECT_FALSE(p->huge_page_advised());
  auto* bytes = static_cast<uint8_t*>(p->data());
  for (size_t i = 0; i < p->size(); ++i) ASSERT_EQ(bytes[i], 0) << i;
  std::memset(bytes, 0xab, p->size());
}

TEST(HostPages, LargeMappingsStartOnAHugePageAndCoverTheRequest) {
  const size_t request = kHugePageBytes * 3 + 12345;
  Result<HostPages> p = HostPages::map(request);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p->data()) % kHugePageBytes, 0u);
  EXPECT_EQ(p->size() % kHugePageBytes, 0u);
  EXPECT_GE(p->size(), request);
  auto* bytes = static_cast<uint8_t*>(p->data());
  bytes[0] = 1;
  bytes[request - 1] = 2;
  bytes[p->size() - 1] = 3;
  EXPECT_EQ(bytes[kHugePageBytes], 0);
}

TEST(HostPages, BadRequestsAreErrors) {
  EXPECT_TRUE(IsError(HostPages::map(0).status(), ErrorCode::InvalidArgument));
  EXPECT_TRUE(IsError(HostPages::map(std::numeric_limits<size_t>::max() - 5).status(), ErrorCode::OutOfMemory));
  // More address space than a 48-bit machine has: the mapping fails, reported.
  EXPECT_TRUE(IsError(HostPages::map(size_t{1} << 62).status(), ErrorCode::OutOfMemory));
}

TEST(HostPages, MovesTransferOwnershipAndReleaseHandsItOver) {
  Result<HostPages> p = HostPages::map(kHugePageBytes);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  void* data = p->data();
  const size_t size = p->size();
  HostPages moved = std::move(*p);
  EXPECT_EQ(moved.data(), data);
  EXPECT_EQ(p->data(), nullptr);
  HostPages assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.data(), data);
  void* released = assigned.release();
  EXPECT_EQ(released, data);
  EXPECT_EQ(assigned.data(), nullptr);
  HostPages::unmap(released, size);
}

}  // namespace
}  // namespace planrt
