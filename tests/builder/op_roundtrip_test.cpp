// Every op of §9 from JSON through the builder into a program the verifying reader accepts,
// with the output shape the op's PyTorch semantics give and the attributes as emitted.
#include <gtest/gtest.h>

#include <set>

#include <fmt/format.h>

#include "builder_test_util.h"
#include "format/fb_types.h"
#include "format/program_file.h"
#include "kernels/elementwise_ops.h"
#include "kernels/kernel.h"
#include "model_json_util.h"

namespace planrt::builder {
namespace {

using btest::OneMethod;

struct OpCase {
  std::string name;   // test label
  OneMethod model;
  std::string op;     // the op of the (last) kernel checked
  std::string shape;  // of value "y"
  std::string dtype = "f32";
};

const fb::AttrT* find_attr(const fb::InstructionT& ins, const std::string& name) {
  for (const auto& a : ins.attrs) {
    if (a->name == name) return a.get();
  }
  return nullptr;
}

// Builds the model, serializes it, reads it back through format::ProgramFile and returns
// the kernel instruction that produces "y".
struct RoundTrip {
  BuiltProgram built;
  const fb::MethodT* method;
  const fb::InstructionT* producer;
};

Result<RoundTrip> round_trip(const OneMethod& m) {
  PLANRT_ASSIGN_OR_RETURN(Model model, parse_model_json(m.json()));
  // Each op as written: the channels-last rewrite (its own tests, layout_test.cpp) would
  // wrap a convolution in permutes.
  BuildOptions options;
  options.channels_last = false;
  PLANRT_ASSIGN_OR_RETURN(BuiltProgram built, build_program(model, options));
  PLANRT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, built.serialize());
  PLANRT_ASSIGN_OR_RETURN(format::ProgramFile file, format::ProgramFile::from_bytes(std::move(bytes)));
  const fb::MethodT* method = built.program().methods[0].get();
  const fb::InstructionT* producer = nullptr;
  for (const auto& ins : method->instructions) {
    for (uint32_t o : ins->outputs) {
      if (method->values[o]->name == "y") producer = ins.get();
    }
  }
  if (producer == nullptr) return make_error(ErrorCode::Internal, "no instruction writes y");
  return RoundTrip{std::move(built), method, producer};
}

OneMethod with(std::string inputs, std::string nodes, std::string constants = "") {
  OneMethod m;
  m.inputs = std::move(inputs);
  m.nodes = std::move(nodes);
  m.constants = std::move(constants);
  return m;
}

const char* kX = R"([{"name": "x", "dtype": "f32", "shape": ["S", 8]}])";
const char* kX3 = R"([{"name": "x", "dtype": "f32", "shape": [1, "S", 8]}])";
const char* kXY = R"([{"name": "a", "dtype": "f32", "shape": [1, 8]}, {"name": "b", "dtype": "f32", "shape": ["S", 1]}])";

std::vector<OpCase> cases() {
  std::vector<OpCase> c;
  c.push_back({"linear", with(kX, R"({"op": "linear", "inputs": ["x", "w", "b"], "outputs": ["y"]})",
                              R"("w": {"dtype": "f32", "shape": [4, 8]}, "b": {"dtype": "f32", "shape": [4]})"),
               "linear", "[S, 4]"});
  c.push_back({"linear_no_bias", with(kX, R"({"op": "linear", "inputs": ["x", "w", null], "outputs": ["y"]})",
                                      R"("w": {"dtype": "f32", "shape": [4, 8]})"),
               "linear", "[S, 4]"});
  c.push_back({"matmul", with(R"([{"name": "a", "dtype": "f32", "shape": [2, 1, "S", 8]}])",
                              R"({"op": "matmul", "inputs": ["a", "w"], "outputs": ["y"]})",
                              R"("w": {"dtype": "f32", "shape": [3, 8, 5]})"),
               "matmul", "[2, 3, S, 5]"});
  c.push_back({"matmul_vector", with(kX, R"({"op": "matmul", "inputs": ["x", "v"], "outputs": ["y"]})",
                                     R"("v": {"dtype": "f32", "shape": [8]})"),
               "matmul", "[S]"});
  for (std::string op : {"add", "sub", "mul", "div"}) {
    c.push_back({op, with(kXY, fmt::format(R"({{"op": "{}", "inputs": ["a", "b"], "outputs": ["y"]}})", op)), op,
                 "[S, 8]"});
  }
  c.push_back({"layer_norm", with(kX3, R"({"op": "layer_norm", "inputs": ["x", "w", "b"], "outputs": ["y"], "attrs": {"eps": 1e-6}})",
                                  R"("w": {"dtype": "f32", "shape": [8]}, "b": {"dtype": "f32", "shape": [8]})"),
               "layer_norm", "[1, S, 8]"});
  c.push_back({"layer_norm_no_affine", with(kX3, R"({"op": "layer_norm", "inputs": ["x"], "outputs": ["y"]})"),
               "layer_norm", "[1, S, 8]"});
  c.push_back({"rms_norm", with(kX3, R"({"op": "rms_norm", "inputs": ["x", "w"], "outputs": ["y"]})",
                                R"("w": {"dtype": "f32", "shape": [8]})"),
               "rms_norm", "[1, S, 8]"});
  c.push_back({"softmax", with(kX3, R"({"op": "softmax", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": -1}})"),
               "softmax", "[1, S, 8]"});
  c.push_back({"gelu", with(kX3, R"({"op": "gelu", "inputs": ["x"], "outputs": ["y"], "attrs": {"approximate": "tanh"}})"),
               "gelu", "[1, S, 8]"});
  c.push_back({"relu", with(kX3, R"({"op": "relu", "inputs": ["x"], "outputs": ["y"]})"), "relu", "[1, S, 8]"});
  c.push_back({"silu", with(kX3, R"({"op": "silu", "inputs": ["x"], "outputs": ["y"]})"), "silu", "[1, S, 8]"});
  for (const char* op : {"sqrt", "neg", "exp", "erf", "tanh", "sigmoid"}) {
    c.push_back({op, with(kX3, fmt::format(R"({{"op": "{}", "inputs": ["x"], "outputs": ["y"]}})", op)), op, "[1, S, 8]"});
  }
  c.push_back({"pow", with(kX3, R"({"op": "pow", "inputs": ["x", "x"], "outputs": ["y"]})"), "pow", "[1, S, 8]"});
  c.push_back({"reduce_mean_keep", with(kX3, R"({"op": "reduce_mean", "inputs": ["x"], "outputs": ["y"], "attrs": {"dims": [-1], "keepdim": true}})"),
               "reduce_mean", "[1, S, 1]"});
  c.push_back({"reduce_mean_drop", with(kX3, R"({"op": "reduce_mean", "inputs": ["x"], "outputs": ["y"], "attrs": {"dims": [0, 1]}})"),
               "reduce_mean", "[8]"});
  for (const char* op : {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod"}) {
    c.push_back({op, with(kX3, fmt::format(R"({{"op": "{}", "inputs": ["x"], "outputs": ["y"], "attrs": {{"dims": [1, 2]}}}})", op)),
                 op, "[1]"});
  }
  c.push_back({"argmax", with(kX3, R"({"op": "argmax", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": -1, "keepdim": true}})"),
               "argmax", "[1, S, 1]", "i64"});
  c.push_back({"argmin", with(kX3, R"({"op": "argmin", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": 1}})"),
               "argmin", "[1, 8]", "i64"});
  c.push_back({"cumsum", with(R"([{"name": "x", "dtype": "i64", "shape": [2, "S"]}])",
                              R"({"op": "cumsum", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": 1, "exclusive": true}})"),
               "cumsum", "[2, S]", "i64"});
  c.push_back({"log_softmax", with(kX3, R"({"op": "log_softmax", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": 1}})"),
               "log_softmax", "[1, S, 8]"});
  c.push_back({"reshape_named", with(kX3, R"({"op": "reshape", "inputs": ["x"], "outputs": ["y"], "attrs": {"shape": [1, "S", 2, 4]}})"),
               "reshape", "[1, S, 2, 4]"});
  c.push_back({"reshape_infer", with(R"([{"name": "x", "dtype": "f32", "shape": [2, "S", 8]}])",
                                     R"({"op": "reshape", "inputs": ["x"], "outputs": ["y"], "attrs": {"shape": [-1, 8]}})"),
               "reshape", "[2*S, 8]"});
  c.push_back({"permute", with(R"([{"name": "x", "dtype": "f32", "shape": [1, "S", 2, 4]}])",
                               R"({"op": "permute", "inputs": ["x"], "outputs": ["y"], "attrs": {"dims": [0, 2, -3, 3]}})"),
               "permute", "[1, 2, S, 4]"});
  c.push_back({"transpose", with(kX3, R"({"op": "transpose", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim0": 1, "dim1": -1}})"),
               "transpose", "[1, 8, S]"});
  c.push_back({"sdpa", with(R"([{"name": "q", "dtype": "f32", "shape": [1, 2, "S", 4]},
                                {"name": "k", "dtype": "f32", "shape": [1, 2, 6, 4]},
                                {"name": "v", "dtype": "f32", "shape": [1, 2, 6, 3]}])",
                            R"({"op": "scaled_dot_product_attention", "inputs": ["q", "k", "v"], "outputs": ["y"], "attrs": {"causal": true, "scale": 0.5}})"),
               "scaled_dot_product_attention", "[1, 2, S, 3]"});
  c.push_back({"embedding", with(R"([{"name": "ids", "dtype": "i64", "shape": [1, "S"]}])",
                                 R"({"op": "embedding", "inputs": ["ids", "table"], "outputs": ["y"]})",
                                 R"("table": {"dtype": "f32", "shape": [100, 8]})"),
               "embedding", "[1, S, 8]"});
  c.push_back({"concat_named", with(kX, R"({"op": "concat", "inputs": ["x", "x", "x"], "outputs": ["y"]})"), "concat", "[3*S, 8]"});
  c.push_back({"concat_static", with(kX, R"({"op": "concat", "inputs": ["x", "x"], "outputs": ["y"], "attrs": {"dim": -1}})"),
               "concat", "[S, 16]"});
  c.push_back({"slice_static", with(kX, R"({"op": "slice", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": 1, "start": 2, "end": -2}})"),
               "slice", "[S, 4]"});
  c.push_back({"slice_named_prefix", with(R"([{"name": "x", "dtype": "f32", "shape": ["S", 8]}])",
                                          R"({"op": "slice", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": 0, "start": 0, "end": 1}})"),
               "slice", "[1, 8]"});
  c.push_back({"slice_named_whole", with(kX, R"({"op": "slice", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": 0, "end": 1000}})"),
               "slice", "[S, 8]"});
  const char* img = R"([{"name": "x", "dtype": "f32", "shape": ["S", 3, 9, 8]}])";
  c.push_back({"conv2d", with(img, R"({"op": "conv2d", "inputs": ["x", "w", "b"], "outputs": ["y"],
                                      "attrs": {"strides": [2, 1], "pads": [1, 0, 1, 2], "groups": 1, "activation": "relu"}})",
                              R"("w": {"dtype": "f32", "shape": [4, 3, 3, 3]}, "b": {"dtype": "f32", "shape": [4]})"),
               "conv2d", "[S, 4, 5, 8]"});
  c.push_back({"conv2d_depthwise", with(img, R"({"op": "conv2d", "inputs": ["x", "w"], "outputs": ["y"], "attrs": {"groups": 3, "dilations": [2, 2]}})",
                                        R"("w": {"dtype": "f32", "shape": [6, 1, 3, 3]})"),
               "conv2d", "[S, 6, 5, 4]"});
  c.push_back({"max_pool2d", with(img, R"({"op": "max_pool2d", "inputs": ["x"], "outputs": ["y"], "attrs": {"kernel": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}})"),
               "max_pool2d", "[S, 3, 5, 4]"});
  c.push_back({"avg_pool2d", with(img, R"({"op": "avg_pool2d", "inputs": ["x"], "outputs": ["y"], "attrs": {"kernel": [2, 2], "strides": [2, 2], "ceil_mode": true}})"),
               "avg_pool2d", "[S, 3, 5, 4]"});
  c.push_back({"clip", with(kX3, R"({"op": "clip", "inputs": ["x"], "outputs": ["y"], "attrs": {"min": 0, "max": 6.0}})"), "clip", "[1, S, 8]"});
  c.push_back({"hard_sigmoid", with(kX3, R"({"op": "hard_sigmoid", "inputs": ["x"], "outputs": ["y"], "attrs": {"alpha": 0.25}})"),
               "hard_sigmoid", "[1, S, 8]"});
  c.push_back({"hard_swish", with(kX3, R"({"op": "hard_swish", "inputs": ["x"], "outputs": ["y"]})"), "hard_swish", "[1, S, 8]"});
  c.push_back({"pad", with(img, R"({"op": "pad", "inputs": ["x"], "outputs": ["y"], "attrs": {"pads": [0, 0, 1, 2, 0, 0, 3, -1], "mode": "reflect"}})"),
               "pad", "[S, 3, 13, 9]"});
  c.push_back({"expand", with(R"([{"name": "x", "dtype": "f32", "shape": [1, 8]}, {"name": "z", "dtype": "f32", "shape": ["S", 1]}])",
                              R"({"op": "expand", "inputs": ["x"], "outputs": ["y"], "attrs": {"shape": [2, "S", 8]}})"),
               "expand", "[2, S, 8]"});
  c.push_back({"gather_elements",
               with(R"([{"name": "x", "dtype": "f32", "shape": [1, 16]}, {"name": "i", "dtype": "i64", "shape": [1, "S"]}])",
                    R"({"op": "gather_elements", "inputs": ["x", "i"], "outputs": ["y"], "attrs": {"dim": 1}})"),
               "gather_elements", "[1, S]"});
  c.push_back({"take",
               with(R"([{"name": "x", "dtype": "bool", "shape": ["S", 2]}, {"name": "i", "dtype": "i64", "shape": [3, "S"]}])",
                    R"({"op": "take", "inputs": ["x", "i"], "outputs": ["y"]})"),
               "take", "[3, S]", "bool"});
  // resize: sizes (-1 keeps the symbolic batch) and the scales the transform reads, as text.
  c.push_back({"resize", with(img, R"({"op": "resize", "inputs": ["x"], "outputs": ["y"],
                                      "attrs": {"mode": "cubic", "coordinate_transformation_mode": "align_corners",
                                                "sizes": [-1, 3, 18, 4], "scales": "1,1,2,0.5", "exclude_outside": true}})"),
               "resize", "[S, 3, 18, 4]"});
  c.push_back({"resize_scales", with(img, R"({"op": "resize", "inputs": ["x"], "outputs": ["y"],
                                             "attrs": {"scales": "1,1,1.5,0.6000000238418579"}})"),
               "resize", "[S, 3, 13, 4]"});
  c.push_back({"size", with(kX, R"({"op": "size", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": -2}})"), "size", "[]",
               "i64"});
  // The typed elementwise family (kernels/elementwise_ops.h): each op over inputs of a
  // dtype its rule admits, broadcast to [S, 8], and its output dtype.
  const char* kFloats = R"([{"name": "a", "dtype": "f32", "shape": [1, 8]}, {"name": "b", "dtype": "f32", "shape": ["S", 1]}])";
  const char* kBools = R"([{"name": "a", "dtype": "bool", "shape": [1, 8]}, {"name": "b", "dtype": "bool", "shape": ["S", 1]}])";
  for (const kernels::ElementwiseOp& op : kernels::elementwise_ops()) {
    const bool logical = op.rule == kernels::ElementwiseRule::Logical;
    std::string inputs = op.arity == 1 ? "[\"b\"]" : op.arity == 2 ? "[\"a\", \"b\"]" : "[\"m\", \"a\", \"b\"]";
    std::string attrs = op.rule == kernels::ElementwiseRule::Cast ? R"(, "attrs": {"dtype": "i64"})" : "";
    std::string decl = logical ? kBools : kFloats;
    if (op.rule == kernels::ElementwiseRule::Where) {
      decl = R"([{"name": "m", "dtype": "bool", "shape": ["S", 8]}, {"name": "a", "dtype": "f32", "shape": [1, 8]}, {"name": "b", "dtype": "f32", "shape": ["S", 1]}])";
    }
    const bool to_bool = logical || op.rule == kernels::ElementwiseRule::Compare ||
                         op.rule == kernels::ElementwiseRule::FloatingToBool;
    const std::string dtype = to_bool ? "bool" : op.rule == kernels::ElementwiseRule::Cast ? "i64" : "f32";
    c.push_back({std::string(op.name),
                 with(decl, fmt::format(R"({{"op": "{}", "inputs": {}, "outputs": ["y"]{}}})", op.name, inputs, attrs)),
                 std::string(op.name), op.arity == 1 ? "[S, 1]" : "[S, 8]", dtype});
  }
  return c;
}

