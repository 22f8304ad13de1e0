// Random weights (deterministic per seed and name) and weights loaded from safetensors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "builder/weights.h"
#include "builder_test_util.h"
#include "format/safetensors.h"
#include "model_json_util.h"

namespace planrt::builder {
namespace {

std::vector<float> floats_of(const ir::Constant& c) {
  std::vector<float> v(c.bytes.size() / sizeof(float));
  std::memcpy(v.data(), c.bytes.data(), c.bytes.size());
  return v;
}

std::vector<uint8_t> bytes_of(const Model& m, const std::string& name) {
  const ir::Constant* c = m.graph().find_constant(name);
  EXPECT_NE(c, nullptr) << name;
  return c == nullptr ? std::vector<uint8_t>{} : std::vector<uint8_t>(c->bytes.begin(), c->bytes.end());
}

TEST(RandomWeights, GeneratorIsSplitmix64) {
  // Reference values of splitmix64 seeded with 0 (its published test vector).
  NormalGenerator g(0);
  EXPECT_EQ(g.next_u64(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(g.next_u64(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(g.next_u64(), 0x06C45D188009454Full);
}

TEST(RandomWeights, NormalSamplesHaveUnitVariance) {
  NormalGenerator g(42);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double v = g.next_normal();
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += v * v;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.01);
}

TEST(RandomWeights, SameSeedGivesSameBytesAndOtherSeedsDiffer) {
  btest::OneMethod m;
  m.nodes = R"({"op": "linear", "inputs": ["x", "w"], "outputs": ["y"]})";
  m.constants = R"("w": {"dtype": "f32", "shape": [4, 8]})";
  std::string json = m.json();
  ASSERT_OK_AND_ASSIGN(Model a, parse_model_json(json));
  ASSERT_OK_AND_ASSIGN(Model b, parse_model_json(json));
  EXPECT_EQ(bytes_of(a, "w"), bytes_of(b, "w"));
  std::string other = json;
  other.replace(other.find("\"seed\": 3"), 9, "\"seed\": 4");
  ASSERT_OK_AND_ASSIGN(Model c, parse_model_json(other));
  EXPECT_NE(bytes_of(a, "w"), bytes_of(c, "w"));
}

TEST(RandomWeights, BytesAreFixedAcrossMachines) {
  // Pinned values: a change here changes every random program ever built.
  ir::Model model;
  model.constants.push_back({"w", DType::F32, {4}, ir::Init::Normal, {}, nullptr});
  ASSERT_OK(generate_random_weights(model, {.seed = 1234, .std = 1.0}, nullptr));
  std::vector<float> v = floats_of(model.constants[0]);
  NormalGenerator g(tensor_seed(1234, "w"));
  for (float f : v) EXPECT_EQ(f, static_cast<float>(g.next_normal()));
  EXPECT_EQ(tensor_seed(1234, "w"), tensor_seed(1234, "w"));
  EXPECT_NE(tensor_seed(1234, "w"), tensor_seed(1234, "v"));
  EXPECT_NE(tensor_seed(1234, "w"), tensor_seed(1235, "w"));
  // Samples of the generator itself, pinned.
  NormalGenerator pinned(7);
  EXPECT_NEAR(pinned.next_normal(), 1.3649922974572282, 1e-12);
  EXPECT_NEAR(pinned.next_normal(), 0.14452122126941494, 1e-12);
}

TEST(RandomWeights, TensorBytesDependOnNameNotDeclarationOrder) {
  ir::Model a, b;
  a.constants.push_back({"p", DType::F32, {3}, ir::Init::Normal, {}, nullptr});
  a.constants.push_back({"q", DType::F32, {3}, ir::Init::Normal, {}, nullptr});
  b.constants.push_back({"q", DType::F32, {3}, ir::Init::Normal, {}, nullptr});
  ASSERT_OK(generate_random_weights(a, {.seed = 9, .std = 0.02}, nullptr));
  ASSERT_OK(generate_random_weights(b, {.seed = 9, .std = 0.02}, nullptr));
  EXPECT_EQ(floats_of(a.constants[1]), floats_of(b.constants[0]));
  EXPECT_NE(floats_of(a.constants[0]), floats_of(a.constants[1]));
}

TEST(RandomWeights, InitAndDtypes) {
  ir::Model m;
  m.constants.push_back({"ones", DType::F32, {2}, ir::Init::Ones, {}, nullptr});
  m.constants.push_back({"zeros", DType::F32, {2}, ir::Init::Zeros, {}, nullptr});
  m.constants.push_back({"half", DType::F16, {2}, ir::Init::Ones, {}, nullptr});
  m.constants.push_back({"brain", DType::BF16, {2}, ir::Init::Ones, {}, nullptr});
  m.constants.push_back({"ids", DType::I64, {2}, ir::Init::Normal, {}, nullptr});
  ASSERT_OK(generate_random_weights(m, {}, nullptr));
  EXPECT_EQ(floats_of(m.constants[0]), (std::vector<float>{1, 1}));
  EXPECT_EQ(floats_of(m.constants[1]), (std::vector<float>{0, 0}));
  uint16_t h[2], bf[2];
  std::memcpy(h, m.constants[2].bytes.data(), 4);
  std::memcpy(bf, m.constants[3].bytes.data(), 4);
  EXPECT_EQ(h[0], 0x3C00);
  EXPECT_EQ(bf[1], 0x3F80);
  int64_t ids[2];
  std::memcpy(ids, m.constants[4].bytes.data(), 16);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(m.constants[4].bytes.size(), 16u);
}

TEST(RandomWeights, NegativeStdIsRejected) {
  ir::Model m;
  m.constants.push_back({"w", DType::F32, {2}, ir::Init::Normal, {}, nullptr});
  EXPECT_ERROR_CONTAINS(generate_random_weights(m, {.seed = 0, .std = -1}, nullptr), "std must be finite and >= 0");
}

// A description of under a kilobyte declared a constant of 40 GB that no node reads; with
// a limit the reader refuses it before generating anything (tests/fuzz/regressions/
// model_json/unused-40gb-random-constant.json, where the fuzz target sets one).
TEST(RandomWeights, ALimitRefusesLargeRandomWeightsBeforeGeneratingThem) {
  btest::OneMethod m;
  m.nodes = R"({"op": "add", "inputs": ["x", "b"], "outputs": ["y"]})";
  m.constants = R"("b": {"dtype": "f32", "shape": [8]}, "unused": {"dtype": "f32", "shape": [100000, 100000]})";
  ReadOptions limited;
  limited.max_random_weight_bytes = 1 << 20;
  Result<Model> refused = parse_model_json(m.json(), ".", limited);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::OutOfMemory);
  EXPECT_ERROR_CONTAINS(refused.status(), "2 constants need 40000000032 bytes, above the limit of 1048576");

  m.constants = R"("b": {"dtype": "f32", "shape": [8]}, "unused": {"dtype": "f32", "shape": [256, 512]})";
  Result<Model> within = parse_model_json(m.json(), ".", limited);
  ASSERT_TRUE(within.ok()) << within.status().to_string();
  EXPECT_EQ(within->constants_bytes(), 32u + 256u * 512u * 4u);
}

TEST(HalfConversion, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16_bits(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7C00);  // halfway to the next: rounds to infinity
  EXPECT_EQ(f32_to_f16_bits(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie to even (zero)
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(3.0f, -26)), 0x0001);  // above the tie
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie, even stays
  EXPECT_EQ(f32_to_f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie, odd rounds up
  EXPECT_EQ(f32_to_f16_bits(std::nanf("")) & 0x7C00, 0x7C00);
  EXPECT_NE(f32_to_f16_bits(std::nanf("")) & 0x03FF, 0);
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie, even stays
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie, odd rounds up
  EXPECT_NE(f32_to_bf16_bits(std::nanf("")) & 0x007F, 0);  // NaN stays NaN
  // Widening is exact: every bf16 comes back as itself.
  EXPECT_EQ(bf16_bits_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_bits_to_f32(0xC000), -2.0f);
  for (uint32_t bits = 0; bits <= 0xFFFF; bits += 7) {
    const float x = bf16_bits_to_f32(static_cast<uint16_t>(bits));
    if (!std::isnan(x)) {
      EXPECT_EQ(f32_to_bf16_bits(x), bits) << bits;
    }
  }
}

// Writes tensors to a safetensors file for the loading tests.
std::string write_weights(const btest::TempDir& dir, const std::string& name,
                          std::vector<std::pair<std::string, std::vector<int64_t>>> tensors,
                          std::vector<std::vector<float>>* data) {
  std::vector<format::SafetensorsTensor> ts;
  data->clear();
  data->reserve(tensors.size());
  for (auto& [n, shape] : tensors) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    std::vector<float>& v = data->emplace_back(numel);
    for (int64_t i = 0; i < numel; ++i) v[i] = static_cast<float>(i) * 0.5f;
    ts.push_back({n, DType::F32, shape, {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4}});
  }
  std::string path = dir.file(name);
  Status s = format::write_safetensors(path, ts);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return path;
}

std::string mlp_with_file(const std::string& file, const std::string& constants = "") {
  std::string decl = constants.empty() ? "" : ", \"constants\": {" + constants + "}";
  return R"({"format": "planrt-model/1", "weights": {"file": ")" + file + "\"}" + decl + R"(,
    "methods": [{"name": "forward", "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 8]}],
      "outputs": ["y"], "nodes": [{"op": "linear", "inputs": ["x", "fc.weight", "fc.bias"], "outputs": ["y"]}]}]})";
}

TEST(SafetensorsWeights, LoadedByNameRelativeToTheModel) {
  btest::TempDir dir;
  std::vector<std::vector<float>> data;
  write_weights(dir, "w.safetensors", {{"fc.weight", {4, 8}}, {"fc.bias", {4}}, {"unused", {3}}}, &data);
  std::vector<std::string> stages;
  ReadOptions opts;
  opts.progress = [&](const WeightProgress& p) { stages.push_back(std::string(p.stage) + ":" + std::string(p.tensor)); };
  ASSERT_OK_AND_ASSIGN(Model model, parse_model_json(mlp_with_file("w.safetensors"), dir.path(), opts));
  EXPECT_EQ(model.num_constants(), 2u);  // only what the nodes read
  EXPECT_EQ(floats_of(*model.graph().find_constant("fc.weight")), data[0]);
  EXPECT_EQ(floats_of(*model.graph().find_constant("fc.bias")), data[1]);
  EXPECT_EQ(stages, (std::vector<std::string>{"load:fc.weight", "load:fc.bias"}));
  // The program carries the same bytes, and outlives the model.
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  model = Model(std::make_unique<ir::Model>());
  ASSERT_OK_AND_ASSIGN(auto bytes, built.serialize());
  EXPECT_GT(bytes.size(), 36u * 4);
}

TEST(SafetensorsWeights, MismatchesNameTheTensor) {
  btest::TempDir dir;
  std::vector<std::vector<float>> data;
  write_weights(dir, "w.safetensors", {{"fc.weight", {4, 8}}, {"fc.bias", {5}}}, &data);
  // A shape the node cannot use: reported with the node.
  EXPECT_ERROR_CONTAINS(parse_model_json(mlp_with_file("w.safetensors"), dir.path()),
                        "node 0 (op linear, output 'y'): operand 2 'fc.bias' (f32 [5]) must have shape [4]");
  // A declaration the file contradicts.
  EXPECT_ERROR_CONTAINS(
      parse_model_json(mlp_with_file("w.safetensors", R"("fc.weight": {"dtype": "f16", "shape": [4, 8]})"), dir.path()),
      "tensor 'fc.weight' in '" + dir.file("w.safetensors") + "' is f32 [4, 8] but the model declares f16 [4, 8]");
  // A declared constant missing from the file.
  EXPECT_ERROR_CONTAINS(
      parse_model_json(mlp_with_file("w.safetensors", R"("extra": {"dtype": "f32", "shape": [1]})"), dir.path()),
      "constant 'extra' is not in");
  // A tensor a node reads that the file lacks.
  write_weights(dir, "partial.safetensors", {{"fc.weight", {4, 8}}}, &data);
  EXPECT_ERROR_CONTAINS(parse_model_json(mlp_with_file("partial.safetensors"), dir.path()),
                        "input 2 'fc.bias' is missing");
}

TEST(SafetensorsWeights, ExportedRandomWeightsReloadIntoTheTemplate) {
  btest::TempDir dir;
  TransformerOptions o;
  o.layers = 1;
  o.d_model = 32;
  o.heads = 2;
  o.ffn = 64;
  o.max_seq = 16;
  o.weights = "random:5";
  ASSERT_OK_AND_ASSIGN(Model random, make_transformer(o));
  ASSERT_OK(write_weights_safetensors(random, dir.file("t.safetensors")));
  o.weights = dir.file("t.safetensors");
  ASSERT_OK_AND_ASSIGN(Model loaded, make_transformer(o));
  for (const ir::Constant& c : random.graph().constants) {
    EXPECT_EQ(bytes_of(loaded, c.name), bytes_of(random, c.name)) << c.name;
  }
  // Weights of another size are refused, naming the tensor.
  o.ffn = 48;
  EXPECT_ERROR_CONTAINS(make_transformer(o), "tensor 'blocks.0.mlp.fc1.weight' in '" + dir.file("t.safetensors") +
                                                 "' is f32 [64, 32] but the model declares f32 [48, 32]");
}

}  // namespace
}  // namespace planrt::builder
