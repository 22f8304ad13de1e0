// The channels-last rewrite (builder/layout.h) on the IR: which nodes it converts, where the
// permutes at a region's edges go, the weights it derives, and every graph it must leave as
// written. That the rewritten programs compute the same numbers is
// tests/runtime/channels_last_test.cpp's.
#include "builder/layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>

#include "builder/check.h"
#include "ir_test_util.h"

namespace planrt::builder {
namespace {

using btest::node;
using btest::ops;

using ir::Dim;

// A constant whose element i is i (f32).
void add_constant(ir::Model& model, std::string name, std::vector<int64_t> shape) {
  auto bytes = std::make_shared<std::vector<float>>(
      static_cast<size_t>(std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>())));
  std::iota(bytes->begin(), bytes->end(), 0.0f);
  ir::Constant c;
  c.name = std::move(name);
  c.shape = std::move(shape);
  c.bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size() * sizeof(float));
  c.owner = bytes;
  model.constants.push_back(std::move(c));
}

std::vector<float> floats_of(const ir::Constant& c) {
  std::vector<float> v(c.bytes.size() / sizeof(float));
  std::memcpy(v.data(), c.bytes.data(), c.bytes.size());
  return v;
}

// x [N, 8, 10, 10] (N dynamic) with the method's other parts given by the test.
ir::Method image_method(std::vector<ir::Node> nodes, std::vector<std::string> outputs, int64_t channels = 8) {
  ir::Method m;
  m.name = "forward";
  m.dims = {{"N", 1, 4}};
  m.inputs = {{"x", {DType::F32, {Dim::named(0), Dim::fixed(channels), Dim::fixed(10), Dim::fixed(10)}}}};
  m.nodes = std::move(nodes);
  m.outputs = std::move(outputs);
  return m;
}

ir::Attrs conv3x3() { return {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}; }

const ir::Node* producer(const ir::Method& m, const std::string& value) {
  for (const ir::Node& n : m.nodes) {
    if (std::find(n.outputs.begin(), n.outputs.end(), value) != n.outputs.end()) return &n;
  }
  return nullptr;
}

std::string layout_of(const ir::Node& n) {
  auto it = n.attrs.find("layout");
  return it == n.attrs.end() ? "nchw" : std::get<std::string>(it->second);
}

// Rewrites, then checks that the result is a valid method with the same output types.
int rewrite_and_check(ir::Model& model, ir::Method& m, ChannelsLastNames& names) {
  Result<ir::CheckedMethod> before = ir::check_method(model, m);
  EXPECT_TRUE(before.ok()) << before.status().to_string();
  Result<int> converted = rewrite_channels_last(model, m, names);
  EXPECT_TRUE(converted.ok()) << converted.status().to_string();
  Result<ir::CheckedMethod> after = ir::check_method(model, m);
  EXPECT_TRUE(after.ok()) << after.status().to_string();
  if (before.ok() && after.ok()) {
    for (const std::string& out : m.outputs) EXPECT_EQ(before->values.at(out), after->values.at(out)) << out;
  }
  return converted.ok() ? *converted : -1;
}

int rewrite_and_check(ir::Model& model, ir::Method& m) {
  ChannelsLastNames names;
  return rewrite_and_check(model, m, names);
}

