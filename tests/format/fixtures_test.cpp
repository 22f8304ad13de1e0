// The fixtures other layers' tests build on must themselves be valid programs.
#include <gtest/gtest.h>

#include "format/program_file.h"
#include "format/test_util.h"
#include "support/program_fixtures.h"

namespace planrt::format {
namespace {

Result<ProgramFile> load(const fixtures::FixtureProgram& f) {
  auto bytes = f.serialize();
  if (!bytes.ok()) return bytes.status();
  return ProgramFile::from_bytes(std::move(bytes).value());
}

TEST(Fixtures, HostReluAddIsValid) {
  auto file = load(fixtures::relu_add_program());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const fb::Method& m = *file->program().methods()->Get(0);
  EXPECT_EQ(m.name()->str(), "forward");
  EXPECT_EQ(m.planned_buffers()->size(), 1u);
  EXPECT_EQ(m.instructions()->size(), 2u);
}

TEST(Fixtures, CudaVariantIsValidAndTagsBufferOneAsCuda0) {
  fixtures::ReluAddOptions o;
  o.on_cuda = true;
  auto file = load(fixtures::relu_add_program(o));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const fb::Method& m = *file->program().methods()->Get(0);
  ASSERT_EQ(m.planned_buffers()->size(), 2u);
  EXPECT_EQ(m.planned_buffers()->Get(0)->device()->type(), fb::DeviceType::CPU);
  EXPECT_EQ(m.planned_buffers()->Get(1)->device()->type(), fb::DeviceType::CUDA);
  EXPECT_EQ(m.planned_buffers()->Get(1)->device()->index(), 0);
  ASSERT_EQ(m.segments()->size(), 1u);
  EXPECT_EQ(m.segments()->Get(0)->backend()->str(), "cuda");
  ASSERT_NE(m.segments()->Get(0)->blob_nested_root(), nullptr);
}

TEST(Fixtures, TwoMethodVariantHasDistinctBufferSizes) {
  auto file = load(fixtures::two_method_program());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const auto* methods = file->program().methods();
  ASSERT_EQ(methods->size(), 2u);
  EXPECT_EQ(methods->Get(1)->name()->str(), "scale");
  EXPECT_LT(methods->Get(0)->planned_buffers()->Get(0)->size_bytes(),
            methods->Get(1)->planned_buffers()->Get(0)->size_bytes());
}

TEST(Fixtures, ExternalWeightsVariantLoadsTheSafetensorsFile) {
  TempDir dir;
  auto f = fixtures::relu_add_program();
  ASSERT_TRUE(f.write_with_external_weights(dir.path().string(), "m.prog", "w.safetensors").ok());
  auto file = ProgramFile::open(dir.file("m.prog"));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto data = file->constant_data(0);
  ASSERT_EQ(data.size(), 16u);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), f.constants[0].begin()));
}

TEST(Fixtures, ReferencesComputeTheMethods) {
  std::vector<float> x = {1, -1, 0, 2, -3, 0.5f, 0.25f, 1};  // S = 2, F = 4; c = -1, -0.5, 0, 0.5
  EXPECT_EQ(fixtures::relu_add_reference(x, 4), (std::vector<float>{0, 0, 0, 2.5f, 0, 0, 0.25f, 1.5f}));
  EXPECT_EQ(fixtures::scale_reference(x, 4), (std::vector<float>{-1, 0.5f, 0, 1, 3, -0.25f, 0, 0.5f}));
}

}  // namespace
}  // namespace planrt::format
