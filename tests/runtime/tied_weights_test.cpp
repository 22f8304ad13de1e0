// Tied weights: a constant several linears read, and constants of equal content (an exporter's
// shared initializer seen through Identity or transposed per reader, layers cloned from one
// module), are stored once in the program (builder/lower.cpp's constant table) and packed
// once at load (runtime/method_load.cpp), so the method holds the weight once; outputs are
// those of the plain kernels. Constants of equal bytes but another shape stay apart, and so
// does every constant of a program with external weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "builder/graph.h"
#include "kernels/cpu/packed_linear.h"
#include "planrt/builder/builder.h"
#include "planrt/runtime/method.h"
#include "planrt/runtime/program.h"
#include "support/built_programs.h"

namespace planrt {
namespace {

// x [1, 4, 64] -> linear(w1, b1) -> relu -> linear(w2, b2) -> linear(w1, b1) -> y [1, 4, 64],
// and r = reshape(y, [1, 2, 128]) -> linear(w3) -> z [1, 2, 32]; w3 holds 32 x 128 = 4096
// floats, as many as w1.
constexpr const char* kModel = R"({
  "format": "planrt-model/1",
  "weights": {"random": {"seed": 11, "std": 0.2}},
  "constants": {"w1": {"dtype": "f32", "shape": [64, 64]}, "b1": {"dtype": "f32", "shape": [64]},
                "w2": {"dtype": "f32", "shape": [64, 64]}, "b2": {"dtype": "f32", "shape": [64]},
                "w3": {"dtype": "f32", "shape": [32, 128]}},
  "methods": [{"name": "forward", "backend": "cpu",
    "inputs": [{"name": "x", "dtype": "f32", "shape": [1, 4, 64]}],
    "outputs": ["y", "z"],
    "nodes": [
      {"op": "linear", "inputs": ["x", "w1", "b1"], "outputs": ["h"]},
      {"op": "relu", "inputs": ["h"], "outputs": ["hr"]},
      {"op": "linear", "inputs": ["hr", "w2", "b2"], "outputs": ["h2"]},
      {"op": "linear", "inputs": ["h2", "w1", "b1"], "outputs": ["y"]},
      {"op": "reshape", "inputs": ["y"], "outputs": ["r"], "attrs": {"shape": [1, 2, 128]}},
      {"op": "linear", "inputs": ["r", "w3"], "outputs": ["z"]}
    ]}]})";

// The model with the bytes of constant `from` given to each constant in `to` (equal content
// under other names, as an exporter writes tied layers).
Result<builder::Model> with_bytes_of(const std::string& from, const std::vector<std::string>& to) {
  PLANRT_ASSIGN_OR_RETURN(builder::Model parsed, builder::parse_model_json(kModel));
  auto graph = std::make_unique<builder::ir::Model>(parsed.graph());
  const builder::ir::Constant* source = graph->find_constant(from);
  if (source == nullptr) return make_error(ErrorCode::NotFound, "no constant '{}'", from);
  const builder::ir::Constant copy = *source;
  for (builder::ir::Constant& c : graph->constants) {
    if (std::find(to.begin(), to.end(), c.name) != to.end()) {
      c.bytes = copy.bytes;
      c.owner = copy.owner;
    }
  }
  return builder::Model(std::move(graph));
}

uint64_t packed_bytes_of(int64_t n, int64_t k) {
  std::vector<float> w(static_cast<size_t>(n * k), 0.5f);
  auto packed = kernels::cpu::PackedLinear::create(
      TensorView::contiguous(w.data(), DType::F32, Shape({n, k}), Device::cpu()));
  return packed.ok() ? (*packed)->packed_bytes() : 0;
}

struct Loaded {
  size_t constants = 0;
  uint64_t packed_bytes = 0;
  std::vector<std::vector<float>> packed_outputs, plain_outputs;
};