// A ResNet-like body: stem conv, relu, pool, a residual block, the global pool and the
// flatten. One permute at the start; nothing goes back to NCHW (the pooled [N, C, 1, 1] has
// the same element order in both layouts, so the flatten reads the twin).
TEST(ChannelsLast, AResidualNetworkRunsChannelsLastBetweenItsInputPermuteAndItsFlatten) {
  ir::Model model;
  add_constant(model, "w1", {8, 8, 3, 3});
  add_constant(model, "b1", {8});
  add_constant(model, "w2", {8, 8, 3, 3});
  ir::Method m = image_method(
      {node("conv2d", {"x", "w1", "b1"}, "c1", conv3x3()), node("relu", {"c1"}, "r1"),
       node("max_pool2d", {"r1"}, "p", {{"kernel", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}}),
       node("conv2d", {"p", "w2"}, "c2", conv3x3()), node("add", {"c2", "p"}, "s"), node("relu", {"s"}, "r2"),
       node("reduce_mean", {"r2"}, "g", {{"dims", std::vector<int64_t>{2, 3}}, {"keepdim", true}}),
       node("reshape", {"g"}, "y", {{"shape", ir::ShapeSpec{{0, "N"}, {8, {}}}}})},
      {"y"});
  model.methods = {m};
  EXPECT_EQ(rewrite_and_check(model, m), 2);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"permute", "conv2d", "relu", "max_pool2d", "conv2d", "add", "relu",
                                              "reduce_mean", "reshape"}));
  EXPECT_EQ(std::get<std::vector<int64_t>>(m.nodes[0].attrs.at("dims")), (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_EQ(m.nodes[0].inputs[0], "x");
  EXPECT_EQ(layout_of(m.nodes[1]), "nhwc");
  EXPECT_EQ(m.nodes[1].inputs[1], "w1#nhwc");
  EXPECT_EQ(m.nodes[1].inputs[2], "b1");  // biases are per channel in both layouts
  EXPECT_EQ(layout_of(m.nodes[3]), "nhwc");
  EXPECT_EQ(std::get<std::vector<int64_t>>(m.nodes[7].attrs.at("dims")), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(m.nodes.back().outputs[0], "y");
}

// The derived weight is [K, KH, KW, C/g] with its elements moved; made once for two methods.
TEST(ChannelsLast, TheWeightIsPermutedOnceAtBuildAndSharedByEveryMethod) {
  ir::Model model;
  add_constant(model, "w", {2, 3, 2, 2});
  ir::Method m = image_method({node("conv2d", {"x", "w"}, "y")}, {"y"}, 3);
  ir::Method again = m;
  again.name = "again";
  model.methods = {m, again};
  ChannelsLastNames names;
  EXPECT_EQ(rewrite_and_check(model, m, names), 1);
  EXPECT_EQ(rewrite_and_check(model, again, names), 1);
  ASSERT_EQ(model.constants.size(), 2u);
  const ir::Constant& w = model.constants[1];
  EXPECT_EQ(w.name, "w#nhwc");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 2, 2, 3}));
  // w[k, c, r, s] = ((k * 3 + c) * 2 + r) * 2 + s; the derived [k, r, s, c] holds the same.
  const std::vector<float> v = floats_of(w);
  for (int k = 0; k < 2; ++k) {
    for (int r = 0; r < 2; ++r) {
      for (int s = 0; s < 2; ++s) {
        for (int c = 0; c < 3; ++c) {
          EXPECT_EQ(v[static_cast<size_t>(((k * 2 + r) * 2 + s) * 3 + c)], static_cast<float>(((k * 3 + c) * 2 + r) * 2 + s));
        }
      }
    }
  }
  // A weight whose permuted shape is its own still has its elements moved.
  add_constant(model, "square", {4, 3, 3, 3});
  ir::Method stem = image_method({node("conv2d", {"x", "square"}, "y")}, {"y"}, 3);
  ChannelsLastNames fresh;
  EXPECT_EQ(rewrite_and_check(model, stem, fresh), 1);
  const ir::Constant* square = model.find_constant(stem.nodes[1].inputs[1]);
  ASSERT_NE(square, nullptr);
  EXPECT_NE(square->name, "square");
  EXPECT_EQ(floats_of(*square)[1], 9.0f);  // [0, 0, 0, 1] is [0, 1, 0, 0] of the source
  // The output is the method's: made back in NCHW right after the convolution.
  EXPECT_EQ(ops(m), (std::vector<std::string>{"permute", "conv2d", "permute"}));
  EXPECT_EQ(std::get<std::vector<int64_t>>(m.nodes[2].attrs.at("dims")), (std::vector<int64_t>{0, 3, 1, 2}));
}

