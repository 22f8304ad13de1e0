// Placement rules 1-6 of docs/design.md §3, one behaviour per test.
#include <gtest/gtest.h>

#include "planrt/runtime/memory_manager.h"
#include "planrt/runtime/module.h"
#include "planrt/runtime/program.h"
#include "runtime_test_util.h"
#include "support/test_device.h"

namespace planrt {
namespace {

using namespace runtime_test;
using testing::ScopedTestAllocator;
using testing::ScopedTestBackend;

Result<std::vector<Tensor>> run_relu_add(Method& m, int64_t s) {
  std::vector<float> x = make_x(s);
  TensorView in = view_of(x, {s, kFeatures});
  return m.execute({&in, 1});
}

// Rule 1.
TEST(Placement, ProgramLoadAllocatesNoMethodMemory) {
  ScopedTestAllocator host(DeviceType::CPU);
  ScopedTestAllocator cuda;
  ASSERT_TRUE(host.status().ok() && cuda.status().ok());
  Program p = load_fixture(host_and_device_program());
  EXPECT_EQ(host->counts().allocations, 0);
  EXPECT_EQ(cuda->counts().allocations, 0);
  EXPECT_FALSE(p.shared_host_arenas_allocated());
  EXPECT_EQ(p.method_names(), (std::vector<std::string>{"host", "device"}));
}

// Rule 1, and the reference's own test: the device method is refused at load_method, not
// at Program::load, and the host method runs before and after.
TEST(Placement, DeviceMethodWithoutAllocatorIsRefusedAndHostMethodKeepsRunning) {
  ASSERT_EQ(get_device_allocator(DeviceType::CUDA), nullptr);
  // The backend is there; only the device allocator is missing.
  ScopedTestBackend backend("cuda");
  ASSERT_TRUE(backend.status().ok());
  Program p = load_fixture(host_and_device_program());
  Result<Method> host = p.load_method("host");
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  Result<std::vector<Tensor>> before = run_relu_add(*host, 3);
  ASSERT_TRUE(before.ok()) << before.status().to_string();

  Result<Method> device = p.load_method("device");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), ErrorCode::NotSupported);
  const std::string& msg = device.status().message();
  EXPECT_TRUE(contains(msg, "method 'device'")) << msg;
  EXPECT_TRUE(contains(msg, "planned buffer 1")) << msg;
  EXPECT_TRUE(contains(msg, "cuda:0")) << msg;
  EXPECT_TRUE(contains(msg, std::to_string(2 * kArena) + " bytes")) << msg;

  Result<std::vector<Tensor>> after = run_relu_add(*host, 3);
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  EXPECT_EQ(floats((*after)[0]), fixtures::relu_add_reference(make_x(3), kFeatures));

  // With an allocator and a backend the same method loads, takes its device bytes from the
  // allocator, and computes what the host method computes.
  ScopedTestAllocator cuda;
  ASSERT_TRUE(cuda.status().ok());
  backend->check_device_memory(&cuda.allocator());
  {
    Result<Method> loaded = p.load_method("device");
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    EXPECT_EQ(cuda->counts().allocations, 1);
    EXPECT_EQ(cuda->counts().bytes_live, static_cast<int64_t>(2 * kArena));
    Result<std::vector<Tensor>> out = run_relu_add(*loaded, 3);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(floats((*out)[0]), floats((*after)[0]));
    EXPECT_EQ(cuda->counts().copies_h2d, 1);
    EXPECT_EQ(cuda->counts().copies_d2h, 1);
    EXPECT_EQ(backend->counts().executes, 1);
  }
  EXPECT_EQ(cuda->counts().bytes_live, 0);
  backend->check_device_memory(nullptr);
}

