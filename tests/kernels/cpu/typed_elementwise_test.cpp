// The typed elementwise family on the CPU (kernels/elementwise_ops.h): every op against a
// reference written here in doubles and 64-bit integers, over every dtype its rule admits,
// same-shape, broadcast (three ways for where), rank 0 and empty; the edge values each
// op's semantics name; and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "kernel_test_util.h"
#include "kernels/elementwise_ops.h"

namespace planrt::kernels {
namespace {

using testing::broadcast_source;
using testing::HostTensor;
using testing::IsError;
using testing::run_op;
using testing::unravel;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Element i of a host tensor as a double (bool: 0/1 from any non-zero byte).
double get(const HostTensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::F32: return t.as<float>()[i];
    case DType::F16: return f16_bits_to_f32(t.as<uint16_t>()[i]);
    case DType::BF16: return bf16_bits_to_f32(t.as<uint16_t>()[i]);
    case DType::I32: return t.as<int32_t>()[i];
    case DType::I64: return static_cast<double>(t.as<int64_t>()[i]);
    case DType::U8: return t.as<uint8_t>()[i];
    case DType::Bool: return t.as<uint8_t>()[i] != 0 ? 1 : 0;
  }
  return kNaN;
}

void put(HostTensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::F32: t.as<float>()[i] = static_cast<float>(v); break;
    case DType::F16: t.as<uint16_t>()[i] = f32_to_f16_bits(static_cast<float>(v)); break;
    case DType::BF16: t.as<uint16_t>()[i] = f32_to_bf16_bits(static_cast<float>(v)); break;
    case DType::I32: t.as<int32_t>()[i] = static_cast<int32_t>(v); break;
    case DType::I64: t.as<int64_t>()[i] = static_cast<int64_t>(v); break;
    case DType::U8: t.as<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    case DType::Bool: t.as<uint8_t>()[i] = v != 0 ? 1 : 0; break;
  }
}

HostTensor make(DType dtype, Shape shape, const std::vector<double>& values) {
  HostTensor t(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) put(t, i, values[static_cast<size_t>(i) % values.size()]);
  return t;
}

// Values that every dtype holds exactly, with the interesting ones for each kind.
std::vector<double> sample(DType dtype) {
  switch (dtype) {
    case DType::Bool: return {0, 1, 1, 0, 1};
    case DType::U8: return {0, 1, 2, 7, 200, 255, 3};
    case DType::I32:
    case DType::I64: return {0, 1, -1, 2, -7, 9, 100, -3};
    default: return {0.0, -0.5, 0.5, 1.5, 2.5, -2.5, 3.25, -1.0, 0.75, 2.0};
  }
}

bool same(double got, double want, DType dtype) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  const double tol = dtype == DType::F32 ? 1e-6 : dtype == DType::F16 ? 1e-3 : dtype == DType::BF16 ? 8e-3 : 0.0;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

using Ref = std::function<double(const std::vector<double>&)>;

// Runs `op` on inputs of `shapes` and checks every output element against ref over the
// broadcast inputs' values.
void check(std::string_view op, const OpAttrs& attrs, const std::vector<HostTensor>& inputs,
           const Shape& out_shape, DType out_dtype, const Ref& ref) {
  HostTensor y(out_dtype, out_shape);
  std::vector<TensorView> in;
  for (const HostTensor& t : inputs) in.push_back(t.view());
  Status s = run_op(op, attrs, in, {y.view()});
  ASSERT_TRUE(s.ok()) << op << ": " << s.to_string();
  for (int64_t i = 0; i < out_shape.numel(); ++i) {
    std::vector<int64_t> index = unravel(i, out_shape);
    std::vector<double> args;
    for (const HostTensor& t : inputs) args.push_back(get(t, broadcast_source(index, out_shape, t.shape())));
    const double want = ref(args);
    // Narrow float outputs round the reference as the kernel's store does.
    const double want_stored = out_dtype == DType::F16 || out_dtype == DType::BF16 ? get(make(out_dtype, Shape{}, {want}), 0) : want;
    ASSERT_TRUE(same(get(y, i), want_stored, out_dtype))
        << op << " (" << dtype_name(inputs[0].dtype()) << ") element " << i << ": got " << get(y, i)
        << ", want " << want_stored;
  }
}

struct ShapeCase {
  std::vector<Shape> in;
  Shape out;
};

