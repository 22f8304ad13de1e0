// Built programs written to disk and read back through the verifying reader, with weights
// in the data segment or in a safetensors file beside the program.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "builder_test_util.h"
#include "format/program_file.h"
#include "format/safetensors.h"

namespace planrt::builder {
namespace {

using btest::data_dir;

std::vector<uint8_t> constant_bytes(const Model& model, const std::string& name) {
  const ir::Constant* c = model.graph().find_constant(name);
  return {c->bytes.begin(), c->bytes.end()};
}

TEST(ProgramWrite, MlpExampleWritesAndReadsBackWithEmbeddedWeights) {
  ASSERT_OK_AND_ASSIGN(Model model, read_model_json(data_dir() + "/models/mlp.json"));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  btest::expect_plans_valid(built.program());
  btest::TempDir dir;
  ASSERT_OK(built.write(dir.file("mlp.prog")));
  ASSERT_OK_AND_ASSIGN(format::ProgramFile file, format::ProgramFile::open(dir.file("mlp.prog")));
  const fb::Program& p = file.program();
  EXPECT_EQ(p.format_version(), format::kFormatVersion);
  EXPECT_EQ(p.producer()->str(), "planrt-builder");
  EXPECT_EQ(p.external_constants(), nullptr);
  ASSERT_EQ(p.constants()->size(), 4u);
  for (uint32_t i = 0; i < p.constants()->size(); ++i) {
    std::string name = p.constants()->Get(i)->name()->str();
    std::span<const uint8_t> data = file.constant_data(i);
    EXPECT_EQ(std::vector<uint8_t>(data.begin(), data.end()), constant_bytes(model, name)) << name;
  }
  const fb::Method* m = p.methods()->Get(0);
  EXPECT_EQ(m->name()->str(), "forward");
  EXPECT_EQ(m->instructions()->size(), 2u);  // the relu runs inside the first linear
  ASSERT_EQ(m->plan()->size(), 1u);
  EXPECT_EQ(m->plan()->Get(0)->planner()->str(), "greedy-by-size");
  // At B = 8: x 512 B, a (the fused linear's output) 1 KiB, y 128 B; the largest live set
  // is x + a, read and written by instruction 0.
  EXPECT_EQ(m->plan()->Get(0)->lower_bound_bytes(), 512u + 1024);
  EXPECT_EQ(built.plans()[0].planned_bytes, m->planned_buffers()->Get(0)->size_bytes());
  EXPECT_EQ(built.num_constants(), 4u);
  EXPECT_EQ(built.constants_bytes(), model.constants_bytes());
}

TEST(ProgramWrite, ExternalWeightsGoToASafetensorsFileBesideTheProgram) {
  ASSERT_OK_AND_ASSIGN(Model model, read_model_json(data_dir() + "/models/mlp.json"));
  BuildOptions opts;
  opts.external_weights = true;
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model, opts));
  btest::TempDir dir;
  ASSERT_OK(built.write(dir.file("net.v1.prog")));
  EXPECT_TRUE(std::filesystem::exists(dir.file("net.v1.safetensors")));
  ASSERT_OK_AND_ASSIGN(format::ProgramFile file, format::ProgramFile::open(dir.file("net.v1.prog")));
  ASSERT_NE(file.program().external_constants(), nullptr);
  EXPECT_EQ(file.program().external_constants()->str(), "net.v1.safetensors");
  for (uint32_t i = 0; i < file.program().constants()->size(); ++i) {
    std::string name = file.program().constants()->Get(i)->name()->str();
    std::span<const uint8_t> data = file.constant_data(i);
    EXPECT_EQ(std::vector<uint8_t>(data.begin(), data.end()), constant_bytes(model, name)) << name;
  }
  // The program file itself holds no weights.
  EXPECT_LT(std::filesystem::file_size(dir.file("net.v1.prog")), 4096u);
  EXPECT_ERROR_CONTAINS(built.serialize(), "external weights is written with write(path)");
}

TEST(ProgramWrite, WeightExportHoldsEveryConstant) {
  ASSERT_OK_AND_ASSIGN(Model model, read_model_json(data_dir() + "/models/mlp.json"));
  btest::TempDir dir;
  ASSERT_OK(write_weights_safetensors(model, dir.file("w.safetensors")));
  ASSERT_OK_AND_ASSIGN(format::SafetensorsFile st, format::SafetensorsFile::open(dir.file("w.safetensors")));
  EXPECT_EQ(st.tensors().size(), 4u);
  const format::SafetensorsTensor* w = st.find("fc1.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(std::vector<uint8_t>(w->data.begin(), w->data.end()), constant_bytes(model, "fc1.weight"));
}

TEST(ProgramWrite, WriteToAnUnwritablePathIsAnError) {
  ASSERT_OK_AND_ASSIGN(Model model, read_model_json(data_dir() + "/models/mlp.json"));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  Status s = built.write("/nonexistent/dir/out.prog");
  EXPECT_FALSE(s.ok());
  EXPECT_ERROR_CONTAINS(s, "/nonexistent/dir/out");
}

TEST(ProgramWrite, ModelSummaryAndMethodNames) {
  ASSERT_OK_AND_ASSIGN(Model model, read_model_json(data_dir() + "/models/two_methods.json"));
  EXPECT_EQ(model.method_names(), (std::vector<std::string>{"forward", "forward_cuda"}));
  EXPECT_EQ(model.num_constants(), 6u);
  EXPECT_EQ(model.constants_bytes(), 4u * (64 + 64 + 128 * 64 + 128 + 64 * 128 + 64));
}

}  // namespace
}  // namespace planrt::builder
