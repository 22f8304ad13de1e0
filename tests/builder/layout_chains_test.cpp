// Layout chains (builder/layout_chains.h): what torch 2's dynamo export writes around
// attention at a named batch dim becomes one permute per chain, and every rewritten method
// computes what it did before, checked by running both on index-valued tensors at several
// sizes within the dims' bounds.
#include "builder/layout_chains.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "builder/builder_test_util.h"
#include "builder/check.h"
#include "builder/rewrite.h"
#include "ir_test_util.h"

namespace planrt::builder {
namespace {

using btest::node;
using btest::ops;

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> data;
};

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> concrete(const ir::SymShape& shape, const std::vector<int64_t>& dims) {
  std::vector<int64_t> out;
  for (const ir::Dim& d : shape) out.push_back(d.is_static() ? d.value : d.value * dims[static_cast<size_t>(d.dim)]);
  return out;
}

Tensor permuted(const Tensor& x, const std::vector<int64_t>& perm) {
  const size_t r = x.shape.size();
  std::vector<int64_t> p = perm;
  for (int64_t& d : p) d = d < 0 ? d + static_cast<int64_t>(r) : d;
  Tensor y;
  for (int64_t d : p) y.shape.push_back(x.shape[static_cast<size_t>(d)]);
  std::vector<int64_t> stride(r, 1);
  for (size_t i = r; i-- > 1;) stride[i - 1] = stride[i] * x.shape[i];
  y.data.resize(x.data.size());
  std::vector<int64_t> idx(r, 0);
  for (size_t flat = 0; flat < y.data.size(); ++flat) {
    int64_t src = 0;
    for (size_t i = 0; i < r; ++i) src += idx[i] * stride[static_cast<size_t>(p[i])];
    y.data[flat] = x.data[static_cast<size_t>(src)];
    for (size_t i = r; i-- > 0;) {
      if (++idx[i] < y.shape[i]) break;
      idx[i] = 0;
    }
  }
  return y;
}

// Runs the method's reshape, permute and linear nodes at `dims` (anything else fails).
std::map<std::string, Tensor> run(const ir::Model& model, const ir::Method& m, const std::vector<int64_t>& dims) {
  std::map<std::string, Tensor> values;
  Result<ir::CheckedMethod> types = ir::check_method(model, m);
  EXPECT_TRUE(types.ok()) << types.status().message();
  if (!types.ok()) return values;
  for (const ir::ValueDecl& in : m.inputs) {
    Tensor& t = values[in.name];
    t.shape = concrete(in.type.shape, dims);
    for (int64_t i = 0; i < numel(t.shape); ++i) t.data.push_back(static_cast<double>(i) + 0.25 * static_cast<double>(in.name.size()));
  }
  for (const ir::Node& n : m.nodes) {
    const Tensor& x = values.at(n.inputs[0]);
    Tensor y;
    if (n.op == "reshape") {
      y = x;
      y.shape = concrete(types->values.at(n.outputs[0]).shape, dims);
      EXPECT_EQ(numel(y.shape), numel(x.shape)) << n.outputs[0];
    } else if (n.op == "permute") {
      y = permuted(x, std::get<std::vector<int64_t>>(n.attrs.at("dims")));
    } else if (n.op == "linear") {
      const ir::Constant* w = model.find_constant(n.inputs[1]);
      const ir::Constant* b = n.inputs.size() > 2 ? model.find_constant(n.inputs[2]) : nullptr;
      const auto* wf = reinterpret_cast<const float*>(w->bytes.data());
      const int64_t k = x.shape.back(), out = w->shape[0];
      y.shape = x.shape;
      y.shape.back() = out;
      for (int64_t row = 0; row < numel(x.shape) / k; ++row) {
        for (int64_t j = 0; j < out; ++j) {
          double s = b == nullptr ? 0.0 : reinterpret_cast<const float*>(b->bytes.data())[j];
          for (int64_t i = 0; i < k; ++i) s += x.data[static_cast<size_t>(row * k + i)] * wf[j * k + i];
          y.data.push_back(s);
        }
      }
    } else {
      ADD_FAILURE() << "the test evaluator has no " << n.op;
      return values;
    }
    values[n.outputs[0]] = std::move(y);
  }
  return values;
}

// Dims B (1..8) and S (1..16); heads of 2 x 8 over a width of 16; weights with bytes.
struct LayoutModel {
  ir::Model model;
  std::vector<std::shared_ptr<std::vector<float>>> storage;