// A host conv2d gets its planned workspace as a second output, [batch, per image]: sized by
// the kernels' own rule and placed by the plan like any value, live only for its step.
TEST(OpRoundTrip, HostConvolutionsGetAPlannedWorkspaceOutput) {
  for (const OpCase& c : cases()) {
    if (c.op != "conv2d") continue;
    SCOPED_TRACE(c.name);
    auto rt = round_trip(c.model);
    ASSERT_TRUE(rt.ok()) << rt.status().to_string();
    ASSERT_EQ(rt->producer->outputs.size(), 2u);
    const fb::ValueT* ws = rt->method->values[rt->producer->outputs[1]].get();
    EXPECT_EQ(ws->name, "y#workspace");
    EXPECT_EQ(ws->kind, fb::ValueKind::Planned);
    const std::string shape = btest::shape_of(*rt->method, *ws);
    EXPECT_EQ(shape.rfind("[S, ", 0), 0u) << shape;
  }
}

TEST(OpRoundTrip, EveryOpBuildsAndReadsBackWithItsShape) {
  std::set<std::string> covered;
  for (const OpCase& c : cases()) {
    SCOPED_TRACE(c.name);
    auto rt = round_trip(c.model);
    ASSERT_TRUE(rt.ok()) << rt.status().to_string() << "\n" << c.model.json();
    EXPECT_EQ(rt->producer->op, c.op);
    EXPECT_EQ(rt->producer->kind, fb::InstructionKind::Kernel);
    const fb::ValueT* y = btest::find_value(*rt->method, "y");
    ASSERT_NE(y, nullptr);
    EXPECT_EQ(btest::shape_of(*rt->method, *y), c.shape);
    EXPECT_EQ(format::to_dtype(y->dtype), parse_dtype(c.dtype).value());
    btest::expect_plans_valid(rt->built.program());
    covered.insert(c.op);
  }
  // The op table is the one list of ops: every op in it has a case here.
  for (const kernels::OpInfo& op : kernels::all_ops()) EXPECT_TRUE(covered.contains(std::string(op.name))) << op.name;
}

