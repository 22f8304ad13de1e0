// Planned delegate scratch (docs/design.md §6, "planned scratch"; builder.h
// BuildOptions::plan_cuda_scratch, plan_engine_scratch): a delegate segment's intermediates
// and kernel workspace are one value of the method, passed to its Delegate instruction as
// one more output and live only while it runs.
// - What the builder writes: the operand, its size and placement, the graph's stored plan
//   (with an add's inputs kept apart from the layer_norm after it), and that the method's
//   plan lets different segments' scratch share bytes.
// - The runtime and backends: cuda segments through the test device (the scratch lies in the
//   method's device arena, nothing is allocated per call), CPU engines planned against
//   private ones (the same bits, no scratch held), the load-time option and its refusal, and
//   MethodMeta's estimate.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <set>
#include <string>

#include "builder/builder_test_util.h"
#include "format/fb_types.h"
#include "planning/engine_scratch.h"
#include "planrt/backends/engine.h"
#include "planrt/builder/builder.h"
#include "planrt/runtime/program.h"
#include "support/built_programs.h"
#include "support/status_matchers.h"
#include "support/test_device.h"

namespace planrt {
namespace {

using builder::BuildOptions;
using builder::TransformerOptions;
using builder::btest::small;

const fb::Graph* flat_graph(const fb::SegmentT& s) { return flatbuffers::GetRoot<fb::Graph>(s.blob.data()); }

Device device_of_buffer(const fb::MethodT& m, uint32_t buffer) {
  return format::to_device(m.planned_buffers[buffer]->device.get()).value_or(Device::cpu());
}

uint64_t static_bytes(const fb::ValueT& v) {
  uint64_t n = 4;
  for (const fb::DimRef& d : v.shape) n *= static_cast<uint64_t>(d.value());
  return n;
}

struct Range {
  uint64_t begin = 0, end = 0;
  bool meets(const Range& o) const { return begin < o.end && o.begin < end; }
};

// The bytes of graph value `id` at the profile max (its stored offset, its max size).
Range graph_range(const fb::Graph& g, uint32_t id, const std::vector<int64_t>& max_dims) {
  const fb::Value* v = g.values()->Get(id);
  uint64_t n = element_size(format::to_dtype(v->dtype()).value_or(DType::F32));
  for (const fb::DimRef* d : *v->shape()) {
    n *= static_cast<uint64_t>(d->dim() < 0 ? d->value() : d->value() * max_dims[static_cast<size_t>(d->dim())]);
  }
  return {v->offset(), v->offset() + n};
}

TEST(PlannedScratch, CudaSegmentsTakeTheirScratchAsAMethodValueLiveOnlyDuringTheirCall) {
  ASSERT_OK_AND_ASSIGN(builder::Model model, builder::make_transformer(small(2, "cuda-per-block")));
  ASSERT_OK_AND_ASSIGN(builder::BuiltProgram built, builder::build_program(model));
  builder::btest::expect_plans_valid(built.program());
  const fb::MethodT& m = *built.program().methods[0];
  std::vector<Range> scratch_ranges;
  int delegates = 0;
  for (size_t k = 0; k < m.instructions.size(); ++k) {
    const fb::InstructionT& ins = *m.instructions[k];
    if (ins.kind != fb::InstructionKind::Delegate) continue;
    ++delegates;
    const fb::SegmentT& seg = *m.segments[static_cast<size_t>(ins.segment)];
    SCOPED_TRACE(seg.name);
    const fb::Graph& g = *flat_graph(seg);
    ASSERT_TRUE(g.scratch_operand());
    EXPECT_TRUE(g.scratch_plan_fusion_safe());
    EXPECT_TRUE(g.scratch_plan_stored());
    ASSERT_EQ(ins.outputs.size(), g.outputs()->size() + 1);
    const uint32_t id = ins.outputs.back();
    const fb::ValueT& v = *m.values[id];
    EXPECT_EQ(v.name, seg.name + "#scratch");
    EXPECT_EQ(v.kind, fb::ValueKind::Planned);
    EXPECT_EQ(device_of_buffer(m, v.buffer), Device::cuda(0));
    for (const fb::DimRef& d : v.shape) EXPECT_LT(d.dim(), 0) << "a static shape";
    EXPECT_GE(static_bytes(v), g.scratch_bytes());
    EXPECT_GT(g.scratch_bytes(), 0u);
    // Live only at its own instruction: nothing else reads or writes it.
    for (size_t j = 0; j < m.instructions.size(); ++j) {
      if (j == k) continue;
      for (const auto* ids : {&m.instructions[j]->inputs, &m.instructions[j]->outputs}) {
        EXPECT_EQ(std::count(ids->begin(), ids->end(), id), 0) << "instruction " << j;
      }
    }
    // Every intermediate is planned in it: nothing is left for a pool.
    std::set<uint32_t> operands(g.inputs()->begin(), g.inputs()->end());
    operands.insert(g.outputs()->begin(), g.outputs()->end());
    for (uint32_t i = 0; i < g.values()->size(); ++i) {
      const fb::Value* gv = g.values()->Get(i);
      if (gv->kind() == fb::ValueKind::Constant || operands.contains(i)) continue;
      EXPECT_EQ(gv->kind(), fb::ValueKind::Planned) << gv->name()->str();
    }
    // The add + layer_norm pairs the cuda backend fuses: the norm's output never shares
    // bytes with the add's inputs, which the fused kernel reads while writing it.
    ASSERT_OK_AND_ASSIGN(std::vector<int64_t> max_dims, planning::profile_max_dims(g, m.dims.size()));
    int pairs = 0;
    for (uint32_t s = 0; s + 1 < g.instructions()->size(); ++s) {
      const fb::Instruction* add = g.instructions()->Get(s);
      const fb::Instruction* norm = g.instructions()->Get(s + 1);
      if (add->op()->str() != "add" || norm->op()->str() != "layer_norm" ||
          norm->inputs()->Get(0) != add->outputs()->Get(0)) {
        continue;
      }
      ++pairs;
      const uint32_t out = norm->outputs()->Get(0);
      if (g.values()->Get(out)->kind() != fb::ValueKind::Planned) continue;
      for (uint32_t in : *add->inputs()) {
        if (g.values()->Get(in)->kind() != fb::ValueKind::Planned || operands.contains(in)) continue;
        EXPECT_FALSE(graph_range(g, out, max_dims).meets(graph_range(g, in, max_dims)))
            << "step " << s << ": the norm's output overlaps the add's input " << g.values()->Get(in)->name()->str();
      }
    }
    EXPECT_GE(pairs, 1) << "a block has a residual add feeding a layer norm";
    scratch_ranges.push_back({v.offset, v.offset + static_bytes(v)});
  }
  ASSERT_EQ(delegates, 2);
  // The two blocks' scratch are never alive together, and the method's plan lets them
  // share bytes: the device arena holds one block's scratch at a time, not the sum.
  EXPECT_TRUE(scratch_ranges[0].meets(scratch_ranges[1]));
}

TEST(PlannedScratch, OffTheCudaSegmentsKeepTheWarmPoolForm) {
  ASSERT_OK_AND_ASSIGN(builder::Model model, builder::make_transformer(small(1, "cuda")));
  BuildOptions pool;
  pool.plan_cuda_scratch = false;
  ASSERT_OK_AND_ASSIGN(builder::BuiltProgram built, builder::build_program(model, pool));
  const fb::MethodT& m = *built.program().methods[0];
  for (const auto& seg : m.segments) {
    const fb::Graph& g = *flat_graph(*seg);
    EXPECT_FALSE(g.scratch_operand());
    EXPECT_EQ(g.scratch_bytes(), 0u);
    for (const fb::Value* v : *g.values()) EXPECT_NE(v->kind(), fb::ValueKind::Planned) << v->name()->str();
  }
  for (const auto& v : m.values) EXPECT_EQ(v->name.find("#scratch"), std::string::npos) << v->name;
}

TEST(PlannedScratch, EnginesArePlannedOnlyWhenAskedAndNeverAlsoPooled) {
  ASSERT_OK_AND_ASSIGN(builder::Model model, builder::make_transformer(small(2, "engine-per-block", "cpu")));
  ASSERT_OK_AND_ASSIGN(builder::BuiltProgram plain, builder::build_program(model));
  for (const auto& seg : plain.program().methods[0]->segments) EXPECT_FALSE(flat_graph(*seg)->scratch_operand());
  BuildOptions planned;
  planned.plan_engine_scratch = true;
  ASSERT_OK_AND_ASSIGN(builder::BuiltProgram built, builder::build_program(model, planned));
  builder::btest::expect_plans_valid(built.program());
  for (const auto& seg : built.program().methods[0]->segments) {
    EXPECT_TRUE(flat_graph(*seg)->scratch_operand()) << seg->name;
    EXPECT_FALSE(flat_graph(*seg)->scratch_plan_fusion_safe()) << "engines do not fuse";
  }
  planned.shared_scratch = true;
  EXPECT_ERROR_CONTAINS(builder::build_program(model, planned), "both pooled (shared_scratch) and planned");
}

std::vector<float> input(int64_t s, int64_t d) {
  std::vector<float> x(static_cast<size_t>(s * d));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  return x;
}

Result<std::vector<float>> forward(Method& m, int64_t s, int64_t d) {
  std::vector<float> x = input(s, d);
  TensorView in = TensorView::contiguous(x.data(), DType::F32, {1, s, d});
  PLANRT_ASSIGN_OR_RETURN(std::vector<Tensor> out, m.execute({&in, 1}));
  auto v = out[0].values<float>();
  return std::vector<float>(v.begin(), v.end());
}

TEST(PlannedScratch, ACudaMethodRunsWithItsScratchInTheDeviceArenaAndAllocatesNothingPerCall) {
  ASSERT_OK_AND_ASSIGN(Program host, fixtures::load_transformer(small(2, "cpu", "cpu")));
  ASSERT_OK_AND_ASSIGN(Method reference, host.load_method("forward"));
  testing::ScopedTestAllocator cuda;
  ASSERT_TRUE(cuda.status().ok());
  // Every operand, the planned scratch included, must lie in the test device's memory.
  testing::ScopedTestBackend backend("cuda", &cuda.allocator());
  ASSERT_TRUE(backend.status().ok());
  ASSERT_OK_AND_ASSIGN(Program device, fixtures::load_transformer(small(2, "cuda-per-block")));
  ASSERT_OK_AND_ASSIGN(MethodMeta meta, device.method_meta("forward"));
  for (const SegmentInfo& s : meta.segments) EXPECT_TRUE(s.planned_scratch) << s.name;
  ASSERT_OK_AND_ASSIGN(Method m, device.load_method("forward"));
  const int64_t allocations_after_load = cuda->counts().allocations;
  EXPECT_EQ(cuda->counts().bytes_live, static_cast<int64_t>(meta.planned_bytes_on(Device::cuda(0))));
  for (int64_t s : {128, 5, 1}) {
    SCOPED_TRACE(s);
    ASSERT_OK_AND_ASSIGN(std::vector<float> want, forward(reference, s, 64));
    ASSERT_OK_AND_ASSIGN(std::vector<float> got, forward(m, s, 64));
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(want[i], got[i], 1e-5f) << i;
  }
  EXPECT_EQ(cuda->counts().allocations, allocations_after_load) << "nothing on the device per call";
}

Result<Program> planned_engines(const TransformerOptions& o, bool planned) {
  BuildOptions b;
  b.plan_engine_scratch = planned;
  return fixtures::load_transformer(o, b);
}

TEST(PlannedScratch, PlannedCpuEnginesGiveThePrivateOnesBitsAndHoldNoScratch) {
  ASSERT_TRUE(register_engine_backend().ok());
  const TransformerOptions o = small(2, "engine-per-block", "cpu");
  ASSERT_OK_AND_ASSIGN(Program private_program, planned_engines(o, false));
  ASSERT_OK_AND_ASSIGN(Program planned_program, planned_engines(o, true));
  ASSERT_OK_AND_ASSIGN(MethodMeta private_meta, private_program.method_meta("forward"));
  ASSERT_OK_AND_ASSIGN(MethodMeta planned_meta, planned_program.method_meta("forward"));
  uint64_t largest = 0;
  for (const SegmentInfo& s : planned_meta.segments) {
    EXPECT_TRUE(s.planned_scratch);
    EXPECT_FALSE(s.shared_scratch);
    largest = std::max(largest, s.scratch_bytes);
  }
  ASSERT_EQ(planned_meta.memory.size(), 1u);
  EXPECT_EQ(planned_meta.memory[0].engine_scratch_bytes, 0u) << "it is in the planned bytes";
  EXPECT_GE(planned_meta.memory[0].planned_bytes, private_meta.memory[0].planned_bytes + largest / 2);
  EXPECT_GT(private_meta.memory[0].engine_scratch_bytes, 0u);
  // Planned: less than private's planned + scratch, since the engines' scratch overlap.
  EXPECT_LT(planned_meta.memory[0].planned_bytes,
            private_meta.memory[0].planned_bytes + private_meta.memory[0].engine_scratch_bytes);

  ASSERT_OK_AND_ASSIGN(Method private_method, private_program.load_method("forward"));
  ASSERT_OK_AND_ASSIGN(EngineScratchStats before, engine_scratch_stats(Device::cpu()));
  ASSERT_OK_AND_ASSIGN(Method planned_method, planned_program.load_method("forward"));
  ASSERT_OK_AND_ASSIGN(EngineScratchStats stats, engine_scratch_stats(Device::cpu()));
  EXPECT_EQ(stats.planned_contexts - before.planned_contexts, 2);
  EXPECT_EQ(stats.private_scratch_bytes, before.private_scratch_bytes) << "the planned ones hold none";
  EXPECT_GT(stats.planned_scratch_bytes, before.planned_scratch_bytes);
  for (int64_t s : {128, 9, 1}) {
    SCOPED_TRACE(s);
    ASSERT_OK_AND_ASSIGN(std::vector<float> want, forward(private_method, s, 64));
    ASSERT_OK_AND_ASSIGN(std::vector<float> got, forward(planned_method, s, 64));
    ASSERT_EQ(want.size(), got.size());
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << "bit-identical";
  }
}

TEST(PlannedScratch, TheLoadTimeOptionRunsAPlannedProgramPrivateAndRefusesAnUnplannedOne) {
  ASSERT_TRUE(register_engine_backend().ok());
  const TransformerOptions o = small(1, "engine", "cpu");
  ASSERT_OK_AND_ASSIGN(Program planned_program, planned_engines(o, true));
  ASSERT_OK_AND_ASSIGN(Program private_program, planned_engines(o, false));
  LoadMethodOptions off;
  off.backend_options["engine"] = {{std::string(kPlannedScratchOption), "false"}};
  ASSERT_OK_AND_ASSIGN(EngineScratchStats before, engine_scratch_stats(Device::cpu()));
  ASSERT_OK_AND_ASSIGN(Method as_private, planned_program.load_method("forward", off));
  ASSERT_OK_AND_ASSIGN(EngineScratchStats stats, engine_scratch_stats(Device::cpu()));
  EXPECT_EQ(stats.private_contexts - before.private_contexts, 1);
  EXPECT_EQ(stats.planned_contexts, before.planned_contexts);
  ASSERT_OK_AND_ASSIGN(Method planned, planned_program.load_method("forward"));
  ASSERT_OK_AND_ASSIGN(std::vector<float> want, forward(planned, 33, 64));
  ASSERT_OK_AND_ASSIGN(std::vector<float> got, forward(as_private, 33, 64));
  EXPECT_EQ(want, got);

  LoadMethodOptions on;
  on.backend_options["engine"] = {{std::string(kPlannedScratchOption), "true"}};
  Result<Method> refused = private_program.load_method("forward", on);
  EXPECT_EQ(refused.status().code(), ErrorCode::InvalidArgument);
  EXPECT_ERROR_CONTAINS(refused, "use_planned_scratch=true, but the program was built without a planned scratch");
  EXPECT_ERROR_CONTAINS(refused, "--engine-scratch planned");
  LoadMethodOptions bad;
  bad.backend_options["engine"] = {{std::string(kPlannedScratchOption), "sometimes"}};
  EXPECT_ERROR_CONTAINS(planned_program.load_method("forward", bad), "use_planned_scratch");
}

}  // namespace
}  // namespace planrt