  LayoutModel() {
    ir::Method m;
    m.name = "forward";
    m.dims = {{"B", 1, 8}, {"S", 1, 16}};
    model.methods.push_back(std::move(m));
  }
  ir::Method& method() { return model.methods[0]; }
  void input(const std::string& name, ir::SymShape shape) { method().inputs.push_back({name, {DType::F32, std::move(shape)}}); }
  void add_constant(const std::string& name, std::vector<int64_t> shape) {
    ir::Constant c;
    c.name = name;
    c.shape = std::move(shape);
    auto bytes = std::make_shared<std::vector<float>>(c.nbytes() / sizeof(float));
    for (size_t i = 0; i < bytes->size(); ++i) (*bytes)[i] = static_cast<float>((i * 7 + model.constants.size()) % 13) - 6.0f;
    c.bytes = {reinterpret_cast<const uint8_t*>(bytes->data()), c.nbytes()};
    c.owner = bytes;
    storage.push_back(bytes);
    model.constants.push_back(std::move(c));
  }
  // rewrite_method on the method; every output equal to before at several (B, S).
  int rewrite_and_compare() {
    const ir::Method before = method();
    RewriteState state;
    const int n = builder::rewrite_method(model, method(), state);
    for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{1, 1}, {3, 5}, {8, 16}, {2, 7}}) {
      SCOPED_TRACE(::testing::Message() << "B = " << dims[0] << ", S = " << dims[1]);
      std::map<std::string, Tensor> want = run(model, before, dims), got = run(model, method(), dims);
      for (const std::string& out : before.outputs) {
        if (!want.contains(out) || !got.contains(out)) {
          ADD_FAILURE() << "no value for " << out;
          continue;
        }
        EXPECT_EQ(got.at(out).shape, want.at(out).shape) << out;
        EXPECT_EQ(got.at(out).data, want.at(out).data) << out;
      }
    }
    return n;
  }
};

const ir::Dim B = ir::Dim::named(0), S = ir::Dim::named(1);
ir::Dim fixed(int64_t v) { return ir::Dim::fixed(v); }
ir::ShapeItem dim(const char* name) { return {0, name}; }
ir::ShapeItem num(int64_t v) { return {v, ""}; }
ir::Node permute(std::string in, std::string out, std::vector<int64_t> dims) {
  return node("permute", {std::move(in)}, std::move(out), {{"dims", std::move(dims)}});
}
ir::Node reshape(std::string in, std::string out, ir::ShapeSpec spec) {
  return node("reshape", {std::move(in)}, std::move(out), {{"shape", std::move(spec)}});
}

// The key of torch 2's dynamo export: [S, B, 16] -> [S, B * 2, 8] -> [B * 2, S, 8] -> [B, 2, S,
// 8] -> [B * 2, S, 8] -> [B * 2, 8, S] -> [B, 2, 8, S], then the attention's own swap back.
void add_key_chain(ir::Method& m, const std::string& in, const std::string& out) {
  m.nodes.push_back(reshape(in, out + ".1", {dim("S"), num(-1), num(8)}));
  m.nodes.push_back(permute(out + ".1", out + ".2", {1, 0, 2}));
  m.nodes.push_back(reshape(out + ".2", out + ".3", {dim("B"), num(2), dim("S"), num(8)}));
  m.nodes.push_back(reshape(out + ".3", out + ".4", {num(-1), dim("S"), num(8)}));
  m.nodes.push_back(permute(out + ".4", out + ".5", {0, 2, 1}));
  m.nodes.push_back(reshape(out + ".5", out + ".6", {dim("B"), num(2), num(8), dim("S")}));
  m.nodes.push_back(permute(out + ".6", out, {0, 1, 3, 2}));
}

