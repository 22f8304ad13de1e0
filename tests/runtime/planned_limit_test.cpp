// Resource limits from input (issue 6, item 5): the planned buffer sizes come from the
// file, so load_method bounds what it allocates for them per device
// (LoadMethodOptions::max_planned_bytes_per_device) before allocating anything.
#include <gtest/gtest.h>

#include <unistd.h>

#include "planrt/runtime/program.h"
#include "runtime_test_util.h"
#include "support/test_device.h"

namespace planrt {
namespace {

using namespace runtime_test;
using testing::ScopedTestAllocator;
using testing::ScopedTestBackend;

uint64_t planned_on(const Program& p, std::string_view method, Device device) {
  Result<MethodMeta> meta = p.method_meta(method);
  EXPECT_TRUE(meta.ok()) << meta.status().to_string();
  return meta.ok() ? meta->planned_bytes_on(device) : 0;
}

uint64_t physical_memory() {
  return static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

void expect_names(const Status& s, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts) EXPECT_TRUE(contains(s.message(), part)) << s.to_string();
}

TEST(PlannedLimit, DeviceBytesAboveTheLimitAreRefusedBeforeAnyAllocation) {
  ScopedTestAllocator host(DeviceType::CPU);
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda");
  ASSERT_TRUE(host.status().ok() && cuda.status().ok() && backend.status().ok());
  fixtures::FixtureProgram f = host_and_device_program();
  f.program.methods[1]->planned_buffers[1]->size_bytes *= 2;  // room for the limit between
  Program p = load_fixture(f);
  const uint64_t on_cuda = planned_on(p, "device", Device::cuda(0));
  const uint64_t on_cpu = planned_on(p, "device", Device::cpu());
  ASSERT_GT(on_cuda, on_cpu);  // so a limit between them stops the device side alone

  LoadMethodOptions options;
  options.max_planned_bytes_per_device = on_cuda - 1;
  Result<Method> refused = p.load_method("device", options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::OutOfMemory);
  expect_names(refused.status(), {"method 'device'", "cuda:0", std::to_string(on_cuda) + " bytes",
                                  "limit of " + std::to_string(on_cuda - 1) + " bytes",
                                  "max_planned_bytes_per_device"});
  EXPECT_EQ(cuda->counts().allocations + cuda->counts().failed_allocations, 0);
  EXPECT_EQ(host->counts().allocations + host->counts().failed_allocations, 0);
  EXPECT_EQ(cuda->counts().streams_created, 0);
  EXPECT_EQ(backend->counts().inits, 0);

  options.max_planned_bytes_per_device = on_cuda;  // at the limit is within it
  Result<Method> loaded = p.load_method("device", options);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  Result<std::vector<Tensor>> out = [&] {
    std::vector<float> x = make_x(3);
    TensorView in = view_of(x, {3, kFeatures});
    return loaded->execute({&in, 1});
  }();
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0]), fixtures::relu_add_reference(make_x(3), kFeatures));
}

TEST(PlannedLimit, HostBytesAboveTheLimitAreRefusedBeforeAnyAllocation) {
  ScopedTestAllocator host(DeviceType::CPU);
  ASSERT_TRUE(host.status().ok());
  Program p = load_fixture(fixtures::relu_add_program());
  const uint64_t on_cpu = planned_on(p, "forward", Device::cpu());
  for (bool share : {true, false}) {
    SCOPED_TRACE(share ? "shared arenas" : "own arenas");
    const int64_t calls0 = host->counts().allocations + host->counts().failed_allocations;
    LoadMethodOptions options;
    options.share_memory_arenas = share;
    options.max_planned_bytes_per_device = on_cpu - 1;
    Result<Method> refused = p.load_method("forward", options);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), ErrorCode::OutOfMemory);
    expect_names(refused.status(), {"method 'forward'", "cpu", std::to_string(on_cpu) + " bytes"});
    EXPECT_EQ(host->counts().allocations + host->counts().failed_allocations, calls0);
    EXPECT_FALSE(p.shared_host_arenas_allocated());
    options.max_planned_bytes_per_device = on_cpu;
    EXPECT_TRUE(p.load_method("forward", options).ok());
  }
}

// The shared set is sized by the largest host method at each index, so a small method
// loading with sharing on allocates what the largest asks for; that is what is checked.
TEST(PlannedLimit, TheSharedHostArenasAreCheckedAtTheSizeTheyAreAllocated) {
  ScopedTestAllocator host(DeviceType::CPU);
  ASSERT_TRUE(host.status().ok());
  Program p = load_fixture(fixtures::two_method_program());
  const uint64_t own = planned_on(p, "forward", Device::cpu());
  ASSERT_GT(p.shared_host_arena_bytes(), own);
  LoadMethodOptions options;
  options.max_planned_bytes_per_device = own;
  Result<Method> refused = p.load_method("forward", options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::OutOfMemory);
  expect_names(refused.status(), {"method 'forward'", "shared host arenas",
                                  std::to_string(p.shared_host_arena_bytes()) + " bytes",
                                  "share_memory_arenas = false"});
  EXPECT_EQ(host->counts().allocations, 0);
  // Its own arenas fit.
  options.share_memory_arenas = false;
  Result<Method> own_arenas = p.load_method("forward", options);
  ASSERT_TRUE(own_arenas.ok()) << own_arenas.status().to_string();
  EXPECT_EQ(host->counts().bytes_live, static_cast<int64_t>(own));
}

