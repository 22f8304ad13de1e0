// Builder-made engine programs in the runtime (docs/design.md §6).
// - MethodMeta's engine-scratch estimate (method_meta.h MemoryEstimate::engine_scratch_bytes):
//   private engines cost the sum of their scratch_bytes, engines the compile specs put on
//   the shared pool the largest, per device; answered from the file alone.
// - The seam with the engine backend on the CPU device: the scratch_bytes the builder
//   records is the backend's own plan (the backend refuses a mismatch at load), and the
//   engines compute what the cpu partition computes, pooled or not. (The backend itself is
//   tested in tests/backends/engine.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "format/writer.h"
#include "planrt/backends/engine.h"
#include "planrt/builder/builder.h"
#include "planrt/format/program_generated.h"
#include "planrt/runtime/program.h"
#include "support/built_programs.h"

namespace planrt {
namespace {

builder::TransformerOptions blocks(const std::string& partition, const std::string& device) {
  builder::TransformerOptions o;
  o.layers = 3;
  o.d_model = 32;
  o.heads = 4;
  o.ffn_per_block = {64, 256, 1024};
  o.max_seq = 32;
  o.weights = "random:1";
  o.partition = partition;
  o.device = device;
  return o;
}

Result<Program> load(const builder::TransformerOptions& o, bool shared) {
  builder::BuildOptions b;
  b.shared_scratch = shared;
  return fixtures::load_transformer(o, b);
}

Result<MethodMeta> meta_of(const builder::TransformerOptions& o, bool shared) {
  PLANRT_ASSIGN_OR_RETURN(Program program, load(o, shared));
  return program.method_meta("forward");
}

const MemoryEstimate* estimate_on(const MethodMeta& m, Device d) {
  for (const MemoryEstimate& e : m.memory) {
    if (e.device == d) return &e;
  }
  return nullptr;
}

std::vector<uint64_t> engine_scratch(const MethodMeta& m) {
  std::vector<uint64_t> out;
  for (const SegmentInfo& s : m.segments) {
    if (s.backend == "engine") out.push_back(s.scratch_bytes);
  }
  return out;
}

TEST(EngineMeta, PrivateEnginesCostTheSumAndPooledOnesTheLargest) {
  for (const char* device : {"cpu", "cuda:0"}) {
    SCOPED_TRACE(device);
    Device d = *parse_device(device);
    Result<MethodMeta> priv = meta_of(blocks("engine-per-block", device), false);
    ASSERT_TRUE(priv.ok()) << priv.status().to_string();
    std::vector<uint64_t> each = engine_scratch(*priv);
    ASSERT_EQ(each.size(), 3u);
    // Differing FFN widths: three different requirements.
    EXPECT_LT(each[0], each[1]);
    EXPECT_LT(each[1], each[2]);
    for (const SegmentInfo& s : priv->segments) {
      EXPECT_FALSE(s.shared_scratch) << s.name;
      if (s.backend != "engine") continue;
      // Each engine's plan records its lower bound: positive, at most the plan, and close to it
      // (a transformer block's lifetimes are a chain the greedy packs within a few percent).
      EXPECT_GT(s.scratch_lower_bound_bytes, 0u) << s.name;
      EXPECT_LE(s.scratch_lower_bound_bytes, s.scratch_bytes) << s.name;
      EXPECT_LE(static_cast<double>(s.scratch_bytes), 1.1 * static_cast<double>(s.scratch_lower_bound_bytes))
          << s.name;
    }
    const MemoryEstimate* e = estimate_on(*priv, d);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->engine_scratch_bytes, std::accumulate(each.begin(), each.end(), uint64_t{0}));

    Result<MethodMeta> pooled = meta_of(blocks("engine-per-block", device), true);
    ASSERT_TRUE(pooled.ok()) << pooled.status().to_string();
    EXPECT_EQ(engine_scratch(*pooled), each);  // the engines themselves do not change
    for (const SegmentInfo& s : pooled->segments) EXPECT_TRUE(s.shared_scratch) << s.name;
    const MemoryEstimate* p = estimate_on(*pooled, d);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->engine_scratch_bytes, each[2]);
    // Nothing else in the estimate moves.
    EXPECT_EQ(p->planned_bytes, e->planned_bytes);
    EXPECT_EQ(p->weights_bytes, e->weights_bytes);
  }
}

TEST(EngineMeta, CudaSegmentsBetweenEnginesAreNotPooled) {
  Result<MethodMeta> priv = meta_of(blocks("engine-cuda-interleaved", "cuda:1"), false);
  ASSERT_TRUE(priv.ok()) << priv.status().to_string();
  std::vector<uint64_t> each = engine_scratch(*priv);
  ASSERT_EQ(each.size(), 3u);
  const MemoryEstimate* e = estimate_on(*priv, Device::cuda(1));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->engine_scratch_bytes, 3 * each[0]);  // three attention halves of one shape
  Result<MethodMeta> pooled = meta_of(blocks("engine-cuda-interleaved", "cuda:1"), true);
  ASSERT_TRUE(pooled.ok());
  for (const SegmentInfo& s : pooled->segments) EXPECT_EQ(s.shared_scratch, s.backend == "engine") << s.name;
  EXPECT_EQ(estimate_on(*pooled, Device::cuda(1))->engine_scratch_bytes, each[0]);
}

