// The rewrites lower_model applies to every method (builder/rewrite.h): what they fuse, and
// every reason they leave a graph as written.
#include "builder/rewrite.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "builder/builder_test_util.h"
#include "builder/check.h"
#include "ir_test_util.h"

namespace planrt::builder {
namespace {

using btest::node;
using btest::ops;

// The rewrites on a method outside any model (the typed ones skip it: it does not check).
int rewrite_method(ir::Method& m) {
  ir::Model model;
  RewriteState state;
  return builder::rewrite_method(model, m, state);
}

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

// A mask (input 3) means the same in every layout ([B, H, Sq, Sk]): it stays as it is.
TEST(Rewrite, AMaskInputStaysThroughTheLayoutRewrite) {
  ir::Method m = attention_method();
  m.nodes[3].inputs.push_back("mask");
  EXPECT_EQ(rewrite_method(m), 1);
  ASSERT_EQ(ops(m), (std::vector<std::string>{"scaled_dot_product_attention", "reshape"}));
  EXPECT_EQ(m.nodes[0].inputs, (std::vector<std::string>{"q", "k", "v", "mask"}));
  EXPECT_EQ(std::get<std::string>(m.nodes[0].attrs.at("layout")), "bshd");
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

// A sequence-first model's heads: q, k, v [S, B, H, D] split as permute(1, 2, 0, 3) to
// [B, H, S, D], merged back by permute(2, 0, 1, 3): layout sbhd reads them where they lie.
TEST(Rewrite, SequenceFirstHeadPermutesBecomeTheSbhdLayout) {
  ir::Method m = attention_method();
  for (size_t i : {0, 1, 2}) m.nodes[i].attrs["dims"] = std::vector<int64_t>{1, 2, 0, 3};
  m.nodes[4].attrs["dims"] = std::vector<int64_t>{2, 0, 1, 3};
  EXPECT_EQ(rewrite_method(m), 1);
  ASSERT_EQ(ops(m), (std::vector<std::string>{"scaled_dot_product_attention", "reshape"}));
  EXPECT_EQ(m.nodes[0].inputs, (std::vector<std::string>{"q", "k", "v"}));
  EXPECT_EQ(std::get<std::string>(m.nodes[0].attrs.at("layout")), "sbhd");
  // Splits of two layouts, or a merge of the other one, stay.
  for (const auto& change : std::vector<std::pair<size_t, std::vector<int64_t>>>{{1, {0, 2, 1, 3}}, {4, {0, 2, 1, 3}}}) {
    ir::Method mixed = attention_method();
    for (size_t i : {0, 1, 2}) mixed.nodes[i].attrs["dims"] = std::vector<int64_t>{1, 2, 0, 3};
    mixed.nodes[4].attrs["dims"] = std::vector<int64_t>{2, 0, 1, 3};
    mixed.nodes[change.first].attrs["dims"] = change.second;
    EXPECT_EQ(rewrite_method(mixed), 0) << "node " << change.first;
  }
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

// A typed model of the template's attention half as it is after the permutes' rewrite:
// three projections [1, S, 16] of x, split into 2 heads of 8 by reshapes, attention in layout
// bshd, merged back by a reshape. Weights with bytes (the packing stacks them).
struct AttentionModel {
  ir::Model model;
  std::vector<std::shared_ptr<std::vector<float>>> storage;

  AttentionModel() {
    const ir::ShapeSpec heads{{1, ""}, {0, "S"}, {2, ""}, {8, ""}};
    const ir::ShapeSpec flat{{1, ""}, {0, "S"}, {16, ""}};
    ir::Method m;
    m.name = "forward";
    m.dims = {{"S", 1, 32}};
    m.inputs = {{"x", {DType::F32, {ir::Dim::fixed(1), ir::Dim::named(0), ir::Dim::fixed(16)}}}};
    m.outputs = {"y"};
    for (const char* p : {"q", "k", "v"}) {
      const std::string w = std::string(p) + ".w", b = std::string(p) + ".b";
      add_constant(w, {16, 16});
      add_constant(b, {16});
      m.nodes.push_back(node("linear", {"x", w, b}, std::string(p) + ".out"));
      m.nodes.push_back(node("reshape", {std::string(p) + ".out"}, std::string(p) + ".heads", {{"shape", heads}}));
    }
    m.nodes.push_back(node("scaled_dot_product_attention", {"q.heads", "k.heads", "v.heads"}, "o",
                           {{"layout", std::string("bshd")}, {"causal", true}}));
    m.nodes.push_back(node("reshape", {"o"}, "y", {{"shape", flat}}));
    model.methods.push_back(std::move(m));
  }
  void add_constant(const std::string& name, std::vector<int64_t> shape) {
    ir::Constant c;
    c.name = name;
    c.shape = std::move(shape);
    auto bytes = std::make_shared<std::vector<float>>(c.nbytes() / sizeof(float));
    for (size_t i = 0; i < bytes->size(); ++i) (*bytes)[i] = static_cast<float>(model.constants.size() * 1000 + i);
    c.bytes = {reinterpret_cast<const uint8_t*>(bytes->data()), c.nbytes()};
    c.owner = bytes;
    storage.push_back(bytes);
    model.constants.push_back(std::move(c));
  }
  ir::Method& method() { return model.methods[0]; }
  int rewrite(RewriteState& state) {
    ir::Method m = model.methods[0];
    const int n = builder::rewrite_method(model, m, state);
    model.methods[0] = std::move(m);
    return n;
  }
  int rewrite() {
    RewriteState state;
    return rewrite(state);
  }
  std::vector<float> values(const std::string& constant) {
    const ir::Constant* c = model.find_constant(constant);
    if (c == nullptr) return {};
    const auto* f = reinterpret_cast<const float*>(c->bytes.data());
    return {f, f + c->bytes.size() / sizeof(float)};
  }
};

TEST(Rewrite, AttentionReadsFlatHeadsAndOnePackedProjection) {
  AttentionModel a;
  const std::vector<float> wq = a.values("q.w"), wk = a.values("k.w"), wv = a.values("v.w");
  const std::vector<float> bk = a.values("k.b");
  EXPECT_EQ(a.rewrite(), 2);  // the reshapes absorbed, the projections packed
  const ir::Method& m = a.method();
  ASSERT_EQ(ops(m), (std::vector<std::string>{"linear", "scaled_dot_product_attention"}));
  const ir::Node& lin = m.nodes[0];
  ASSERT_EQ(lin.inputs.size(), 3u);
  EXPECT_EQ(lin.inputs[0], "x");
  EXPECT_EQ(lin.inputs[1], "q.w#qkv");
  EXPECT_EQ(lin.inputs[2], "q.b#qkv");
  const ir::Node& attn = m.nodes[1];
  EXPECT_EQ(attn.inputs, std::vector<std::string>{lin.outputs[0]});
  EXPECT_EQ(attn.outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(std::get<int64_t>(attn.attrs.at("heads")), 2);
  EXPECT_TRUE(std::get<bool>(attn.attrs.at("causal")));
  // The stacked weight is q's rows, then k's, then v's; the bias likewise.
  const ir::Constant* w = a.model.find_constant("q.w#qkv");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{48, 16}));
  std::vector<float> want = wq;
  want.insert(want.end(), wk.begin(), wk.end());
  want.insert(want.end(), wv.begin(), wv.end());
  EXPECT_EQ(a.values("q.w#qkv"), want);
  const std::vector<float> b = a.values("q.b#qkv");
  ASSERT_EQ(b.size(), 48u);
  EXPECT_EQ(std::vector<float>(b.begin() + 16, b.begin() + 32), bk);
  // The result checks: the attention's operand is [1, S, 48], its output [1, S, 16].
  ASSERT_OK_AND_ASSIGN(ir::CheckedMethod types, ir::check_method(a.model, m));
  EXPECT_EQ(types.values.at("y").shape.back(), ir::Dim::fixed(16));
  EXPECT_EQ(types.values.at(lin.outputs[0]).shape.back(), ir::Dim::fixed(48));
}

// Weights that already lie back to back in one buffer (an ONNX in_proj the importer split)
// are stacked without a copy; a second method reuses the stacked constants.
TEST(Rewrite, PackedProjectionSharesAdjacentWeightBytesAndIsMadeOncePerModel) {
  AttentionModel a;
  auto joint = std::make_shared<std::vector<float>>(3 * 256);
  for (size_t i = 0; i < joint->size(); ++i) (*joint)[i] = static_cast<float>(i);
  const char* names[] = {"q.w", "k.w", "v.w"};
  for (int p = 0; p < 3; ++p) {
    ir::Constant& c = a.model.constants[static_cast<size_t>(std::find_if(a.model.constants.begin(), a.model.constants.end(),
        [&](const ir::Constant& k) { return k.name == names[p]; }) - a.model.constants.begin())];
    c.bytes = {reinterpret_cast<const uint8_t*>(joint->data() + p * 256), 256 * sizeof(float)};
    c.owner = joint;
  }
  a.model.methods.push_back(a.method());
  a.model.methods[1].name = "again";
  RewriteState state;
  EXPECT_EQ(a.rewrite(state), 2);
  const size_t constants = a.model.constants.size();
  ir::Method again = a.model.methods[1];
  EXPECT_EQ(builder::rewrite_method(a.model, again, state), 2);
  EXPECT_EQ(a.model.constants.size(), constants);  // nothing stacked twice
  EXPECT_EQ(again.nodes[0].inputs[1], "q.w#qkv");
  const ir::Constant* w = a.model.find_constant("q.w#qkv");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->bytes.data(), reinterpret_cast<const uint8_t*>(joint->data()));  // shared, not copied
  EXPECT_EQ(w->bytes.size(), 3 * 256 * sizeof(float));
}

TEST(Rewrite, ProjectionsItCannotPackStaySeparate) {
  struct Case {
    std::string why;
    void (*change)(AttentionModel&);
    int rewritten;  // the reshapes' absorption still happens where only the packing cannot
  };
  const Case cases[] = {
      {"k projects another input",
       [](AttentionModel& a) {
         a.method().inputs.push_back({"x2", a.method().inputs[0].type});
         a.method().nodes[2].inputs[0] = "x2";
       },
       1},
      {"a projection read by another node",
       [](AttentionModel& a) { a.method().nodes.push_back(node("relu", {"v.out"}, "r")); }, 1},
      {"a projection that is a method output", [](AttentionModel& a) { a.method().outputs.push_back("k.out"); }, 1},
      {"v without bias", [](AttentionModel& a) { a.method().nodes[4].inputs.pop_back(); }, 1},
      {"a weight that is an input",
       [](AttentionModel& a) {
         a.method().inputs.push_back({"wk", {DType::F32, {ir::Dim::fixed(16), ir::Dim::fixed(16)}}});
         a.method().nodes[2].inputs[1] = "wk";
       },
       1},
      {"a projection in another segment", [](AttentionModel& a) { a.method().nodes[0].segment = "other"; }, 1},
      {"a head split that is a method output", [](AttentionModel& a) { a.method().outputs.push_back("q.heads"); }, 0},
      {"the attention output read twice", [](AttentionModel& a) { a.method().outputs.push_back("o"); }, 0},
      {"a head split in another segment", [](AttentionModel& a) { a.method().nodes[3].segment = "other"; }, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    AttentionModel a;
    c.change(a);
    EXPECT_EQ(a.rewrite(), c.rewritten);
    const std::vector<std::string> got = ops(a.method());
    EXPECT_EQ(std::count(got.begin(), got.end(), "linear"), 3);
  }
}

// The block as torch's exporter writes nn.MultiheadAttention at a unit batch (batch_first):
// x [1, S, 16] -> reshape [S, 1, 16] (the batch/sequence transpose) -> three projections ->
// reshapes [S, 2, 8] -> attention (bshd) -> reshape [S, 16] -> output projection -> reshape
// [1, S, 16] -> residual add.
AttentionModel exporter_attention() {
  AttentionModel a;
  const ir::ShapeSpec seq_major{{0, "S"}, {1, ""}, {16, ""}};
  const ir::ShapeSpec heads{{0, "S"}, {2, ""}, {8, ""}};
  ir::Method& m = a.method();
  m.nodes.insert(m.nodes.begin(), node("reshape", {"x"}, "xt", {{"shape", seq_major}}));
  for (ir::Node& n : m.nodes) {
    if (n.op == "linear") n.inputs[0] = "xt";
    if (n.op == "reshape" && n.outputs[0] != "xt" && n.outputs[0] != "y") n.attrs["shape"] = heads;
  }
  a.add_constant("o.w", {16, 16});
  m.nodes.back() = node("reshape", {"o"}, "merged", {{"shape", ir::ShapeSpec{{0, "S"}, {16, ""}}}});
  m.nodes.push_back(node("linear", {"merged", "o.w"}, "proj"));
  m.nodes.push_back(node("reshape", {"proj"}, "back", {{"shape", ir::ShapeSpec{{1, ""}, {0, "S"}, {16, ""}}}}));
  m.nodes.push_back(node("add", {"x", "back"}, "y"));
  return a;
}

// The reshapes between the exporter's projections go: the transpose moves past the linears
// (they map rows alone), the heads are absorbed with the flat operand's leading unit dim,
// the merge moves past the output projection, the reshape back becomes an identity and goes;
// then the projections pack. The result is the template's block.
TEST(Rewrite, AnExportersAttentionBlockBecomesTheTemplatesBlock) {
  AttentionModel a = exporter_attention();
  ASSERT_OK(ir::check_method(a.model, a.method()).status());
  EXPECT_EQ(a.rewrite(), 5);
  const ir::Method& m = a.method();
  ASSERT_EQ(ops(m), (std::vector<std::string>{"linear", "scaled_dot_product_attention", "linear", "add"}));
  EXPECT_EQ(m.nodes[0].inputs[0], "x");
  EXPECT_EQ(m.nodes[1].inputs, std::vector<std::string>{m.nodes[0].outputs[0]});
  EXPECT_EQ(std::get<int64_t>(m.nodes[1].attrs.at("heads")), 2);
  EXPECT_EQ(m.nodes[2].inputs[0], m.nodes[1].outputs[0]);
  EXPECT_EQ(m.nodes[3].inputs, (std::vector<std::string>{"x", "proj"}));
  ASSERT_OK_AND_ASSIGN(ir::CheckedMethod types, ir::check_method(a.model, m));
  EXPECT_EQ(types.values.at("proj").shape, types.values.at("x").shape);  // [1, S, 16]
}

TEST(Rewrite, ReshapesThatLinearsCannotAbsorbStay) {
  {  // the projection's output read by an add, whose broadcast would see another shape
    AttentionModel a = exporter_attention();
    a.method().nodes.push_back(node("add", {"proj", "proj"}, "twice"));
    a.method().outputs.push_back("twice");
    a.rewrite();
    const std::vector<std::string> got = ops(a.method());
    EXPECT_EQ(std::count(got.begin(), got.end(), "reshape"), 2);  // the merge and the way back
  }
  {  // a reshape that changes the last dim: the linear needs its rows as they are
    AttentionModel a;
    a.add_constant("w8", {4, 8});
    ir::Method& m = a.method();
    m.nodes = {node("reshape", {"x"}, "r", {{"shape", ir::ShapeSpec{{1, ""}, {0, "S"}, {2, ""}, {8, ""}}}}),
               node("linear", {"r", "w8"}, "l"),
               node("reshape", {"l"}, "y", {{"shape", ir::ShapeSpec{{1, ""}, {0, "S"}, {8, ""}}}})};
    ASSERT_OK(ir::check_method(a.model, m).status());
    EXPECT_EQ(a.rewrite(), 0);
    EXPECT_EQ(ops(a.method()), (std::vector<std::string>{"reshape", "linear", "reshape"}));
  }
  {  // the way back read in another segment: dropping it would move a segment's edge
    AttentionModel a = exporter_attention();
    a.method().nodes.back().segment = "other";
    a.rewrite();
    const std::vector<std::string> got = ops(a.method());
    EXPECT_EQ(std::count(got.begin(), got.end(), "reshape"), 1);
  }
  {  // the way back is a method output: it stays
    AttentionModel a = exporter_attention();
    a.method().outputs.push_back("back");
    a.rewrite();
    const std::vector<std::string> got = ops(a.method());
    EXPECT_EQ(std::count(got.begin(), got.end(), "reshape"), 1);
  }
}

// q projects a [1, S, 16] input, k and v a [S, 16] one, each split to [S, 2, 8]: the flat
// operands would differ in rank, so the heads stay split (the model builds as written).
TEST(Rewrite, FlatOperandsOfDifferentRanksKeepTheirHeadSplits) {
  AttentionModel a;
  ir::Method& m = a.method();
  m.inputs.push_back({"x2", {DType::F32, {ir::Dim::named(0), ir::Dim::fixed(16)}}});
  const ir::ShapeSpec heads{{0, "S"}, {2, ""}, {8, ""}};
  for (ir::Node& n : m.nodes) {
    if (n.op == "linear" && n.outputs[0] != "q.out") n.inputs[0] = "x2";
    if (n.op == "reshape" && n.outputs[0] != "y") n.attrs["shape"] = heads;
  }
  ASSERT_OK(ir::check_method(a.model, m).status());
  EXPECT_EQ(a.rewrite(), 0);
  EXPECT_TRUE(ir::check_method(a.model, a.method()).ok());
}

// v of another width (Dv 12): the heads are absorbed, the projections cannot stack.
TEST(Rewrite, ProjectionsOfDifferentWidthsStaySeparate) {
  AttentionModel a;
  for (ir::Constant& c : a.model.constants) {
    if (c.name == "v.w") c.shape = {24, 16};
    if (c.name == "v.b") c.shape = {24};
    auto bytes = std::make_shared<std::vector<uint8_t>>(c.nbytes());
    c.bytes = {bytes->data(), bytes->size()};
    c.owner = bytes;
  }
  ir::Method& m = a.method();
  m.nodes[5].attrs["shape"] = ir::ShapeSpec{{1, ""}, {0, "S"}, {2, ""}, {12, ""}};
  m.nodes[7].attrs["shape"] = ir::ShapeSpec{{1, ""}, {0, "S"}, {24, ""}};
  ASSERT_OK(ir::check_method(a.model, m).status());
  EXPECT_EQ(a.rewrite(), 1);
  const std::vector<std::string> got = ops(a.method());
  EXPECT_EQ(std::count(got.begin(), got.end(), "linear"), 3);
  EXPECT_EQ(std::count(got.begin(), got.end(), "reshape"), 0);
}

// A constant already named as the stacked weight would be: the made one takes another name.
TEST(Rewrite, StackedWeightsTakeAFreeName) {
  AttentionModel a;
  a.add_constant("q.w#qkv", {1});
  EXPECT_EQ(a.rewrite(), 2);
  EXPECT_EQ(a.method().nodes[0].inputs[1], "q.w#qkv2");
  ASSERT_NE(a.model.find_constant("q.w#qkv2"), nullptr);
  EXPECT_EQ(a.model.find_constant("q.w#qkv")->shape, std::vector<int64_t>{1});
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

// On the host a linear takes the relu or gelu that alone reads it (gelu's approximation
// with it); not a clamp, not on a GPU, not when read twice.
TEST(Rewrite, HostLinearsTakeTheReluOrGeluThatAloneReadsThem) {
  auto linear_then = [](std::string op, ir::Attrs attrs) {
    ir::Method m;
    m.name = "forward";
    m.outputs = {"y"};
    m.nodes = {node("linear", {"x", "w", "b"}, "h"), node(std::move(op), {"h"}, "y", std::move(attrs))};
    return m;
  };
  {
    ir::Method m = linear_then("gelu", {{"approximate", std::string("tanh")}});
    EXPECT_EQ(rewrite_method(m), 1);
    ASSERT_EQ(ops(m), std::vector<std::string>{"linear"});
    EXPECT_EQ(m.nodes[0].outputs, std::vector<std::string>{"y"});
    EXPECT_EQ(m.nodes[0].inputs, (std::vector<std::string>{"x", "w", "b"}));
    EXPECT_EQ(std::get<std::string>(m.nodes[0].attrs.at("activation")), "gelu");
    EXPECT_EQ(std::get<std::string>(m.nodes[0].attrs.at("approximate")), "tanh");
  }
  ir::Method relu = linear_then("relu", {});
  EXPECT_EQ(rewrite_method(relu), 1);
  EXPECT_EQ(std::get<std::string>(relu.nodes[0].attrs.at("activation")), "relu");
  for (const char* op : {"hard_swish", "sigmoid", "tanh"}) {
    ir::Method m = linear_then(op, {});
    EXPECT_EQ(rewrite_method(m), 0) << op;
  }
  ir::Method on_gpu = linear_then("gelu", {});
  on_gpu.backend = ir::Backend::Cuda;
  EXPECT_EQ(rewrite_method(on_gpu), 0);
  ir::Method engine_on_gpu = linear_then("gelu", {});
  engine_on_gpu.backend = ir::Backend::Engine;
  EXPECT_EQ(rewrite_method(engine_on_gpu), 0);
  ir::Method read_twice = linear_then("gelu", {});
  read_twice.nodes.push_back(node("add", {"h", "y"}, "z"));
  read_twice.outputs = {"z"};
  EXPECT_EQ(rewrite_method(read_twice), 0);
}

}  // namespace
}  // namespace planrt::builder