// A file may declare host buffers larger than the machine (each under the verifier's
// per-buffer cap): by default the loader refuses them against physical memory instead of
// asking the host allocator, which under overcommit may say yes and then fault in the
// zero-fill. Two buffers each under the memory, together above it, are refused too.
TEST(PlannedLimit, ByDefaultHostBuffersBeyondPhysicalMemoryAreRefused) {
  ScopedTestAllocator host(DeviceType::CPU);
  ASSERT_TRUE(host.status().ok());
  const uint64_t memory = physical_memory();
  ASSERT_GT(memory, 0u);
  for (int buffers : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << buffers << " buffer(s)");
    fixtures::FixtureProgram f = fixtures::relu_add_program();
    auto& planned = f.program.methods[0]->planned_buffers;
    const uint64_t each = buffers == 1 ? memory + 4096 : memory / 2 + 4096;
    planned[0]->size_bytes = each;
    for (int i = 1; i < buffers; ++i) planned.push_back(fixtures::planned_buffer(each, fb::DeviceType::CPU));
    Result<std::vector<uint8_t>> bytes = f.serialize();
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    ProgramLoadOptions load;
    load.max_planned_buffer_bytes = uint64_t{1} << 50;  // let the file through to load_method
    Result<Program> p = Program::load_bytes(std::move(bytes).value(), load);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    for (bool share : {true, false}) {
      LoadMethodOptions options;
      options.share_memory_arenas = share;
      Result<Method> refused = p->load_method("forward", options);
      ASSERT_FALSE(refused.ok());
      EXPECT_EQ(refused.status().code(), ErrorCode::OutOfMemory);
      expect_names(refused.status(), {"method 'forward'", "cpu", std::to_string(memory) + " bytes",
                                      "physical memory"});
      EXPECT_EQ(host->counts().allocations + host->counts().failed_allocations, 0);
    }
  }
}

// A device's default bound is what its allocator says the device holds (CUDA: cudaMemGetInfo's
// total); an allocator that does not know leaves the device to its own failures.
TEST(PlannedLimit, ByDefaultDeviceBytesBeyondTheDevicesTotalMemoryAreRefused) {
  ScopedTestAllocator host(DeviceType::CPU);
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda");
  ASSERT_TRUE(host.status().ok() && cuda.status().ok() && backend.status().ok());
  Program p = load_fixture(host_and_device_program());
  const uint64_t on_cuda = planned_on(p, "device", Device::cuda(0));
  ASSERT_GT(on_cuda, 0u);

  cuda->set_total_memory(on_cuda - 1);
  Result<Method> refused = p.load_method("device");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::OutOfMemory);
  expect_names(refused.status(), {"method 'device'", "cuda:0", std::to_string(on_cuda) + " bytes",
                                  "limit of " + std::to_string(on_cuda - 1) + " bytes",
                                  "by default the device's total memory"});
  EXPECT_EQ(cuda->counts().allocations + cuda->counts().failed_allocations, 0);
  EXPECT_EQ(host->counts().allocations + host->counts().failed_allocations, 0);
  EXPECT_EQ(backend->counts().inits, 0);

  for (uint64_t total : {on_cuda, uint64_t{0}}) {  // all of it; unknown
    cuda->set_total_memory(total);
    Result<Method> loaded = p.load_method("device");
    EXPECT_TRUE(loaded.ok()) << "total " << total << ": " << loaded.status().to_string();
  }
}

// The sum saturates instead of wrapping: buffers whose sizes add past 2^64 are refused,
// not taken for a small total.
TEST(PlannedLimit, SizesWhoseSumOverflowsAreRefused) {
  ScopedTestAllocator host(DeviceType::CPU);
  ASSERT_TRUE(host.status().ok());
  fixtures::FixtureProgram f = fixtures::relu_add_program();
  auto& planned = f.program.methods[0]->planned_buffers;
  const uint64_t huge = uint64_t{1} << 63;
  planned[0]->size_bytes = huge;
  planned.push_back(fixtures::planned_buffer(huge, fb::DeviceType::CPU));
  planned.push_back(fixtures::planned_buffer(4096, fb::DeviceType::CPU));  // wraps to 4096
  Result<std::vector<uint8_t>> bytes = f.serialize();
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  ProgramLoadOptions load;
  load.max_planned_buffer_bytes = UINT64_MAX;
  Result<Program> p = Program::load_bytes(std::move(bytes).value(), load);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  LoadMethodOptions options;
  options.share_memory_arenas = false;
  options.max_planned_bytes_per_device = uint64_t{1} << 20;
  Result<Method> refused = p->load_method("forward", options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::OutOfMemory) << refused.status().to_string();
  EXPECT_EQ(host->counts().allocations + host->counts().failed_allocations, 0);
}

}  // namespace
}  // namespace planrt