// A pointwise weight [K, C, 1, 1] and a depthwise one [C, 1, KH, KW] keep their element order:
// the derived constants share the source's bytes.
TEST(ChannelsLast, WeightsWhoseOrderDoesNotChangeShareTheirBytes) {
  ir::Model model;
  add_constant(model, "pw", {8, 8, 1, 1});
  add_constant(model, "dw", {8, 1, 3, 3});
  ir::Method m = image_method({node("conv2d", {"x", "pw"}, "a"),
                               node("conv2d", {"a", "dw"}, "y", {{"groups", int64_t{8}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}})},
                              {"y"});
  model.methods = {m};
  EXPECT_EQ(rewrite_and_check(model, m), 2);
  ASSERT_EQ(model.constants.size(), 4u);
  EXPECT_EQ(model.constants[2].shape, (std::vector<int64_t>{8, 1, 1, 8}));
  EXPECT_EQ(model.constants[2].bytes.data(), model.constants[0].bytes.data());
  EXPECT_EQ(model.constants[3].shape, (std::vector<int64_t>{8, 3, 3, 1}));
  EXPECT_EQ(model.constants[3].bytes.data(), model.constants[1].bytes.data());
}

// ConvNeXt's block: the model's own permutes to and from channels-last around its layer
// norm and linears disappear against the convolution's twin.
TEST(ChannelsLast, AModelsOwnPermutesAroundTheConvolutionCancel) {
  ir::Model model;
  add_constant(model, "dw", {8, 1, 7, 7});
  add_constant(model, "lin", {8, 8});
  ir::Method m = image_method(
      {node("conv2d", {"x", "dw"}, "c", {{"groups", int64_t{8}}, {"pads", std::vector<int64_t>{3, 3, 3, 3}}}),
       node("permute", {"c"}, "t", {{"dims", std::vector<int64_t>{0, 2, 3, 1}}}), node("layer_norm", {"t"}, "n"),
       node("linear", {"n", "lin"}, "l"), node("permute", {"l"}, "back", {{"dims", std::vector<int64_t>{0, 3, 1, 2}}}),
       node("add", {"x", "back"}, "s"), node("conv2d", {"s", "dw"}, "y", {{"groups", int64_t{8}}, {"pads", std::vector<int64_t>{3, 3, 3, 3}}})},
      {"y"});
  model.methods = {m};
  EXPECT_EQ(rewrite_and_check(model, m), 2);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"permute", "conv2d", "layer_norm", "linear", "add", "conv2d", "permute"}));
  EXPECT_EQ(m.nodes[2].inputs[0], m.nodes[1].outputs[0]);  // the layer norm reads the convolution
  // x's twin is the input permute, read by the first convolution and the residual add.
  EXPECT_EQ(m.nodes[4].inputs, (std::vector<std::string>{m.nodes[0].outputs[0], "l"}));
}

// Squeeze-excitation: the pooled scale [N, C, 1, 1] through two 1x1 convolutions and a gate,
// multiplied into the image; a bias constant [C, 1, 1] broadcast the same way.
TEST(ChannelsLast, BroadcastOperandsFollowTheirImage) {
  ir::Model model;
  add_constant(model, "w", {8, 8, 3, 3});
  add_constant(model, "pw", {8, 8, 1, 1});
  add_constant(model, "shift", {8, 1, 1});
  ir::Method m = image_method(
      {node("conv2d", {"x", "w"}, "c", conv3x3()),
       node("reduce_mean", {"c"}, "g", {{"dims", std::vector<int64_t>{2, 3}}, {"keepdim", true}}),
       node("conv2d", {"g", "pw"}, "e"), node("hard_sigmoid", {"e"}, "gate"), node("mul", {"c", "gate"}, "scaled"),
       node("add", {"scaled", "shift"}, "y")},
      {"y"});
  model.methods = {m};
  EXPECT_EQ(rewrite_and_check(model, m), 2);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"permute", "conv2d", "reduce_mean", "conv2d", "hard_sigmoid", "mul",
                                              "add", "permute"}));
  const ir::Constant* shift = model.find_constant("shift#nhwc");
  ASSERT_NE(shift, nullptr);
  EXPECT_EQ(shift->shape, (std::vector<int64_t>{1, 1, 1, 8}));
  EXPECT_EQ(m.nodes[6].inputs[1], "shift#nhwc");
}

