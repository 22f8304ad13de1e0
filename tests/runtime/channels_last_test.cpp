// The channels-last rewrite (builder/layout.h) end to end on the CPU: a small network with
// every construct the rewrite converts (convolutions of each kind, pools, a residual add,
// squeeze-excitation, concat, pad, the global pool and the flatten into a linear) built with
// and without it computes the same outputs, through oneDNN's prepared convolutions and
// through the plain kernels (cpu.pack_weights=false), at two batch sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "planrt/builder/builder.h"
#include "planrt/runtime/program.h"
#include "support/built_programs.h"
#include "builder/builder_test_util.h"

namespace planrt {
namespace {

constexpr const char* kNetwork = R"({
  "format": "planrt-model/1",
  "weights": {"random": {"seed": 5}},
  "constants": {
    "stem": {"dtype": "f32", "shape": [8, 3, 3, 3]}, "stem_b": {"dtype": "f32", "shape": [8]},
    "dw": {"dtype": "f32", "shape": [8, 1, 3, 3]}, "pw": {"dtype": "f32", "shape": [8, 8, 1, 1]},
    "se1": {"dtype": "f32", "shape": [4, 8, 1, 1]}, "se2": {"dtype": "f32", "shape": [8, 4, 1, 1]},
    "shift": {"dtype": "f32", "shape": [8, 1, 1]}, "wide": {"dtype": "f32", "shape": [6, 16, 3, 3]},
    "head": {"dtype": "f32", "shape": [5, 6]}
  },
  "methods": [{"name": "forward", "backend": "cpu", "dims": {"N": {"min": 1, "max": 4}},
    "inputs": [{"name": "x", "dtype": "f32", "shape": ["N", 3, 17, 15]}],
    "outputs": ["logits", "features"],
    "nodes": [
      {"op": "conv2d", "inputs": ["x", "stem", "stem_b"], "outputs": ["s"], "attrs": {"strides": [2, 2], "pads": [1, 1, 1, 1], "activation": "relu"}},
      {"op": "max_pool2d", "inputs": ["s"], "outputs": ["p"], "attrs": {"kernel": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}},
      {"op": "conv2d", "inputs": ["p", "dw"], "outputs": ["d"], "attrs": {"groups": 8, "pads": [0, 1, 2, 1]}},
      {"op": "hard_swish", "inputs": ["d"], "outputs": ["h"]},
      {"op": "reduce_mean", "inputs": ["h"], "outputs": ["g"], "attrs": {"dims": [2, 3], "keepdim": true}},
      {"op": "conv2d", "inputs": ["g", "se1"], "outputs": ["e1"], "attrs": {"activation": "relu"}},
      {"op": "conv2d", "inputs": ["e1", "se2"], "outputs": ["e2"]},
      {"op": "hard_sigmoid", "inputs": ["e2"], "outputs": ["gate"]},
      {"op": "mul", "inputs": ["h", "gate"], "outputs": ["scaled"]},
      {"op": "conv2d", "inputs": ["scaled", "pw"], "outputs": ["q"]},
      {"op": "add", "inputs": ["q", "shift"], "outputs": ["q2"]},
      {"op": "add", "inputs": ["q2", "p"], "outputs": ["res"]},
      {"op": "concat", "inputs": ["res", "p"], "outputs": ["cat"], "attrs": {"dim": 1}},
      {"op": "pad", "inputs": ["cat"], "outputs": ["padded"], "attrs": {"pads": [0, 0, 1, 0, 0, 0, 0, 2]}},
      {"op": "conv2d", "inputs": ["padded", "wide"], "outputs": ["features"], "attrs": {"dilations": [2, 1]}},
      {"op": "avg_pool2d", "inputs": ["features"], "outputs": ["a"], "attrs": {"kernel": [2, 2], "strides": [2, 2], "ceil_mode": true}},
      {"op": "reduce_mean", "inputs": ["a"], "outputs": ["pooled"], "attrs": {"dims": [2, 3], "keepdim": true}},
      {"op": "reshape", "inputs": ["pooled"], "outputs": ["flat"], "attrs": {"shape": ["N", 6]}},
      {"op": "linear", "inputs": ["flat", "head"], "outputs": ["logits"]}
    ]}]})";

Result<std::vector<std::vector<float>>> run(bool channels_last, bool pack_weights, int64_t batch) {
  PLANRT_ASSIGN_OR_RETURN(builder::Model model, builder::parse_model_json(kNetwork));
  builder::BuildOptions options;
  options.channels_last = channels_last;
  PLANRT_ASSIGN_OR_RETURN(Program program, fixtures::load_built_program(model, options));
  LoadMethodOptions load;
  load.backend_options["cpu"] = {{"pack_weights", pack_weights ? "true" : "false"}};
  PLANRT_ASSIGN_OR_RETURN(Method method, program.load_method("forward", load));
  std::vector<float> x(static_cast<size_t>(batch * 3 * 17 * 15));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) + 0.1f;
  TensorView in = TensorView::contiguous(x.data(), DType::F32, {batch, 3, 17, 15});
  PLANRT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, method.execute({&in, 1}));
  std::vector<std::vector<float>> values;
  for (const Tensor& t : outs) {
    auto v = t.values<float>();
    values.emplace_back(v.begin(), v.end());
  }
  return values;
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return diff / std::max(scale, 1e-30);
}

TEST(ChannelsLastProgram, ComputesWhatTheNchwProgramComputes) {
  for (bool pack : {true, false}) {
    for (int64_t batch : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << "pack_weights " << pack << " batch " << batch);
      ASSERT_OK_AND_ASSIGN(auto want, run(false, pack, batch));
      ASSERT_OK_AND_ASSIGN(auto got, run(true, pack, batch));
      ASSERT_EQ(got.size(), want.size());
      for (size_t o = 0; o < want.size(); ++o) {
        ASSERT_EQ(got[o].size(), want[o].size()) << "output " << o;
        EXPECT_LT(relative_error(got[o], want[o]), 1e-5) << "output " << o;
      }
    }
  }
}

// The rewritten program's instructions: the convolutions and pools channels-last, one permute
// for the input and one for the NCHW output "features" (the logits come from the flatten,
// which reads the pooled twin), the weights derived at build.
TEST(ChannelsLastProgram, PermutesOnlyAtTheRegionsEdges) {
  ASSERT_OK_AND_ASSIGN(builder::Model model, builder::parse_model_json(kNetwork));
  ASSERT_OK_AND_ASSIGN(builder::BuiltProgram built, builder::build_program(model));
  const auto& method = *built.program().methods[0];
  int permutes = 0, channels_last = 0;
  for (const auto& ins : method.instructions) {
    if (ins->op == "permute") ++permutes;
    for (const auto& a : ins->attrs) {
      if (a->name == "layout") ++channels_last;
    }
  }
  EXPECT_EQ(permutes, 2);
  EXPECT_EQ(channels_last, 8);  // 6 convolutions, 2 pools
}

}  // namespace
}  // namespace planrt
