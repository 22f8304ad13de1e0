// Every way a model description can be wrong gives an error naming the place and the cause.
#include <gtest/gtest.h>

#include "builder_test_util.h"
#include "model_json_util.h"

namespace planrt::builder {
namespace {

using btest::OneMethod;

const char* kW = R"("w": {"dtype": "f32", "shape": [4, 8]})";

OneMethod nodes(std::string n, std::string constants = "") {
  OneMethod m;
  m.nodes = std::move(n);
  m.constants = std::move(constants);
  return m;
}

Result<Model> parse(const OneMethod& m) { return parse_model_json(m.json()); }

TEST(ModelErrors, JsonThatDoesNotParseReportsWhere) {
  auto r = parse_model_json("{\n  \"format\": \"planrt-model/1\",\n  \"methods\": [,]\n}");
  EXPECT_ERROR_CONTAINS(r, "invalid JSON");
  EXPECT_ERROR_CONTAINS(r, "line 3");
}

TEST(ModelErrors, DocumentMustBeAnObjectWithTheFormatTag) {
  EXPECT_ERROR_CONTAINS(parse_model_json("[1, 2]"), "the document must be an object, got array");
  EXPECT_ERROR_CONTAINS(parse_model_json(R"({"methods": []})"), "missing \"format\"");
  EXPECT_ERROR_CONTAINS(parse_model_json(R"({"format": "planrt-model/2", "methods": []})"),
                        "\"format\" is \"planrt-model/2\", expected \"planrt-model/1\"");
  EXPECT_ERROR_CONTAINS(parse_model_json(R"({"format": "planrt-model/1", "methods": []})"), "the model has no methods");
  EXPECT_ERROR_CONTAINS(parse_model_json(R"({"format": "planrt-model/1", "methods": [], "nodes": []})"),
                        "unknown key \"nodes\"");
}

TEST(ModelErrors, UnknownOpNamesNodeAndOp) {
  auto r = parse(nodes(R"({"op": "conv3d", "inputs": ["x"], "outputs": ["y"]})"));
  EXPECT_ERROR_CONTAINS(r, "method 'forward', node 0 (op conv3d, output 'y'): unknown op 'conv3d' (known ops: linear");
}

TEST(ModelErrors, WrongOperandCount) {
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "linear", "inputs": ["x"], "outputs": ["y"]})")),
                        "node 0 (op linear, output 'y'): wrong operand count: linear takes 2 to 3 inputs, got 1");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "relu", "inputs": ["x", "x"], "outputs": ["y"]})")),
                        "wrong operand count: relu takes 1 inputs, got 2");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y", "z"]})")),
                        "wrong output count: relu has 1 outputs, got 2");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "linear", "inputs": [null, "w"], "outputs": ["y"]})", kW)),
                        "input 0 is required but absent");
}

TEST(ModelErrors, ShapeMismatchBetweenNodes) {
  OneMethod m = nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["h"]},
                         {"op": "linear", "inputs": ["h", "w"], "outputs": ["y"]})",
                      R"("w": {"dtype": "f32", "shape": [4, 6]})");
  EXPECT_ERROR_CONTAINS(parse(m), "method 'forward', node 1 (op linear, output 'y'): shape mismatch: operand 0 'h' "
                                  "(f32 [S, 8]) has [8] input features but operand 1 'w' (f32 [4, 6]) expects [6]");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "add", "inputs": ["x", "w"], "outputs": ["y"]})", kW)),
                        "shapes [S, 8] and [4, 8] do not broadcast");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "layer_norm", "inputs": ["x", "v"], "outputs": ["y"]})",
                                    R"("v": {"dtype": "f32", "shape": [7]})")),
                        "operand 1 'v' (f32 [7]) must have shape [8]");
}

TEST(ModelErrors, MissingConstant) {
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "linear", "inputs": ["x", "fc.weight"], "outputs": ["y"]})", kW)),
                        "node 0 (op linear, output 'y'): input 1 'fc.weight' is missing: neither a value of the "
                        "method nor a constant of the model");
}