// An operand value that is not a twin: broadcast [C, 1, 1]-like ones are reshaped, full
// images permuted, scalars taken as they are.
TEST(ChannelsLast, OtherOperandValuesAreReshapedOrPermuted) {
  ir::Model model;
  add_constant(model, "w", {8, 8, 3, 3});
  ir::Method m = image_method({node("conv2d", {"x", "w"}, "c", conv3x3()), node("mul", {"c", "scale"}, "m"),
                               node("add", {"m", "other"}, "a"), node("div", {"a", "one"}, "y")},
                              {"y"});
  m.inputs.push_back({"scale", {DType::F32, {Dim::fixed(8), Dim::fixed(1), Dim::fixed(1)}}});
  m.inputs.push_back({"other", {DType::F32, {Dim::named(0), Dim::fixed(8), Dim::fixed(10), Dim::fixed(10)}}});
  m.inputs.push_back({"one", {DType::F32, {Dim::fixed(1)}}});
  model.methods = {m};
  EXPECT_EQ(rewrite_and_check(model, m), 1);
  // The add would copy `other` to save making `m` back: no gain, so the region ends there.
  EXPECT_EQ(ops(m), (std::vector<std::string>{"permute", "conv2d", "reshape", "mul", "permute", "add", "div"}));
  EXPECT_EQ(m.nodes[4].outputs[0], "m");
  // With two twins in one concat, copying `other` once is the cheaper side.
  ir::Method twice = image_method({node("conv2d", {"x", "w"}, "c", conv3x3()), node("mul", {"c", "c"}, "m"),
                                   node("concat", {"m", "c", "other"}, "cat", {{"dim", int64_t{1}}}),
                                   node("div", {"cat", "one"}, "y")},
                                  {"y"});
  twice.inputs = m.inputs;
  EXPECT_EQ(rewrite_and_check(model, twice), 1);
  EXPECT_EQ(ops(twice), (std::vector<std::string>{"permute", "conv2d", "mul", "permute", "concat", "div", "permute"}));
  EXPECT_EQ(twice.nodes[5].inputs[1], "one");
}

// concat, pad and slice along the channel dim renumber it.
TEST(ChannelsLast, ConcatPadAndSliceRenumberTheirDims) {
  ir::Model model;
  add_constant(model, "w", {8, 8, 3, 3});
  ir::Method m = image_method(
      {node("conv2d", {"x", "w"}, "c", conv3x3()), node("concat", {"c", "c"}, "cat", {{"dim", int64_t{1}}}),
       node("pad", {"cat"}, "p", {{"pads", std::vector<int64_t>{0, 0, 1, 2, 0, 0, 3, 4}}}),
       node("slice", {"p"}, "y", {{"dim", int64_t{-3}}, {"start", int64_t{2}}, {"end", int64_t{10}}})},
      {"y"});
  model.methods = {m};
  EXPECT_EQ(rewrite_and_check(model, m), 1);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"permute", "conv2d", "concat", "pad", "slice", "permute"}));
  EXPECT_EQ(std::get<int64_t>(m.nodes[2].attrs.at("dim")), 3);
  EXPECT_EQ(std::get<std::vector<int64_t>>(m.nodes[3].attrs.at("pads")), (std::vector<int64_t>{0, 1, 2, 0, 0, 3, 4, 0}));
  EXPECT_EQ(std::get<int64_t>(m.nodes[4].attrs.at("dim")), 3);
}

// A node the rewrite cannot convert reads the NCHW value, made back once however many read it.
TEST(ChannelsLast, AnOpOverTheChannelDimReadsTheValueBackInNchw) {
  ir::Model model;
  add_constant(model, "w", {8, 8, 3, 3});
  ir::Method m = image_method({node("conv2d", {"x", "w"}, "c", conv3x3()), node("softmax", {"c"}, "s", {{"dim", int64_t{1}}}),
                               node("relu", {"c"}, "r"), node("add", {"s", "c"}, "y")},
                              {"y", "r"});
  model.methods = {m};
  EXPECT_EQ(rewrite_and_check(model, m), 1);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"permute", "conv2d", "permute", "softmax", "relu", "permute", "add"}));
  EXPECT_EQ(m.nodes[2].outputs[0], "c");
  EXPECT_EQ(m.nodes[3].inputs[0], "c");
  EXPECT_EQ(m.nodes[5].outputs[0], "r");  // a method output keeps its NCHW name
}