// An input already in the device's memory (a CUDA tensor through DLPack) is copied device
// to device: no host round trip, and the copy counters say so.
TEST(Placement, DeviceInputIsCopiedDeviceToDevice) {
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda");
  ASSERT_TRUE(cuda.status().ok() && backend.status().ok());
  Program p = load_fixture(host_and_device_program());
  Result<Method> device = p.load_method("device");
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  const int64_t s = 3;
  std::vector<float> x = make_x(s);
  const size_t n = x.size() * sizeof(float);
  Result<void*> dx = cuda->allocate(n, Device::cuda(0));
  ASSERT_TRUE(dx.ok());
  ASSERT_TRUE(cuda->copy_host_to_device(*dx, x.data(), n, Device::cuda(0)).ok());
  const int64_t h2d_before = cuda->counts().copies_h2d;
  TensorView in = TensorView::contiguous(*dx, DType::F32, {s, kFeatures}, Device::cuda(0));
  Result<std::vector<Tensor>> out = device->execute({&in, 1});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0]), fixtures::relu_add_reference(x, kFeatures));
  EXPECT_EQ(cuda->counts().copies_h2d, h2d_before);
  EXPECT_EQ(cuda->counts().copies_d2d, 1);
  const MethodRunStats stats = device->run_stats();
  EXPECT_EQ(stats.inputs_from_device, 1);
  EXPECT_EQ(stats.host_to_device_bytes, 0u);
  EXPECT_EQ(stats.device_to_device_bytes, n);
  EXPECT_EQ(stats.device_to_host_bytes, n);

  // A host run of the same method counts a host-to-device copy instead.
  Result<std::vector<Tensor>> host_run = run_relu_add(*device, s);
  ASSERT_TRUE(host_run.ok()) << host_run.status().to_string();
  EXPECT_EQ(device->run_stats().host_to_device_bytes, n);
  EXPECT_EQ(device->run_stats().inputs_from_device, 1);

  // Device memory the method does not read on that device is refused, naming both.
  TensorView other = TensorView::contiguous(*dx, DType::F32, {s, kFeatures}, Device::cuda(1));
  Result<std::vector<Tensor>> refused = device->execute({&other, 1});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(refused.status().message(), "cuda:1")) << refused.status().message();
  EXPECT_TRUE(contains(refused.status().message(), "on cuda:0")) << refused.status().message();
  Result<Method> host = p.load_method("host");
  ASSERT_TRUE(host.ok());
  Result<std::vector<Tensor>> on_host = host->execute({&in, 1});
  ASSERT_FALSE(on_host.ok());
  EXPECT_EQ(on_host.status().code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(on_host.status().message(), "reads it on the host")) << on_host.status().message();
  cuda->deallocate(*dx, n, Device::cuda(0));
}

// Rule 2.
TEST(Placement, HostMethodsShareArenas) {
  ScopedTestAllocator host(DeviceType::CPU);
  Program p = load_fixture(fixtures::two_method_program());
  Result<Method> forward = p.load_method("forward");
  Result<Method> scale = p.load_method("scale");
  ASSERT_TRUE(forward.ok() && scale.ok());
  EXPECT_TRUE(forward->shares_memory_arenas());
  EXPECT_TRUE(scale->shares_memory_arenas());
  // One arena for buffer index 0, allocated once for both.
  EXPECT_EQ(host->counts().allocations, 1);

  std::vector<float> x = make_x(2);
  TensorView in = view_of(x, {2, kFeatures});
  Result<std::vector<Tensor>> fwd = forward->execute({&in, 1});
  ASSERT_TRUE(fwd.ok()) << fwd.status().to_string();
  ASSERT_TRUE(scale->run({&in, 1}).ok());
  // forward's output slot now holds scale's output (both live at offset 512 of buffer 0):
  // they overwrite each other's planned memory, never what execute returned.
  Result<std::vector<TensorView>> fwd_view = forward->outputs();
  ASSERT_TRUE(fwd_view.ok());
  std::vector<float> seen((*fwd_view)[0].data_as<float>(), (*fwd_view)[0].data_as<float>() + x.size());
  EXPECT_EQ(seen, fixtures::scale_reference(x, kFeatures));
  EXPECT_EQ(floats((*fwd)[0]), fixtures::relu_add_reference(x, kFeatures));
}