TEST(ModelErrors, DtypeMismatch) {
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "linear", "inputs": ["x", "w"], "outputs": ["y"]})",
                                    R"("w": {"dtype": "f16", "shape": [4, 8]})")),
                        "dtype mismatch: operand 1 'w' (f16 [4, 8]) but operand 0 'x' (f32 [S, 8])");
  OneMethod m = nodes(R"({"op": "embedding", "inputs": ["x", "t"], "outputs": ["y"]})",
                      R"("t": {"dtype": "f32", "shape": [4, 8]})");
  EXPECT_ERROR_CONTAINS(parse(m), "operand 0 'x' (f32 [S, 8]) must hold indices (i32 or i64)");
  m = nodes(R"({"op": "softmax", "inputs": ["x"], "outputs": ["y"]})");
  m.inputs = R"([{"name": "x", "dtype": "i32", "shape": ["S", 8]}])";
  EXPECT_ERROR_CONTAINS(parse(m), "must be a floating-point tensor");
}

TEST(ModelErrors, BadDims) {
  OneMethod m = nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"]})");
  m.dims = R"({"S": {"min": 5, "max": 2}})";
  EXPECT_ERROR_CONTAINS(parse(m), "method 'forward': dims: dim 'S' has min 5 > max 2");
  m.dims = R"({"S": {"min": 0, "max": 2}})";
  EXPECT_ERROR_CONTAINS(parse(m), "dim 'S' has min 0 (must be >= 1)");
  m.dims = R"({"S": {"min": 1}})";
  EXPECT_ERROR_CONTAINS(parse(m), "dim 'S': missing \"max\"");
  m.dims = R"({"S": {"min": 1, "max": "big"}})";
  EXPECT_ERROR_CONTAINS(parse(m), "\"max\" must be a number, got string");
  m.dims = R"({"T": {"min": 1, "max": 4}})";
  EXPECT_ERROR_CONTAINS(parse(m), "input 'x': shape entry 0 names dim 'S', which the method does not declare");
  m.dims = R"({"S": {"min": 1, "max": 4}})";
  m.inputs = R"([{"name": "x", "dtype": "f32", "shape": ["S", 0]}])";
  EXPECT_ERROR_CONTAINS(parse(m), "shape entry 1 is 0 (sizes are >= 1)");
}

TEST(ModelErrors, ValueUsedBeforeItIsDefined) {
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "relu", "inputs": ["h"], "outputs": ["y"]},
                                       {"op": "relu", "inputs": ["x"], "outputs": ["h"]})")),
                        "node 0 (op relu, output 'y'): input 0 'h' is used before it is defined (by node 1)");
}

TEST(ModelErrors, DuplicateValueNames) {
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"]},
                                       {"op": "relu", "inputs": ["y"], "outputs": ["y"]})")),
                        "node 1 (op relu, output 'y'): output 0 'y' is a duplicate value name");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["x"]})")),
                        "output 0 'x' is a duplicate value name");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["w"]})", kW)),
                        "output 0 'w' has the name of a constant");
  OneMethod m = nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"]})");
  m.inputs = R"([{"name": "x", "dtype": "f32", "shape": [2]}, {"name": "x", "dtype": "f32", "shape": [2]}])";
  EXPECT_ERROR_CONTAINS(parse(m), "input 1 'x' is a duplicate value name");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y@cpu"]})")),
                        "'@' is reserved in value names");
}

TEST(ModelErrors, MethodOutputs) {
  OneMethod m = nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"]})");
  m.outputs = R"(["z"])";
  EXPECT_ERROR_CONTAINS(parse(m), "method 'forward': output 0 'z' is not a value of the method");
  m.outputs = R"(["y", "y"])";
  EXPECT_ERROR_CONTAINS(parse(m), "output 1 'y' is listed twice");
  m.outputs = R"([])";
  EXPECT_ERROR_CONTAINS(parse(m), "method 'forward': has no outputs");
  m = nodes(R"({"op": "linear", "inputs": ["x", "w"], "outputs": ["y"]})", kW);
  m.outputs = R"(["w"])";
  EXPECT_ERROR_CONTAINS(parse(m), "output 0 'w' is a constant");
}

