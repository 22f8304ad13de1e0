// The rewrites lower_model applies to every method (builder/rewrite.h): what they fuse, and
// every reason they leave a graph as written.
#include "builder/rewrite.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "ir_test_util.h"

namespace planrt::builder {
namespace {

using btest::node;
using btest::ops;

ir::Node swap_seq_heads(std::string in, std::string out) {
  return node("permute", {std::move(in)}, std::move(out), {{"dims", std::vector<int64_t>{0, 2, 1, 3}}});
}

// The template's attention: q, k, v [1, S, H, D] split into heads, attention, merge.
ir::Method attention_method() {
  ir::Method m;
  m.name = "forward";
  m.outputs = {"y"};
  m.nodes = {swap_seq_heads("q", "qh"), swap_seq_heads("k", "kh"), swap_seq_heads("v", "vh"),
             node("scaled_dot_product_attention", {"qh", "kh", "vh"}, "o", {{"causal", true}}),
             swap_seq_heads("o", "merged"), node("reshape", {"merged"}, "y")};
  return m;
}

TEST(Rewrite, HeadPermutesAroundAttentionBecomeItsBshdLayout) {
  ir::Method m = attention_method();
  EXPECT_EQ(rewrite_method(m), 1);
  ASSERT_EQ(ops(m), (std::vector<std::string>{"scaled_dot_product_attention", "reshape"}));
  const ir::Node& attn = m.nodes[0];
  EXPECT_EQ(attn.inputs, (std::vector<std::string>{"q", "k", "v"}));
  EXPECT_EQ(attn.outputs, std::vector<std::string>{"merged"});  // what the reshape reads
  EXPECT_EQ(std::get<std::string>(attn.attrs.at("layout")), "bshd");
  EXPECT_TRUE(std::get<bool>(attn.attrs.at("causal")));  // other attributes kept
  EXPECT_EQ(rewrite_method(m), 0);                        // nothing left to rewrite
}

TEST(Rewrite, OneProjectionForQueriesAndKeysIsSplitOnce) {
  ir::Method m = attention_method();
  m.nodes.erase(m.nodes.begin() + 1);  // k is q's split
  m.nodes[1].inputs[0] = "v";
  m.nodes[1].outputs[0] = "vh";
  m.nodes[2].inputs = {"qh", "qh", "vh"};
  EXPECT_EQ(rewrite_method(m), 1);
  EXPECT_EQ(m.nodes[0].inputs, (std::vector<std::string>{"q", "q", "v"}));
}

TEST(Rewrite, NegativePermuteDimsAreRecognised) {
  ir::Method m = attention_method();
  m.nodes[0].attrs["dims"] = std::vector<int64_t>{0, -2, 1, -1};
  EXPECT_EQ(rewrite_method(m), 1);
}

// Two attentions in a row (axial attention): the first's merge is the second's split. The
// first absorbs it; the second then reads the first's output as written, in layout bhsd.
TEST(Rewrite, ChainedAttentionsShareAPermuteOnlyOnce) {
  ir::Method m;
  m.name = "forward";
  m.outputs = {"z"};
  m.nodes = {swap_seq_heads("x", "xh"),
             node("scaled_dot_product_attention", {"xh", "xh", "xh"}, "o1"),
             swap_seq_heads("o1", "y"),
             node("scaled_dot_product_attention", {"y", "y", "y"}, "o2"),
             swap_seq_heads("o2", "z")};
  EXPECT_EQ(rewrite_method(m), 1);
  ASSERT_EQ(ops(m), (std::vector<std::string>{"scaled_dot_product_attention", "scaled_dot_product_attention",
                                              "permute"}));
  EXPECT_EQ(m.nodes[0].inputs, (std::vector<std::string>{"x", "x", "x"}));
  EXPECT_EQ(m.nodes[0].outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(m.nodes[1].inputs, (std::vector<std::string>{"y", "y", "y"}));
  EXPECT_FALSE(m.nodes[1].attrs.contains("layout"));
  EXPECT_EQ(m.nodes[2].inputs, std::vector<std::string>{"o2"});
}

TEST(Rewrite, GraphsItCannotFuseStayAsWritten) {
  struct Case {
    std::string why;
    void (*change)(ir::Method&);
  };
  const Case cases[] = {
      {"a split read by another node", [](ir::Method& m) { m.nodes.push_back(node("relu", {"kh"}, "r")); }},
      {"a split that is a method output", [](ir::Method& m) { m.outputs.push_back("vh"); }},
      {"the attention output read twice", [](ir::Method& m) { m.nodes.push_back(node("relu", {"o"}, "r")); }},
      {"no merge after", [](ir::Method& m) { m.nodes[4].attrs["dims"] = std::vector<int64_t>{0, 1, 3, 2}; }},
      {"a split of other dims", [](ir::Method& m) { m.nodes[0].attrs["dims"] = std::vector<int64_t>{2, 1, 0, 3}; }},
      {"a split in another segment", [](ir::Method& m) { m.nodes[1].segment = "other"; }},
      {"a merge on another backend", [](ir::Method& m) { m.nodes[4].backend = ir::Backend::Cpu; }},
      {"a split on another device", [](ir::Method& m) { m.nodes[2].device = Device{DeviceType::CUDA, 1}; }},
      {"a layout already chosen",
       [](ir::Method& m) { m.nodes[3].attrs["layout"] = std::string("bhsd"); }},
      {"a mask input", [](ir::Method& m) { m.nodes[3].inputs.push_back("mask"); }},
      // Removing the permutes would join the two cpu nodes around them into one segment.
      {"another backend's node between the splits and the merge",
       [](ir::Method& m) {
         ir::Node cpu = node("relu", {"q"}, "r");
         cpu.backend = ir::Backend::Cpu;
         m.nodes.insert(m.nodes.begin() + 1, cpu);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    ir::Method m = attention_method();
    c.change(m);
    const std::vector<std::string> before = ops(m);
    EXPECT_EQ(rewrite_method(m), 0);
    EXPECT_EQ(ops(m), before);
  }
}

// On the host a convolution takes the relu or clamp op that alone reads it, with that op's
// attributes; on a GPU, when another node also reads it, when it is a method output, when
// the reader is in another run, or when the convolution has an activation already, not.
TEST(Rewrite, HostConvolutionsTakeTheActivationThatAloneReadsThem) {
  auto conv_then = [](std::string op, ir::Attrs attrs) {
    ir::Method m;
    m.name = "forward";
    m.outputs = {"y"};
    m.nodes = {node("conv2d", {"x", "w"}, "c", {{"groups", int64_t{1}}}), node(std::move(op), {"c"}, "y", std::move(attrs))};
    return m;
  };
  {
    ir::Method m = conv_then("clip", {{"min", 0.0}, {"max", 6.0}});
    EXPECT_EQ(rewrite_method(m), 1);
    ASSERT_EQ(ops(m), std::vector<std::string>{"conv2d"});
    EXPECT_EQ(m.nodes[0].outputs, std::vector<std::string>{"y"});
    EXPECT_EQ(std::get<std::string>(m.nodes[0].attrs.at("activation")), "clip");
    EXPECT_EQ(std::get<double>(m.nodes[0].attrs.at("max")), 6.0);
    EXPECT_EQ(std::get<int64_t>(m.nodes[0].attrs.at("groups")), 1);
  }
  for (const char* op : {"relu", "hard_sigmoid", "hard_swish"}) {
    ir::Method m = conv_then(op, {});
    EXPECT_EQ(rewrite_method(m), 1) << op;
    EXPECT_EQ(std::get<std::string>(m.nodes[0].attrs.at("activation")), op);
  }
  ir::Method gelu = conv_then("gelu", {});
  EXPECT_EQ(rewrite_method(gelu), 0);
  ir::Method on_gpu = conv_then("hard_swish", {});
  on_gpu.backend = ir::Backend::Cuda;
  EXPECT_EQ(rewrite_method(on_gpu), 0);
  ir::Method engine_on_host = conv_then("hard_swish", {});
  engine_on_host.backend = ir::Backend::Engine;
  engine_on_host.device = Device::cpu();
  EXPECT_EQ(rewrite_method(engine_on_host), 1);
  ir::Method read_twice = conv_then("hard_swish", {});
  read_twice.nodes.push_back(node("add", {"c", "y"}, "z"));
  read_twice.outputs = {"z"};
  EXPECT_EQ(rewrite_method(read_twice), 0);
  ir::Method an_output = conv_then("hard_swish", {});
  an_output.outputs = {"y", "c"};
  EXPECT_EQ(rewrite_method(an_output), 0);
  ir::Method other_run = conv_then("hard_swish", {});
  other_run.nodes[1].segment = "after";
  EXPECT_EQ(rewrite_method(other_run), 0);
  ir::Method has_one = conv_then("hard_swish", {});
  has_one.nodes[0].attrs["activation"] = std::string("relu");
  EXPECT_EQ(rewrite_method(has_one), 0);
}

}  // namespace
}  // namespace planrt::builder