// Graphs left as written: no convolution; a weight that is a value; a convolution already
// channels-last.
TEST(ChannelsLast, LeavesGraphsItCannotImproveAsWritten) {
  {
    ir::Model model;
    ir::Method m = image_method({node("relu", {"x"}, "r"),
                                 node("max_pool2d", {"r"}, "y", {{"kernel", std::vector<int64_t>{2, 2}}})},
                                {"y"});
    model.methods = {m};
    const ir::Method before = m;
    EXPECT_EQ(rewrite_and_check(model, m), 0);
    EXPECT_EQ(ops(m), ops(before));
  }
  {
    ir::Model model;
    ir::Method m = image_method({node("conv2d", {"x", "wv"}, "y", conv3x3())}, {"y"});
    m.inputs.push_back({"wv", {DType::F32, {Dim::fixed(8), Dim::fixed(8), Dim::fixed(3), Dim::fixed(3)}}});
    model.methods = {m};
    EXPECT_EQ(rewrite_and_check(model, m), 0);
    EXPECT_EQ(ops(m), std::vector<std::string>{"conv2d"});
  }
}

// Nodes of another backend are another run: the value crosses in NCHW, made back in the
// convolution's run; the other run's nodes are not converted.
TEST(ChannelsLast, ARunOnAnotherBackendReadsNchw) {
  ir::Model model;
  add_constant(model, "w", {8, 8, 3, 3});
  ir::Method m = image_method({node("conv2d", {"x", "w"}, "c", conv3x3()), node("relu", {"c"}, "y")}, {"y"});
  m.nodes[1].backend = ir::Backend::Cuda;
  model.methods = {m};
  EXPECT_EQ(rewrite_and_check(model, m), 1);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"permute", "conv2d", "permute", "relu"}));
  EXPECT_FALSE(m.nodes[2].backend.has_value());  // made back on the convolution's side
  EXPECT_EQ(m.nodes[3].inputs[0], "c");
  EXPECT_EQ(producer(m, "c"), &m.nodes[2]);
}

// A broadcast operand of lower rank is reshaped for the node that reads it, never taken for
// an image: a reduce_mean or reshape of it later reads it as written (the review of f077a4f).
TEST(ChannelsLast, ALowerRankBroadcastOperandIsNoImageTwin) {
  ir::Model model;
  add_constant(model, "w", {8, 8, 3, 3});
  ir::Method m = image_method({node("conv2d", {"x", "w"}, "c", conv3x3()), node("add", {"c", "pos"}, "a"),
                               node("reduce_mean", {"pos"}, "rows", {{"dims", std::vector<int64_t>{1}}, {"keepdim", false}}),
                               node("reshape", {"pos"}, "flat", {{"shape", ir::ShapeSpec{{100, {}}}}})},
                              {"a", "rows", "flat"});
  m.inputs.push_back({"pos", {DType::F32, {Dim::fixed(10), Dim::fixed(10)}}});
  model.methods = {m};
  EXPECT_EQ(rewrite_and_check(model, m), 1);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"permute", "conv2d", "reshape", "add", "permute", "reduce_mean", "reshape"}));
  EXPECT_EQ(m.nodes[5].inputs[0], "pos");
  EXPECT_EQ(std::get<std::vector<int64_t>>(m.nodes[5].attrs.at("dims")), std::vector<int64_t>{1});
  EXPECT_EQ(m.nodes[6].inputs[0], "pos");
}

