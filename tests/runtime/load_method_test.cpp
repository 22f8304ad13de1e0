// What load_method checks and resolves before a method may run.
#include <gtest/gtest.h>

#include "planrt/runtime/program.h"
#include "runtime_test_util.h"
#include "support/test_device.h"

namespace planrt {
namespace {

using namespace runtime_test;
using testing::ScopedTestAllocator;
using testing::ScopedTestBackend;

Status load_status(const fixtures::FixtureProgram& f, const std::string& method) {
  Result<std::vector<uint8_t>> bytes = f.serialize();
  if (!bytes.ok()) return bytes.status();
  PLANRT_ASSIGN_OR_RETURN(Program p, Program::load_bytes(std::move(bytes).value()));
  return p.load_method(method).status();
}

fixtures::FixtureProgram device_program() {
  fixtures::ReluAddOptions o;
  o.on_cuda = true;
  return fixtures::relu_add_program(o);
}

TEST(LoadMethod, UnknownOpIsNotFoundNamingTheNode) {
  ScopedTestAllocator host(DeviceType::CPU);
  fixtures::FixtureProgram f = fixtures::relu_add_program();
  f.program.methods[0]->instructions[1]->op = "frobnicate";
  Status s = load_status(f, "forward");
  EXPECT_EQ(s.code(), ErrorCode::NotFound);
  EXPECT_TRUE(contains(s.message(), "instruction 1 (kernel 'frobnicate', node 'relu'): unknown op"))
      << s.message();
  EXPECT_EQ(host->counts().allocations, 0);
}

TEST(LoadMethod, WrongOperandCountIsInvalidProgram) {
  fixtures::FixtureProgram f = fixtures::relu_add_program();
  f.program.methods[0]->instructions[1]->inputs = {2, 1};  // relu takes one input
  Status s = load_status(f, "forward");
  EXPECT_EQ(s.code(), ErrorCode::InvalidProgram);
  EXPECT_TRUE(contains(s.message(), "op 'relu' takes 1..1 inputs")) << s.message();
}

TEST(LoadMethod, KernelOnADeviceValueIsRefused) {
  fixtures::FixtureProgram f = device_program();
  // relu reading x_dev (value 2, planned on cuda:0) into the host output y.
  auto relu = fixtures::kernel_instruction("relu", {2}, {1});
  relu->node = "bad_relu";
  f.program.methods[0]->instructions.push_back(std::move(relu));
  Status s = load_status(f, "forward");
  EXPECT_EQ(s.code(), ErrorCode::InvalidProgram);
  EXPECT_TRUE(contains(s.message(), "node 'bad_relu'")) << s.message();
  // The reader may refuse it before load_method does; either way the error names the value.
  EXPECT_TRUE(contains(s.message(), "'x_dev'")) << s.message();
}

TEST(LoadMethod, UnregisteredBackendIsNotFoundNamingBackendSegmentAndMethod) {
  ScopedTestAllocator host(DeviceType::CPU);
  ScopedTestAllocator cuda;
  fixtures::ReluAddOptions o;
  o.on_cuda = true;
  o.cuda_backend = "warp_drive";
  Status s = load_status(fixtures::relu_add_program(o), "forward");
  EXPECT_EQ(s.code(), ErrorCode::NotFound);
  EXPECT_TRUE(contains(s.message(), "method 'forward'")) << s.message();
  EXPECT_TRUE(contains(s.message(), "backend 'warp_drive' of segment 0 'cuda0'")) << s.message();
  EXPECT_EQ(host->counts().allocations, 0);
  EXPECT_EQ(cuda->counts().allocations, 0);
}

TEST(LoadMethod, BackendInitFailureLeavesNothingAllocated) {
  ScopedTestAllocator host(DeviceType::CPU);
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda", &cuda.allocator());
  backend->fail_next_init();
  Status s = load_status(device_program(), "forward");
  EXPECT_EQ(s.code(), ErrorCode::Internal);
  EXPECT_TRUE(contains(s.message(), "segment 0 'cuda0' (backend 'cuda') init")) << s.message();
  EXPECT_EQ(cuda->counts().bytes_live, 0);
  EXPECT_EQ(host->counts().bytes_live, 0);
  EXPECT_EQ(backend->counts().destroys, backend->counts().inits);
}

TEST(LoadMethod, BackendOptionsAndCompileSpecsReachTheBackend) {
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda", &cuda.allocator());
  fixtures::FixtureProgram f = device_program();
  auto program_spec = std::make_unique<fb::KeyValueT>();
  program_spec->key = "pool";
  program_spec->value = "off";
  f.program.compile_specs.push_back(std::move(program_spec));
  auto segment_spec = std::make_unique<fb::KeyValueT>();
  segment_spec->key = "pool";
  segment_spec->value = "on";
  f.program.methods[0]->segments[0]->compile_specs.push_back(std::move(segment_spec));
  Program p = load_fixture(f);
  LoadMethodOptions options;
  options.backend_options["cuda"] = {{"use_shared_activation_scratch", "1"}};
  options.backend_options["engine"] = {{"ignored", "x"}};
  Result<Method> m = p.load_method("forward", options);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(backend->last_options(),
            (std::vector<BackendOption>{{"use_shared_activation_scratch", "1"}}));
  // The program's specs, then the segment's: a later key wins.
  EXPECT_EQ(backend->last_compile_specs(),
            (std::vector<BackendOption>{{"pool", "off"}, {"pool", "on"}}));
}

TEST(LoadMethod, DelegateSegmentRunsOnDeviceMemory) {
  ScopedTestAllocator cuda;
  ScopedTestBackend backend("cuda", &cuda.allocator());
  Program p = load_fixture(device_program());
  Result<Method> m = p.load_method("forward");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  for (int64_t s : {1, 16}) {
    std::vector<float> x = make_x(s);
    TensorView in = view_of(x, {s, kFeatures});
    Result<std::vector<Tensor>> out = m->execute({&in, 1});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(floats((*out)[0]), fixtures::relu_add_reference(x, kFeatures));
  }
  EXPECT_EQ(backend->counts().inits, 1);
  EXPECT_EQ(backend->counts().executes, 2);
  EXPECT_EQ(cuda->counts().bytes_copied, 2 * (1 + 16) * kFeatures * 4);
}

TEST(LoadMethod, DimThatNoInputDeterminesIsInvalidProgram) {
  fixtures::FixtureProgram f = fixtures::relu_add_program();
  auto& m = *f.program.methods[0];
  auto t = std::make_unique<fb::DimSpecT>();
  t->name = "T";
  t->min = 1;
  t->max = 16;
  m.dims.push_back(std::move(t));
  m.values[2]->shape = {fixtures::named_dim(1), fixtures::fixed_dim(kFeatures)};  // t [T, 4]
  Status s = load_status(f, "forward");
  EXPECT_EQ(s.code(), ErrorCode::InvalidProgram);
  EXPECT_TRUE(contains(s.message(), "value 't' refers to dim 'T', which no input determines"))
      << s.message();
}

}  // namespace
}  // namespace planrt