namespace planrt {
namespace {

const MemoryEstimate* on_device(const MethodMeta& m, Device d) {
  for (const MemoryEstimate& e : m.memory) {
    if (e.device == d) return &e;
  }
  return nullptr;
}

// MemoryEstimate's prediction (issue 19 item 2): the plan's bytes, the weights, engine
// scratch and the math libraries' handles a CUDA device needs, from the file alone; a
// program whose cuda segments take the warm pool says its prediction is a lower bound.
TEST(PredictedDeviceBytes, AddTheLibraryHandlesTheDevicesSegmentsNeed) {
  constexpr uint64_t kMiB = 1 << 20;
  ASSERT_OK_AND_ASSIGN(Program planned, fixtures::load_transformer(small(1, "cuda")));
  ASSERT_OK_AND_ASSIGN(MethodMeta m, planned.method_meta("forward"));
  const MemoryEstimate* cuda = on_device(m, Device::cuda(0));
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->library_bytes, 4 * kMiB) << "a cuBLAS handle";
  EXPECT_FALSE(cuda->uses_warm_pool);
  EXPECT_EQ(cuda->predicted_bytes(),
            cuda->planned_bytes + cuda->weights_bytes + cuda->engine_scratch_bytes + cuda->library_bytes +
                cuda->page_rounding_bytes);
  EXPECT_EQ(on_device(m, Device::cpu())->library_bytes, 0u);