// Three engines of one method without weights: a [S, 8] relu chain each, the middle one
// twice as long, so each has its own requirement. `specs[i]` is the segment's own
// use_shared_activation_scratch ("" for none); `program_spec` the program's.
Result<MethodMeta> three_engines(const std::string& program_spec, const std::vector<std::string>& specs) {
  std::string text = R"({"format": "planrt-model/1", "methods": [{"name": "forward", "backend": "engine",
    "device": "cuda:0", "dims": {"S": {"min": 1, "max": 16}},
    "inputs": [{"name": "x", "dtype": "f32", "shape": ["S", 8]}], "outputs": ["y"], "nodes": [
      {"op": "relu", "inputs": ["x"], "outputs": ["a0"], "segment": "e0"},
      {"op": "relu", "inputs": ["a0"], "outputs": ["b0"], "segment": "e0"},
      {"op": "relu", "inputs": ["b0"], "outputs": ["a1"], "segment": "e1"},
      {"op": "concat", "inputs": ["a1", "a1"], "outputs": ["c1"], "attrs": {"dim": 1}, "segment": "e1"},
      {"op": "slice", "inputs": ["c1"], "outputs": ["b1"], "attrs": {"dim": 1, "start": 0, "end": 8}, "segment": "e1"},
      {"op": "relu", "inputs": ["b1"], "outputs": ["a2"], "segment": "e2"},
      {"op": "relu", "inputs": ["a2"], "outputs": ["y"], "segment": "e2"}]}]})";
  PLANRT_ASSIGN_OR_RETURN(builder::Model model, builder::parse_model_json(text));
  PLANRT_ASSIGN_OR_RETURN(builder::BuiltProgram built, builder::build_program(model));
  fb::ProgramT program = built.program();
  auto kv = [](const std::string& value) {
    auto out = std::make_unique<fb::KeyValueT>();
    out->key = "use_shared_activation_scratch";
    out->value = value;
    return out;
  };
  if (!program_spec.empty()) program.compile_specs.push_back(kv(program_spec));
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i].empty()) program.methods[0]->segments[i]->compile_specs.push_back(kv(specs[i]));
  }
  PLANRT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, format::serialize_program(std::move(program), {}));
  PLANRT_ASSIGN_OR_RETURN(Program p, Program::load_bytes(std::move(bytes)));
  return p.method_meta("forward");
}

TEST(EngineMeta, SegmentSpecsOverrideTheProgramsAndPrivateAndPooledAdd) {
  Result<MethodMeta> base = three_engines("", {});
  ASSERT_TRUE(base.ok()) << base.status().to_string();
  std::vector<uint64_t> each = engine_scratch(*base);
  ASSERT_EQ(each.size(), 3u);
  ASSERT_GT(each[1], each[0]);
  ASSERT_GT(each[0], 0u);
  auto scratch = [](const Result<MethodMeta>& m) {
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.ok() ? m->memory.back().engine_scratch_bytes : 0;
  };
  const uint64_t sum = each[0] + each[1] + each[2];
  const uint64_t largest = *std::max_element(each.begin(), each.end());
  EXPECT_EQ(scratch(base), sum);
  EXPECT_EQ(scratch(three_engines("true", {})), largest);
  EXPECT_EQ(scratch(three_engines("1", {})), largest);
  // The segment's own spec is read after the program's (the runtime's order): it wins.
  EXPECT_EQ(scratch(three_engines("true", {"false", "false", "false"})), sum);
  // Pooled e0 and e2, private e1: e1's own plus the larger of the pooled two.
  EXPECT_EQ(scratch(three_engines("true", {"", "0", ""})), each[1] + std::max(each[0], each[2]));
  EXPECT_EQ(scratch(three_engines("", {"true", "", "true"})), each[1] + std::max(each[0], each[2]));
  // A value the backend refuses at load ("maybe") does not turn the pool on here.
  Result<MethodMeta> maybe = three_engines("maybe", {});
  EXPECT_EQ(scratch(maybe), sum);
  ASSERT_TRUE(maybe.ok());
  for (const SegmentInfo& s : maybe->segments) EXPECT_FALSE(s.shared_scratch);
}

Result<std::vector<float>> forward(Program& p, int64_t s) {
  std::vector<float> x(static_cast<size_t>(s * 32));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  PLANRT_ASSIGN_OR_RETURN(Method m, p.load_method("forward"));
  TensorView in = TensorView::contiguous(x.data(), DType::F32, {1, s, 32});
  PLANRT_ASSIGN_OR_RETURN(std::vector<Tensor> out, m.execute({&in, 1}));
  auto v = out[0].values<float>();
  return std::vector<float>(v.begin(), v.end());
}

TEST(BuiltEngines, RunOnTheCpuDeviceAndMatchTheCpuPartition) {
  ASSERT_TRUE(register_engine_backend().ok());
  Result<Program> cpu = load(blocks("cpu", "cpu"), false);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  for (const char* partition : {"engine", "engine-per-block"}) {
    for (bool shared : {false, true}) {
      SCOPED_TRACE(testing::Message() << partition << (shared ? " shared" : " private"));
      Result<Program> engines = load(blocks(partition, "cpu"), shared);
      ASSERT_TRUE(engines.ok()) << engines.status().to_string();
      for (int64_t s : {32, 7, 1}) {
        Result<std::vector<float>> want = forward(*cpu, s);
        Result<std::vector<float>> got = forward(*engines, s);
        ASSERT_TRUE(want.ok()) << want.status().to_string();
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        ASSERT_EQ(want->size(), got->size());
        for (size_t i = 0; i < want->size(); ++i) {
          ASSERT_NEAR((*want)[i], (*got)[i], 1e-5f) << "S=" << s << " i=" << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace planrt
