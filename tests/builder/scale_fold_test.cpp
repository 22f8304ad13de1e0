// fold_scales_into_linears (builder/scale_fold.h): a constant per-feature scale after a
// linear goes into its weight and bias, with the products rounded once; every condition
// that leaves the multiply as written.
#include "builder/scale_fold.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "builder/builder_test_util.h"
#include "builder/check.h"
#include "builder/rewrite.h"
#include "ir_test_util.h"
#include "planrt/core/dtype.h"

namespace planrt::builder {
namespace {

using btest::node;
using btest::ops;

// x [2, 3, 4] -> h = linear(x, w [5, 4], b [5]) -> y = mul(h, s): the shape of s, its side
// and the dtype vary per test.
struct ScaleModel {
  ir::Model model;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> storage;

  explicit ScaleModel(std::vector<int64_t> scale_shape, DType dtype = DType::F32, bool scale_first = false) {
    add("w", {5, 4}, dtype, [](int64_t i) { return 0.25f * static_cast<float>(i) - 2.0f; });
    add("b", {5}, dtype, [](int64_t i) { return 1.0f + 0.5f * static_cast<float>(i); });
    add("s", std::move(scale_shape), dtype, [](int64_t i) { return 0.1f + 0.3f * static_cast<float>(i); });
    ir::Method m;
    m.name = "forward";
    m.inputs = {{"x", {dtype, {ir::Dim::fixed(2), ir::Dim::fixed(3), ir::Dim::fixed(4)}}}};
    m.outputs = {"y"};
    m.nodes = {node("linear", {"x", "w", "b"}, "h"),
               scale_first ? node("mul", {"s", "h"}, "y") : node("mul", {"h", "s"}, "y")};
    model.methods.push_back(std::move(m));
  }
  void add(const std::string& name, std::vector<int64_t> shape, DType dtype, const std::function<float(int64_t)>& value) {
    ir::Constant c;
    c.name = name;
    c.dtype = dtype;
    c.shape = std::move(shape);
    auto bytes = std::make_shared<std::vector<uint8_t>>(c.nbytes());
    const int64_t n = static_cast<int64_t>(c.nbytes()) / static_cast<int64_t>(element_size(dtype));
    for (int64_t i = 0; i < n; ++i) {
      if (dtype == DType::BF16 || dtype == DType::F16) {
        const uint16_t bits = dtype == DType::BF16 ? f32_to_bf16_bits(value(i)) : f32_to_f16_bits(value(i));
        std::memcpy(bytes->data() + 2 * i, &bits, 2);
      } else {
        const float v = value(i);
        std::memcpy(bytes->data() + 4 * i, &v, 4);
      }
    }
    c.bytes = {bytes->data(), bytes->size()};
    c.owner = bytes;
    storage.push_back(bytes);
    model.constants.push_back(std::move(c));
  }
  ir::Method& method() { return model.methods[0]; }
  MadeNames names;  // the model's, shared by every fold of it
  int fold(ScaleFoldState& state) {
    Result<ir::CheckedMethod> types = ir::check_method(model, method());
    EXPECT_TRUE(types.ok()) << types.status().to_string();
    if (!types.ok()) return -1;
    return fold_scales_into_linears(model, method(), *types, names, state);
  }
  int fold() {
    ScaleFoldState state;
    return fold(state);
  }
  std::vector<float> values(const std::string& name) const {
    const ir::Constant* c = model.find_constant(name);
    if (c == nullptr) return {};
    std::vector<float> out;
    const size_t size = element_size(c->dtype);
    for (size_t i = 0; i < c->bytes.size() / size; ++i) {
      if (c->dtype == DType::BF16 || c->dtype == DType::F16) {
        uint16_t bits;
        std::memcpy(&bits, c->bytes.data() + 2 * i, 2);
        out.push_back(c->dtype == DType::BF16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits));
      } else {
        float v;
        std::memcpy(&v, c->bytes.data() + 4 * i, 4);
        out.push_back(v);
      }
    }
    return out;
  }
};

TEST(ScaleFold, APerFeatureScaleGoesIntoTheWeightAndBias) {
  for (bool scale_first : {false, true}) {
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{5}, std::vector<int64_t>{1, 1, 5}}) {
      SCOPED_TRACE(::testing::Message() << "scale first " << scale_first << " rank " << shape.size());
      ScaleModel a(shape, DType::F32, scale_first);
      const std::vector<float> w = a.values("w"), b = a.values("b"), s = a.values("s");
      EXPECT_EQ(a.fold(), 1);
      ASSERT_EQ(ops(a.method()), std::vector<std::string>{"linear"});
      const ir::Node& lin = a.method().nodes[0];
      EXPECT_EQ(lin.inputs, (std::vector<std::string>{"x", "w#scaled", "b#scaled"}));
      EXPECT_EQ(lin.outputs, std::vector<std::string>{"y"});
      std::vector<float> want_w(w.size()), want_b(b.size());
      for (size_t n = 0; n < 5; ++n) {
        for (size_t k = 0; k < 4; ++k) want_w[n * 4 + k] = s[n] * w[n * 4 + k];
        want_b[n] = s[n] * b[n];
      }
      EXPECT_EQ(a.values("w#scaled"), want_w);
      EXPECT_EQ(a.values("b#scaled"), want_b);
      EXPECT_EQ(a.values("w"), w);  // the sources stay for any other reader
      ASSERT_OK_AND_ASSIGN(ir::CheckedMethod types, ir::check_method(a.model, a.method()));
      EXPECT_EQ(types.values.at("y").shape.back(), ir::Dim::fixed(5));
    }
  }
}