std::vector<ShapeCase> shape_cases(int arity) {
  if (arity == 1) return {{{Shape{2, 5}}, Shape{2, 5}}, {{Shape{}}, Shape{}}, {{Shape{0, 3}}, Shape{0, 3}}};
  if (arity == 2) {
    return {{{Shape{2, 5}, Shape{2, 5}}, Shape{2, 5}},
            {{Shape{3, 1, 4}, Shape{2, 1}}, Shape{3, 2, 4}},
            {{Shape{}, Shape{4}}, Shape{4}},
            {{Shape{0, 2}, Shape{1, 2}}, Shape{0, 2}}};
  }
  return {{{Shape{2, 3}, Shape{2, 3}, Shape{2, 3}}, Shape{2, 3}},
          {{Shape{1, 4}, Shape{3, 1}, Shape{}}, Shape{3, 4}},
          {{Shape{2, 1, 3}, Shape{3}, Shape{2, 2, 1}}, Shape{2, 2, 3}}};
}

std::vector<DType> cpu_dtypes(ElementwiseRule rule) {
  switch (rule) {
    case ElementwiseRule::Floating:
    case ElementwiseRule::FloatingToBool: return {DType::F32, DType::F16, DType::BF16};
    case ElementwiseRule::Numeric:
    case ElementwiseRule::NumericBinary: return {DType::F32, DType::I32, DType::I64, DType::U8};
    case ElementwiseRule::Logical: return {DType::Bool};
    default: return {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8, DType::Bool};
  }
}

double reference(ElementwiseFn fn, const std::vector<double>& v, DType dtype) {
  const bool integer = is_integer(dtype);
  switch (fn) {
    case ElementwiseFn::Cos: return std::cos(v[0]);
    case ElementwiseFn::Sin: return std::sin(v[0]);
    case ElementwiseFn::Log: return std::log(v[0]);
    case ElementwiseFn::Floor: return std::floor(v[0]);
    case ElementwiseFn::Ceil: return std::ceil(v[0]);
    case ElementwiseFn::Round: return std::nearbyint(v[0]);
    case ElementwiseFn::Reciprocal: return 1.0 / v[0];
    case ElementwiseFn::Tan: return std::tan(v[0]);
    case ElementwiseFn::Acos: return std::acos(v[0]);
    case ElementwiseFn::Asin: return std::asin(v[0]);
    case ElementwiseFn::Atan: return std::atan(v[0]);
    case ElementwiseFn::Sinh: return std::sinh(v[0]);
    case ElementwiseFn::Cosh: return std::cosh(v[0]);
    case ElementwiseFn::Asinh: return std::asinh(v[0]);
    case ElementwiseFn::Acosh: return std::acosh(v[0]);
    case ElementwiseFn::Atanh: return std::atanh(v[0]);
    // The parametric functions at their default attributes (elementwise_ops.h).
    case ElementwiseFn::Softplus: return std::log1p(std::exp(v[0]));
    case ElementwiseFn::Softsign: return v[0] / (1 + std::fabs(v[0]));
    case ElementwiseFn::Mish: return v[0] * std::tanh(std::log1p(std::exp(v[0])));
    case ElementwiseFn::LeakyRelu: return v[0] < 0 ? 0.01 * v[0] : v[0];
    case ElementwiseFn::Elu:
    case ElementwiseFn::Celu: return v[0] < 0 ? std::exp(v[0]) - 1 : v[0];
    case ElementwiseFn::Selu:
      return 1.05070102214813232421875 * (v[0] <= 0 ? 1.67326319217681884765625 * (std::exp(v[0]) - 1) : v[0]);
    case ElementwiseFn::ThresholdedRelu: return v[0] > 1 ? v[0] : 0;
    case ElementwiseFn::Shrink: return v[0] < -0.5 ? v[0] : v[0] > 0.5 ? v[0] : 0;
    case ElementwiseFn::PRelu: return v[0] < 0 ? v[0] * v[1] : v[0];
    case ElementwiseFn::Abs: return std::fabs(v[0]);
    case ElementwiseFn::Sign: return v[0] > 0 ? 1.0 : v[0] < 0 ? -1.0 : v[0];
    case ElementwiseFn::IsNan: return std::isnan(v[0]);
    case ElementwiseFn::IsInf: return std::isinf(v[0]);
    case ElementwiseFn::LogicalNot: return v[0] == 0;
    case ElementwiseFn::Equal: return v[0] == v[1];
    case ElementwiseFn::Less: return v[0] < v[1];
    case ElementwiseFn::LessEqual: return v[0] <= v[1];
    case ElementwiseFn::Greater: return v[0] > v[1];
    case ElementwiseFn::GreaterEqual: return v[0] >= v[1];
    case ElementwiseFn::LogicalAnd: return v[0] != 0 && v[1] != 0;
    case ElementwiseFn::LogicalOr: return v[0] != 0 || v[1] != 0;
    case ElementwiseFn::LogicalXor: return (v[0] != 0) != (v[1] != 0);
    case ElementwiseFn::Minimum: return std::isnan(v[0]) || std::isnan(v[1]) ? kNaN : std::min(v[0], v[1]);
    case ElementwiseFn::Maximum: return std::isnan(v[0]) || std::isnan(v[1]) ? kNaN : std::max(v[0], v[1]);
    case ElementwiseFn::Mod: {  // floor-style (fmod false, the default)
      if (v[1] == 0) return integer ? 0.0 : kNaN;
      double r = std::fmod(v[0], v[1]);
      if (r != 0 && ((r < 0) != (v[1] < 0))) r += v[1];
      return r;
    }
    case ElementwiseFn::Where: return v[0] != 0 ? v[1] : v[2];
    case ElementwiseFn::Cast: return v[0];
    case ElementwiseFn::Add: return v[0] + v[1];
    case ElementwiseFn::Sub: return v[0] - v[1];
    case ElementwiseFn::Mul: return v[0] * v[1];
    case ElementwiseFn::Div: return integer ? (v[1] == 0 ? 0 : std::trunc(v[0] / v[1])) : v[0] / v[1];
    case ElementwiseFn::Pow: return std::pow(v[0], v[1]);
    case ElementwiseFn::Neg: return -v[0];
  }
  return kNaN;
}