  BuildOptions pool;
  pool.plan_cuda_scratch = false;
  ASSERT_OK_AND_ASSIGN(Program pooled, fixtures::load_transformer(small(1, "cuda"), pool));
  ASSERT_OK_AND_ASSIGN(MethodMeta pm, pooled.method_meta("forward"));
  EXPECT_TRUE(on_device(pm, Device::cuda(0))->uses_warm_pool);

  // A convolution on the device needs cuDNN's handle too.
  const std::string text = R"({"format": "planrt-model/1", "weights": {"random": {"seed": 3}},
    "constants": {"w": {"dtype": "f32", "shape": [4, 3, 3, 3]}},
    "methods": [{"name": "forward", "backend": "cuda", "dims": {"N": {"min": 1, "max": 2}},
      "inputs": [{"name": "x", "dtype": "f32", "shape": ["N", 3, 8, 8]}], "outputs": ["y"],
      "nodes": [{"op": "conv2d", "inputs": ["x", "w"], "outputs": ["c"]},
                {"op": "relu", "inputs": ["c"], "outputs": ["y"]}]}]})";
  ASSERT_OK_AND_ASSIGN(builder::Model model, builder::parse_model_json(text));
  ASSERT_OK_AND_ASSIGN(Program conv, fixtures::load_built_program(model));
  ASSERT_OK_AND_ASSIGN(MethodMeta cm, conv.method_meta("forward"));
  EXPECT_EQ(on_device(cm, Device::cuda(0))->library_bytes, 12 * kMiB) << "cuBLAS and cuDNN";

  // So does bf16 attention (cuDNN's fused attention, kernels/cuda/attention.cpp).
  TransformerOptions bf16 = small(1, "cuda");
  bf16.dtype = DType::BF16;
  bf16.heads = bf16.d_model / 64;  // bf16 attention has head dim 64
  ASSERT_OK_AND_ASSIGN(Program attention, fixtures::load_transformer(bf16));
  ASSERT_OK_AND_ASSIGN(MethodMeta am, attention.method_meta("forward"));
  EXPECT_EQ(on_device(am, Device::cuda(0))->library_bytes, 12 * kMiB) << "cuBLAS and cuDNN";

  // Causal bf16 attention runs planrt's own kernel (cuDNN's operation takes no causal mask
  // before 9.21): no cuDNN handle is opened, none is counted; the same graph without the
  // mask counts it.
  for (const bool causal : {true, false}) {
    const std::string causal_text = fmt::format(R"({{"format": "planrt-model/1",
      "methods": [{{"name": "forward", "backend": "cuda", "dims": {{"S": {{"min": 1, "max": 64}}}},
        "inputs": [{{"name": "x", "dtype": "bf16", "shape": [1, 8, "S", 64]}}], "outputs": ["y"],
        "nodes": [{{"op": "scaled_dot_product_attention", "inputs": ["x", "x", "x"], "outputs": ["y"],
                    "attrs": {{"causal": {}}}}}]}}]}})", causal);
    ASSERT_OK_AND_ASSIGN(builder::Model causal_model, builder::parse_model_json(causal_text));
    ASSERT_OK_AND_ASSIGN(Program causal_program, fixtures::load_built_program(causal_model));
    ASSERT_OK_AND_ASSIGN(MethodMeta causal_meta, causal_program.method_meta("forward"));
    EXPECT_EQ(on_device(causal_meta, Device::cuda(0))->library_bytes, (causal ? 4 : 12) * kMiB)
        << (causal ? "causal: cuBLAS only" : "not causal: cuBLAS and cuDNN");
  }
}

