// Symbolic shape arithmetic and per-op inference on the IR directly.
#include <gtest/gtest.h>

#include "builder/shape_inference.h"
#include "builder/sym_shape.h"
#include "builder_test_util.h"

namespace planrt::builder::ir {
namespace {

const std::vector<DimDecl> kDims = {{"S", 1, 64}, {"T", 2, 8}};
const Dim S = Dim::named(0), T = Dim::named(1);
Dim c(int64_t v) { return Dim::fixed(v); }

TensorType f32(SymShape s) { return {DType::F32, std::move(s)}; }

Result<InferredNode> infer(std::string_view op, std::vector<TensorType> types, Attrs attrs = {}) {
  std::vector<Operand> ops;
  for (const TensorType& t : types) ops.push_back({"v", &t});
  return infer_node(op, ops, attrs, kDims);  // the result holds no pointer into `types`
}

std::string out_shape(const Result<InferredNode>& r) {
  return r.ok() ? shape_to_string(r->outputs[0].shape, kDims) : "error: " + r.status().message();
}

TEST(SymShape, BroadcastFollowsPyTorch) {
  ASSERT_OK_AND_ASSIGN(SymShape s, broadcast_shapes({c(1), S, c(8)}, {c(4), c(1), c(1)}, kDims));
  EXPECT_EQ(shape_to_string(s, kDims), "[4, S, 8]");
  ASSERT_OK_AND_ASSIGN(SymShape r, broadcast_shapes({S}, {c(3), c(1)}, kDims));
  EXPECT_EQ(shape_to_string(r, kDims), "[3, S]");
  EXPECT_FALSE(broadcast_shapes({S}, {T}, kDims).ok());
  EXPECT_FALSE(broadcast_shapes({S}, {c(5)}, kDims).ok());  // S may be 5, but need not be
}

TEST(SymShape, DivisionIsExpressibleOnlyAsAMultipleOfOneDim) {
  ASSERT_OK_AND_ASSIGN(Monomial all, numel({c(2), S, c(8)}));
  EXPECT_EQ(all.coeff, 16);
  ASSERT_OK_AND_ASSIGN(Dim q, divide(all, Monomial{8, {}}));
  EXPECT_EQ(q, Dim::named(0, 2));
  ASSERT_OK_AND_ASSIGN(Dim one, divide(all, Monomial{16, {0}}));
  EXPECT_EQ(one, c(1));
  EXPECT_FALSE(divide(all, Monomial{3, {}}).ok());        // 16 not divisible by 3
  EXPECT_FALSE(divide(all, Monomial{1, {1}}).ok());       // T does not divide
  EXPECT_FALSE(divide(Monomial{1, {0, 1}}, Monomial{1, {}}).ok());  // S*T
  EXPECT_FALSE(numel({c(int64_t{1} << 40), c(int64_t{1} << 40)}).ok());
}

// The Dim arithmetic the layout chains align reshapes with: a result only where it is a
// constant or a multiple of one named dim.
TEST(SymShape, DimProductsAndQuotientsStayOneNamedDimOrFail) {
  Dim out;
  ASSERT_TRUE(multiply_dims(c(8), S, &out));
  EXPECT_EQ(out, Dim::named(0, 8));
  ASSERT_TRUE(multiply_dims(c(3), c(5), &out));
  EXPECT_EQ(out, c(15));
  EXPECT_FALSE(multiply_dims(S, T, &out));  // S*T
  EXPECT_FALSE(multiply_dims(c(INT64_MAX), c(2), &out));
  ASSERT_TRUE(divide_dims(Dim::named(0, 12), c(4), &out));
  EXPECT_EQ(out, Dim::named(0, 3));
  ASSERT_TRUE(divide_dims(Dim::named(1, 12), Dim::named(1, 4), &out));
  EXPECT_EQ(out, c(3));
  EXPECT_FALSE(divide_dims(Dim::named(0, 12), Dim::named(1, 4), &out));  // S / T
  EXPECT_FALSE(divide_dims(c(12), S, &out));
  EXPECT_FALSE(divide_dims(c(12), c(5), &out));
  EXPECT_FALSE(divide_dims(c(12), c(0), &out));
}

TEST(SymShape, SizesWithinBounds) {
  EXPECT_EQ(min_size(Dim::named(1, 3), kDims), 6);
  EXPECT_EQ(max_size(Dim::named(1, 3), kDims), 24);
  EXPECT_EQ(max_size(Dim::named(0, int64_t{1} << 62), kDims), INT64_MAX);  // saturates
}

TEST(ShapeInference, MatmulBroadcastsBatchDims) {
  EXPECT_EQ(out_shape(infer("matmul", {f32({c(2), c(1), S, c(4)}), f32({c(3), c(4), T})})), "[2, 3, S, T]");
  EXPECT_EQ(out_shape(infer("matmul", {f32({c(4)}), f32({c(4), c(5)})})), "[5]");
  EXPECT_EQ(out_shape(infer("matmul", {f32({c(4)}), f32({c(4)})})), "[]");
  EXPECT_EQ(out_shape(infer("matmul", {f32({S, c(4)}), f32({c(5), c(4)})})),
            "error: shape mismatch: operand 0 'v' (f32 [S, 4]) and operand 1 'v' (f32 [5, 4]) cannot be "
            "multiplied (inner dims [4] vs [5])");
  EXPECT_EQ(out_shape(infer("matmul", {f32({c(2), S, c(4)}), f32({c(3), c(4), c(4)})})),
            "error: batch dims: shapes [2] and [3] do not broadcast (dim 0 of the result: [2] vs [3])");
}

TEST(ShapeInference, ReshapeWithMultipliersAndNamedDims) {
  ShapeSpec back{{-1, ""}, {0, "S"}, {8, ""}};
  EXPECT_EQ(out_shape(infer("reshape", {f32({c(4), S, c(2), c(4)})}, {{"shape", back}})), "[4, S, 8]");
  EXPECT_EQ(out_shape(infer("reshape", {f32({S, c(6)})}, {{"shape", std::vector<int64_t>{-1}}})), "[6*S]");
  EXPECT_EQ(out_shape(infer("reshape", {f32({Dim::named(0, 6)})}, {{"shape", ShapeSpec{{0, "S"}, {-1, ""}}}})), "[S, 6]");
  EXPECT_EQ(out_shape(infer("reshape", {f32({S, c(6)})}, {{"shape", std::vector<int64_t>{4, -1}}})).substr(0, 6), "error:");
  EXPECT_EQ(out_shape(infer("reshape", {f32({S})}, {{"shape", std::vector<int64_t>{0}}})),
            "error: attribute 'shape' entry 0 is 0 (sizes are >= 1, or -1)");
}

TEST(ShapeInference, ConcatAddsMultiplesOfOneDim) {
  EXPECT_EQ(out_shape(infer("concat", {f32({Dim::named(0, 2), c(3)}), f32({S, c(3)})})), "[3*S, 3]");
  EXPECT_EQ(out_shape(infer("concat", {f32({S, c(3)}), f32({S, c(3), c(1)})})).substr(0, 20), "error: rank mismatch");
  EXPECT_EQ(out_shape(infer("concat", {f32({S, c(3)}), f32({S, c(4)})})).substr(0, 21), "error: shape mismatch");
}

TEST(ShapeInference, SliceToANamedDimTakesItsLength) {
  const Attrs to_s{{"dim", int64_t{0}}, {"end", std::string("S")}};
  ASSERT_OK_AND_ASSIGN(InferredNode n, infer("slice", {f32({c(64), c(8)})}, to_s));
  EXPECT_EQ(shape_to_string(n.outputs[0].shape, kDims), "[S, 8]");
  EXPECT_FALSE(n.attrs.contains("end"));  // the kernel takes the length from the output
  EXPECT_EQ(out_shape(infer("slice", {f32({S, c(8)})}, to_s)), "[S, 8]");
  EXPECT_NE(out_shape(infer("slice", {f32({c(32), c(8)})}, to_s)).find("S may reach 64, past the dim"),
            std::string::npos);
  EXPECT_NE(out_shape(infer("slice", {f32({c(64), c(8)})}, {{"start", int64_t{1}}, {"end", std::string("S")}}))
                .find("must start at 0"),
            std::string::npos);
  EXPECT_NE(out_shape(infer("slice", {f32({c(64), c(8)})}, {{"end", std::string("Q")}})).find("dim 'Q'"),
            std::string::npos);
}

TEST(ShapeInference, SdpaChecksEveryOperand) {
  SymShape q{c(1), c(2), S, c(8)};
  EXPECT_EQ(out_shape(infer("scaled_dot_product_attention", {f32(q), f32({c(1), c(2), T, c(8)}), f32({c(1), c(2), T, c(5)})})),
            "[1, 2, S, 5]");
  EXPECT_NE(out_shape(infer("scaled_dot_product_attention", {f32(q), f32({c(1), c(3), S, c(8)}), f32(q)})).find("differ in leading dim 1"),
            std::string::npos);
  EXPECT_NE(out_shape(infer("scaled_dot_product_attention", {f32(q), f32({c(1), c(2), S, c(4)}), f32(q)})).find("differ in head dim"),
            std::string::npos);
  EXPECT_NE(out_shape(infer("scaled_dot_product_attention", {f32(q), f32(q), f32({c(1), c(2), T, c(8)})})).find("differ in sequence length"),
            std::string::npos);
  // One merged leading dim ([B*H, S, D], as nn.MultiheadAttention's export has it).
  EXPECT_EQ(out_shape(infer("scaled_dot_product_attention", {f32({c(6), S, c(8)}), f32({c(6), T, c(8)}), f32({c(6), T, c(4)})})),
            "[6, S, 4]");
  EXPECT_NE(out_shape(infer("scaled_dot_product_attention", {f32({S, c(8)}), f32({S, c(8)}), f32({S, c(8)})})).find("rank >= 3"),
            std::string::npos);
  EXPECT_NE(out_shape(infer("scaled_dot_product_attention", {f32(q), f32(q), f32(q)}, {{"causal", int64_t{1}}})).find("'causal' must be true or false"),
            std::string::npos);
  EXPECT_NE(out_shape(infer("scaled_dot_product_attention", {f32(q), f32(q), f32(q)}, {{"fused", std::string("yes")}})).find("'fused' must be true or false"),
            std::string::npos);
  EXPECT_EQ(out_shape(infer("scaled_dot_product_attention", {f32(q), f32(q), f32(q)}, {{"fused", false}})),
            "[1, 2, S, 8]");
}

// Layout sbhd: [S, .., H, D] (a sequence-first model's rows), the batch dims between.
TEST(ShapeInference, SdpaSbhdLayout) {
  const Attrs sbhd{{"layout", std::string("sbhd")}};
  auto sdpa = [](std::vector<TensorType> types, Attrs attrs) {
    return out_shape(infer("scaled_dot_product_attention", std::move(types), std::move(attrs)));
  };
  auto has = [](const std::string& got, const std::string& part) { return got.find(part) != std::string::npos; };
  EXPECT_EQ(sdpa({f32({S, c(2), c(3), c(8)}), f32({T, c(2), c(3), c(8)}), f32({T, c(2), c(3), c(5)})}, sbhd),
            "[S, 2, 3, 5]");
  EXPECT_TRUE(has(sdpa({f32({S, c(2), c(3), c(8)}), f32({T, c(4), c(3), c(8)}), f32({T, c(4), c(3), c(8)})}, sbhd),
                  "differ in batch dim 1 (layout sbhd"));
  EXPECT_TRUE(has(sdpa({f32({S, c(2), c(3), c(8)}), f32({T, c(2), c(3), c(8)}), f32({S, c(2), c(3), c(8)})}, sbhd),
                  "sequence length"));
  const Attrs heads2{{"layout", std::string("sbhd")}, {"heads", int64_t{2}}};
  EXPECT_EQ(sdpa({f32({S, c(4), c(48)})}, heads2), "[S, 4, 16]");  // packed: q|k|v of 2 x 8
  // A mask broadcasts to the scores [B, H, Sq, Sk] in every layout: bool, or q's dtype.
  const TensorType q_sbhd = f32({S, c(2), c(3), c(8)}), kv_sbhd = f32({T, c(2), c(3), c(8)});
  EXPECT_EQ(sdpa({q_sbhd, kv_sbhd, kv_sbhd, TensorType{DType::Bool, {c(2), c(1), c(1), T}}}, sbhd), "[S, 2, 3, 8]");
  EXPECT_EQ(sdpa({q_sbhd, kv_sbhd, kv_sbhd, f32({c(2), c(3), S, T})}, sbhd), "[S, 2, 3, 8]");
  EXPECT_TRUE(has(sdpa({q_sbhd, kv_sbhd, kv_sbhd, f32({c(2), c(3), S, S})}, sbhd), "does not broadcast to the scores"));
  EXPECT_TRUE(has(sdpa({q_sbhd, kv_sbhd, kv_sbhd, TensorType{DType::I64, {c(2), c(1), c(1), T}}}, sbhd),
                  "a mask is bool"));
  EXPECT_TRUE(has(sdpa({q_sbhd, kv_sbhd, kv_sbhd, f32({c(3), c(1), c(1), S, T})}, sbhd), "does not broadcast"));
}

// Attribute heads (layout bshd): [.., S, H*D] operands, or one packed [.., S, 3*H*D] input;
// every way to get it wrong is an error that says what it needs, never a crash.
TEST(ShapeInference, SdpaHeadsAttributeAndPackedInput) {
  const Attrs heads2{{"layout", std::string("bshd")}, {"heads", int64_t{2}}};
  auto sdpa = [](std::vector<TensorType> types, Attrs attrs) {
    return out_shape(infer("scaled_dot_product_attention", std::move(types), std::move(attrs)));
  };
  auto has = [](const std::string& got, const std::string& part) { return got.find(part) != std::string::npos; };
  EXPECT_EQ(sdpa({f32({c(1), S, c(48)})}, heads2), "[1, S, 16]");  // packed: q|k|v of 2 x 8
  EXPECT_EQ(sdpa({f32({c(1), S, c(16)}), f32({c(1), T, c(16)}), f32({c(1), T, c(12)})}, heads2), "[1, S, 12]");
  EXPECT_TRUE(has(sdpa({f32({c(1), S, c(50)})}, heads2), "a multiple of 3 x 2"));
  EXPECT_TRUE(has(sdpa({f32({c(1), S, S})}, heads2), "static last dim"));
  EXPECT_TRUE(has(sdpa({f32({c(1), S, c(48)})}, {{"layout", std::string("bshd")}}), "packed q|k|v input needs it"));
  EXPECT_TRUE(has(sdpa({f32({c(1), S, c(48)})}, {{"heads", int64_t{2}}}), "needs layout \"bshd\""));
  EXPECT_TRUE(has(sdpa({f32({c(1), S, c(48)})}, {{"layout", std::string("bshd")}, {"heads", int64_t{-2}}}),
                  "must be positive"));
  // A heads count whose 3 x heads would overflow is no divisor of anything.
  EXPECT_TRUE(has(sdpa({f32({c(1), S, c(15)})}, {{"layout", std::string("bshd")}, {"heads", int64_t{6148914691236517207}}}),
                  "a multiple of 3 x 6148914691236517207"));
  // Splitting the last dim of a rank-8 operand would make rank 9.
  EXPECT_TRUE(has(sdpa({f32({c(1), c(1), c(1), c(1), c(1), c(1), S, c(48)})}, heads2), "rank at most 7"));
  // Two inputs, or only one of k and v absent: q, k and v, or the packed input alone (k and
  // v absent, then a mask).
  EXPECT_TRUE(has(sdpa({f32({c(1), S, c(48)}), f32({c(1), S, c(48)})}, heads2), "packed q|k|v, absent k and v"));
  const TensorType q = f32({c(1), S, c(48)}), flat = f32({c(1), S, c(16)});
  const TensorType mask{DType::Bool, {c(1), c(1), c(1), S}};
  std::vector<Operand> packed_with_mask{{"q", &q}, {"", nullptr}, {"", nullptr}, {"mask", &mask}};
  ASSERT_OK_AND_ASSIGN(InferredNode ok, infer_node("scaled_dot_product_attention", packed_with_mask, heads2, kDims));
  EXPECT_EQ(shape_to_string(ok.outputs[0].shape, kDims), "[1, S, 16]");
  std::vector<Operand> k_absent{{"q", &flat}, {"", nullptr}, {"v", &flat}};
  Result<InferredNode> r = infer_node("scaled_dot_product_attention", k_absent, heads2, kDims);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has(r.status().message(), "expected q, k and v"));
}

TEST(ShapeInference, LinearTakesAFusedReluOrGelu) {
  auto linear = [](Attrs attrs) {
    return out_shape(infer("linear", {f32({c(1), S, c(16)}), f32({c(8), c(16)})}, std::move(attrs)));
  };
  auto has = [](const std::string& got, const std::string& part) { return got.find(part) != std::string::npos; };
  EXPECT_EQ(linear({{"activation", std::string("gelu")}, {"approximate", std::string("tanh")}}), "[1, S, 8]");
  EXPECT_EQ(linear({{"activation", std::string("relu")}}), "[1, S, 8]");
  EXPECT_TRUE(has(linear({{"activation", std::string("swish")}}), "must be \"none\", \"relu\" or \"gelu\""));
  EXPECT_TRUE(has(linear({{"activation", int64_t{1}}}), "must be \"none\", \"relu\" or \"gelu\""));
  EXPECT_TRUE(has(linear({{"approximate", std::string("tanh")}}), "needs activation gelu"));
  EXPECT_TRUE(has(linear({{"activation", std::string("gelu")}, {"approximate", std::string("fast")}}),
                  "must be \"none\" or \"tanh\""));
}

// The typed elementwise family: one rule from kernels/elementwise_ops.h, its dtypes checked
// when the program is built, every operand broadcast.
TEST(ShapeInference, TypedElementwiseOpsFollowTheirDtypeRules) {
  const TensorType b{DType::Bool, {c(1), S}};
  const TensorType i{DType::I64, {c(4), c(1)}};
  Result<InferredNode> eq = infer("equal", {i, {DType::I64, {S}}});
  ASSERT_TRUE(eq.ok()) << eq.status().to_string();
  EXPECT_EQ(eq->outputs[0].dtype, DType::Bool);
  EXPECT_EQ(out_shape(eq), "[4, S]");
  Result<InferredNode> w = infer("where", {b, f32({c(4), c(1)}), f32({})});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->outputs[0].dtype, DType::F32);
  EXPECT_EQ(out_shape(w), "[4, S]");
  Result<InferredNode> cast = infer("cast", {b}, {{"dtype", std::string("f16")}});
  ASSERT_TRUE(cast.ok()) << cast.status().to_string();
  EXPECT_EQ(cast->outputs[0].dtype, DType::F16);
  EXPECT_EQ(infer("isnan", {f32({S})})->outputs[0].dtype, DType::Bool);
  EXPECT_EQ(out_shape(infer("where", {f32({S}), f32({S}), f32({S})})),
            "error: where: cond has dtype f32; it must be bool (operand 0 'v' (f32 [S]); operand 1 'v' (f32 [S]); operand 2 'v' (f32 [S]))");
  EXPECT_NE(out_shape(infer("cos", {i})).find("must be floating"), std::string::npos);
  EXPECT_NE(out_shape(infer("cast", {b})).find("attribute 'dtype'"), std::string::npos);
  EXPECT_NE(out_shape(infer("cast", {b}, {{"dtype", std::string("f64")}})).find("unknown dtype 'f64'"), std::string::npos);
  EXPECT_NE(out_shape(infer("minimum", {i, f32({c(4)})})).find("one dtype"), std::string::npos);
  EXPECT_NE(out_shape(infer("add", {b, b})).find("is bool"), std::string::npos);
  EXPECT_NE(out_shape(infer("isinf", {f32({S})}, {{"detect", true}})).find("unknown attribute 'detect'"), std::string::npos);
  Result<InferredNode> neg = infer("neg", {i});  // integers negate (and wrap)
  ASSERT_TRUE(neg.ok()) << neg.status().to_string();
}

