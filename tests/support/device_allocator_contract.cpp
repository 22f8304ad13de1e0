#include "support/device_allocator_contract.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "planrt/platform/device_buffer.h"
#include "support/gpu.h"
#include "support/status_matchers.h"
#include "support/test_device.h"

#define CONTRACT_ASSERT_OK(expr)                              \
  do {                                                        \
    const ::planrt::Status contract_s_ = (expr);              \
    ASSERT_TRUE(contract_s_.ok()) << contract_s_.to_string(); \
  } while (0)

namespace planrt::testing {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
// Around the host alignment, and one that is a multiple of nothing convenient.
constexpr size_t kSizes[] = {1, 63, 64, 1000, 3 * kMiB + 17};

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed * 7 + 1);
  return v;
}

// Runs `undo` when it goes out of scope: a stream destroyed, host memory unpinned, also
// when an assertion returns early.
class Defer {
 public:
  explicit Defer(std::function<void()> undo) : undo_(std::move(undo)) {}
  ~Defer() { undo_(); }
  Defer(const Defer&) = delete;
  Defer& operator=(const Defer&) = delete;

 private:
  std::function<void()> undo_;
};

// Two device buffers of `n` bytes each, to copy from one to the other.
struct TwoBuffers {
  DeviceBuffer a;
  DeviceBuffer b;
};

Result<TwoBuffers> two_buffers(DeviceAllocator& allocator, size_t n, Device device) {
  PLANRT_ASSIGN_OR_RETURN(DeviceBuffer a, DeviceBuffer::allocate(allocator, n, device));
  PLANRT_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::allocate(allocator, n, device));
  return TwoBuffers{std::move(a), std::move(b)};
}

enum class Copies { Synchronous, Async };

// in -> buffers.a -> buffers.b -> out (in.size() bytes) through the synchronous copies, or
// the *_async ones on `stream`, not synchronized.
Status round_trip(DeviceAllocator& allocator, Device device, const TwoBuffers& buffers,
                  const std::vector<uint8_t>& in, std::vector<uint8_t>& out, Copies copies,
                  void* stream = nullptr) {
  const size_t n = in.size();
  void* a = buffers.a.data();
  void* b = buffers.b.data();
  if (copies == Copies::Synchronous) {
    PLANRT_RETURN_IF_ERROR(allocator.copy_host_to_device(a, in.data(), n, device));
    PLANRT_RETURN_IF_ERROR(allocator.copy_device_to_device(b, a, n, device));
    return allocator.copy_device_to_host(out.data(), b, n, device);
  }
  PLANRT_RETURN_IF_ERROR(allocator.copy_host_to_device_async(a, in.data(), n, device, stream));
  PLANRT_RETURN_IF_ERROR(allocator.copy_device_to_device_async(b, a, n, device, stream));
  return allocator.copy_device_to_host_async(out.data(), b, n, device, stream);
}

TestDeviceAllocator& as_test_allocator(DeviceAllocator& a) { return static_cast<TestDeviceAllocator&>(a); }

}  // namespace

std::shared_ptr<DeviceAllocator> borrowed(DeviceAllocator& allocator) {
  return std::shared_ptr<DeviceAllocator>(std::shared_ptr<void>(), &allocator);
}

AllocatorCase host_allocator_case() {
  AllocatorCase c;
  c.name = "HostAllocator";
  c.make = [] { return borrowed(host_allocator()); };
  c.device = Device::cpu();
  c.foreign = Device::cuda(0);
  c.foreign_code = ErrorCode::NotSupported;
  c.alignment = kHostAlignment;
  c.absurd_bytes = std::numeric_limits<size_t>::max() / 2;
  return c;
}

AllocatorCase test_allocator_case() {
  AllocatorCase c;
  c.name = "TestDeviceAllocator";
  c.make = [] { return std::make_shared<TestDeviceAllocator>(DeviceType::CUDA); };
  c.device = Device::cuda(0);
  c.foreign = Device::cpu();
  c.foreign_code = ErrorCode::NotSupported;
  c.alignment = kHostAlignment;  // its "device" memory comes from host_allocator()
  c.absurd_bytes = std::numeric_limits<size_t>::max() / 2;
  c.fail_nth_allocation = [](DeviceAllocator& a, int64_t n) { as_test_allocator(a).fail_nth_allocation(n); };
  c.verify = [](DeviceAllocator& a) {
    const AllocatorCounts counts = as_test_allocator(a).counts();
    EXPECT_EQ(counts.bytes_live, 0) << "allocations not given back";
    EXPECT_EQ(counts.bad_deallocations, 0) << "a deallocate() that allocate() did not match";
    EXPECT_EQ(counts.streams_created, counts.streams_destroyed);
    EXPECT_EQ(counts.bad_stream_uses, 0);
    EXPECT_EQ(counts.pins, counts.unpins);
    EXPECT_EQ(counts.bad_unpins, 0);
  };
  return c;
}

std::string AllocatorCaseName(const ::testing::TestParamInfo<AllocatorCase>& info) {
  return info.param.name;
}

void PrintTo(const AllocatorCase& c, std::ostream* os) { *os << c.name << " on " << to_string(c.device); }