// Names the rewrite makes never meet the model's: a constant or another method's value
// already called "w#nhwc" is left alone, the derived weight takes another name.
TEST(ChannelsLast, MadeNamesAvoidEveryNameOfTheModel) {
  ir::Model model;
  add_constant(model, "w", {8, 8, 3, 3});
  add_constant(model, "w#nhwc", {8, 3, 3, 8});  // the author's own, not a permuted w
  ir::Method m = image_method({node("conv2d", {"x", "w"}, "y", conv3x3())}, {"y"});
  ir::Method other = image_method({node("relu", {"x"}, "w#nhwc2")}, {"w#nhwc2"});
  other.name = "other";
  model.methods = {m, other};
  ChannelsLastNames names;
  EXPECT_EQ(rewrite_and_check(model, m, names), 1);
  EXPECT_EQ(m.nodes[1].inputs[1], "w#nhwc3");
  EXPECT_TRUE(ir::check_method(model, other).ok());
}

// A run with no convolution it can convert is left alone, on the host too (a model's own
// permute to channels-last there would otherwise pull a later op into a copy).
TEST(ChannelsLast, AHostRunWithoutAConvolutionIsLeftAlone) {
  ir::Model model;
  add_constant(model, "w", {8, 8, 3, 3});
  ir::Method m = image_method({node("conv2d", {"x", "w"}, "c", conv3x3()),
                               node("permute", {"x"}, "p", {{"dims", std::vector<int64_t>{0, 2, 3, 1}}}),
                               node("layer_norm", {"p"}, "ln"), node("gelu", {"x"}, "g")},
                              {"c", "ln", "g"});
  m.nodes[0].segment = "convs";  // the convolution in a run of its own
  model.methods = {m};
  EXPECT_EQ(rewrite_and_check(model, m), 1);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"permute", "conv2d", "permute", "permute", "layer_norm", "gelu"}));
  EXPECT_EQ(m.nodes[5].inputs[0], "x");
}