TEST(ModelErrors, NotExpressibleShapes) {
  OneMethod m = nodes(R"({"op": "reshape", "inputs": ["x"], "outputs": ["y"], "attrs": {"shape": [-1]}})");
  m.dims = R"({"S": {"min": 1, "max": 4}, "T": {"min": 1, "max": 4}})";
  m.inputs = R"([{"name": "x", "dtype": "f32", "shape": ["S", "T"]}])";
  EXPECT_ERROR_CONTAINS(parse(m), "node 0 (op reshape, output 'y'): reshape of operand 0 'x' (f32 [S, T]) to []: the -1 "
                                  "entry would be 1*S*T / 1, which is not a multiple of one named dim");
  m.nodes = R"({"op": "concat", "inputs": ["x", "x2"], "outputs": ["y"], "attrs": {"dim": 0}})";
  m.inputs = R"([{"name": "x", "dtype": "f32", "shape": ["S", 2]}, {"name": "x2", "dtype": "f32", "shape": ["T", 2]}])";
  EXPECT_ERROR_CONTAINS(parse(m), "gives a size that is not a multiple of one named dim");
  m.nodes = R"({"op": "slice", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": 0, "start": 1}})";
  EXPECT_ERROR_CONTAINS(parse(m), "in a way a program cannot express");
  m.nodes = R"({"op": "slice", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": 0, "end": -1}})";
  EXPECT_ERROR_CONTAINS(parse(m), "negative bounds on a named dim are not expressible");
  m.nodes = R"({"op": "reshape", "inputs": ["x"], "outputs": ["y"], "attrs": {"shape": ["S", 3]}})";
  EXPECT_ERROR_CONTAINS(parse(m), "element counts differ (2*S vs 3*S)");
  m.nodes = R"({"op": "add", "inputs": ["x", "x2"], "outputs": ["y"]})";
  EXPECT_ERROR_CONTAINS(parse(m), "shapes [S, 2] and [T, 2] do not broadcast");
}

TEST(ModelErrors, BadAttributes) {
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "layer_norm", "inputs": ["x"], "outputs": ["y"], "attrs": {"epsilon": 1e-5}})")),
                        "unknown attribute 'epsilon' (accepted: eps)");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "softmax", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": 2}})")),
                        "attribute 'dim' 2 is out of range for rank 2");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "softmax", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": "last"}})")),
                        "attribute 'dim' must be an integer");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "gelu", "inputs": ["x"], "outputs": ["y"], "attrs": {"approximate": "fast"}})")),
                        "attribute 'approximate' must be \"none\" or \"tanh\"");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "permute", "inputs": ["x"], "outputs": ["y"], "attrs": {"dims": [0, 0]}})")),
                        "attribute 'dims' names dim 0 twice");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "permute", "inputs": ["x"], "outputs": ["y"]})")),
                        "missing attribute 'dims'");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "transpose", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim0": 0}})")),
                        "missing attribute 'dim1'");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "reshape", "inputs": ["x"], "outputs": ["y"], "attrs": {"shape": [-1, -1]}})")),
                        "more than one -1");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "reshape", "inputs": ["x"], "outputs": ["y"], "attrs": {"shape": ["T", 8]}})")),
                        "names dim 'T', which the method does not declare");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "slice", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": 1, "start": 5, "end": 5}})")),
                        "slice [5:5] of dim 1 (size 8) of operand 0 'x' (f32 [S, 8]) is empty");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "slice", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": 1, "step": 2}})")),
                        "attribute 'step' is 2; only step 1 is supported");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "layer_norm", "inputs": ["x"], "outputs": ["y"], "attrs": {"eps": -1}})")),
                        "attribute 'eps' must be >= 0, got -1");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"], "attrs": {"k": {"a": 1}}})")),
                        "attribute 'k': unsupported attribute value of type object");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "scaled_dot_product_attention", "inputs": ["x", "x", "x"], "outputs": ["y"]})")),
                        "operand 0 'x' (f32 [S, 8]) must have rank >= 3");
}