TEST(LayoutChains, AKeysChainOfThreePermutesBecomesOneReshapeAndOnePermute) {
  LayoutModel a;
  a.input("k", {S, B, fixed(16)});
  a.method().outputs = {"y"};
  add_key_chain(a.method(), "k", "y");
  EXPECT_EQ(a.rewrite_and_compare(), 1);
  const ir::Method& m = a.method();
  ASSERT_EQ(ops(m), (std::vector<std::string>{"reshape", "permute"}));
  EXPECT_EQ(std::get<std::vector<int64_t>>(m.nodes[1].attrs.at("dims")), (std::vector<int64_t>{1, 2, 0, 3}));
  EXPECT_EQ(m.nodes[1].outputs[0], "y");
  ASSERT_OK_AND_ASSIGN(ir::CheckedMethod types, ir::check_method(a.model, m));
  EXPECT_EQ(types.values.at(m.nodes[0].outputs[0]).shape, (ir::SymShape{S, B, fixed(2), fixed(8)}));
}

// Permutes that cancel leave one reshape; a chain without a permute one reshape too.
TEST(LayoutChains, PermutesThatCancelLeaveAReshape) {
  LayoutModel a;
  a.input("x", {B, S, fixed(16)});
  a.method().outputs = {"y"};
  a.method().nodes = {permute("x", "t", {1, 0, 2}), reshape("t", "r", {dim("S"), dim("B"), num(2), num(8)}),
                      permute("r", "y", {1, 0, 2, 3})};
  EXPECT_EQ(a.rewrite_and_compare(), 1);
  EXPECT_EQ(ops(a.method()), std::vector<std::string>{"reshape"});
}

// Reshapes in a row count by the last: the ONNX importer writes a Reshape to [S * B, E] as
// rows [B, S, E] (its product dims sorted) before the reshape back to [S, B, E]; the first
// alone factors nothing ([S, B, 2, 8] -> [B, ...] has no B at the front).
TEST(LayoutChains, ReshapesInARowCountByTheLast) {
  LayoutModel a;
  a.input("o", {B, fixed(2), S, fixed(8)});
  a.method().outputs = {"y"};
  a.method().nodes = {permute("o", "m", {2, 0, 1, 3}), reshape("m", "rows", {dim("B"), dim("S"), num(16)}),
                      reshape("rows", "back", {dim("S"), dim("B"), num(16)}), permute("back", "y", {1, 0, 2})};
  EXPECT_EQ(a.rewrite_and_compare(), 1);
  ASSERT_EQ(ops(a.method()), (std::vector<std::string>{"permute", "reshape"}));
  EXPECT_EQ(std::get<std::vector<int64_t>>(a.method().nodes[0].attrs.at("dims")), (std::vector<int64_t>{0, 2, 1, 3}));
}

