// The ONNX importer on models written here with ONNX's protobuf classes: what a bad model
// is told (every unsupported op at once, attributes, dims without bounds, external data
// outside the model's folder, initializers whose bytes disagree with their shapes,
// malformed and truncated files), and that what it accepts builds and computes correctly
// (external data, folding of shape computations, the recognised patterns).
#include <gtest/gtest.h>

#include "planrt/format/program_generated.h"
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <fmt/ranges.h>

#include "builder/graph.h"
#include "planrt/builder/builder.h"
#include "planrt/importers/onnx.h"
#include "format/npy.h"
#include "planrt/runtime/module.h"
#include "support/status_matchers.h"

namespace planrt::importers {
namespace {

namespace fs = std::filesystem;
using planrt::testing::IsError;

class OnnxImport : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("planrt_onnx_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    model_.set_ir_version(8);
    auto* opset = model_.add_opset_import();
    opset->set_domain("");
    opset->set_version(14);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ::onnx::GraphProto& graph() { return *model_.mutable_graph(); }

  // A graph input of `elem` with dims (a size, or a dim_param name).
  void input(const std::string& name, std::vector<std::variant<int64_t, std::string>> dims,
             int32_t elem = ::onnx::TensorProto::FLOAT) {
    auto* v = graph().add_input();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    auto* shape = t->mutable_shape();
    for (const auto& d : dims) {
      auto* dim = shape->add_dim();
      if (const auto* n = std::get_if<int64_t>(&d)) {
        dim->set_dim_value(*n);
      } else {
        dim->set_dim_param(std::get<std::string>(d));
      }
    }
  }
  void output(const std::string& name) { graph().add_output()->set_name(name); }
  ::onnx::NodeProto* node(const std::string& op, std::vector<std::string> inputs,
                          std::vector<std::string> outputs, const std::string& name = "") {
    auto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? outputs[0] : name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  ::onnx::TensorProto* initializer(const std::string& name, std::vector<int64_t> dims,
                                   const std::vector<float>& values) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
    return t;
  }
  std::string save(const std::string& file = "model.onnx") {
    const std::string path = (dir_ / file).string();
    std::ofstream out(path, std::ios::binary);
    model_.SerializeToOstream(&out);
    return path;
  }
  void write_file(const std::string& file, const std::string& bytes) {
    std::ofstream out(dir_ / file, std::ios::binary);
    out << bytes;
  }

  // The model built for the CPU, written and loaded.
  Result<Module> built_module(const builder::Model& model) {
    PLANRT_ASSIGN_OR_RETURN(builder::BuiltProgram built, builder::build_program(model));
    const std::string prog = (dir_ / "m.prog").string();
    PLANRT_RETURN_IF_ERROR(built.write(prog));
    return Module::load(prog);
  }

  // Runs the model's method on the CPU with one f32 input.
  std::vector<float> run(const builder::Model& model, const std::vector<float>& x, Shape shape) {
    Result<Module> module = built_module(model);
    EXPECT_TRUE(module.ok()) << module.status().to_string();
    if (!module.ok()) return {};
    Result<Tensor> in = Tensor::from_view(TensorView::contiguous(const_cast<float*>(x.data()), DType::F32, shape));
    const std::vector<TensorView> inputs{in->view()};
    Result<std::vector<Tensor>> out = module->execute("forward", inputs);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    if (!out.ok()) return {};
    const float* y = static_cast<const float*>((*out)[0].data());
    return std::vector<float>(y, y + (*out)[0].view().numel());
  }

  fs::path dir_;
  ::onnx::ModelProto model_;
};

TEST_F(OnnxImport, AFileThatIsNotAModelIsRefused) {
  write_file("junk.onnx", std::string("\xff\xff\xff\xff this is not protobuf", 25));
  EXPECT_TRUE(IsError(read_model_onnx((dir_ / "junk.onnx").string()).status(),
                      ErrorCode::InvalidArgument, {"junk.onnx", "is not an ONNX model"}));
  EXPECT_TRUE(IsError(read_model_onnx((dir_ / "missing.onnx").string()).status(), ErrorCode::NotFound,
                      {"missing.onnx"}));
}

TEST_F(OnnxImport, ATruncatedFileIsRefused) {
  input("x", {int64_t{2}, int64_t{3}});
  initializer("w", {3, 3}, std::vector<float>(9, 0.5f));
  node("MatMul", {"x", "w"}, {"y"});
  output("y");
  const std::string path = save();
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_TRUE(read_model_onnx(path).ok());
  for (size_t keep : {bytes.size() / 2, bytes.size() - 3}) {
    write_file("cut.onnx", bytes.substr(0, keep));
    Status s = read_model_onnx((dir_ / "cut.onnx").string()).status();
    EXPECT_FALSE(s.ok()) << keep;
  }
}

TEST_F(OnnxImport, EveryUnsupportedOpIsListedAtOnce) {
  input("x", {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{8}});
  node("ConvTranspose", {"x", "w"}, {"a"}, "conv_1");
  node("Relu", {"a"}, {"b"});
  node("MyOp", {"b"}, {"y"}, "custom")->set_domain("com.example");
  output("y");
  Status s = read_model_onnx(save()).status();
  EXPECT_TRUE(IsError(s, ErrorCode::NotSupported,
                      {"2 nodes use ops planrt does not import", "'conv_1' (ConvTranspose)",
                       "op ConvTranspose, domain 'ai.onnx', opset 14", "'custom' (MyOp)",
                       "domain 'com.example'"}));
}

TEST_F(OnnxImport, AnUnsupportedAttributeIsNamed) {
  input("x", {int64_t{2}, int64_t{3}});
  auto* n = node("Softmax", {"x"}, {"y"});
  auto* a = n->add_attribute();
  a->set_name("temperature");
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(2.0f);
  output("y");
  EXPECT_TRUE(IsError(read_model_onnx(save()).status(), ErrorCode::NotSupported,
                      {"'y' (Softmax)", "attribute 'temperature' is not supported", "axis"}));
}

// Opsets before 7 are read; what an op meant there and no longer does came with an
// attribute it later lost, which is refused by name.
TEST_F(OnnxImport, AnOldOpsetsFormerMeaningIsRefusedByItsAttribute) {
  model_.mutable_opset_import(0)->set_version(5);
  input("x", {int64_t{2}, int64_t{3}});
  auto* n = node("Relu", {"x"}, {"y"});
  output("y");
  EXPECT_TRUE(read_model_onnx(save()).ok());
  auto* a = n->add_attribute();
  a->set_name("consumed_inputs");
  a->set_type(::onnx::AttributeProto::INTS);
  a->add_ints(0);
  EXPECT_TRUE(IsError(read_model_onnx(save()).status(), ErrorCode::NotSupported,
                      {"'y' (Relu)", "attribute 'consumed_inputs' is not supported"}));
}

TEST_F(OnnxImport, ADimWithoutBoundsNamesTheFlagToPass) {
  input("x", {std::string("batch"), std::string("seq"), int64_t{4}});
  node("Relu", {"x"}, {"y"});
  output("y");
  EXPECT_TRUE(IsError(read_model_onnx(save()).status(), ErrorCode::InvalidArgument,
                      {"'batch' (graph input 'x' dim 0)", "'seq' (graph input 'x' dim 1)",
                       "--dim batch=MIN..MAX --dim seq=MIN..MAX"}));
  OnnxImportOptions o;
  o.dims["batch"] = {1, 2};
  o.dims["seq"] = {1, 16};
  o.dims["other"] = {1, 2};
  EXPECT_TRUE(IsError(read_model_onnx(save(), o).status(), ErrorCode::InvalidArgument,
                      {"--dim names 'other'", "batch, seq"}));
  o.dims.erase("other");
  o.dims["seq"] = {8, 4};
  EXPECT_TRUE(IsError(read_model_onnx(save(), o).status(), ErrorCode::InvalidArgument,
                      {"seq=8..4", "1 <= MIN <= MAX"}));
  o.dims["seq"] = {1, 16};
  EXPECT_TRUE(read_model_onnx(save(), o).ok());
}

TEST_F(OnnxImport, AnInitializerWhoseBytesDisagreeWithItsShapeIsNamed) {
  input("x", {int64_t{2}, int64_t{3}});
  initializer("w", {3, 4}, std::vector<float>(11, 1.0f));
  node("MatMul", {"x", "w"}, {"y"});
  output("y");
  EXPECT_TRUE(IsError(read_model_onnx(save()).status(), ErrorCode::InvalidArgument,
                      {"tensor 'w'", "holds 44 bytes but its shape and type need 48"}));
}

TEST_F(OnnxImport, ExternalDataIsReadFromBesideTheModelAndNowhereElse) {
  input("x", {int64_t{1}, int64_t{2}});
  auto* w = graph().add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->add_dims(2);
  w->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto location = [&](const std::string& where, const std::string& offset = "0") {
    w->clear_external_data();
    auto* kv = w->add_external_data();
    kv->set_key("location");
    kv->set_value(where);
    kv = w->add_external_data();
    kv->set_key("offset");
    kv->set_value(offset);
  };
  node("MatMul", {"x", "w"}, {"y"});
  output("y");
  // 8 junk bytes, then w = [[1, 2], [3, 4]].
  const std::vector<float> values{1, 2, 3, 4};
  write_file("weights.bin", std::string(8, '\0') +
                                std::string(reinterpret_cast<const char*>(values.data()), 16));
  location("weights.bin", "8");
  Result<builder::Model> m = read_model_onnx(save());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(run(*m, {1, 1}, {1, 2}), (std::vector<float>{4, 6}));

  location("weights.bin", "16");
  EXPECT_TRUE(IsError(read_model_onnx(save()).status(), ErrorCode::InvalidArgument,
                      {"tensor 'w'", "runs past the end of 'weights.bin'"}));
  location("../outside.bin");
  EXPECT_TRUE(IsError(read_model_onnx(save()).status(), ErrorCode::InvalidArgument,
                      {"tensor 'w'", "'../outside.bin' lies outside the model's folder"}));
  location("/etc/passwd");
  EXPECT_TRUE(IsError(read_model_onnx(save()).status(), ErrorCode::InvalidArgument,
                      {"'/etc/passwd' is an absolute path"}));
  fs::create_symlink("/etc", dir_ / "escape");
  location("escape/passwd");
  EXPECT_TRUE(IsError(read_model_onnx(save()).status(), ErrorCode::InvalidArgument,
                      {"lies outside the model's folder"}));
  location("absent.bin");
  EXPECT_TRUE(IsError(read_model_onnx(save()).status(), ErrorCode::NotFound, {"absent.bin"}));
}

TEST_F(OnnxImport, AnOpsetOutsideTheRangeIsRefused) {
  model_.mutable_opset_import(0)->set_version(22);
  input("x", {int64_t{2}});
  node("Relu", {"x"}, {"y"});
  output("y");
  EXPECT_TRUE(IsError(read_model_onnx(save()).status(), ErrorCode::NotSupported,
                      {"opset 22", "opsets 1 to 21"}));
}

TEST_F(OnnxImport, AShapeInputComputedAtRunTimeNamesTheFlag) {
  input("x", {int64_t{2}, int64_t{6}});
  input("shape", {int64_t{2}}, ::onnx::TensorProto::INT64);
  node("Reshape", {"x", "shape"}, {"y"});
  output("y");
  EXPECT_TRUE(IsError(read_model_onnx(save()).status(), ErrorCode::InvalidArgument,
                      {"'y' (Reshape)", "'shape'", "is computed at run time", "--input-value"}));
  // Given a value, the input is a constant and the reshape is static.
  ::onnx::TensorProto shape;
  shape.set_data_type(::onnx::TensorProto::INT64);
  shape.add_dims(2);
  shape.add_int64_data(3);
  shape.add_int64_data(4);
  {
    std::ofstream out(dir_ / "shape.pb", std::ios::binary);
    shape.SerializeToOstream(&out);
  }
  OnnxImportOptions o;
  o.input_values["shape"] = (dir_ / "shape.pb").string();
  Result<builder::Model> m = read_model_onnx(save(), o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->graph().methods[0].inputs.size(), 1u);
  o.input_values["nope"] = (dir_ / "shape.pb").string();
  EXPECT_TRUE(IsError(read_model_onnx(save(), o).status(), ErrorCode::InvalidArgument,
                      {"--input-value names 'nope'"}));
}

TEST_F(OnnxImport, ShapeComputationsFoldOverTheDims) {
  // y = reshape(x, concat(shape(x)[0], -1)): [B, 2, 3] -> [B, 6] with B a named dim.
  input("x", {std::string("B"), int64_t{2}, int64_t{3}});
  node("Shape", {"x"}, {"s"});
  auto* zero = node("Constant", {}, {"zero"});
  {
    auto* a = zero->add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(::onnx::TensorProto::INT64);
    a->mutable_t()->add_dims(1);
    a->mutable_t()->add_int64_data(0);
  }
  node("Gather", {"s", "zero"}, {"b"});
  auto* minus = node("Constant", {}, {"minus_one"});
  {
    auto* a = minus->add_attribute();
    a->set_name("value_ints");
    a->set_type(::onnx::AttributeProto::INTS);
    a->add_ints(-1);
  }
  auto* cat = node("Concat", {"b", "minus_one"}, {"target"});
  {
    auto* a = cat->add_attribute();
    a->set_name("axis");
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(0);
  }
  node("Reshape", {"x", "target"}, {"y"});
  output("y");
  OnnxImportOptions o;
  o.dims["B"] = {1, 4};
  Result<builder::Model> m = read_model_onnx(save(), o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const builder::ir::Method& method = m->graph().methods[0];
  ASSERT_EQ(method.nodes.size(), 1u);  // the shape arithmetic left nothing behind
  EXPECT_EQ(method.nodes[0].op, "reshape");
  std::vector<float> x(12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  EXPECT_EQ(run(*m, x, {2, 2, 3}), x);
}

TEST_F(OnnxImport, DecomposedLayerNormAndGeluBecomeTheFusedOps) {
  // y = gelu(layer_norm(x) * w + b) as torch 1.13 exports them.
  input("x", {int64_t{3}, int64_t{4}});
  auto scalar = [&](const std::string& name, float v) { initializer(name, {}, {v}); };
  auto attr_ints = [](::onnx::NodeProto* n, const char* name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  };
  scalar("two", 2.0f);
  scalar("eps", 1e-5f);
  scalar("sqrt2", std::sqrt(2.0f));
  scalar("one", 1.0f);
  scalar("half", 0.5f);
  initializer("w", {4}, {1.0f, 2.0f, 0.5f, -1.0f});
  initializer("b", {4}, {0.1f, 0.2f, 0.3f, 0.4f});
  attr_ints(node("ReduceMean", {"x"}, {"mean"}), "axes", {-1});
  node("Sub", {"x", "mean"}, {"d"});
  node("Pow", {"d", "two"}, {"d2"});
  attr_ints(node("ReduceMean", {"d2"}, {"var"}), "axes", {-1});
  node("Add", {"var", "eps"}, {"ve"});
  node("Sqrt", {"ve"}, {"sd"});
  node("Div", {"d", "sd"}, {"n"});
  node("Mul", {"n", "w"}, {"nw"});
  node("Add", {"nw", "b"}, {"h"});
  node("Div", {"h", "sqrt2"}, {"t"});
  node("Erf", {"t"}, {"e"});
  node("Add", {"e", "one"}, {"a"});
  node("Mul", {"h", "a"}, {"m"});
  node("Mul", {"m", "half"}, {"y"});
  output("y");
  Result<builder::Model> m = read_model_onnx(save());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const builder::ir::Method& method = m->graph().methods[0];
  ASSERT_EQ(method.nodes.size(), 2u);
  EXPECT_EQ(method.nodes[0].op, "layer_norm");
  EXPECT_EQ(method.nodes[1].op, "gelu");
  const std::vector<float> x{1, 2, 3, 4, -1, 0, 1, 5, 0.5f, 0.25f, -2, 3};
  std::vector<float> got = run(*m, x, {3, 4});
  ASSERT_EQ(got.size(), 12u);
  const float w[4] = {1.0f, 2.0f, 0.5f, -1.0f}, b[4] = {0.1f, 0.2f, 0.3f, 0.4f};
  for (int r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < 4; ++i) mean += x[r * 4 + i] / 4.0;
    for (int i = 0; i < 4; ++i) var += (x[r * 4 + i] - mean) * (x[r * 4 + i] - mean) / 4.0;
    for (int i = 0; i < 4; ++i) {
      const double h = (x[r * 4 + i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
      const double want = 0.5 * h * (1 + std::erf(h / std::sqrt(2.0)));
      EXPECT_NEAR(got[r * 4 + i], want, 1e-5) << r << "," << i;
    }
  }
}

TEST_F(OnnxImport, TiedWeightsAreStoredOnceHoweverTheyAreReached) {
  // Three MatMuls over one weight: the initializer, the initializer through Identity (how
  // torch writes layers cloned from one module), and a second initializer of equal bytes.
  // Each is transposed for planrt's linear; the program stores that transpose once.
  input("x", {int64_t{2}, int64_t{3}});
  const std::vector<float> w{0.5f, -1, 2, 0.25f, 1, -0.5f, 3, 0, 1.5f};
  initializer("w", {3, 3}, w);
  initializer("w_copy", {3, 3}, w);
  node("Identity", {"w"}, {"w_alias"});
  node("MatMul", {"x", "w"}, {"h1"});
  node("MatMul", {"h1", "w_alias"}, {"h2"});
  node("MatMul", {"h2", "w_copy"}, {"y"});
  output("y");
  Result<builder::Model> m = read_model_onnx(save());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  Result<builder::BuiltProgram> built = builder::build_program(*m);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  EXPECT_EQ(built->num_constants(), 1u);
  EXPECT_EQ(built->constants_bytes(), 9u * sizeof(float));
  const std::vector<float> x{1, 2, 3, -1, 0.5f, 4};
  std::vector<float> got = run(*m, x, {2, 3});
  ASSERT_EQ(got.size(), 6u);
  for (int r = 0; r < 2; ++r) {
    std::vector<double> h(x.begin() + r * 3, x.begin() + r * 3 + 3);
    for (int pass = 0; pass < 3; ++pass) {
      std::vector<double> next(3, 0.0);
      for (int j = 0; j < 3; ++j) {
        for (int k = 0; k < 3; ++k) next[j] += h[k] * w[k * 3 + j];
      }
      h = next;
    }
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(got[r * 3 + j], h[j], 1e-4 * std::max(1.0, std::fabs(h[j]))) << r << "," << j;
  }
}

// What transformers 5 writes around attention over padded batches, computed at run time:
// IsNaN guarding a fully masked row, Where on a bool mask, Cast of an integer mask, and a
// comparison of run-time integers, on a bool graph input and an int64 one.
TEST_F(OnnxImport, RunTimeBoolAndIntegerValuesComputeAsOnnxSays) {
  input("x", {std::string("B"), int64_t{4}});
  input("keep", {std::string("B"), int64_t{4}}, ::onnx::TensorProto::BOOL);
  input("ids", {std::string("B"), int64_t{4}}, ::onnx::TensorProto::INT64);
  initializer("zero", {}, {0.0f});
  node("IsNaN", {"x"}, {"nan"});
  node("Where", {"nan", "zero", "x"}, {"clean"});
  node("Not", {"keep"}, {"drop"});
  node("Where", {"drop", "zero", "clean"}, {"kept"});
  node("Equal", {"ids", "ids"}, {"same"});  // all true at run time
  node("Cast", {"same"}, {"one"})->add_attribute()->CopyFrom([] {
    ::onnx::AttributeProto a;
    a.set_name("to");
    a.set_type(::onnx::AttributeProto::INT);
    a.set_i(::onnx::TensorProto::FLOAT);
    return a;
  }());
  node("Mul", {"kept", "one"}, {"y"});
  output("y");
  OnnxImportOptions o;
  o.dims["B"] = {1, 4};
  Result<builder::Model> m = read_model_onnx(save(), o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::set<std::string> ops;
  for (const auto& n : m->graph().methods[0].nodes) ops.insert(n.op);
  for (const char* op : {"isnan", "where", "logical_not", "equal", "cast", "mul"}) {
    EXPECT_TRUE(ops.contains(op)) << op << " in " << fmt::format("{}", fmt::join(ops, ", "));
  }
  Result<Module> module = built_module(*m);
  ASSERT_TRUE(module.ok()) << module.status().to_string();
  std::vector<float> x{1, NAN, 3, 4, -1, -2, NAN, -4};
  std::vector<uint8_t> keep{1, 1, 0, 1, 1, 0, 1, 1};
  std::vector<int64_t> ids{5, 6, 7, 8, 1, 2, 3, 4};
  Result<Tensor> tx = Tensor::from_view(TensorView::contiguous(x.data(), DType::F32, {2, 4}));
  Result<Tensor> tk = Tensor::from_view(TensorView::contiguous(keep.data(), DType::Bool, {2, 4}));
  Result<Tensor> ti = Tensor::from_view(TensorView::contiguous(ids.data(), DType::I64, {2, 4}));
  const std::vector<TensorView> inputs{tx->view(), tk->view(), ti->view()};
  Result<std::vector<Tensor>> out = module->execute("forward", inputs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const float* y = static_cast<const float*>((*out)[0].data());
  EXPECT_EQ(std::vector<float>(y, y + 8), (std::vector<float>{1, 0, 0, 4, -1, 0, 0, -4}));
  // A Where whose condition is not bool is refused by name.
  graph().mutable_node(1)->set_input(0, "x");
  EXPECT_TRUE(IsError(read_model_onnx(save(), o).status(), ErrorCode::InvalidArgument,
                      {"'clean' (Where)", "condition is float, not bool"}));
}

TEST_F(OnnxImport, ReductionsOverAnyAxesHardmaxAndCumSumComputeAsOnnxSays) {
  auto attr_ints = [](::onnx::NodeProto* n, const char* name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  };
  auto attr_int = [](::onnx::NodeProto* n, const char* name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  };
  input("x", {int64_t{2}, int64_t{3}, int64_t{4}});
  input("ids", {int64_t{2}, int64_t{3}}, ::onnx::TensorProto::INT64);
  ::onnx::TensorProto* axes = graph().add_initializer();
  axes->set_name("axes");
  axes->set_data_type(::onnx::TensorProto::INT64);
  axes->add_dims(2);
  axes->add_int64_data(0);
  axes->add_int64_data(2);
  ::onnx::TensorProto* one = graph().add_initializer();
  one->set_name("one");
  one->set_data_type(::onnx::TensorProto::INT64);
  one->add_int64_data(1);
  node("ReduceSum", {"x", "axes"}, {"sum"});                       // axes 0 and 2: not adjacent, kept
  auto* max = node("ReduceMax", {"x"}, {"max"});                  // the same, dropped
  attr_ints(max, "axes", {2, 0});
  attr_int(max, "keepdims", 0);
  node("Hardmax", {"x"}, {"hot"});
  auto* lse = node("ReduceLogSumExp", {"x"}, {"lse"});
  attr_ints(lse, "axes", {1});
  attr_int(lse, "keepdims", 0);
  attr_int(node("CumSum", {"ids", "one"}, {"running"}), "exclusive", 1);
  for (const char* o : {"sum", "max", "hot", "lse", "running"}) output(o);
  Result<builder::Model> m = read_model_onnx(save(), {});
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  Result<builder::BuiltProgram> built = builder::build_program(*m);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  const std::string prog = (dir_ / "r.prog").string();
  ASSERT_TRUE(built->write(prog).ok());
  Result<Module> module = Module::load(prog);
  ASSERT_TRUE(module.ok()) << module.status().to_string();
  // x[b, s, f] = 10 b + (f == 2 ? 5 : f) - s: each row's largest at f = 2.
  std::vector<float> x(24);
  for (int b = 0; b < 2; ++b) {
    for (int s2 = 0; s2 < 3; ++s2) {
      for (int f = 0; f < 4; ++f) x[(b * 3 + s2) * 4 + f] = static_cast<float>(10 * b + (f == 2 ? 5 : f) - s2);
    }
  }
  std::vector<int64_t> ids{1, 2, 3, 4, 5, 6};
  Result<Tensor> tx = Tensor::from_view(TensorView::contiguous(x.data(), DType::F32, {2, 3, 4}));
  Result<Tensor> ti = Tensor::from_view(TensorView::contiguous(ids.data(), DType::I64, {2, 3}));
  const std::vector<TensorView> inputs{tx->view(), ti->view()};
  Result<std::vector<Tensor>> out = module->execute("forward", inputs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  auto floats = [&](size_t i) {
    const auto* p = static_cast<const float*>((*out)[i].data());
    return std::vector<float>(p, p + (*out)[i].view().numel());
  };
  EXPECT_EQ((*out)[0].view().sizes, (Shape{1, 3, 1}));
  std::vector<float> sum(3, 0.0f), largest(3, -1e9f);
  for (int b = 0; b < 2; ++b) {
    for (int s2 = 0; s2 < 3; ++s2) {
      for (int f = 0; f < 4; ++f) {
        sum[s2] += x[(b * 3 + s2) * 4 + f];
        largest[s2] = std::max(largest[s2], x[(b * 3 + s2) * 4 + f]);
      }
    }
  }
  EXPECT_EQ(floats(0), sum);
  EXPECT_EQ((*out)[1].view().sizes, (Shape{3}));
  EXPECT_EQ(floats(1), largest);
  const std::vector<float> hot = floats(2);
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(std::vector<float>(hot.begin() + r * 4, hot.begin() + r * 4 + 4), (std::vector<float>{0, 0, 1, 0})) << r;
  }
  EXPECT_EQ((*out)[3].view().sizes, (Shape{2, 4}));
  const std::vector<float> log_sum_exp = floats(3);
  for (int b = 0; b < 2; ++b) {
    for (int f = 0; f < 4; ++f) {
      double e = 0;
      for (int s2 = 0; s2 < 3; ++s2) e += std::exp(static_cast<double>(x[(b * 3 + s2) * 4 + f]));
      EXPECT_NEAR(log_sum_exp[b * 4 + f], std::log(e), 1e-5) << b << " " << f;
    }
  }
  const auto* running = static_cast<const int64_t*>((*out)[4].data());
  EXPECT_EQ(std::vector<int64_t>(running, running + 6), (std::vector<int64_t>{0, 1, 3, 0, 4, 9}));
}

// softmax(q k^T * scale + mask) v with the masks exporters write becomes one attention with a
// mask input (no score tensor): transformers' where(keep, 0, lowest) with its IsNaN guard,
// the inverted where(drop, lowest, 0), and an additive float mask; a mask the attention
// cannot take as it is (a bias per query row, [S, 1]: its last dim is not the keys) keeps
// the decomposed form. Each computes what ONNX says, padded keys weighing nothing.
TEST_F(OnnxImport, AttentionMasksAsExportersWriteThemRunInsideTheAttention) {
  constexpr int64_t kB = 2, kH = 2, kS = 5, kD = 4;
  enum class Form { KeepWhereGuarded, DropWhere, Additive, Unfusable };
  for (Form form : {Form::KeepWhereGuarded, Form::DropWhere, Form::Additive, Form::Unfusable}) {
    SCOPED_TRACE(static_cast<int>(form));
    model_.mutable_graph()->Clear();
    for (const char* name : {"q", "k", "v"}) input(name, {std::string("B"), kH, std::string("S"), kD});
    if (form == Form::Additive) {
      input("bias", {std::string("B"), int64_t{1}, int64_t{1}, std::string("S")});
    } else if (form == Form::Unfusable) {
      input("bias", {std::string("S"), int64_t{1}});
    } else {
      input("keep", {std::string("B"), std::string("S")}, ::onnx::TensorProto::BOOL);
    }
    ::onnx::TensorProto* axes = graph().add_initializer();
    axes->set_name("axes");
    axes->set_data_type(::onnx::TensorProto::INT64);
    axes->add_dims(2);
    const int64_t axes_values[2] = {1, 2};
    axes->set_raw_data(std::string(reinterpret_cast<const char*>(axes_values), sizeof(axes_values)));
    initializer("zero", {}, {0.0f});
    initializer("lowest", {}, {-3.4028235e38f});
    initializer("scale", {}, {0.5f});
    node("Transpose", {"k"}, {"kt"})->add_attribute()->CopyFrom([] {
      ::onnx::AttributeProto a;
      a.set_name("perm");
      a.set_type(::onnx::AttributeProto::INTS);
      for (int64_t x : {0, 1, 3, 2}) a.add_ints(x);
      return a;
    }());
    node("MatMul", {"q", "kt"}, {"qk"});
    node("Mul", {"qk", "scale"}, {"scores"});
    std::string mask = "bias";
    if (form == Form::KeepWhereGuarded || form == Form::DropWhere) {
      node("Unsqueeze", {"keep"}, {"keep4"});
      graph().mutable_node(graph().node_size() - 1)->add_input("axes");
      if (form == Form::KeepWhereGuarded) {
        node("Where", {"keep4", "zero", "lowest"}, {"mask"});
      } else {
        node("Not", {"keep4"}, {"drop4"});
        node("Where", {"drop4", "lowest", "zero"}, {"mask"});
      }
      mask = "mask";
    }
    node("Add", {"scores", mask}, {"masked"});
    node("Softmax", {"masked"}, {"p"})->add_attribute()->CopyFrom([] {
      ::onnx::AttributeProto a;
      a.set_name("axis");
      a.set_type(::onnx::AttributeProto::INT);
      a.set_i(-1);
      return a;
    }());
    std::string weights = "p";
    if (form == Form::KeepWhereGuarded) {
      node("IsNaN", {"p"}, {"nan"});
      node("Where", {"nan", "zero", "p"}, {"guarded"});
      weights = "guarded";
    }
    node("MatMul", {weights, "v"}, {"y"});
    output("y");
    OnnxImportOptions o;
    o.dims["B"] = {1, kB};
    o.dims["S"] = {1, 8};
    Result<builder::Model> m = read_model_onnx(save(), o);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    std::set<std::string> ops;
    size_t attention_inputs = 0;
    for (const auto& n : m->graph().methods[0].nodes) {
      ops.insert(n.op);
      if (n.op == "scaled_dot_product_attention") attention_inputs = n.inputs.size();
    }
    const std::string listed = fmt::format("{}", fmt::join(ops, ", "));
    if (form == Form::Unfusable) {
      EXPECT_TRUE(ops.contains("softmax")) << listed;
    } else {
      EXPECT_FALSE(ops.contains("softmax")) << listed;
      EXPECT_EQ(attention_inputs, 4u) << listed;
    }
    // Run it: batch 0 keeps every key, batch 1 its first two.
    Result<Module> module = built_module(*m);
    ASSERT_TRUE(module.ok()) << module.status().to_string();
    std::vector<float> q(kB * kH * kS * kD), k(q.size()), v(q.size());
    for (size_t i = 0; i < q.size(); ++i) {
      q[i] = std::sin(0.7 * i), k[i] = std::cos(0.3 * i), v[i] = std::sin(0.11 * i + 1);
    }
    std::vector<uint8_t> keep(kB * kS, 1);
    for (int64_t j = 2; j < kS; ++j) keep[kS + j] = 0;
    // The additive forms: 0 / -1e9 by batch and key ([B,1,1,S]), or by query row ([S, 1]).
    std::vector<float> bias(form == Form::Unfusable ? kS : kB * kS);
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = form == Form::Unfusable ? 0.3f * i : (keep[i] ? 0.0f : -1e9f);
    const Shape qs{kB, kH, kS, kD};
    std::vector<Tensor> held;
    auto hold = [&](void* data, DType dtype, const Shape& shape) {
      Result<Tensor> t = Tensor::from_view(TensorView::contiguous(data, dtype, shape));
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      held.push_back(std::move(*t));
    };
    for (std::vector<float>* t : {&q, &k, &v}) hold(t->data(), DType::F32, qs);
    if (form == Form::Additive) {
      hold(bias.data(), DType::F32, {kB, 1, 1, kS});
    } else if (form == Form::Unfusable) {
      hold(bias.data(), DType::F32, {kS, 1});
    } else {
      hold(keep.data(), DType::Bool, {kB, kS});
    }
    std::vector<TensorView> inputs;
    for (const Tensor& t : held) inputs.push_back(t.view());
    Result<std::vector<Tensor>> out = module->execute("forward", inputs);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const float* y = static_cast<const float*>((*out)[0].data());
    for (int64_t b = 0; b < kB; ++b) {
      for (int64_t h = 0; h < kH; ++h) {
        for (int64_t i = 0; i < kS; ++i) {
          const int64_t head = (b * kH + h) * kS;
          std::vector<double> w(kS);
          double mx = -INFINITY, sum = 0;
          for (int64_t j = 0; j < kS; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < kD; ++d) dot += q[(head + i) * kD + d] * k[(head + j) * kD + d];
            const double add = form == Form::Unfusable ? bias[i] : keep[b * kS + j] ? 0.0 : -1e30;
            w[j] = 0.5 * dot + add;
            mx = std::max(mx, w[j]);
          }
          for (double& e : w) sum += (e = std::exp(e - mx));
          for (int64_t d = 0; d < kD; ++d) {
            double want = 0;
            for (int64_t j = 0; j < kS; ++j) want += w[j] / sum * v[(head + j) * kD + d];
            EXPECT_NEAR(y[(head + i) * kD + d], want, 1e-5) << b << "," << h << "," << i << "," << d;
          }
        }
      }
    }
  }
}

// The losses (ops_loss.cpp) name what they take; their results are ONNX's node tests'.
TEST_F(OnnxImport, LossesThatCannotBeComputedSayWhatTheyTake) {
  auto set_reduction = [](::onnx::NodeProto* n, const std::string& r) {
    auto* a = n->add_attribute();
    a->set_name("reduction");
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(r);
  };
  struct Case {
    std::vector<std::variant<int64_t, std::string>> target_dims;
    int32_t target_elem;
    std::string reduction;
    std::string_view says, and_says;
  };
  const std::vector<Case> cases{
      {{int64_t{3}}, ::onnx::TensorProto::INT64, "average", "reduction is 'average'", "\"mean\""},
      {{int64_t{3}}, ::onnx::TensorProto::FLOAT, "mean", "target is float", "int64 or int32"},
      {{int64_t{3}, int64_t{2}}, ::onnx::TensorProto::INT64, "mean", "target [N, d...]", "ranks 2 and 2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    model_.mutable_graph()->Clear();
    input("x", {int64_t{3}, int64_t{4}});
    input("t", c.target_dims, c.target_elem);
    set_reduction(node("NegativeLogLikelihoodLoss", {"x", "t"}, {"loss"}), c.reduction);
    output("loss");
    EXPECT_TRUE(IsError(read_model_onnx(save()).status(), ErrorCode::InvalidArgument, {c.says, c.and_says}));
  }
}

// The ops built from layout ops (ops_layout.cpp) name what they cannot take; their results
// are ONNX's node tests'.
TEST_F(OnnxImport, LayoutOpsThatCannotBeBuiltSayWhy) {
  auto attr_int = [](::onnx::NodeProto* n, const char* name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  };
  auto ints = [&](const std::string& name, std::vector<int64_t> values) {
    ::onnx::TensorProto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 8));
  };
  struct Case {
    std::string why;
    std::function<void()> make;
    std::string_view says;
  };
  const std::vector<Case> cases{
      {"blocksize 0", [&] { attr_int(node("DepthToSpace", {"x"}, {"y"}), "blocksize", 0); }, "blocksize is 0"},
      {"channels", [&] { attr_int(node("DepthToSpace", {"x"}, {"y"}), "blocksize", 3); }, "blocksize^2 = 9"},
      {"space", [&] { attr_int(node("SpaceToDepth", {"x"}, {"y"}), "blocksize", 4); }, "multiples of blocksize 4"},
      {"repeats", [&] { ints("r", {2, 2}); node("Tile", {"x", "r"}, {"y"}); }, "repeats has 2 entries"},
      {"eye", [&] { node("EyeLike", {"x"}, {"y"}); }, "takes a 2-D tensor"},
      {"depth", [&] { ints("d", {0}); ints("v", {0, 1}); node("OneHot", {"i", "d", "v"}, {"y"}); }, "depth must be one positive"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    model_.mutable_graph()->Clear();
    input("x", {int64_t{1}, int64_t{8}, int64_t{6}, int64_t{6}});
    input("i", {int64_t{3}}, ::onnx::TensorProto::INT64);
    c.make();
    output("y");
    Status s = read_model_onnx(save()).status();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s.to_string();
  }
}

// Einsum (ops_einsum.cpp) against a direct sum over every assignment of the letters, for
// the contractions models write: batched products, attention scores, transposes, sums,
// "..." and three operands; a diagonal is refused by name.
TEST_F(OnnxImport, EinsumComputesEveryContractionAsWritten) {
  struct Case {
    std::string equation;
    std::vector<std::vector<int64_t>> shapes;
  };
  const std::vector<Case> cases{
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
      {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}},
      {"i,i", {{6}, {6}}},
      {"ij->ji", {{3, 4}}},
      {"ij->i", {{3, 4}}},
      {"ij", {{3, 4}}},
      {"ji", {{3, 4}}},
      {"...ij,...jk->...ik", {{2, 3, 2, 4}, {2, 3, 4, 3}}},
      {"abc,cd,de->abe", {{2, 3, 4}, {4, 5}, {5, 2}}},
      {"ij,ij->ij", {{3, 4}, {3, 4}}},
      {"ij,jk", {{3, 4}, {4, 2}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.equation);
    model_.mutable_graph()->Clear();
    std::vector<std::string> names;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      names.push_back(fmt::format("x{}", i));
      std::vector<std::variant<int64_t, std::string>> dims(c.shapes[i].begin(), c.shapes[i].end());
      input(names.back(), dims);
    }
    ::onnx::NodeProto* n = node("Einsum", names, {"y"});
    auto* a = n->add_attribute();
    a->set_name("equation");
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(c.equation);
    output("y");
    Result<builder::Model> m = read_model_onnx(save());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    Result<Module> module = built_module(*m);
    ASSERT_TRUE(module.ok()) << module.status().to_string();
    // Inputs, and the letters of each term ("..." as the letters A, B, ...).
    std::vector<std::vector<float>> data;
    std::vector<Tensor> held;
    std::vector<TensorView> views;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      int64_t count = 1;
      for (int64_t d : c.shapes[i]) count *= d;
      data.emplace_back(static_cast<size_t>(count));
      for (int64_t j = 0; j < count; ++j) data.back()[j] = std::sin(1.3 * j + static_cast<double>(i));
    }
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      Result<Tensor> t = Tensor::from_view(TensorView::contiguous(data[i].data(), DType::F32, *Shape::from(c.shapes[i])));
      ASSERT_TRUE(t.ok());
      held.push_back(std::move(*t));
    }
    for (const Tensor& t : held) views.push_back(t.view());
    Result<std::vector<Tensor>> out = module->execute("forward", views);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const std::string eq = c.equation;
    const size_t arrow = eq.find("->");
    std::vector<std::string> terms;
    std::string lhs = eq.substr(0, arrow);
    for (size_t start = 0;;) {
      const size_t comma = lhs.find(',', start);
      terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    auto expand = [](std::string t, size_t rank) {
      const size_t at = t.find("...");
      if (at == std::string::npos) return t;
      const size_t unnamed = rank - (t.size() - 3);
      return t.substr(0, at) + std::string("ABCDEFGH").substr(8 - unnamed) + t.substr(at + 3);
    };
    std::map<char, int64_t> size;
    size_t ellipsis = 0;
    for (size_t i = 0; i < terms.size(); ++i) {
      if (terms[i].find("...") != std::string::npos) ellipsis = std::max(ellipsis, c.shapes[i].size() - (terms[i].size() - 3));
      terms[i] = expand(terms[i], c.shapes[i].size());
      for (size_t d = 0; d < terms[i].size(); ++d) size[terms[i][d]] = c.shapes[i][d];
    }
    std::string result;
    if (arrow != std::string::npos) {
      result = eq.substr(arrow + 2);
      const size_t at = result.find("...");
      if (at != std::string::npos) result = result.substr(0, at) + std::string("ABCDEFGH").substr(8 - ellipsis) + result.substr(at + 3);
    } else {
      std::map<char, int> count;
      for (const std::string& t : terms) {
        for (char l : t) ++count[l];
      }
      for (const auto& [l, k] : count) {
        if (k == 1) result += l;
      }
    }
    std::string letters;
    for (const auto& [l, n] : size) letters += l;
    int64_t out_count = 1;
    for (char l : result) out_count *= size[l];
    std::vector<double> want(static_cast<size_t>(out_count), 0.0);
    std::map<char, int64_t> at;
    std::function<void(size_t)> walk = [&](size_t li) {
      if (li == letters.size()) {
        double p = 1;
        for (size_t i = 0; i < terms.size(); ++i) {
          int64_t flat = 0;
          for (char l : terms[i]) flat = flat * size[l] + at[l];
          p *= data[i][static_cast<size_t>(flat)];
        }
        int64_t flat = 0;
        for (char l : result) flat = flat * size[l] + at[l];
        want[static_cast<size_t>(flat)] += p;
        return;
      }
      for (at[letters[li]] = 0; at[letters[li]] < size[letters[li]]; ++at[letters[li]]) walk(li + 1);
    };
    walk(0);
    ASSERT_EQ((*out)[0].view().numel(), out_count);
    const float* y = static_cast<const float*>((*out)[0].data());
    for (int64_t i = 0; i < out_count; ++i) EXPECT_NEAR(y[i], want[static_cast<size_t>(i)], 1e-4) << i;
  }
  // A diagonal is refused by name.
  model_.mutable_graph()->Clear();
  input("x", {int64_t{3}, int64_t{3}});
  ::onnx::NodeProto* n = node("Einsum", {"x"}, {"y"});
  auto* a = n->add_attribute();
  a->set_name("equation");
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s("ii->i");
  output("y");
  EXPECT_TRUE(IsError(read_model_onnx(save()).status(), ErrorCode::NotSupported, {"'ii'", "diagonal"}));
}

// A graph output declared with another type or fixed size than the graph computes is refused
// (ONNX Runtime refuses it too); planrt does not convert to the declaration.
TEST_F(OnnxImport, AGraphOutputDeclaredOtherThanComputedIsRefused) {
  auto declare = [&](int32_t elem, std::vector<int64_t> dims) {
    model_.mutable_graph()->Clear();
    input("x", {int64_t{2}, int64_t{3}});
    node("Relu", {"x"}, {"y"});
    auto* o = graph().add_output();
    o->set_name("y");
    auto* t = o->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
    return read_model_onnx(save()).status();
  };
  EXPECT_TRUE(declare(::onnx::TensorProto::FLOAT, {2, 3}).ok());
  EXPECT_TRUE(declare(::onnx::TensorProto::FLOAT, {0, 3}).ok());  // 0: a dim of unknown size
  EXPECT_TRUE(IsError(declare(::onnx::TensorProto::INT32, {2, 3}), ErrorCode::InvalidArgument,
                      {"graph output 'y' is declared int32 but the graph computes float"}));
  EXPECT_TRUE(IsError(declare(::onnx::TensorProto::FLOAT, {7, 7}), ErrorCode::InvalidArgument,
                      {"graph output 'y' is declared with dim 0 of size 7", "[2, 3]"}));
  EXPECT_TRUE(IsError(declare(::onnx::TensorProto::FLOAT, {6}), ErrorCode::InvalidArgument, {"rank 1"}));
}

// Concat's axis is checked where the import folds it too: over shapes (symbolic vectors)
// and over constants, as where it runs.
TEST_F(OnnxImport, AConcatAxisOutOfRangeIsRefusedWhereverItIsComputed) {
  for (bool over_shapes : {true, false}) {
    SCOPED_TRACE(over_shapes);
    model_.mutable_graph()->Clear();
    input("x", {std::string("S"), int64_t{4}});
    if (over_shapes) {
      node("Shape", {"x"}, {"a"});
    } else {
      initializer("a", {2}, {1.0f, 2.0f});
    }
    ::onnx::NodeProto* n = node("Concat", {"a", "a"}, {"y"});
    auto* axis = n->add_attribute();
    axis->set_name("axis");
    axis->set_type(::onnx::AttributeProto::INT);
    axis->set_i(99);
    output("y");
    OnnxImportOptions o;
    o.dims["S"] = {1, 4};
    EXPECT_TRUE(IsError(read_model_onnx(save(), o).status(), ErrorCode::InvalidArgument, {"'y' (Concat)", "axis 99"}));
  }
}

TEST_F(OnnxImport, APartitionNeedingAGpuOnTheHostIsRefused) {
  input("x", {int64_t{2}});
  node("Relu", {"x"}, {"y"});
  output("y");
  OnnxImportOptions o;
  o.partition = "cuda";
  o.device = "cpu";
  EXPECT_TRUE(IsError(read_model_onnx(save(), o).status(), ErrorCode::InvalidArgument,
                      {"partition 'cuda' makes cuda segments", "device is 'cpu'"}));
  o.partition = "sideways";
  EXPECT_TRUE(IsError(read_model_onnx(save(), o).status(), ErrorCode::InvalidArgument,
                      {"partition 'sideways'", "engine-per-block"}));
}

}  // namespace
}  // namespace planrt::importers

namespace planrt::importers {
namespace {

namespace fs = std::filesystem;

// A 1-block pre-norm encoder exported by torch 2.11's TorchScript exporter (on the GPU
// machine; CI's torch is 1.13), with its input and torch's output (tests/data/onnx). torch
// 2.x writes the packed QKV split as linear -> reshape [1, S, B, 3, E] -> permute ->
// reshape [3, S, B, E] -> slices of dim 0: the import turns it into three linears over
// the weight's row blocks, with no slice left, and computes what torch computed.
TEST(OnnxImportTorch2, ThePackedQkvSplitThroughLayoutOpsBecomesThreeLinears) {
  const char* data = std::getenv("PLANRT_TEST_DATA");
  ASSERT_NE(data, nullptr) << "PLANRT_TEST_DATA is set by ctest";
  const fs::path dir = fs::path(data) / "onnx";
  OnnxImportOptions o;
  o.dims["S"] = {16, 16};
  Result<builder::Model> m = read_model_onnx((dir / "encoder_torch2_export.onnx").string(), o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  int linears = 0, slices = 0;
  for (const auto& n : m->graph().methods[0].nodes) {
    linears += n.op == "linear";
    slices += n.op == "slice";
  }
  EXPECT_EQ(linears, 6);  // q, k, v, the output projection, two FFN layers
  EXPECT_EQ(slices, 0);
  Result<format::HostTensor> x = format::read_npy((dir / "encoder_torch2_x.npy").string());
  Result<format::HostTensor> y = format::read_npy((dir / "encoder_torch2_y.npy").string());
  ASSERT_TRUE(x.ok() && y.ok());
  Result<builder::BuiltProgram> built = builder::build_program(*m);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  // The head split ([S, B * H, D] transposed, viewed as [B, H, S, D]) and merge (permute(2,
  // 0, 1, 3)) of the unit batch: read and written in place by the attention (rewrite.h), so
  // no permute is left and q, k, v are one packed product.
  int permutes = 0, packed = 0;
  for (const auto& ins : built->program().methods[0]->instructions) {
    permutes += ins->op == "permute";
    for (uint32_t id : ins->outputs) packed += built->program().methods[0]->values[id]->name.ends_with("#qkv");
  }
  EXPECT_EQ(permutes, 0);
  EXPECT_EQ(packed, 1);
  Result<std::vector<uint8_t>> bytes = built->serialize();
  ASSERT_TRUE(bytes.ok());
  Result<Module> module = Module::load_bytes(std::move(bytes).value());
  ASSERT_TRUE(module.ok()) << module.status().to_string();
  const std::vector<TensorView> inputs{x->view()};
  Result<std::vector<Tensor>> out = module->execute("forward", inputs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const auto* got = static_cast<const float*>((*out)[0].data());
  const auto* want = reinterpret_cast<const float*>(y->data.data());
  const size_t n = y->data.size() / 4;
  ASSERT_EQ(static_cast<size_t>((*out)[0].numel()), n);
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < n; ++i) {
    max_err = std::max(max_err, static_cast<double>(std::fabs(got[i] - want[i])));
    max_ref = std::max(max_ref, static_cast<double>(std::fabs(want[i])));
  }
  EXPECT_LE(max_err / max_ref, 1e-5);
}

// torch 2.11's dynamo exporter names nodes "node_linear" and so on, with no module path; its
// metadata "pkg.torch.onnx.name_scopes" holds the path ("['', 'enc', 'enc.layers.0', ...]").
// engine-per-block finds the blocks there (the node's own name, e.g. 'add_9', is not one),
// and each block then lowers as the template's: one packed q|k|v product, no permute.
TEST(OnnxImportTorch2, TheDynamoExportsBlocksComeFromItsNameScopes) {
  const char* data = std::getenv("PLANRT_TEST_DATA");
  ASSERT_NE(data, nullptr) << "PLANRT_TEST_DATA is set by ctest";
  const fs::path dir = fs::path(data) / "onnx" / "dynamo";
  for (const char* model : {"bert_like.onnx", "encoder_seq_first_gelu.onnx"}) {
    SCOPED_TRACE(model);
    OnnxImportOptions o;
    o.dims["b"] = {1, 4};
    o.dims["s"] = {1, 32};
    o.partition = "engine-per-block";
    o.device = "cpu";
    Result<builder::Model> m = read_model_onnx((dir / model).string(), o);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    std::set<std::string> segments;
    for (const auto& n : m->graph().methods[0].nodes) segments.insert(n.segment);
    EXPECT_TRUE(segments.contains("block0") && segments.contains("block1")) << fmt::format("{}", fmt::join(segments, ", "));
    EXPECT_FALSE(segments.contains("block2"));  // two encoder layers, nothing else a block
    Result<builder::BuiltProgram> built = builder::build_program(*m);
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    int permutes = 0, packed = 0, steps = 0;
    for (const auto& seg : built->program().methods[0]->segments) {  // the engines' own graphs
      ASSERT_FALSE(seg->blob.empty()) << seg->name;
      const fb::Graph* g = flatbuffers::GetRoot<fb::Graph>(seg->blob.data());
      for (const fb::Instruction* ins : *g->instructions()) {
        ++steps;
        permutes += ins->op()->string_view() == "permute";
        for (uint32_t id : *ins->outputs()) packed += g->values()->Get(id)->name()->string_view().ends_with("#qkv");
      }
    }
    EXPECT_GT(steps, 0);
    EXPECT_EQ(permutes, 0);
    EXPECT_EQ(packed, 2);
  }
}

}  // namespace
}  // namespace planrt::importers
