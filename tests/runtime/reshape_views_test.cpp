// Reshapes as views in a delegate's planned scratch (Graph.scratch_plan_views,
// planning/engine_scratch.h): a reshape from one planned intermediate to another takes its
// input's place, so the step copies nothing; a reshape that reads a segment input or writes
// a segment output keeps its copy. What the builder stores, and that engines and cuda
// segments (on the host test device) computing through those views give the cpu backend's
// bits at several sequence lengths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "builder/builder_test_util.h"
#include "format/fb_types.h"
#include "planrt/backends/engine.h"
#include "planrt/builder/builder.h"
#include "planrt/platform/device_allocator.h"
#include "planrt/runtime/program.h"
#include "support/built_programs.h"
#include "support/status_matchers.h"
#include "support/test_device.h"

namespace planrt {
namespace {

// h = linear(x); h4 = reshape(h) -> r4 = relu(h4) -> r = reshape(r4); s = h + r, the
// method's output, and y = reshape(r), another. h is read after its reshape, so without views
// h, h4 and r4 are live at the relu (three places); with them h|h4 and r4|r (two). y and s
// are the caller's memory: y's reshape stays a copy. `backend` is the method's: every node
// runs there.
std::string model_json(const std::string& backend, const std::string& device) {
  return R"({
  "format": "planrt-model/1",
  "weights": {"random": {"seed": 5, "std": 0.2}},
  "constants": {"w": {"dtype": "f32", "shape": [64, 64]}, "b": {"dtype": "f32", "shape": [64]}},
  "methods": [{"name": "forward", "backend": ")" + backend + R"(", "device": ")" + device + R"(",
    "dims": {"S": {"min": 1, "max": 32}},
    "inputs": [{"name": "x", "dtype": "f32", "shape": ["S", 64]}],
    "outputs": ["s", "y"],
    "nodes": [
      {"op": "linear", "inputs": ["x", "w", "b"], "outputs": ["h"]},
      {"op": "reshape", "inputs": ["h"], "outputs": ["h4"], "attrs": {"shape": ["S", 4, 16]}},
      {"op": "relu", "inputs": ["h4"], "outputs": ["r4"]},
      {"op": "reshape", "inputs": ["r4"], "outputs": ["r"], "attrs": {"shape": ["S", 64]}},
      {"op": "add", "inputs": ["h", "r"], "outputs": ["s"]},
      {"op": "reshape", "inputs": ["r"], "outputs": ["y"], "attrs": {"shape": ["S", 4, 16]}}
    ]}]})";
}

Result<builder::Model> model(const std::string& backend, const std::string& device) {
  return builder::parse_model_json(model_json(backend, device), ".");
}

// The first delegate segment's graph, with its values by name.
struct SegmentGraph {
  fb::GraphT graph;
  std::map<std::string, const fb::ValueT*> values;
};

Result<SegmentGraph> first_segment(const builder::Model& m, const builder::BuildOptions& options) {
  PLANRT_ASSIGN_OR_RETURN(builder::BuiltProgram built, builder::build_program(m, options));
  const fb::MethodT& method = *built.program().methods.at(0);
  if (method.segments.empty()) return make_error(ErrorCode::NotFound, "no segment");
  SegmentGraph out;
  flatbuffers::GetRoot<fb::Graph>(method.segments[0]->blob.data())->UnPackTo(&out.graph);
  for (const auto& v : out.graph.values) out.values[v->name] = v.get();
  return out;
}

Result<std::vector<float>> forward(Method& m, int64_t s) {
  std::vector<float> x(static_cast<size_t>(s * 64));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  TensorView in = TensorView::contiguous(x.data(), DType::F32, {s, 64});
  PLANRT_ASSIGN_OR_RETURN(std::vector<Tensor> out, m.execute({&in, 1}));
  std::vector<float> both;
  for (const Tensor& t : out) {
    auto v = t.values<float>();
    both.insert(both.end(), v.begin(), v.end());
  }
  return both;
}

void expect_same_bits(Method& reference, Method& m) {
  for (int64_t s : {32, 7, 1}) {
    SCOPED_TRACE(s);
    ASSERT_OK_AND_ASSIGN(std::vector<float> want, forward(reference, s));
    ASSERT_OK_AND_ASSIGN(std::vector<float> got, forward(m, s));
    ASSERT_EQ(want.size(), got.size());
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
  }
}