TEST(ShapeInference, GatherElementsTakesIndicesShape) {
  const TensorType x = f32({c(1), c(64)});
  Result<InferredNode> g = infer("gather_elements", {x, {DType::I64, {c(1), S}}}, {{"dim", int64_t{-1}}});
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(out_shape(g), "[1, S]");
  EXPECT_EQ(std::get<int64_t>(g->attrs.at("dim")), 1);
  EXPECT_NE(out_shape(infer("gather_elements", {x, f32({c(1), S})})).find("i32 or i64"), std::string::npos);
  EXPECT_NE(out_shape(infer("gather_elements", {x, {DType::I64, {c(2), S}}}, {{"dim", int64_t{1}}})).find("may exceed"),
            std::string::npos);
}

// resize: sizes (-1 keeps a dim, symbolic or not) or floor(size * scale); a symbolic dim only
// kept; the attributes checked by the kernels' own rule (kernels/op_plans.h).
TEST(ShapeInference, ResizeSizesTheOutputFromSizesOrScales) {
  const TensorType x = f32({S, c(3), c(5), c(4)});
  EXPECT_EQ(out_shape(infer("resize", {x}, {{"sizes", std::vector<int64_t>{-1, -1, 10, 3}}})), "[S, 3, 10, 3]");
  EXPECT_EQ(out_shape(infer("resize", {x}, {{"scales", std::string("1,1,2.5,0.6000000238418579")}})), "[S, 3, 12, 2]");
  EXPECT_EQ(out_shape(infer("resize", {f32({c(7)})}, {{"mode", std::string("cubic")}, {"scales", std::string("0.3")}})),
            "[2]");
  // sizes decide the shape; scales then only feed the coordinate transform.
  EXPECT_EQ(out_shape(infer("resize", {x}, {{"sizes", std::vector<int64_t>{-1, 3, 5, 8}}, {"scales", std::string("1,1,1,3")}})),
            "[S, 3, 5, 8]");
  // A symbolic dim can only be kept.
  EXPECT_NE(out_shape(infer("resize", {x}, {{"scales", std::string("2,1,2,2")}})).find("dim 0 is not a fixed size"),
            std::string::npos);
  EXPECT_NE(out_shape(infer("resize", {x}, {{"sizes", std::vector<int64_t>{2, 3, 5, 4}}})).find("dim 0 is not a fixed size"),
            std::string::npos);
  // The kernels' attribute checks, in their words.
  EXPECT_NE(out_shape(infer("resize", {x}, {})).find("sizes or scales"), std::string::npos);
  EXPECT_NE(out_shape(infer("resize", {x}, {{"scales", std::string("1,1,2")}})).find("scales has 3 entries"),
            std::string::npos);
  EXPECT_NE(out_shape(infer("resize", {x}, {{"scales", std::string("1,1,2,2")}, {"mode", std::string("area")}}))
                .find("mode 'area'"),
            std::string::npos);
  EXPECT_NE(out_shape(infer("resize", {x}, {{"scales", std::string("1,1,0.1,1")}})).find("resizes to 0"),
            std::string::npos);
  EXPECT_NE(out_shape(infer("resize", {x}, {{"scales", std::string("1,1,2,2")}, {"antialias", true}}))
                .find("unknown attribute 'antialias'"),
            std::string::npos);
  EXPECT_NE(out_shape(infer("resize", {{DType::I64, {c(2)}}}, {{"scales", std::string("2")}})).find("floating-point"),
            std::string::npos);
  EXPECT_NE(out_shape(infer("resize", {f32({})}, {{"scales", std::string("")}})).find("scalar"), std::string::npos);
}