// The block around attention as the dynamo export writes it at a named batch: the input
// transposed to [S, B, 16] before the projections, the heads split from [S, B * 2, 8], the
// output merged through [S, B, 2, 8] and transposed back after the output projection. The
// moves past the linears let each side's permutes meet: five permutes become three.
TEST(LayoutChains, ProjectionsLetTheirTransposesMeetTheHeadSplitsAndMerges) {
  LayoutModel a;
  a.input("x", {B, S, fixed(16)});
  a.input("o", {B, fixed(2), S, fixed(8)});
  a.add_constant("q.w", {16, 16});
  a.add_constant("q.b", {16});
  a.add_constant("v.w", {16, 16});
  a.add_constant("out.w", {16, 16});
  ir::Method& m = a.method();
  m.outputs = {"q", "v", "y"};
  m.nodes = {permute("x", "xt", {1, 0, 2}), node("linear", {"xt", "q.w", "q.b"}, "q.lin"),
             node("linear", {"xt", "v.w"}, "v.lin")};
  for (const char* p : {"q", "v"}) {
    const std::string s = p;
    m.nodes.push_back(reshape(s + ".lin", s + ".1", {dim("S"), num(-1), num(8)}));
    m.nodes.push_back(permute(s + ".1", s + ".2", {1, 0, 2}));
    m.nodes.push_back(reshape(s + ".2", s, {dim("B"), num(2), dim("S"), num(8)}));
  }
  m.nodes.push_back(permute("o", "o.1", {2, 0, 1, 3}));
  m.nodes.push_back(reshape("o.1", "o.2", {dim("S"), dim("B"), num(16)}));
  m.nodes.push_back(node("linear", {"o.2", "out.w"}, "o.lin"));
  m.nodes.push_back(permute("o.lin", "y", {1, 0, 2}));
  ASSERT_EQ(count_permutes(m), 5);
  EXPECT_GT(a.rewrite_and_compare(), 0);
  EXPECT_EQ(count_permutes(a.method()), 3);
  for (const ir::Node& n : a.method().nodes) {
    if (n.op == "permute") {
      EXPECT_EQ(std::get<std::vector<int64_t>>(n.attrs.at("dims")), (std::vector<int64_t>{0, 2, 1, 3})) << n.outputs[0];
    }
    if (n.op == "linear") {
      EXPECT_TRUE(n.inputs[0] == "x" || n.outputs[0] == "y") << n.outputs[0];  // rows of x, or writes y
    }
  }
}

// What stays as written: dims that do not factor, a chain cut by a value the caller also
// sees (each side simplified alone), a chain across segments, a permute the caller also sees.
TEST(LayoutChains, ChainsItCannotSimplifyStay) {
  {  // [6, 4] -> [4, 6] -> [3, 8]: 4 and 3 share no factor
    LayoutModel a;
    a.input("x", {fixed(6), fixed(4)});
    a.method().outputs = {"y"};
    a.method().nodes = {permute("x", "t", {1, 0}), reshape("t", "r", {num(3), num(8)}), permute("r", "y", {1, 0})};
    EXPECT_EQ(a.rewrite_and_compare(), 0);
    EXPECT_EQ(count_permutes(a.method()), 2);
  }
  {  // the key chain with a value in the middle that is also an output
    LayoutModel a;
    a.input("k", {S, B, fixed(16)});
    a.method().outputs = {"y", "y.3"};
    add_key_chain(a.method(), "k", "y");
    a.rewrite_and_compare();
    EXPECT_EQ(count_permutes(a.method()), 1);  // up to y.3 one; after it the two cancel
    ASSERT_OK_AND_ASSIGN(ir::CheckedMethod types, ir::check_method(a.model, a.method()));
    EXPECT_EQ(types.values.at("y.3").shape, (ir::SymShape{B, fixed(2), S, fixed(8)}));
  }
  {  // a permute of the chain in another segment
    LayoutModel a;
    a.input("k", {S, B, fixed(16)});
    a.method().outputs = {"y"};
    add_key_chain(a.method(), "k", "y");
    a.method().nodes[4].segment = "other";
    a.rewrite_and_compare();
    EXPECT_EQ(count_permutes(a.method()), 3);
    for (const ir::Node& n : a.method().nodes) EXPECT_EQ(n.segment, n.outputs[0] == "y.5" ? "other" : "") << n.outputs[0];
  }
  {  // the transpose before the projection also an output: it stays before the linear
    LayoutModel a;
    a.input("x", {B, S, fixed(16)});
    a.add_constant("q.w", {16, 16});
    ir::Method& m = a.method();
    m.outputs = {"q", "xt"};
    m.nodes = {permute("x", "xt", {1, 0, 2}), node("linear", {"xt", "q.w"}, "q.lin"),
               reshape("q.lin", "q.1", {dim("S"), num(-1), num(8)}), permute("q.1", "q", {1, 0, 2})};
    a.rewrite_and_compare();
    EXPECT_EQ(a.method().nodes[1].inputs[0], "xt");
    EXPECT_EQ(count_permutes(a.method()), 2);
  }
}

}  // namespace
}  // namespace planrt::builder