TEST(ModelErrors, StructuralMistakesNameTheirPlace) {
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"inputs": ["x"], "outputs": ["y"]})")), "method 'forward', node 0: missing \"op\"");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "relu", "inputs": "x", "outputs": ["y"]})")),
                        "node 0: \"inputs\" must be a array, got string");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "relu", "inputs": [3], "outputs": ["y"]})")),
                        "node 0: input 0 must be a value name or null, got number");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"], "extra": 1})")),
                        "node 0: unknown key \"extra\"");
  OneMethod m = nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"]})");
  m.inputs = R"([{"name": "x", "dtype": "f64", "shape": [2]}])";
  EXPECT_ERROR_CONTAINS(parse(m), "input 'x': unknown dtype 'f64'");
  EXPECT_ERROR_CONTAINS(parse(nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"]})", R"("w": {"dtype": "f32", "shape": [2], "init": "xavier"})")),
                        "constant 'w': unknown init \"xavier\" (accepted: normal, zeros, ones)");
}

TEST(ModelErrors, BackendsAndDevices) {
  OneMethod m = nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"], "backend": "tpu"})");
  EXPECT_ERROR_CONTAINS(parse(m), "node 0: unknown backend 'tpu' (accepted: cpu, cuda, engine)");
  m = nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"], "device": "cuda:1"})");
  EXPECT_ERROR_CONTAINS(parse(m), "node 0 (op relu, output 'y'): backend cpu cannot run on device cuda:1");
  m = nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"], "backend": "cuda", "device": "cpu"})");
  EXPECT_ERROR_CONTAINS(parse(m), "backend cuda needs a cuda device, got cpu");
  m = nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"], "device": "gpu7"})");
  EXPECT_ERROR_CONTAINS(parse(m), "unknown device 'gpu7'");
  m = nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"]})");
  m.backend = "npu";
  EXPECT_ERROR_CONTAINS(parse(m), "method 'forward': unknown backend 'npu'");
}

TEST(ModelErrors, WeightsSection) {
  std::string body = R"("methods": [{"name": "f", "inputs": [{"name": "x", "dtype": "f32", "shape": [8]}],
                          "outputs": ["y"], "nodes": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["y"]}]}])";
  std::string w = R"("constants": {"w": {"dtype": "f32", "shape": [4, 8]}})";
  EXPECT_ERROR_CONTAINS(parse_model_json(R"({"format": "planrt-model/1", )" + w + ", " + body + "}"),
                        "\"constants\" are declared but \"weights\" is missing");
  EXPECT_ERROR_CONTAINS(parse_model_json(R"({"format": "planrt-model/1", "weights": {"file": "a", "random": {}}, )" + w + ", " + body + "}"),
                        "give exactly one of \"file\" or \"random\"");
  EXPECT_ERROR_CONTAINS(parse_model_json(R"({"format": "planrt-model/1", "weights": {"random": {"seed": -1}}, )" + w + ", " + body + "}"),
                        "\"seed\" must be a non-negative integer");
  EXPECT_ERROR_CONTAINS(parse_model_json(R"({"format": "planrt-model/1", "weights": {"random": {"std": -0.5}}, )" + w + ", " + body + "}"),
                        "\"std\" must be >= 0");
  EXPECT_ERROR_CONTAINS(parse_model_json(R"({"format": "planrt-model/1", "weights": {"file": "no_such.safetensors"}, )" + body + "}", "/nonexistent"),
                        "/nonexistent/no_such.safetensors");
}

TEST(ModelErrors, CompileSpecs) {
  OneMethod m = nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"]})");
  std::string text = m.json();
  text.insert(1, R"("compile_specs": {"gpu": {"a": "b"}}, )");
  EXPECT_ERROR_CONTAINS(parse_model_json(text), "compile_specs 'gpu': unknown backend 'gpu'");
  text = m.json();
  text.insert(1, R"("compile_specs": {"cuda": {"a": [1]}}, )");
  EXPECT_ERROR_CONTAINS(parse_model_json(text), "value of \"a\" must be a string, number or boolean");
}