// Rule 2: sized to the largest size any host method asks at each index, when the first
// host method loads, so a later, larger host method fits without a new allocation.
TEST(Placement, SharedArenasAreSizedForTheLargestHostMethod) {
  ScopedTestAllocator host(DeviceType::CPU);
  Program p = load_fixture(fixtures::two_method_program());
  EXPECT_EQ(p.shared_host_arena_bytes(), 1024u);  // scale's buffer 0 > forward's 768
  Result<Method> forward = p.load_method("forward");
  ASSERT_TRUE(forward.ok());
  EXPECT_EQ(host->counts().bytes_allocated, 1024);
  Result<Method> scale = p.load_method("scale");
  ASSERT_TRUE(scale.ok());
  EXPECT_EQ(host->counts().allocations, 1);
  std::vector<float> x = make_x(32);  // scale's largest S
  TensorView in = view_of(x, {32, kFeatures});
  Result<std::vector<Tensor>> out = scale->execute({&in, 1});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0]), fixtures::scale_reference(x, kFeatures));
}

// Rule 2, the option.
TEST(Placement, ShareMemoryArenasOffGivesEachMethodItsOwn) {
  ScopedTestAllocator host(DeviceType::CPU);
  Program p = load_fixture(fixtures::two_method_program());
  LoadMethodOptions own;
  own.share_memory_arenas = false;
  Result<Method> forward = p.load_method("forward", own);
  Result<Method> scale = p.load_method("scale");
  ASSERT_TRUE(forward.ok() && scale.ok());
  EXPECT_FALSE(forward->shares_memory_arenas());
  EXPECT_TRUE(scale->shares_memory_arenas());
  EXPECT_EQ(host->counts().allocations, 2);
  EXPECT_EQ(host->counts().bytes_allocated, 768 + 1024);

  std::vector<float> x = make_x(2);
  TensorView in = view_of(x, {2, kFeatures});
  ASSERT_TRUE(forward->run({&in, 1}).ok());
  ASSERT_TRUE(scale->run({&in, 1}).ok());
  Result<std::vector<TensorView>> fwd_view = forward->outputs();
  ASSERT_TRUE(fwd_view.ok());
  std::vector<float> seen((*fwd_view)[0].data_as<float>(), (*fwd_view)[0].data_as<float>() + x.size());
  EXPECT_EQ(seen, fixtures::relu_add_reference(x, kFeatures));
}

// Rule 3.
TEST(Placement, DeviceMethodGetsItsOwnArenas) {
  ScopedTestAllocator host(DeviceType::CPU);
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda", &cuda.allocator());
  Program p = load_fixture(host_and_device_program());
  Result<Method> h = p.load_method("host");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(host->counts().allocations, 1);
  EXPECT_EQ(host->counts().bytes_allocated, 768);  // the device method's host buffer is not counted in
  Result<Method> d = p.load_method("device");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_FALSE(d->shares_memory_arenas());
  EXPECT_EQ(host->counts().allocations, 2);
  EXPECT_EQ(host->counts().bytes_allocated, 768 + 512);
  EXPECT_EQ(cuda->counts().allocations, 1);
  EXPECT_EQ(cuda->counts().bytes_allocated, 512);
  // Even with sharing requested a device method gets its own.
  LoadMethodOptions share;
  share.share_memory_arenas = true;
  Result<Method> d2 = p.load_method("device", share);
  ASSERT_TRUE(d2.ok());
  EXPECT_FALSE(d2->shares_memory_arenas());
  EXPECT_EQ(cuda->counts().allocations, 2);
}

// Rule 3: device first, so a device failure happens before any host arena exists.
TEST(Placement, FailedDeviceAllocationLeavesNothingAllocated) {
  ScopedTestAllocator host(DeviceType::CPU);
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda", &cuda.allocator());
  Program p = load_fixture(host_and_device_program());
  cuda->fail_nth_allocation(1);
  Result<Method> d = p.load_method("device");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), ErrorCode::OutOfMemory);
  const std::string& msg = d.status().message();
  EXPECT_TRUE(contains(msg, "method 'device'") && contains(msg, "planned buffer 1") &&
              contains(msg, "cuda:0") && contains(msg, "512 bytes"))
      << msg;
  EXPECT_EQ(host->counts().allocations, 0) << "no host arena may be allocated before the device fails";
  EXPECT_EQ(cuda->counts().bytes_live, 0);
  EXPECT_EQ(backend->counts().inits, 0);
  // Methods loaded before keep working, and the device method loads once memory is there.
  Result<Method> h = p.load_method("host");
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(run_relu_add(*h, 1).ok());
  EXPECT_TRUE(p.load_method("device").ok());
}

