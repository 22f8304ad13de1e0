#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include <unistd.h>

#include "planrt/runtime/module.h"
#include "planrt/runtime/program.h"
#include "runtime_test_util.h"
#include "support/status_matchers.h"
#include "support/test_device.h"

namespace planrt {
namespace {

using namespace runtime_test;
using testing::IsError;

class ExecuteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    program_ = std::make_unique<Program>(load_fixture(fixtures::two_method_program()));
    Result<Method> m = program_->load_method("forward");
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    method_ = std::make_unique<Method>(std::move(m).value());
  }
  Status run_with(TensorView in) { return method_->execute({&in, 1}).status(); }

  std::unique_ptr<Program> program_;
  std::unique_ptr<Method> method_;
};

TEST_F(ExecuteTest, ComputesTheMethodForEveryBoundDim) {
  for (int64_t s : {1, 7, 16}) {
    std::vector<float> x = make_x(s);
    TensorView in = view_of(x, {s, kFeatures});
    Result<std::vector<Tensor>> out = method_->execute({&in, 1});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    ASSERT_EQ(out->size(), 1u);
    EXPECT_EQ((*out)[0].shape(), (Shape{s, kFeatures}));
    EXPECT_EQ((*out)[0].dtype(), DType::F32);
    EXPECT_EQ(floats((*out)[0]), fixtures::relu_add_reference(x, kFeatures));
  }
}

TEST_F(ExecuteTest, WrongDtypeIsInvalidArgumentNamingTheInput) {
  std::vector<int32_t> x(8);
  Status s = run_with(TensorView::contiguous(x.data(), DType::I32, {2, kFeatures}));
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(s.message(), "input 0 'x' is i32, expected f32")) << s.message();
}

TEST_F(ExecuteTest, WrongRankIsInvalidArgument) {
  std::vector<float> x(8);
  Status s = run_with(TensorView::contiguous(x.data(), DType::F32, {8}));
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(s.message(), "'x' has rank 1, expected rank 2 [S, 4]")) << s.message();
}

TEST_F(ExecuteTest, StaticDimMismatchIsInvalidArgument) {
  std::vector<float> x(10);
  Status s = run_with(TensorView::contiguous(x.data(), DType::F32, {2, 5}));
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(s.message(), "has size 5 at dim 1, expected 4")) << s.message();
}

TEST_F(ExecuteTest, DimOutsideBoundsIsOutOfRangeNamingInputDimValueAndBounds) {
  std::vector<float> x = make_x(17);
  Status s = run_with(view_of(x, {17, kFeatures}));
  EXPECT_EQ(s.code(), ErrorCode::OutOfRange);
  EXPECT_TRUE(contains(s.message(), "input 0 'x' dim 0: S = 17 is outside its bounds [1, 16]"))
      << s.message();
  std::vector<float> empty;
  Status zero = run_with(view_of(empty, {0, kFeatures}));
  EXPECT_EQ(zero.code(), ErrorCode::OutOfRange);
}

TEST_F(ExecuteTest, WrongInputCountIsInvalidArgument) {
  Result<std::vector<Tensor>> out = method_->execute({});
  EXPECT_EQ(out.status().code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(out.status().message(), "takes 1 inputs, got 0")) << out.status().message();
}

TEST_F(ExecuteTest, NonHostOrStridedInputIsInvalidArgument) {
  std::vector<float> x = make_x(2);
  TensorView on_device = view_of(x, {2, kFeatures});
  on_device.device = Device::cuda(0);
  EXPECT_EQ(run_with(on_device).code(), ErrorCode::InvalidArgument);
  TensorView strided = view_of(x, {2, kFeatures});
  strided.strides = Shape{1, 2};
  EXPECT_EQ(run_with(strided).code(), ErrorCode::InvalidArgument);
}

TEST_F(ExecuteTest, ErrorsLeaveTheMethodUsable) {
  std::vector<float> bad(10);
  EXPECT_TRUE(IsError(run_with(TensorView::contiguous(bad.data(), DType::F32, {2, 5})),
                      ErrorCode::InvalidArgument, {"has size 5 at dim 1, expected 4"}));
  std::vector<float> x = make_x(3);
  EXPECT_TRUE(run_with(view_of(x, {3, kFeatures})).ok());
}

TEST_F(ExecuteTest, RunKeepsOutputsInPlannedMemoryUntilCopied) {
  Result<std::vector<TensorView>> before = method_->outputs();
  EXPECT_EQ(before.status().code(), ErrorCode::InvalidArgument);
  std::vector<float> x = make_x(5);
  TensorView in = view_of(x, {5, kFeatures});
  ASSERT_TRUE(method_->run({&in, 1}).ok());
  Result<std::vector<TensorView>> views = method_->outputs();
  ASSERT_TRUE(views.ok());
  EXPECT_EQ((*views)[0].sizes, (Shape{5, kFeatures}));
  std::vector<float> y(x.size());
  TensorView dst = view_of(y, {5, kFeatures});
  ASSERT_TRUE(method_->copy_outputs_into({&dst, 1}).ok());
  EXPECT_EQ(y, fixtures::relu_add_reference(x, kFeatures));
  std::vector<float> small(4);
  TensorView wrong = view_of(small, {1, kFeatures});
  Status s = method_->copy_outputs_into({&wrong, 1});
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(s.message(), "output 0 'y'")) << s.message();
}