TEST(ShapeInference, ReductionsArgReductionsAndCumsum) {
  const TensorType x = f32({c(2), S, c(5)});
  EXPECT_EQ(out_shape(infer("reduce_max", {x}, {{"dims", std::vector<int64_t>{-2, -1}}})), "[2]");
  EXPECT_EQ(out_shape(infer("reduce_prod", {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", true}})), "[2, 1, 5]");
  EXPECT_NE(out_shape(infer("reduce_min", {x}, {{"dims", std::vector<int64_t>{0, 2}}})).find("not adjacent (reduce_min"),
            std::string::npos);
  Result<InferredNode> a = infer("argmax", {x}, {{"dim", int64_t{-1}}, {"keepdim", true}});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(out_shape(a), "[2, S, 1]");
  EXPECT_EQ(a->outputs[0].dtype, DType::I64);
  EXPECT_EQ(out_shape(infer("argmin", {x}, {{"dim", int64_t{1}}})), "[2, 5]");
  EXPECT_NE(out_shape(infer("argmin", {f32({c(2), c(0)})}, {{"dim", int64_t{1}}})).find("no elements along dim 1"),
            std::string::npos);
  EXPECT_NE(out_shape(infer("argmax", {{DType::I64, {c(3)}}})).find("floating-point"), std::string::npos);
  Result<InferredNode> cs = infer("cumsum", {{DType::I32, {S, c(3)}}}, {{"dim", int64_t{-2}}});
  ASSERT_TRUE(cs.ok()) << cs.status().to_string();
  EXPECT_EQ(out_shape(cs), "[S, 3]");
  EXPECT_EQ(cs->outputs[0].dtype, DType::I32);
  EXPECT_EQ(std::get<int64_t>(cs->attrs.at("dim")), 0);
  EXPECT_NE(out_shape(infer("cumsum", {{DType::I32, {S}}})).find("'dim'"), std::string::npos);
  EXPECT_NE(out_shape(infer("cumsum", {{DType::Bool, {S}}}, {{"dim", int64_t{0}}})).find("bool"), std::string::npos);
  EXPECT_EQ(out_shape(infer("log_softmax", {x}, {{"dim", int64_t{1}}})), "[2, S, 5]");
}

TEST(ShapeInference, OpWithoutRuleIsReportedNotGuessed) {
  EXPECT_FALSE(has_shape_rule("conv3d"));
  auto r = infer("conv3d", {f32({S})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::NotSupported);
  EXPECT_EQ(r.status().message(), "op 'conv3d' has no shape rule in the builder");
}

}  // namespace
}  // namespace planrt::builder::ir