// The integer value wrapped into `dtype`'s range, as the kernels' arithmetic wraps.
double wrap(double v, DType dtype) {
  if (dtype == DType::U8) return static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(v)));
  if (dtype == DType::I32) return static_cast<double>(static_cast<int32_t>(static_cast<int64_t>(v)));
  return v;
}

TEST(TypedElementwise, EveryOpMatchesTheReferenceInEveryDtypeAndBroadcast) {
  for (const ElementwiseOp& op : elementwise_ops()) {
    if (op.rule == ElementwiseRule::Cast) continue;  // its own test below
    for (DType dtype : cpu_dtypes(op.rule)) {
      for (const ShapeCase& sc : shape_cases(op.arity)) {
        std::vector<HostTensor> inputs;
        for (size_t k = 0; k < sc.in.size(); ++k) {
          const DType d = op.rule == ElementwiseRule::Where && k == 0 ? DType::Bool : dtype;
          std::vector<double> values = sample(d);
          std::rotate(values.begin(), values.begin() + static_cast<long>(k % values.size()), values.end());
          inputs.push_back(make(d, sc.in[k], values));
        }
        std::vector<DType> dtypes;
        for (const HostTensor& t : inputs) dtypes.push_back(t.dtype());
        Result<DType> out_dtype = elementwise_output_dtype(op, dtypes, std::nullopt);
        ASSERT_TRUE(out_dtype.ok()) << op.name << ": " << out_dtype.status().to_string();
        const ElementwiseFn fn = op.fn;
        check(op.name, {}, inputs, sc.out, *out_dtype,
              [fn, dtype](const std::vector<double>& v) { return reference(fn, v, dtype); });
      }
    }
  }
}