// Rule 3, for every allocation a load makes: whichever one fails, nothing stays allocated.
TEST(Placement, FailedNthAllocationDuringLoadLeavesCountsBalanced) {
  ScopedTestAllocator host(DeviceType::CPU);
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda", &cuda.allocator());
  Program p = load_fixture(host_and_device_program());
  for (testing::TestDeviceAllocator* failing : {&host.allocator(), &cuda.allocator()}) {
    for (int n = 1; n <= 3; ++n) {
      failing->fail_nth_allocation(n);
      {
        Result<Method> d = p.load_method("device");
        if (d.ok()) {
          EXPECT_TRUE(run_relu_add(*d, 2).ok());
        }
      }
      failing->fail_nth_allocation(0);
      for (auto* a : {&host.allocator(), &cuda.allocator()}) {
        testing::AllocatorCounts c = a->counts();
        EXPECT_EQ(c.allocations, c.deallocations) << "n = " << n;
        EXPECT_EQ(c.bytes_live, 0) << "n = " << n;
        EXPECT_EQ(c.bad_deallocations, 0);
      }
      EXPECT_EQ(backend->counts().inits, backend->counts().destroys);
    }
  }
  EXPECT_GE(host->counts().failed_allocations + cuda->counts().failed_allocations, 2);
}

// Rule 4.
TEST(Placement, MismatchedBufferAndDeviceListsReturnError) {
  ScopedTestAllocator host(DeviceType::CPU);
  std::vector<uint64_t> sizes = {64, 128};
  std::vector<Device> devices = {Device::cpu()};
  Result<MemoryManager> mm = MemoryManager::create(sizes, devices, "forward");
  ASSERT_FALSE(mm.ok());
  EXPECT_EQ(mm.status().code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(mm.status().message(), "forward")) << mm.status().message();
  EXPECT_TRUE(contains(mm.status().message(), "2 planned buffer sizes but 1 devices"))
      << mm.status().message();
  EXPECT_EQ(host->counts().allocations, 0);
}

TEST(Placement, MemoryManagerZeroFillsHostArenasAndAllocatesDeviceFirst) {
  ScopedTestAllocator cuda;
  std::vector<uint64_t> sizes = {64, 128, 0};
  std::vector<Device> devices = {Device::cpu(), Device::cuda(0), Device::cpu()};
  Result<MemoryManager> mm = MemoryManager::create(sizes, devices, "m");
  ASSERT_TRUE(mm.ok()) << mm.status().to_string();
  EXPECT_TRUE(mm->has_device_memory());
  EXPECT_EQ(mm->bytes_on(Device::cuda(0)), 128u);
  EXPECT_TRUE(cuda->owns(mm->buffer(1), 128));
  auto* bytes = static_cast<const uint8_t*>(mm->buffer(0));
  for (int i = 0; i < 64; ++i) ASSERT_EQ(bytes[i], 0);
  EXPECT_EQ(mm->buffer(2), nullptr);
}

// Rule 5.
TEST(Placement, UnloadMethodReleasesArenas) {
  ScopedTestAllocator host(DeviceType::CPU);
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda", &cuda.allocator());
  fixtures::FixtureProgram f = host_and_device_program();
  fixtures::ReluAddOptions o;
  f.program.methods.push_back(std::move(fixtures::two_method_program(o).program.methods[1]));  // "scale"
  Result<std::vector<uint8_t>> bytes = f.serialize();
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  Result<Module> m = Module::load_bytes(std::move(bytes).value());
  ASSERT_TRUE(m.ok()) << m.status().to_string();

  ASSERT_TRUE(m->load_method("device").ok());
  EXPECT_EQ(cuda->counts().bytes_live, 512);
  ASSERT_TRUE(m->unload_method("device").ok());
  EXPECT_EQ(cuda->counts().bytes_live, 0);
  EXPECT_EQ(host->counts().bytes_live, 0);
  EXPECT_EQ(backend->counts().destroys, 1);
  EXPECT_FALSE(m->is_method_loaded("device"));

  // The shared host arenas go with the last host method that uses them.
  ASSERT_TRUE(m->load_method("host").ok());
  ASSERT_TRUE(m->load_method("scale").ok());
  EXPECT_TRUE(m->program().shared_host_arenas_allocated());
  ASSERT_TRUE(m->unload_method("host").ok());
  EXPECT_TRUE(m->program().shared_host_arenas_allocated());
  ASSERT_TRUE(m->unload_method("scale").ok());
  EXPECT_FALSE(m->program().shared_host_arenas_allocated());
  EXPECT_EQ(host->counts().bytes_live, 0);

  Status again = m->unload_method("scale");
  EXPECT_EQ(again.code(), ErrorCode::NotFound);
  EXPECT_TRUE(contains(again.message(), "scale"));
}