TEST(OpRoundTrip, AbsentOptionalOperandIsNoValue) {
  auto rt = round_trip(cases()[1].model);
  ASSERT_TRUE(rt.ok()) << rt.status().to_string();
  ASSERT_EQ(rt->producer->inputs.size(), 3u);
  EXPECT_EQ(rt->producer->inputs[2], format::kNoValue);
  EXPECT_EQ(rt->method->values[rt->producer->inputs[1]]->kind, fb::ValueKind::Constant);
}

TEST(OpRoundTrip, AttributesAreEmittedNormalized) {
  auto get = [](const std::string& name) {
    for (OpCase& c : cases()) {
      if (c.name == name) return round_trip(c.model);
    }
    return Result<RoundTrip>(make_error(ErrorCode::NotFound, "no case {}", name));
  };
  {
    auto rt = get("softmax");
    ASSERT_TRUE(rt.ok()) << rt.status().to_string();
    const fb::AttrT* dim = find_attr(*rt->producer, "dim");
    ASSERT_NE(dim, nullptr);
    EXPECT_EQ(dim->type, fb::AttrType::Int);
    EXPECT_EQ(dim->i, 2);
  }
  {
    auto rt = get("permute");
    ASSERT_TRUE(rt.ok()) << rt.status().to_string();
    const fb::AttrT* dims = find_attr(*rt->producer, "dims");
    ASSERT_NE(dims, nullptr);
    EXPECT_EQ(dims->type, fb::AttrType::Ints);
    EXPECT_EQ(dims->ints, (std::vector<int64_t>{0, 2, 1, 3}));
  }
  {
    auto rt = get("slice_static");
    ASSERT_TRUE(rt.ok()) << rt.status().to_string();
    EXPECT_EQ(find_attr(*rt->producer, "start")->i, 2);
    EXPECT_EQ(find_attr(*rt->producer, "end")->i, 6);
  }
  {
    auto rt = get("reshape_named");
    ASSERT_TRUE(rt.ok()) << rt.status().to_string();
    EXPECT_EQ(find_attr(*rt->producer, "shape")->ints, (std::vector<int64_t>{1, -1, 2, 4}));
  }
  {
    auto rt = get("sdpa");
    ASSERT_TRUE(rt.ok()) << rt.status().to_string();
    EXPECT_EQ(find_attr(*rt->producer, "causal")->type, fb::AttrType::Bool);
    EXPECT_EQ(find_attr(*rt->producer, "causal")->i, 1);
    EXPECT_EQ(find_attr(*rt->producer, "scale")->f, 0.5);
  }
  {
    auto rt = get("gelu");
    ASSERT_TRUE(rt.ok()) << rt.status().to_string();
    EXPECT_EQ(find_attr(*rt->producer, "approximate")->type, fb::AttrType::String);
    EXPECT_EQ(find_attr(*rt->producer, "approximate")->s, "tanh");
  }
  {
    auto rt = get("layer_norm");
    ASSERT_TRUE(rt.ok()) << rt.status().to_string();
    EXPECT_EQ(find_attr(*rt->producer, "eps")->type, fb::AttrType::Float);
    EXPECT_DOUBLE_EQ(find_attr(*rt->producer, "eps")->f, 1e-6);
  }
  {
    auto rt = get("rms_norm");  // no eps given: the default is written into the program
    ASSERT_TRUE(rt.ok()) << rt.status().to_string();
    ASSERT_NE(find_attr(*rt->producer, "eps"), nullptr);
    EXPECT_DOUBLE_EQ(find_attr(*rt->producer, "eps")->f, 1e-6);
  }
}

TEST(OpRoundTrip, EmbeddingTakesItsDtypeFromTheTable) {
  OneMethod m = with(R"([{"name": "ids", "dtype": "i32", "shape": ["S"]}])",
                     R"({"op": "embedding", "inputs": ["ids", "table"], "outputs": ["y"]})",
                     R"("table": {"dtype": "f16", "shape": [10, 4]})");
  auto rt = round_trip(m);
  ASSERT_TRUE(rt.ok()) << rt.status().to_string();
  EXPECT_EQ(btest::find_value(*rt->method, "y")->dtype, fb::DType::F16);
}

}  // namespace
}  // namespace planrt::builder