TEST(TypedElementwise, ActivationsReadTheirAttributesAndStayFiniteForLargeInputs) {
  HostTensor x = make(DType::F32, Shape{6}, {-3.0, -0.5, 0.0, 0.25, 2.0, 120.0});
  struct Case {
    const char* op;
    std::vector<std::pair<const char*, double>> attrs;
    std::function<double(double)> ref;
  };
  const Case cases[] = {
      {"leaky_relu", {{"alpha", 0.2}}, [](double v) { return v < 0 ? 0.2 * v : v; }},
      {"elu", {{"alpha", 0.5}}, [](double v) { return v < 0 ? 0.5 * std::expm1(v) : v; }},
      {"celu", {{"alpha", 2.0}}, [](double v) { return std::max(0.0, v) + std::min(0.0, 2.0 * std::expm1(v / 2.0)); }},
      {"selu", {{"alpha", 2.0}, {"gamma", 3.0}}, [](double v) { return 3.0 * (v <= 0 ? 2.0 * std::expm1(v) : v); }},
      {"thresholded_relu", {{"alpha", 0.1}}, [](double v) { return v > 0.1 ? v : 0.0; }},
      {"shrink", {{"lambd", 0.3}, {"bias", 0.1}}, [](double v) { return v < -0.3 ? v + 0.1 : v > 0.3 ? v - 0.1 : 0.0; }},
      // e^120 overflows f32: softplus and mish must not.
      {"softplus", {}, [](double v) { return std::max(v, 0.0) + std::log1p(std::exp(-std::fabs(v))); }},
      {"mish", {}, [](double v) { return v * std::tanh(std::max(v, 0.0) + std::log1p(std::exp(-std::fabs(v)))); }},
  };
  for (const Case& c : cases) {
    OpAttrs attrs;
    for (const auto& [name, value] : c.attrs) attrs.set(name, value);
    const auto ref = c.ref;
    check(c.op, attrs, {x}, Shape{6}, DType::F32, [ref](const std::vector<double>& v) { return ref(v[0]); });
  }
  OpAttrs zero;
  zero.set("alpha", 0.0);
  HostTensor y(DType::F32, Shape{6});
  EXPECT_TRUE(IsError(run_op("celu", zero, {x.view()}, {y.view()}), ErrorCode::InvalidArgument, {"celu", "alpha is 0"}));
  OpAttrs text;
  text.set("alpha", std::string("big"));
  EXPECT_FALSE(run_op("leaky_relu", text, {x.view()}, {y.view()}).ok());
}

TEST(TypedElementwise, ArithmeticOpsTakeIntegersAndWrap) {
  for (const char* name : {"add", "sub", "mul", "div", "pow"}) {
    const ElementwiseOp* op = integer_arithmetic_op(name);
    ASSERT_NE(op, nullptr);
    for (DType dtype : {DType::I32, DType::I64, DType::U8}) {
      std::vector<double> a = sample(dtype), b = sample(dtype);
      if (std::string_view(name) == "pow") {
        a = {2, 3, 1, 0, 5};
        b = {0, 1, 2, 3, 4};
      }
      std::rotate(b.begin(), b.begin() + 1, b.end());
      HostTensor ta = make(dtype, Shape{3, 4}, a), tb = make(dtype, Shape{4}, b);
      const ElementwiseFn fn = op->fn;
      check(name, {}, {ta, tb}, Shape{3, 4}, dtype, [fn, dtype](const std::vector<double>& v) {
        return wrap(reference(fn, v, dtype), dtype);
      });
    }
  }
  HostTensor x = make(DType::I64, Shape{4}, {1, -2, 0, 7});
  check("neg", {}, {x}, Shape{4}, DType::I64, [](const std::vector<double>& v) { return -v[0]; });
}

TEST(TypedElementwise, IntegerEdgeCasesNeverTrap) {
  const int32_t min = std::numeric_limits<int32_t>::min();
  HostTensor a(DType::I32, Shape{4}), b(DType::I32, Shape{4}), y(DType::I32, Shape{4});
  const int32_t av[] = {min, 7, -7, 5};
  const int32_t bv[] = {-1, 0, 2, -2};
  std::memcpy(a.as<int32_t>(), av, sizeof av);
  std::memcpy(b.as<int32_t>(), bv, sizeof bv);
  ASSERT_TRUE(run_op("div", {}, {a.view(), b.view()}, {y.view()}).ok());
  EXPECT_EQ(y.as<int32_t>()[0], min);  // -min wraps
  EXPECT_EQ(y.as<int32_t>()[1], 0);    // x / 0 = 0
  EXPECT_EQ(y.as<int32_t>()[2], -3);   // toward zero
  EXPECT_EQ(y.as<int32_t>()[3], -2);
  ASSERT_TRUE(run_op("abs", {}, {a.view()}, {y.view()}).ok());
  EXPECT_EQ(y.as<int32_t>()[0], min);  // |min| wraps
  HostTensor base = make(DType::I64, Shape{4}, {2, 1, -1, -1});
  HostTensor exponent = make(DType::I64, Shape{4}, {-1, -5, -3, -4});
  HostTensor p(DType::I64, Shape{4});
  ASSERT_TRUE(run_op("pow", {}, {base.view(), exponent.view()}, {p.view()}).ok());
  EXPECT_EQ(std::vector<int64_t>(p.as<int64_t>(), p.as<int64_t>() + 4), (std::vector<int64_t>{0, 1, -1, 1}));
}

