// PackedWeightArena (kernels/cpu/weight_arena.h): aligned, non-overlapping allocations that
// outlive nothing they are handed to; requests above a chunk get a chunk of their own; bad
// requests are errors. Packed kernels whose weight lies in an arena keep it alive and compute
// what the plain kernels do.
#include "kernels/cpu/weight_arena.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/packed_linear.h"

namespace planrt::kernels {
namespace {

using cpu::PackedWeightArena;
using testing::HostTensor;
using testing::IsError;
using testing::run_op;

TEST(PackedWeightArena, AllocationsAreAlignedDisjointAndCounted) {
  PackedWeightArena arena;
  std::vector<std::pair<uint8_t*, size_t>> blocks;
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, size_t{3} << 20, size_t{65}}) {
    Result<void*> p = arena.allocate(bytes);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % PackedWeightArena::kAlignment, 0u);
    std::memset(*p, static_cast<int>(blocks.size() + 1), bytes);
    blocks.emplace_back(static_cast<uint8_t*>(*p), bytes);
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    for (size_t j = 0; j < blocks[i].second; ++j) ASSERT_EQ(blocks[i].first[j], i + 1) << i << " byte " << j;
  }
  EXPECT_EQ(arena.allocated_bytes(), 64u + 128u + 4096u + (size_t{3} << 20) + 128u);
  EXPECT_EQ(arena.mapped_bytes(), PackedWeightArena::kChunkBytes);
}

TEST(PackedWeightArena, ARequestAboveAChunkGetsAChunkOfItsOwnWhoseTailServesTheNext) {
  PackedWeightArena arena;
  const size_t big = PackedWeightArena::kChunkBytes + 5;
  ASSERT_TRUE(arena.allocate(100).ok());
  EXPECT_EQ(arena.mapped_bytes(), PackedWeightArena::kChunkBytes);
  Result<void*> p = arena.allocate(big);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  static_cast<uint8_t*>(*p)[big - 1] = 7;
  // Its own chunk: the request rounded up to huge pages (32 MiB + 5 bytes -> 34 MiB).
  const uint64_t own = (big + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  EXPECT_EQ(arena.mapped_bytes(), PackedWeightArena::kChunkBytes + own);
  // The next small request fits in that chunk's tail: nothing more is mapped.
  Result<void*> next = arena.allocate(100);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(arena.mapped_bytes(), PackedWeightArena::kChunkBytes + own);
  EXPECT_GE(static_cast<uint8_t*>(*next), static_cast<uint8_t*>(*p) + big);
  // One that does not fit starts another chunk.
  ASSERT_TRUE(arena.allocate(own).ok());
  EXPECT_EQ(arena.mapped_bytes(), PackedWeightArena::kChunkBytes + 2 * own);
}

TEST(PackedWeightArena, BadRequestsAreErrors) {
  PackedWeightArena arena;
  EXPECT_TRUE(IsError(arena.allocate(0).status(), ErrorCode::InvalidArgument));
  EXPECT_TRUE(IsError(arena.allocate(std::numeric_limits<size_t>::max()).status(), ErrorCode::OutOfMemory));
  EXPECT_TRUE(IsError(arena.allocate(size_t{1} << 62).status(), ErrorCode::OutOfMemory));
  EXPECT_EQ(arena.allocated_bytes(), 0u);
}

TEST(PackedWeightArena, APackedLinearInAnArenaKeepsItAliveAndMatchesThePlainKernel) {
  HostTensor w = HostTensor::random({300, 96}, 3);
  HostTensor b = HostTensor::random({300}, 4);
  auto arena = std::make_shared<PackedWeightArena>();
  Result<std::unique_ptr<cpu::PackedLinear>> packed = cpu::PackedLinear::create(w.view(), arena);
  ASSERT_TRUE(packed.ok()) << packed.status().to_string();
  EXPECT_EQ(arena->allocated_bytes(), ((*packed)->packed_bytes() + 63) / 64 * 64);
  arena.reset();  // the kernel holds the arena its weight lies in
  for (int64_t rows : {int64_t{1}, int64_t{5}, int64_t{130}}) {
    HostTensor x = HostTensor::random({rows, 96}, static_cast<uint32_t>(rows));
    HostTensor want(DType::F32, {rows, 300}), got(DType::F32, {rows, 300});
    std::vector<TensorView> in = {x.view(), w.view(), b.view()};
    ASSERT_TRUE(run_op("linear", {}, in, {want.view()}).ok());
    const TensorView out = got.view();
    ASSERT_TRUE((*packed)->run(in, {&out, 1}).ok());
    EXPECT_LT(testing::relative_error(got, want.doubles()), 1e-6) << rows;
  }
}

}  // namespace
}  // namespace planrt::kernels