// A linear without a bias folds its weight alone.
TEST(ScaleFold, ALinearWithoutBiasFoldsItsWeight) {
  ScaleModel a({5});
  a.method().nodes[0].inputs = {"x", "w"};
  const std::vector<float> w = a.values("w"), s = a.values("s");
  EXPECT_EQ(a.fold(), 1);
  EXPECT_EQ(a.method().nodes[0].inputs, (std::vector<std::string>{"x", "w#scaled"}));
  EXPECT_EQ(a.values("w#scaled")[7], s[1] * w[7]);
}

// One value for every feature folds too; bf16 products are rounded once, to nearest even.
TEST(ScaleFold, ASingleScaleAndBf16ProductsRoundedOnce) {
  ScaleModel a({1}, DType::BF16);
  const std::vector<float> w = a.values("w"), b = a.values("b");
  const float s = a.values("s")[0];
  EXPECT_EQ(a.fold(), 1);
  const std::vector<float> got = a.values("w#scaled");
  ASSERT_EQ(got.size(), w.size());
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(got[i], bf16_bits_to_f32(f32_to_bf16_bits(s * w[i]))) << i;
  EXPECT_EQ(a.values("b#scaled")[4], bf16_bits_to_f32(f32_to_bf16_bits(s * b[4])));
}

// f16 (the CUDA kernels compute it as bf16) folds the same way, its products rounded once
// to f16; the per-feature scale too.
TEST(ScaleFold, F16ProductsRoundedOnceToF16) {
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{1}, std::vector<int64_t>{5}}) {
    SCOPED_TRACE(shape.size());
    ScaleModel a(shape, DType::F16);
    const std::vector<float> w = a.values("w"), b = a.values("b"), s = a.values("s");
    EXPECT_EQ(a.fold(), 1);
    ASSERT_EQ(ops(a.method()), std::vector<std::string>{"linear"});
    const ir::Constant* scaled = a.model.find_constant("w#scaled");
    ASSERT_NE(scaled, nullptr);
    EXPECT_EQ(scaled->dtype, DType::F16);
    const std::vector<float> got = a.values("w#scaled");
    ASSERT_EQ(got.size(), w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      const float si = s[s.size() == 1 ? 0 : i / 4];
      EXPECT_EQ(got[i], f16_bits_to_f32(f32_to_f16_bits(si * w[i]))) << i;
    }
    const float s4 = s[s.size() == 1 ? 0 : 4];
    EXPECT_EQ(a.values("b#scaled")[4], f16_bits_to_f32(f32_to_f16_bits(s4 * b[4])));
  }
}

TEST(ScaleFold, MulsItCannotFoldStayAsWritten) {
  {
    ScaleModel a({3, 1});  // a scale per row, not per feature
    EXPECT_EQ(a.fold(), 0);
  }
  {
    ScaleModel a({2, 3, 5});  // a full tensor
    EXPECT_EQ(a.fold(), 0);
  }
  {
    ScaleModel a({4, 1, 1, 5});  // the product is larger than the linear's output
    EXPECT_EQ(a.fold(), 0);
  }
  {
    ScaleModel a({5});
    a.method().nodes.push_back(node("add", {"h", "y"}, "z"));  // h read twice
    a.method().outputs = {"z"};
    EXPECT_EQ(a.fold(), 0);
  }
  {
    ScaleModel a({5});
    a.method().outputs = {"y", "h"};  // h is an output
    EXPECT_EQ(a.fold(), 0);
  }
  {
    ScaleModel a({5});
    a.method().nodes[0].attrs["activation"] = std::string("relu");  // mul(relu(.)) is not a scaled linear
    EXPECT_EQ(a.fold(), 0);
  }
  {
    ScaleModel a({5});
    a.method().inputs.push_back({"t", {DType::F32, {ir::Dim::fixed(5)}}});  // a scale that is not a constant
    a.method().nodes[1].inputs[1] = "t";
    EXPECT_EQ(a.fold(), 0);
  }
  {
    ScaleModel a({5});
    a.method().nodes[1].segment = "apart";  // another segment than the linear's
    EXPECT_EQ(a.fold(), 0);
  }
}

// A second method (or a second use) of the same weight and scale reuses the scaled constants.
TEST(ScaleFold, ScaledConstantsAreMadeOncePerModel) {
  ScaleModel a({5});
  a.model.methods.push_back(a.method());
  a.model.methods[1].name = "again";
  ScaleFoldState state;
  EXPECT_EQ(a.fold(state), 1);
  const size_t constants = a.model.constants.size();
  ir::Method again = a.model.methods[1];
  ASSERT_OK_AND_ASSIGN(ir::CheckedMethod types, ir::check_method(a.model, again));
  EXPECT_EQ(fold_scales_into_linears(a.model, again, types, a.names, state), 1);
  EXPECT_EQ(a.model.constants.size(), constants);
  EXPECT_EQ(again.nodes[0].inputs[1], "w#scaled");
}

// lower_model's rewrites include the fold.
TEST(ScaleFold, RunsAmongTheRewritesOfEveryMethod) {
  ScaleModel a({5});
  RewriteState state;
  ir::Method m = a.method();
  EXPECT_EQ(rewrite_method(a.model, m, state), 1);
  EXPECT_EQ(ops(m), std::vector<std::string>{"linear"});
}

}  // namespace
}  // namespace planrt::builder