// The device's page rounding in the prediction: a segment's constants above 1 MiB are one
// allocation, rounded to 2 MiB pages once; small ones pack; a planned buffer above 1 MiB is
// rounded up; nothing of this on the CPU.
TEST(PredictedDeviceBytes, AddTheDevicesPageRounding) {
  constexpr uint64_t kMiB = 1 << 20;
  // Two 3 MiB weights (768 x 1024 f32) and two small biases: packed 6 MiB, no rounding; a
  // third 3 MiB weight makes 9 MiB, rounded to 10.
  auto model = [](int weights) {
    std::string constants, nodes, prev = "x";
    for (int k = 0; k < weights; ++k) {
      const bool up = k % 2 == 0;
      constants += fmt::format(R"("w{0}": {{"dtype": "f32", "shape": [{1}, {2}]}}, "b{0}": {{"dtype": "f32", "shape": [{1}]}},)",
                               k, up ? 1024 : 768, up ? 768 : 1024);
      std::string out = k == weights - 1 ? "y" : fmt::format("h{}", k);
      nodes += fmt::format(R"({{"op": "linear", "inputs": ["{}", "w{}", "b{}"], "outputs": ["{}"]}},)", prev, k, k, out);
      prev = out;
    }
    constants.pop_back();
    nodes.pop_back();
    return R"({"format": "planrt-model/1", "weights": {"random": {"seed": 1}}, "constants": {)" + constants +
           R"(}, "methods": [{"name": "forward", "backend": "cuda", "dims": {"S": {"min": 1, "max": 4}},
           "inputs": [{"name": "x", "dtype": "f32", "shape": [1, "S", 768]}], "outputs": ["y"], "nodes": [)" +
           nodes + "]}]}";
  };
  // The estimate on cuda:0, with what its planned buffers round by (each on its own).
  struct Estimate {
    MemoryEstimate e;
    uint64_t planned_rounding = 0;
  };
  auto estimate = [](const std::string& text) -> Result<Estimate> {
    PLANRT_ASSIGN_OR_RETURN(builder::Model m, builder::parse_model_json(text));
    PLANRT_ASSIGN_OR_RETURN(Program p, fixtures::load_built_program(m));
    PLANRT_ASSIGN_OR_RETURN(MethodMeta meta, p.method_meta("forward"));
    const MemoryEstimate* e = on_device(meta, Device::cuda(0));
    if (e == nullptr) return Status(ErrorCode::NotFound, "no cuda:0 estimate");
    if (on_device(meta, Device::cpu())->page_rounding_bytes != 0) {
      return Status(ErrorCode::Internal, "page rounding on the CPU");
    }
    Estimate out{*e, 0};
    for (const PlannedBufferInfo& b : meta.planned_buffers) {
      if (b.device == Device::cuda(0) && b.size_bytes > kMiB) {
        out.planned_rounding += (b.size_bytes + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB) - b.size_bytes;
      }
    }
    return out;
  };
  {
    ASSERT_OK_AND_ASSIGN(Estimate two, estimate(model(2)));
    EXPECT_EQ(two.e.weights_bytes, 6 * kMiB + (1024 + 768) * 4);
    // Only the planned buffers can round here (the packed weights are whole pages).
    EXPECT_EQ(two.e.page_rounding_bytes, two.planned_rounding);
  }
  ASSERT_OK_AND_ASSIGN(Estimate three_of, estimate(model(3)));
  const MemoryEstimate& three = three_of.e;
  EXPECT_EQ(three.weights_bytes, 9 * kMiB + (2 * 1024 + 768) * 4);
  EXPECT_EQ(three.page_rounding_bytes, three_of.planned_rounding + 1 * kMiB) << "9 MiB of packed weights take 10";
  EXPECT_EQ(three.predicted_bytes(), three.planned_bytes + three.weights_bytes + three.library_bytes +
                                         three.page_rounding_bytes);
}

}  // namespace
}  // namespace planrt