TEST(ModelErrors, MethodNamesAndSizeLimits) {
  OneMethod m = nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"]})");
  std::string text = m.json();
  auto first = text.find("[{\"name\": \"forward\"");
  auto method = text.substr(first + 1, text.rfind(']') - first - 1);
  std::string twice = text.substr(0, first + 1) + method + ", " + method + "]}";
  EXPECT_ERROR_CONTAINS(parse_model_json(twice), "method 'forward' is declared twice");
  m.inputs = R"([{"name": "x", "dtype": "f32", "shape": [1, 1, 1, 1, 1, 1, 1, 1, 1]}])";
  EXPECT_ERROR_CONTAINS(parse(m), "input 0 'x' has rank 9 (at most 8)");
  m.inputs = R"([{"name": "x", "dtype": "f32", "shape": [4611686018427387904, 8]}])";
  EXPECT_ERROR_CONTAINS(parse(m), "overflows 64-bit byte sizes");
  m.inputs = R"([{"name": "x", "dtype": "f32", "shape": [8]}])";
  m.nodes = R"({"op": "reshape", "inputs": ["x"], "outputs": ["y"], "attrs": {"shape": [1, 1, 1, 1, 1, 1, 1, 1, 8]}})";
  EXPECT_ERROR_CONTAINS(parse(m), "node 0 (op reshape, output 'y'): output 'y' has rank 9 (at most 8)");
  m = nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"]})");
  m.inputs = R"([{"name": "", "dtype": "f32", "shape": [8]}])";
  EXPECT_ERROR_CONTAINS(parse(m), "input 0 has an empty name");
}