TEST(TypedElementwise, ModTakesTheDivisorsSignOrWithFmodTheDividends) {
  HostTensor a = HostTensor::i64(Shape{4}, {7, -7, 7, -7});
  HostTensor b = HostTensor::i64(Shape{4}, {3, 3, -3, -3});
  HostTensor y(DType::I64, Shape{4});
  ASSERT_TRUE(run_op("mod", {}, {a.view(), b.view()}, {y.view()}).ok());
  EXPECT_EQ(std::vector<int64_t>(y.as<int64_t>(), y.as<int64_t>() + 4), (std::vector<int64_t>{1, 2, -2, -1}));
  OpAttrs fmod;
  fmod.set("fmod", true);
  ASSERT_TRUE(run_op("mod", fmod, {a.view(), b.view()}, {y.view()}).ok());
  EXPECT_EQ(std::vector<int64_t>(y.as<int64_t>(), y.as<int64_t>() + 4), (std::vector<int64_t>{1, -1, 1, -1}));
  HostTensor min = HostTensor::i64(Shape{2}, {std::numeric_limits<int64_t>::min(), 5});
  HostTensor divisor = HostTensor::i64(Shape{2}, {-1, 0});
  HostTensor z(DType::I64, Shape{2});
  ASSERT_TRUE(run_op("mod", {}, {min.view(), divisor.view()}, {z.view()}).ok());  // no trap
  EXPECT_EQ(z.as<int64_t>()[0], 0);
  EXPECT_EQ(z.as<int64_t>()[1], 0);
}

TEST(TypedElementwise, FloatEdgeValues) {
  HostTensor x = HostTensor::f32(Shape{8}, {0.5f, 1.5f, 2.5f, -2.5f, -0.5f, static_cast<float>(kNaN),
                                           static_cast<float>(kInf), -static_cast<float>(kInf)});
  HostTensor y(DType::F32, Shape{8});
  ASSERT_TRUE(run_op("round", {}, {x.view()}, {y.view()}).ok());
  const float rounded[] = {0, 2, 2, -2, -0.0f};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(y.f()[i], rounded[i]) << i;
  EXPECT_TRUE(std::isnan(y.f()[5]));
  ASSERT_TRUE(run_op("sign", {}, {x.view()}, {y.view()}).ok());
  EXPECT_TRUE(std::isnan(y.f()[5]));
  EXPECT_EQ(y.f()[6], 1.0f);
  EXPECT_EQ(y.f()[7], -1.0f);
  HostTensor b(DType::Bool, Shape{8});
  OpAttrs only_negative;
  only_negative.set("positive", false);
  ASSERT_TRUE(run_op("isinf", only_negative, {x.view()}, {b.view()}).ok());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b.as<uint8_t>()[i], i == 7 ? 1 : 0) << i;
  ASSERT_TRUE(run_op("isnan", {}, {x.view()}, {b.view()}).ok());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b.as<uint8_t>()[i], i == 5 ? 1 : 0) << i;
  HostTensor one = HostTensor::f32(Shape{}, {1.0f});
  ASSERT_TRUE(run_op("maximum", {}, {x.view(), one.view()}, {y.view()}).ok());
  EXPECT_TRUE(std::isnan(y.f()[5]));  // NaN wins
  EXPECT_EQ(y.f()[0], 1.0f);
}

TEST(TypedElementwise, BoolReadsAnyNonZeroByteAsTrue) {
  HostTensor a(DType::Bool, Shape{3}), b(DType::Bool, Shape{3}), y(DType::Bool, Shape{3});
  const uint8_t av[] = {2, 0, 255}, bv[] = {1, 7, 0};
  std::memcpy(a.as<uint8_t>(), av, 3);
  std::memcpy(b.as<uint8_t>(), bv, 3);
  ASSERT_TRUE(run_op("logical_and", {}, {a.view(), b.view()}, {y.view()}).ok());
  EXPECT_EQ(y.as<uint8_t>()[0], 1);
  EXPECT_EQ(y.as<uint8_t>()[1], 0);
  EXPECT_EQ(y.as<uint8_t>()[2], 0);
  ASSERT_TRUE(run_op("equal", {}, {a.view(), b.view()}, {y.view()}).ok());
  EXPECT_EQ(y.as<uint8_t>()[0], 1);  // true == true, whatever the bytes
}