void DeviceAllocatorContract::SetUp() {
  if (GetParam().needs_gpu) PLANRT_REQUIRE_GPU_OR_SKIP();
  allocator_ = GetParam().make();
  ASSERT_NE(allocator_, nullptr);
}

void DeviceAllocatorContract::TearDown() {
  if (allocator_ != nullptr && GetParam().verify) GetParam().verify(*allocator_);
  allocator_.reset();
}

void DeviceAllocatorFailureContract::TearDown() {
  // Disarmed, whatever the test did: the CUDA allocator's injection is process-wide.
  if (has_allocator() && GetParam().fail_nth_allocation) GetParam().fail_nth_allocation(allocator(), 0);
  DeviceAllocatorContract::TearDown();
}

// ------------------------------------------------------------------ allocate, deallocate

TEST_P(DeviceAllocatorContract, AllocationsAreAlignedAndGivenBack) {
  for (size_t n : kSizes) {
    Result<void*> p = allocator().allocate(n, device());
    ASSERT_TRUE(p.ok()) << n << ": " << p.status().to_string();
    ASSERT_NE(*p, nullptr) << n;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % GetParam().alignment, 0u) << n;
    allocator().deallocate(*p, n, device());
  }
}

TEST_P(DeviceAllocatorContract, ZeroBytesSucceedAndAreGivenBackAsTheyCame) {
  Result<void*> p = allocator().allocate(0, device());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  allocator().deallocate(*p, 0, device());  // nullptr or not: what allocate() gave
}

TEST_P(DeviceAllocatorContract, ADeviceOfAnotherTypeIsRefusedNamingIt) {
  const AllocatorCase& c = GetParam();
  Result<void*> p = allocator().allocate(16, c.foreign);
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(IsError(p.status(), c.foreign_code, {to_string(c.foreign)}));
}

TEST_P(DeviceAllocatorContract, AnImpossibleSizeIsOutOfMemoryNamingItAndTheNextAllocationWorks) {
  const size_t absurd = GetParam().absurd_bytes;
  Result<void*> p = allocator().allocate(absurd, device());  // returned, never thrown
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(IsError(p.status(), ErrorCode::OutOfMemory, {std::to_string(absurd)}));
  Result<void*> q = allocator().allocate(kMiB, device());
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  allocator().deallocate(*q, kMiB, device());
}

// ------------------------------------------------------------------ copies and streams

TEST_P(DeviceAllocatorContract, CopiesMoveBytesThroughDeviceMemory) {
  for (size_t n : kSizes) {
    SCOPED_TRACE(fmt::format("{} bytes", n));
    const std::vector<uint8_t> in = pattern(n, 1);
    std::vector<uint8_t> out(n, 0);
    Result<TwoBuffers> buffers = two_buffers(allocator(), n, device());
    ASSERT_TRUE(buffers.ok()) << buffers.status().to_string();
    CONTRACT_ASSERT_OK(round_trip(allocator(), device(), *buffers, in, out, Copies::Synchronous));
    EXPECT_TRUE(out == in);  // synchronous: arrived when the call returned
  }
}

// The guarantees the runtime relies on: the host source may be overwritten once the call
// returns, and the results are there after synchronize().
TEST_P(DeviceAllocatorContract, AsyncCopiesOnAStreamHaveArrivedAfterSynchronize) {
  const size_t n = kMiB + 3;
  std::vector<uint8_t> src = pattern(n, 2);
  const std::vector<uint8_t> want = src;
  std::vector<uint8_t> out(n, 0);
  Result<TwoBuffers> buffers = two_buffers(allocator(), n, device());
  ASSERT_TRUE(buffers.ok()) << buffers.status().to_string();
  Result<void*> stream = allocator().create_stream(device());  // nullptr: a synchronous device
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  Defer destroy([&] { allocator().destroy_stream(*stream, device()); });
  CONTRACT_ASSERT_OK(round_trip(allocator(), device(), *buffers, src, out, Copies::Async, *stream));
  std::fill(src.begin(), src.end(), uint8_t{0xEE});  // before synchronize: allowed
  CONTRACT_ASSERT_OK(allocator().synchronize(*stream, device()));
  EXPECT_TRUE(out == want);
}

TEST_P(DeviceAllocatorContract, AsyncCopiesWithoutAStreamAreTheSynchronousOnes) {
  const size_t n = 4096;
  const std::vector<uint8_t> in = pattern(n, 3);
  std::vector<uint8_t> out(n, 0);
  Result<TwoBuffers> buffers = two_buffers(allocator(), n, device());
  ASSERT_TRUE(buffers.ok()) << buffers.status().to_string();
  CONTRACT_ASSERT_OK(round_trip(allocator(), device(), *buffers, in, out, Copies::Async, nullptr));
  EXPECT_TRUE(out == in);  // no synchronize: nothing to wait for
  EXPECT_TRUE(allocator().synchronize(nullptr, device()).ok());
  allocator().destroy_stream(nullptr, device());  // nothing to destroy
}