// On a GPU only runs of two or more 16-bit convolutions go channels-last (where cuDNN was
// measured faster; a depthwise one among them runs planrt's kernel, which takes either
// layout); on the host every run with a convolution, engines on the CPU included.
TEST(ChannelsLast, OnAGpuOnlySixteenBitRunsConvert) {
  auto method_on = [](ir::Backend backend, std::optional<Device> device, DType dtype, bool depthwise) {
    ir::Method m = image_method({node("conv2d", {"x", "w"}, "c", conv3x3()), node("relu", {"c"}, "r"),
                                 node("conv2d", {"r", "w"}, "y", conv3x3())},
                                {"y"});
    if (depthwise) m.nodes.push_back(node("conv2d", {"y", "dw"}, "z", {{"groups", int64_t{8}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
    if (depthwise) m.outputs = {"z"};
    m.backend = backend;
    m.device = device;
    m.inputs[0].type.dtype = dtype;
    return m;
  };
  auto model_of = [](DType dtype) {
    ir::Model model;
    add_constant(model, "w", {8, 8, 3, 3});
    add_constant(model, "dw", {8, 1, 3, 3});
    for (ir::Constant& c : model.constants) {  // the bytes are only permuted: any will do
      c.dtype = dtype;
      c.bytes = c.bytes.first(static_cast<size_t>(c.nbytes()));
    }
    return model;
  };
  struct Case {
    ir::Backend backend;
    std::optional<Device> device;
    DType dtype;
    bool depthwise;
    int converted;
  };
  const Case cases[] = {
      {ir::Backend::Cuda, std::nullopt, DType::F32, false, 0},
      {ir::Backend::Cuda, std::nullopt, DType::BF16, false, 2},
      {ir::Backend::Engine, Device::cuda(0), DType::BF16, false, 2},
      {ir::Backend::Cuda, std::nullopt, DType::BF16, true, 3},
      {ir::Backend::Cuda, std::nullopt, DType::F32, true, 0},
      {ir::Backend::Engine, Device::cpu(), DType::F32, true, 3},
      {ir::Backend::Cpu, std::nullopt, DType::F32, true, 3},
  };
  // A depthwise convolution with a channel multiplier (K = 2C) has no planrt kernel: its run
  // stays NCHW on a GPU (cuDNN's channels-last grouped kernels were the slow ones).
  {
    ir::Model model = model_of(DType::BF16);
    add_constant(model, "dw2", {16, 1, 3, 3});
    for (ir::Constant& c : model.constants) {
      c.dtype = DType::BF16;
      c.bytes = c.bytes.first(static_cast<size_t>(c.nbytes()));
    }
    ir::Method m = method_on(ir::Backend::Cuda, std::nullopt, DType::BF16, false);
    m.nodes.push_back(node("conv2d", {"y", "dw2"}, "z", {{"groups", int64_t{8}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
    m.outputs = {"z"};
    model.methods = {m};
    EXPECT_EQ(rewrite_and_check(model, m), 0);
  }
  // One 16-bit convolution alone on a GPU stays NCHW (two permutes for one kernel).
  {
    ir::Model model = model_of(DType::BF16);
    ir::Method m = method_on(ir::Backend::Cuda, std::nullopt, DType::BF16, false);
    m.nodes.pop_back();
    m.outputs = {"r"};
    model.methods = {m};
    EXPECT_EQ(rewrite_and_check(model, m), 0);
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << ir::backend_name(c.backend) << " " << dtype_name(c.dtype) << " depthwise "
                                      << c.depthwise);
    ir::Model model = model_of(c.dtype);
    ir::Method m = method_on(c.backend, c.device, c.dtype, c.depthwise);
    model.methods = {m};
    EXPECT_EQ(rewrite_and_check(model, m), c.converted);
  }
}

// In f32 on a GPU a run converts where the model itself permutes between the layouts at
// least as often as it has dense convolutions (ConvNeXt's permute, layer norm, permute around
// a depthwise convolution): those permutes compose away. Without such permutes, or with
// fewer than the dense convolutions, it stays NCHW.
TEST(ChannelsLast, AnF32GpuRunConvertsWhereTheModelPermutesAroundItsConvolutions) {
  auto block = [](int extra_dense) {
    std::vector<ir::Node> nodes = {
        node("conv2d", {"x", "w"}, "c", conv3x3()),
        node("conv2d", {"c", "dw"}, "d", {{"groups", int64_t{8}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
        node("permute", {"d"}, "p", {{"dims", std::vector<int64_t>{0, 2, 3, 1}}}),
        node("layer_norm", {"p"}, "ln"),
        node("permute", {"ln"}, "q", {{"dims", std::vector<int64_t>{0, 3, 1, 2}}})};
    std::string last = "q";
    for (int i = 0; i < extra_dense; ++i) {
      const std::string out = "e" + std::to_string(i);
      nodes.push_back(node("conv2d", {last, "w"}, out, conv3x3()));
      last = out;
    }
    ir::Method m = image_method(std::move(nodes), {last});
    m.backend = ir::Backend::Cuda;
    return m;
  };
  {  // the model's permutes written with negative dims count too
    ir::Model model;
    add_constant(model, "w", {8, 8, 3, 3});
    add_constant(model, "dw", {8, 1, 3, 3});
    ir::Method m = block(0);
    m.nodes[2].attrs["dims"] = std::vector<int64_t>{0, -2, -1, 1};
    model.methods = {m};
    EXPECT_EQ(rewrite_and_check(model, m), 2);
  }
  for (int extra : {0, 2}) {  // two permutes against one dense convolution, then three
    SCOPED_TRACE(::testing::Message() << "dense convolutions " << 1 + extra);
    ir::Model model;
    add_constant(model, "w", {8, 8, 3, 3});
    add_constant(model, "dw", {8, 1, 3, 3});
    ir::Method m = block(extra);
    model.methods = {m};
    const int converted = rewrite_and_check(model, m);
    if (extra == 0) {
      EXPECT_EQ(converted, 2);
      // The model's two permutes compose away: only the region's edges remain.
      const std::vector<std::string> written = ops(m);
      EXPECT_EQ(std::count(written.begin(), written.end(), "permute"), 2);
    } else {
      EXPECT_EQ(converted, 0);
    }
  }
}

}  // namespace
}  // namespace planrt::builder