TEST(ModelErrors, ReadingAMissingFileIsAnIoError) {
  auto r = read_model_json("/nonexistent/model.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::IoError);
  EXPECT_ERROR_CONTAINS(r, "cannot open model description '/nonexistent/model.json'");
}

TEST(ModelErrors, FileErrorsArePrefixedWithThePath) {
  btest::TempDir dir;
  std::string path = dir.file("bad.json");
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(R"({"format": "planrt-model/1", "methods": [{"name": "m"}]})", f);
  std::fclose(f);
  EXPECT_ERROR_CONTAINS(read_model_json(path), path + ": method 'm': missing \"inputs\"");
}

// What a default load refuses for its size (a planned buffer above 1 TiB: the program
// verifier's limit) is refused when the program is built, with the loader's message; a
// large plan below it builds (nothing is allocated by a build).
TEST(ModelErrors, AProgramTooLargeToLoadIsRefusedAtBuild) {
  OneMethod m = nodes(R"({"op": "relu", "inputs": ["x"], "outputs": ["y"]})");
  m.dims = R"({"S": {"min": 1, "max": 274877906944}})";  // 2^38 rows of 8 f32: 8 TiB each
  ASSERT_OK_AND_ASSIGN(Model huge, parse(m));
  Result<BuiltProgram> refused = build_program(huge);
  EXPECT_EQ(refused.status().code(), ErrorCode::InvalidProgram) << refused.status().to_string();
  EXPECT_ERROR_CONTAINS(refused, "the program would not load: method 'forward' buffer 0 asks for");
  EXPECT_ERROR_CONTAINS(refused, "above the limit of 1099511627776");
  m.dims = R"({"S": {"min": 1, "max": 1073741824}})";  // 32 GiB each
  ASSERT_OK_AND_ASSIGN(Model large, parse(m));
  EXPECT_TRUE(build_program(large).ok()) << build_program(large).status().to_string();
}

// What the back end that runs a node cannot compute is refused when the program is built
// (kernels/dtype_support.h), not when it runs: an f16 linear or softmax on the CPU; bf16
// arithmetic and the typed elementwise ops pass.
TEST(ModelErrors, ADtypeTheCpuKernelsCannotRunIsRefusedAtBuild) {
  OneMethod m = nodes(R"({"op": "linear", "inputs": ["x", "w"], "outputs": ["y"]})",
                      R"("w": {"dtype": "f16", "shape": [4, 8]})");
  m.inputs = R"([{"name": "x", "dtype": "f16", "shape": ["S", 8]}])";
  ASSERT_OK_AND_ASSIGN(Model model, parse(m));
  Result<BuiltProgram> built = build_program(model);
  EXPECT_ERROR_CONTAINS(built, "method 'forward': node 0 (op linear, output 'y') in segment 'cpu0' (cpu on cpu)");
  EXPECT_ERROR_CONTAINS(built, "linear: x has dtype f16; the CPU kernel supports f32");
  EXPECT_EQ(built.status().code(), ErrorCode::NotSupported);
  OneMethod ok = nodes(R"({"op": "isnan", "inputs": ["x"], "outputs": ["n"]},
                          {"op": "cast", "inputs": ["n"], "outputs": ["c"], "attrs": {"dtype": "f16"}},
                          {"op": "add", "inputs": ["c", "x"], "outputs": ["y"]})");
  ok.inputs = R"([{"name": "x", "dtype": "f16", "shape": ["S", 8]}])";
  ASSERT_OK_AND_ASSIGN(Model fine, parse(ok));
  EXPECT_TRUE(build_program(fine).ok()) << build_program(fine).status().to_string();
}

// f16 (IEEE half) is computed by the CUDA kernels as bf16 is (storage only, f32 arithmetic)
// and by no CPU kernel: each arithmetic op of an f16 program for the CPU is refused at build
// with the op and the dtype named; the same nodes on a cuda back end build (no GPU needed to
// build).
TEST(ModelErrors, F16IsRefusedAtBuildOnTheCpuAndBuildsForCuda) {
  struct Case {
    const char* node;
    const char* constants;
    const char* op;
  };
  const Case cases[] = {
      {R"({"op": "linear", "inputs": ["x", "w"], "outputs": ["y"]BACKEND})", R"("w": {"dtype": "f16", "shape": [8, 8]})",
       "linear"},
      {R"({"op": "layer_norm", "inputs": ["x"], "outputs": ["y"]BACKEND})", "", "layer_norm"},
      {R"({"op": "softmax", "inputs": ["x"], "outputs": ["y"], "attrs": {"dim": -1}BACKEND})", "", "softmax"},
      {R"({"op": "gelu", "inputs": ["x"], "outputs": ["y"]BACKEND})", "", "gelu"},
      {R"({"op": "reduce_mean", "inputs": ["x"], "outputs": ["y"], "attrs": {"dims": [-1]}BACKEND})", "",
       "reduce_mean"},
  };
  auto with_backend = [](std::string node, std::string_view backend) {
    node.replace(node.find("BACKEND"), 7, backend);
    return node;
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    OneMethod cpu = nodes(with_backend(c.node, ""), c.constants);
    cpu.inputs = R"([{"name": "x", "dtype": "f16", "shape": ["S", 8]}])";
    ASSERT_OK_AND_ASSIGN(Model on_cpu, parse(cpu));
    Result<BuiltProgram> refused = build_program(on_cpu);
    EXPECT_EQ(refused.status().code(), ErrorCode::NotSupported) << refused.status().to_string();
    EXPECT_ERROR_CONTAINS(refused, fmt::format("{}: x has dtype f16; the CPU kernel supports f32", c.op));
    EXPECT_ERROR_CONTAINS(refused, "(cpu on cpu)");

    OneMethod cuda = nodes(with_backend(c.node, R"(, "backend": "cuda")"), c.constants);
    cuda.inputs = cpu.inputs;
    ASSERT_OK_AND_ASSIGN(Model on_cuda, parse(cuda));
    Result<BuiltProgram> built = build_program(on_cuda);
    EXPECT_TRUE(built.ok()) << built.status().to_string();
  }
}

}  // namespace
}  // namespace planrt::builder
