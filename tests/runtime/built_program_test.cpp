// The reference scenario end to end, on a program the builder makes from
// tests/data/models/two_methods.json: "forward" all on the CPU, "forward_cuda" with a cuda
// segment and a cuda:0 planned buffer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "planrt/builder/builder.h"
#include "planrt/runtime/program.h"
#include "runtime_test_util.h"
#include "support/built_programs.h"
#include "support/test_device.h"

namespace planrt {
namespace {

using runtime_test::contains;

std::string model_path() {
  const char* env = std::getenv("PLANRT_TEST_DATA");
  std::filesystem::path data = env != nullptr
                                   ? std::filesystem::path(env)
                                   : std::filesystem::path(__FILE__).parent_path().parent_path() / "data";
  return (data / "models" / "two_methods.json").string();
}

Result<Program> build_two_methods() {
  PLANRT_ASSIGN_OR_RETURN(builder::Model model, builder::read_model_json(model_path()));
  return fixtures::load_built_program(model);
}

Result<std::vector<Tensor>> run(Method& m, std::vector<float>& x, int64_t s) {
  TensorView in = TensorView::contiguous(x.data(), DType::F32, {1, s, 64});
  return m.execute({&in, 1});
}

TEST(BuiltProgram, DeviceMethodIsRefusedWithoutAllocatorThenMatchesTheHostMethod) {
  Result<Program> p = build_two_methods();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Result<MethodMeta> meta = p->method_meta("forward_cuda");
  ASSERT_TRUE(meta.ok());
  ASSERT_TRUE(meta->uses_device_memory());
  uint64_t device_bytes = meta->planned_bytes_on(Device::cuda(0));

  const int64_t s = 5;
  std::vector<float> x(static_cast<size_t>(s * 64));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.1f * static_cast<float>(i));

  Result<Method> host = p->load_method("forward");
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  Result<std::vector<Tensor>> want = run(*host, x, s);
  ASSERT_TRUE(want.ok()) << want.status().to_string();

  testing::ScopedTestBackend backend("cuda");
  ASSERT_TRUE(backend.status().ok());
  Result<Method> refused = p->load_method("forward_cuda");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::NotSupported);
  EXPECT_TRUE(contains(refused.status().message(), "method 'forward_cuda'") &&
              contains(refused.status().message(), "cuda:0") &&
              contains(refused.status().message(), std::to_string(device_bytes) + " bytes"))
      << refused.status().message();
  ASSERT_TRUE(run(*host, x, s).ok()) << "the host method keeps working";

  testing::ScopedTestAllocator cuda;
  ASSERT_TRUE(cuda.status().ok()) << cuda.status().to_string();
  backend->check_device_memory(&cuda.allocator());
  {
    Result<Method> device = p->load_method("forward_cuda");
    ASSERT_TRUE(device.ok()) << device.status().to_string();
    EXPECT_EQ(cuda->counts().bytes_live, static_cast<int64_t>(device_bytes));
    Result<std::vector<Tensor>> got = run(*device, x, s);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    auto a = (*want)[0].values<float>();
    auto b = (*got)[0].values<float>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f) << i;
    EXPECT_GE(cuda->counts().copies_h2d, 1);
    EXPECT_GE(cuda->counts().copies_d2h, 1);
  }
  EXPECT_EQ(cuda->counts().bytes_live, 0);
  backend->check_device_memory(nullptr);
}

}  // namespace
}  // namespace planrt