TEST(ReshapeViews, ABuiltEngineStoresEachReshapeBetweenIntermediatesAtItsInputsPlace) {
  ASSERT_OK_AND_ASSIGN(builder::Model m, model("engine", "cpu"));
  builder::BuildOptions options;
  options.plan_engine_scratch = true;
  ASSERT_OK_AND_ASSIGN(SegmentGraph g, first_segment(m, options));
  EXPECT_TRUE(g.graph.scratch_plan_views);
  EXPECT_TRUE(g.graph.scratch_plan_stored);
  for (const char* name : {"h", "h4", "r4", "r"}) {
    ASSERT_TRUE(g.values.contains(name)) << name;
    EXPECT_EQ(g.values[name]->kind, fb::ValueKind::Planned) << name;
  }
  EXPECT_EQ(g.values["h4"]->offset, g.values["h"]->offset);
  EXPECT_EQ(g.values["r"]->offset, g.values["r4"]->offset);
  // h (with h4) lives to the add, beside r4 (with r): two places, not four.
  EXPECT_NE(g.values["r4"]->offset, g.values["h"]->offset);
  EXPECT_EQ(g.graph.scratch_bytes, 2u * 32 * 64 * 4) << "h|h4 and r4|r at S = 32";
  // s and y are the segment's outputs, the caller's memory: y's reshape stays a copy.
  EXPECT_NE(g.values["s"]->kind, fb::ValueKind::Planned);
  EXPECT_NE(g.values["y"]->kind, fb::ValueKind::Planned);
}

TEST(ReshapeViews, CpuEnginesThroughViewsGiveTheCpuBackendsBits) {
  ASSERT_TRUE(register_engine_backend().ok());
  ASSERT_OK_AND_ASSIGN(builder::Model cpu_model, model("cpu", "cpu"));
  ASSERT_OK_AND_ASSIGN(Program cpu_program, fixtures::load_built_program(cpu_model));
  LoadMethodOptions plain;  // the engines' kernels: weights as stored, not packed
  plain.backend_options["cpu"] = {{"pack_weights", "false"}};
  ASSERT_OK_AND_ASSIGN(Method reference, cpu_program.load_method("forward", plain));
  ASSERT_OK_AND_ASSIGN(builder::Model engine_model, model("engine", "cpu"));
  for (bool planned : {false, true}) {
    SCOPED_TRACE(planned ? "planned in the method's arena" : "private scratch");
    builder::BuildOptions options;
    options.plan_engine_scratch = planned;
    ASSERT_OK_AND_ASSIGN(Program program, fixtures::load_built_program(engine_model, options));
    ASSERT_OK_AND_ASSIGN(Method m, program.load_method("forward"));
    expect_same_bits(reference, m);
  }
}

TEST(ReshapeViews, CudaSegmentsThroughViewsGiveTheCpuBackendsBits) {
  ASSERT_OK_AND_ASSIGN(builder::Model cpu_model, model("cpu", "cpu"));
  ASSERT_OK_AND_ASSIGN(Program cpu_program, fixtures::load_built_program(cpu_model));
  LoadMethodOptions plain;  // the engines' kernels: weights as stored, not packed
  plain.backend_options["cpu"] = {{"pack_weights", "false"}};
  ASSERT_OK_AND_ASSIGN(Method reference, cpu_program.load_method("forward", plain));
  // Loading a program registers the real CUDA allocator in CUDA builds; this test's device
  // is the host test allocator, which takes its slot (each test is a process of its own).
  if (get_device_allocator(DeviceType::CUDA) != nullptr) {
    ASSERT_TRUE(unregister_device_allocator(DeviceType::CUDA).ok());
  }
  testing::ScopedTestAllocator cuda;
  ASSERT_TRUE(cuda.status().ok()) << cuda.status().to_string();
  testing::ScopedTestBackend backend("cuda", &cuda.allocator());
  ASSERT_TRUE(backend.status().ok());
  ASSERT_OK_AND_ASSIGN(builder::Model cuda_model, model("cuda", "cuda:0"));
  ASSERT_OK_AND_ASSIGN(SegmentGraph g, first_segment(cuda_model, {}));
  EXPECT_TRUE(g.graph.scratch_operand) << "a cuda segment's intermediates are planned by default";
  EXPECT_EQ(g.values["h4"]->offset, g.values["h"]->offset);
  ASSERT_OK_AND_ASSIGN(Program program, fixtures::load_built_program(cuda_model));
  ASSERT_OK_AND_ASSIGN(Method m, program.load_method("forward"));
  expect_same_bits(reference, m);
}

}  // namespace
}  // namespace planrt