Result<Loaded> load_and_run(const builder::Model& model) {
  Loaded out;
  PLANRT_ASSIGN_OR_RETURN(builder::BuiltProgram built, builder::build_program(model));
  out.constants = built.num_constants();
  PLANRT_ASSIGN_OR_RETURN(Program program, fixtures::load_built_program(model));
  LoadMethodOptions plain_options;
  plain_options.backend_options["cpu"] = {{"pack_weights", "false"}};
  PLANRT_ASSIGN_OR_RETURN(Method packed, program.load_method("forward"));
  PLANRT_ASSIGN_OR_RETURN(Method plain, program.load_method("forward", plain_options));
  out.packed_bytes = packed.packed_weight_bytes();
  std::vector<float> x(4 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  TensorView in = TensorView::contiguous(x.data(), DType::F32, Shape({1, 4, 64}), Device::cpu());
  for (auto [method, dest] : {std::pair{&packed, &out.packed_outputs}, std::pair{&plain, &out.plain_outputs}}) {
    PLANRT_ASSIGN_OR_RETURN(std::vector<Tensor> ys, method->execute({&in, 1}));
    for (const Tensor& y : ys) {
      auto v = y.values<float>();
      dest->emplace_back(v.begin(), v.end());
    }
  }
  return out;
}

void expect_packed_equals_plain(const Loaded& l) {
  ASSERT_EQ(l.packed_outputs.size(), 2u);
  ASSERT_EQ(l.plain_outputs.size(), 2u);
  for (size_t o = 0; o < 2; ++o) {
    ASSERT_EQ(l.packed_outputs[o].size(), l.plain_outputs[o].size());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < l.plain_outputs[o].size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(l.packed_outputs[o][i] - l.plain_outputs[o][i])));
      scale = std::max(scale, static_cast<double>(std::fabs(l.plain_outputs[o][i])));
    }
    EXPECT_LE(worst / std::max(scale, 1e-30), 1e-5) << "output " << o;
  }
}

// The model with `from`'s bytes given to `to` (none: as written) stores `constants` entries,
// its packed method holds `packed_bytes`, and packed and plain kernels agree.
void expect_stored_and_packed(const std::string& from, const std::vector<std::string>& to, size_t constants,
                              uint64_t packed_bytes) {
  Result<builder::Model> model = with_bytes_of(from, to);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  Result<Loaded> l = load_and_run(*model);
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  EXPECT_EQ(l->constants, constants);
  EXPECT_EQ(l->packed_bytes, packed_bytes);
  expect_packed_equals_plain(*l);
}

const uint64_t kSquare = packed_bytes_of(64, 64), kWide = packed_bytes_of(32, 128);

TEST(TiedWeights, AWeightTwoLinearsReadIsPackedOnce) {
  ASSERT_GT(kSquare, 0u);
  // w1 (read by two linears) and w2 once each, and w3: not w1 twice.
  expect_stored_and_packed("w1", {}, 5, 2 * kSquare + kWide);
}

TEST(TiedWeights, ConstantsOfEqualContentAreStoredAndPackedOnce) {
  expect_stored_and_packed("w1", {"w2"}, 4, kSquare + kWide);  // w1 = w2, b1, b2, w3
  expect_stored_and_packed("b1", {"b2"}, 4, 2 * kSquare + kWide);  // biases: one entry
}

// A program whose weights go to a file beside it keeps every name: that file is read by
// name and may be replaced by other weights.
TEST(TiedWeights, ExternalWeightsKeepEveryConstant) {
  Result<builder::Model> model = with_bytes_of("w1", {"w2"});
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  builder::BuildOptions external;
  external.external_weights = true;
  Result<builder::BuiltProgram> built = builder::build_program(*model, external);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  EXPECT_EQ(built->num_constants(), 5u);
  Result<builder::BuiltProgram> embedded = builder::build_program(*model);
  ASSERT_TRUE(embedded.ok()) << embedded.status().to_string();
  EXPECT_EQ(embedded->num_constants(), 4u);
}

TEST(TiedWeights, EqualBytesOfAnotherShapeStayApart) {
  expect_stored_and_packed("w1", {"w3"}, 5, 2 * kSquare + kWide);  // 4096 floats as [32, 128]
}

}  // namespace
}  // namespace planrt