// Pinned host memory may still be read after the call returns, so it is written again only
// after synchronize(); unpinned with the arguments it was pinned with.
TEST_P(DeviceAllocatorContract, PinnedHostMemoryIsCopiedFromAndUnpinnedWithTheSameArguments) {
  const size_t n = 64 * 1024;
  std::vector<uint8_t> host = pattern(n, 4);
  const std::vector<uint8_t> want = host;
  std::vector<uint8_t> out(n, 0);
  Result<DeviceBuffer> buffer = DeviceBuffer::allocate(allocator(), n, device());
  ASSERT_TRUE(buffer.ok()) << buffer.status().to_string();
  Result<bool> pinned = allocator().pin_host_memory(host.data(), n, device());
  ASSERT_TRUE(pinned.ok()) << pinned.status().to_string();  // false: stays pageable, nothing to undo
  Defer unpin([&] {
    if (*pinned) allocator().unpin_host_memory(host.data(), n, device());
  });
  {
    Result<void*> stream = allocator().create_stream(device());
    ASSERT_TRUE(stream.ok()) << stream.status().to_string();
    Defer destroy([&] { allocator().destroy_stream(*stream, device()); });
    CONTRACT_ASSERT_OK(allocator().copy_host_to_device_async(buffer->data(), host.data(), n, device(), *stream));
    CONTRACT_ASSERT_OK(allocator().synchronize(*stream, device()));
  }
  std::fill(host.begin(), host.end(), uint8_t{0});
  CONTRACT_ASSERT_OK(allocator().copy_device_to_host(out.data(), buffer->data(), n, device()));
  EXPECT_TRUE(out == want);
}

// ------------------------------------------------------------------ total memory

TEST_P(DeviceAllocatorContract, TotalMemoryIsTheWholeDeviceOrZeroForUnknown) {
  const uint64_t total = allocator().total_memory(device());
  EXPECT_EQ(total != 0, GetParam().knows_total_memory) << total;
  Result<DeviceBuffer> held = DeviceBuffer::allocate(allocator(), kMiB, device());
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  EXPECT_EQ(allocator().total_memory(device()), total) << "the whole memory, not what is free";
  if (total != 0) {
    EXPECT_GE(total, kMiB);
    EXPECT_LT(total, GetParam().absurd_bytes);
  }
}

// ------------------------------------------------------------------ thread safety

// allocate, deallocate, the copies, create_stream, destroy_stream and total_memory from
// several threads at once; each thread's stream is its own.
TEST_P(DeviceAllocatorContract, ConcurrentAllocationsCopiesAndStreamsAreSafe) {
  constexpr int kThreads = 4;
  constexpr int kIterations = 50;
  DeviceAllocator& a = allocator();
  const Device dev = device();
  std::atomic<int> failures{0};
  std::mutex mu;
  std::string first_failure;
  auto fail = [&](const std::string& what) {
    std::lock_guard lock(mu);
    if (failures++ == 0) first_failure = what;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        const std::string where = fmt::format("thread {} iteration {}", t, i);
        const size_t n = 256 + 64 * static_cast<size_t>(t) + static_cast<size_t>(i);
        const std::vector<uint8_t> in = pattern(n, static_cast<uint32_t>(t * kIterations + i));
        std::vector<uint8_t> sync_out(n, 0), async_out(n, 0);
        Result<TwoBuffers> buffers = two_buffers(a, n, dev);
        if (!buffers.ok()) {
          fail(where + ": " + buffers.status().to_string());
          continue;
        }
        Status s = round_trip(a, dev, *buffers, in, sync_out, Copies::Synchronous);
        Result<void*> stream = a.create_stream(dev);
        if (s.ok() && !stream.ok()) s = stream.status();
        if (s.ok()) s = round_trip(a, dev, *buffers, in, async_out, Copies::Async, *stream);
        if (s.ok()) s = a.synchronize(*stream, dev);
        if (stream.ok()) a.destroy_stream(*stream, dev);
        (void)a.total_memory(dev);
        if (!s.ok()) {
          fail(where + ": " + s.to_string());
        } else if (sync_out != in || async_out != in) {
          fail(where + ": the bytes that came back differ");
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << "first: " << first_failure;
}

// ------------------------------------------------------------------ injected failures

TEST_P(DeviceAllocatorFailureContract, AnInjectedFailureIsOutOfMemoryNamingTheBytesAndTheNextAllocationWorks) {
  const AllocatorCase& c = GetParam();
  ASSERT_TRUE(c.fail_nth_allocation) << c.name << " cannot inject failures";
  c.fail_nth_allocation(allocator(), 2);
  Result<void*> first = allocator().allocate(4096, device());
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  allocator().deallocate(*first, 4096, device());
  Result<void*> second = allocator().allocate(1234, device());
  ASSERT_FALSE(second.ok()) << "the second allocation was armed to fail";
  EXPECT_TRUE(IsError(second.status(), ErrorCode::OutOfMemory, {"1234 bytes"}));
  Result<void*> third = allocator().allocate(1234, device());  // one failure per arming
  ASSERT_TRUE(third.ok()) << third.status().to_string();
  allocator().deallocate(*third, 1234, device());
}

}  // namespace planrt::testing