// Rule 6.
TEST(Placement, MethodMetaAnswersBeforeLoading) {
  ScopedTestAllocator host(DeviceType::CPU);
  Program p = load_fixture(host_and_device_program());
  Result<MethodMeta> meta = p.method_meta("device");
  ASSERT_TRUE(meta.ok()) << meta.status().to_string();
  EXPECT_EQ(host->counts().allocations, 0);
  EXPECT_EQ(meta->name, "device");
  ASSERT_EQ(meta->dims.size(), 1u);
  EXPECT_EQ(meta->dims[0].name, "S");
  EXPECT_EQ(meta->dims[0].min, 1);
  EXPECT_EQ(meta->dims[0].max, 16);
  ASSERT_EQ(meta->inputs.size(), 1u);
  EXPECT_EQ(meta->inputs[0].name, "x");
  EXPECT_EQ(meta->inputs[0].dtype, DType::F32);
  EXPECT_EQ(shape_string(meta->inputs[0].shape, meta->dims), "[S, 4]");
  ASSERT_EQ(meta->outputs.size(), 1u);
  EXPECT_EQ(meta->outputs[0].name, "y");
  ASSERT_EQ(meta->planned_buffers.size(), 2u);
  EXPECT_EQ(meta->planned_buffers[0].size_bytes, 512u);
  EXPECT_EQ(meta->planned_buffers[0].device, Device::cpu());
  EXPECT_EQ(meta->planned_buffers[1].size_bytes, 512u);
  EXPECT_EQ(meta->planned_buffers[1].device, Device::cuda(0));
  EXPECT_TRUE(meta->uses_device_memory());
  EXPECT_EQ(meta->backends, std::vector<std::string>{"cuda"});
  ASSERT_EQ(meta->segments.size(), 1u);
  EXPECT_EQ(meta->segments[0].name, "cuda0");
  EXPECT_EQ(meta->segments[0].scratch_bytes, kArena);
  EXPECT_EQ(meta->plan.size(), 2u);
  EXPECT_EQ(meta->num_instructions, 3u);
  ASSERT_EQ(meta->memory.size(), 2u);
  EXPECT_EQ(meta->memory[0].device, Device::cpu());
  EXPECT_EQ(meta->memory[0].planned_bytes, 512u);
  EXPECT_EQ(meta->memory[0].weights_bytes, 0u);  // c is read only inside the cuda segment
  EXPECT_EQ(meta->memory[1].device, Device::cuda(0));
  EXPECT_EQ(meta->memory[1].planned_bytes, 512u);
  EXPECT_EQ(meta->memory[1].weights_bytes, 16u);
  EXPECT_EQ(meta->memory[1].engine_scratch_bytes, kArena);

  Result<MethodMeta> host_meta = p.method_meta("host");
  ASSERT_TRUE(host_meta.ok());
  EXPECT_FALSE(host_meta->uses_device_memory());
  EXPECT_TRUE(host_meta->backends.empty());
  ASSERT_EQ(host_meta->memory.size(), 1u);
  EXPECT_EQ(host_meta->memory[0].weights_bytes, 16u);
  EXPECT_EQ(host_meta->planned_bytes_on(Device::cpu()), 768u);

  Result<MethodMeta> missing = p.method_meta("nope");
  EXPECT_EQ(missing.status().code(), ErrorCode::NotFound);
  EXPECT_TRUE(contains(missing.status().message(), "host, device")) << missing.status().message();
}

}  // namespace
}  // namespace planrt