TEST_F(ExecuteTest, MethodOutlivesItsProgramObject) {
  program_.reset();
  std::vector<float> x = make_x(2);
  TensorView in = view_of(x, {2, kFeatures});
  Result<std::vector<Tensor>> out = method_->execute({&in, 1});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0]), fixtures::relu_add_reference(x, kFeatures));
}

TEST(Execute, KernelErrorNamesInstructionOpAndNode) {
  // c of 3 elements cannot broadcast against x [S, 4]: the add kernel refuses at run time.
  fixtures::FixtureProgram f = fixtures::relu_add_program();
  f.program.constants[0]->shape = {3};
  f.constants[0] = fixtures::float_bytes(fixtures::constant_c(3));
  f.program.methods[0]->values[1]->shape = {fixtures::fixed_dim(3)};
  Program p = load_fixture(f);
  Result<Method> m = p.load_method("forward");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::vector<float> x = make_x(2);
  TensorView in = view_of(x, {2, kFeatures});
  Status s = m->execute({&in, 1}).status();
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(contains(s.message(), "method 'forward': instruction 0 (kernel 'add', node 'add')"))
      << s.message();
}

TEST(Execute, UnknownMethodIsNotFoundListingTheMethods) {
  Program p = load_fixture(fixtures::two_method_program());
  Result<Method> m = p.load_method("backward");
  EXPECT_EQ(m.status().code(), ErrorCode::NotFound);
  EXPECT_TRUE(contains(m.status().message(), "'backward' not found; the program has: forward, scale"))
      << m.status().message();
}

TEST(Execute, ModuleLoadsAMethodOnFirstUse) {
  fixtures::FixtureProgram f = fixtures::two_method_program();
  std::string path = (std::filesystem::temp_directory_path() /
                      ("planrt_module_" + std::to_string(::getpid()) + ".prog")).string();
  ASSERT_TRUE(f.write(path).ok());
  Result<Module> m = Module::load(path);
  std::filesystem::remove(path);  // mapped: the module keeps working
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->method_names(), (std::vector<std::string>{"forward", "scale"}));
  EXPECT_FALSE(m->is_method_loaded("scale"));
  std::vector<float> x = make_x(20);
  TensorView in = view_of(x, {20, kFeatures});
  Result<std::vector<Tensor>> out = m->execute("scale", {&in, 1});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(m->is_method_loaded("scale"));
  EXPECT_EQ(floats((*out)[0]), fixtures::scale_reference(x, kFeatures));
  EXPECT_EQ(m->execute("nope", {&in, 1}).status().code(), ErrorCode::NotFound);
  Result<MethodMeta> meta = m->method_meta("scale");
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->dims[0].max, 32);
}

TEST(Execute, ProgramWithExternalWeightsRuns) {
  fixtures::FixtureProgram f = fixtures::relu_add_program();
  auto dir = std::filesystem::temp_directory_path() / ("planrt_ext_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(f.write_with_external_weights(dir.string(), "m.prog", "w.safetensors").ok());
  Result<Program> p = Program::load((dir / "m.prog").string());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Result<Method> m = p->load_method("forward");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::vector<float> x = make_x(4);
  TensorView in = view_of(x, {4, kFeatures});
  Result<std::vector<Tensor>> out = m->execute({&in, 1});
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(floats((*out)[0]), fixtures::relu_add_reference(x, kFeatures));
}

TEST(Execute, CorruptProgramBytesAreInvalidProgram) {
  Result<std::vector<uint8_t>> bytes = fixtures::relu_add_program().serialize();
  ASSERT_TRUE(bytes.ok());
  (*bytes)[70] ^= 0xFF;  // inside the FlatBuffer
  bytes->resize(bytes->size() - 7);
  Result<Program> p = Program::load_bytes(std::move(bytes).value());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::InvalidProgram);
}

// Methods that share arenas serialize on their lock, so two threads may call them.
TEST(Execute, HostMethodsSharingArenasMayBeCalledFromTwoThreads) {
  Program p = load_fixture(fixtures::two_method_program());
  Result<Method> forward = p.load_method("forward");
  Result<Method> scale = p.load_method("scale");
  ASSERT_TRUE(forward.ok() && scale.ok());
  std::vector<float> x = make_x(16);
  std::vector<float> want_f = fixtures::relu_add_reference(x, kFeatures);
  std::vector<float> want_s = fixtures::scale_reference(x, kFeatures);
  std::atomic<int> wrong{0};
  auto loop = [&](Method& m, const std::vector<float>& want) {
    std::vector<float> local = x;
    TensorView in = view_of(local, {16, kFeatures});
    for (int i = 0; i < 200; ++i) {
      Result<std::vector<Tensor>> out = m.execute({&in, 1});
      if (!out.ok() || floats((*out)[0]) != want) ++wrong;
    }
  };
  std::thread a(loop, std::ref(*forward), std::cref(want_f));
  std::thread b(loop, std::ref(*scale), std::cref(want_s));
  a.join();
  b.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace planrt