TEST(TypedElementwise, CastBetweenEveryPairOfDtypes) {
  const DType all[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8, DType::Bool};
  for (DType from : all) {
    for (DType to : all) {
      HostTensor x = make(from, Shape{2, 4}, sample(from));
      OpAttrs attrs;
      attrs.set("dtype", std::string(dtype_name(to)));
      check("cast", attrs, {x}, Shape{2, 4}, to, [from, to](const std::vector<double>& v) {
        double r = v[0];
        if (to == DType::Bool) return r != 0 ? 1.0 : 0.0;
        if (is_integer(to)) {
          r = std::trunc(r);
          // From a float: saturate. From an integer: wrap, as a C cast, numpy and torch.
          if (is_integer(from)) return wrap(r, to);
          if (to == DType::U8) r = std::min(255.0, std::max(0.0, r));
        }
        return r;
      });
    }
  }
}

TEST(TypedElementwise, CastFromFloatSaturatesAndNaNIsZero) {
  HostTensor x = HostTensor::f32(Shape{5}, {3e9f, -3e9f, static_cast<float>(kNaN), -1.7f, 300.0f});
  OpAttrs to_i32;
  to_i32.set("dtype", std::string("i32"));
  HostTensor y(DType::I32, Shape{5});
  ASSERT_TRUE(run_op("cast", to_i32, {x.view()}, {y.view()}).ok());
  EXPECT_EQ(y.as<int32_t>()[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(y.as<int32_t>()[1], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(y.as<int32_t>()[2], 0);
  EXPECT_EQ(y.as<int32_t>()[3], -1);
  OpAttrs to_u8;
  to_u8.set("dtype", std::string("u8"));
  HostTensor z(DType::U8, Shape{5});
  ASSERT_TRUE(run_op("cast", to_u8, {x.view()}, {z.view()}).ok());
  EXPECT_EQ(z.as<uint8_t>()[4], 255);
  EXPECT_EQ(z.as<uint8_t>()[3], 0);
  OpAttrs to_bool;
  to_bool.set("dtype", std::string("bool"));
  HostTensor b(DType::Bool, Shape{5});
  ASSERT_TRUE(run_op("cast", to_bool, {x.view()}, {b.view()}).ok());
  EXPECT_EQ(b.as<uint8_t>()[2], 1);  // NaN is true
}

TEST(TypedElementwise, ErrorsNameTheOpAndTheOperand) {
  HostTensor f = HostTensor::f32(Shape{2}, {1, 2});
  HostTensor i = HostTensor::i64(Shape{2}, {1, 2});
  HostTensor b(DType::Bool, Shape{2});
  HostTensor y(DType::Bool, Shape{2});
  EXPECT_TRUE(IsError(run_op("equal", {}, {f.view(), i.view()}, {y.view()}), ErrorCode::InvalidArgument, {"equal: a has dtype f32 and b has i64"}));
  HostTensor yf(DType::F32, Shape{2});
  EXPECT_TRUE(IsError(run_op("where", {}, {f.view(), f.view(), f.view()}, {yf.view()}), ErrorCode::InvalidArgument, {"where: cond has dtype f32; it must be bool"}));
  EXPECT_TRUE(IsError(run_op("cos", {}, {i.view()}, {y.view()}), ErrorCode::InvalidArgument, {"floating"}));
  EXPECT_TRUE(IsError(run_op("logical_and", {}, {b.view(), f.view()}, {y.view()}), ErrorCode::InvalidArgument, {"b has dtype f32; it must be bool"}));
  EXPECT_TRUE(IsError(run_op("abs", {}, {b.view()}, {y.view()}), ErrorCode::InvalidArgument, {"not bool"}));
  EXPECT_TRUE(IsError(run_op("cast", {}, {f.view()}, {yf.view()}), ErrorCode::NotFound, {"'dtype' is required"}));
  OpAttrs bad;
  bad.set("dtype", std::string("f64"));
  EXPECT_TRUE(IsError(run_op("cast", bad, {f.view()}, {yf.view()}), ErrorCode::InvalidArgument, {"unknown dtype 'f64'"}));
  // The output's dtype is the rule's: a comparison writes bool.
  EXPECT_TRUE(IsError(run_op("less", {}, {f.view(), f.view()}, {yf.view()}), ErrorCode::InvalidArgument, {"less"}));
  HostTensor three = HostTensor::f32(Shape{3}, {1, 2, 3});
  EXPECT_TRUE(IsError(run_op("minimum", {}, {f.view(), three.view()}, {yf.view()}), ErrorCode::InvalidArgument, {"minimum"}));
}

}  // namespace
}  // namespace planrt::kernels
