// Engine segments as the builder makes them (builder.h TransformerOptions::partition and
// device, BuildOptions::shared_scratch; docs/design.md §6): the template's engine partitions, each
// engine's profile, Planned intermediates and scratch_bytes, which must be exactly what
// plan_engine_scratch (the engine backend's own plan) gives at the profile max.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "planning/engine_scratch.h"
#include "planning/planner.h"
#include "builder_test_util.h"
#include "format/fb_types.h"
#include "format/program_file.h"
#include "model_json_util.h"
#include "planrt/builder/builder.h"

namespace planrt::builder {
namespace {

using K = fb::InstructionKind;
using btest::small;
using planning::EngineScratchPlan;
using planning::kEngineScratchAlignment;
using planning::MemoryPlan;
using planning::plan_engine_scratch;
using planning::profile_max_dims;
using planning::TensorLifetime;
using planning::verify_plan;

// A block's nodes as they run: the template's 20 less the four head permutes and the four
// head reshapes its attention absorbs, and the k and v projections packed into q's
// (builder/rewrite.h); on the host one fewer, the FFN's GELU fused into its first linear.
constexpr uint32_t kNodesPerBlock = 10;
uint32_t nodes_per_block(const char* device) {
  return std::string_view(device) == "cpu" ? kNodesPerBlock - 1 : kNodesPerBlock;
}
constexpr uint32_t kAttentionNodes = 5;  // LN1 .. the residual add after the output projection

Result<BuiltProgram> build(const TransformerOptions& o, const BuildOptions& b = {}) {
  PLANRT_ASSIGN_OR_RETURN(Model model, make_transformer(o));
  return build_program(model, b);
}

Device device_of(const fb::SegmentT& s) { return format::to_device(s.device.get()).value_or(Device::cpu()); }

Device device_of_buffer(const fb::MethodT& m, uint32_t buffer) {
  return format::to_device(m.planned_buffers[buffer]->device.get()).value_or(Device::cpu());
}

// The segment's graph in its flat form (what the engine backend reads), verified.
const fb::Graph* flat_graph(const fb::SegmentT& s) {
  flatbuffers::Verifier verifier(s.blob.data(), s.blob.size());
  if (!verifier.VerifyBuffer<fb::Graph>(nullptr)) return nullptr;
  return flatbuffers::GetRoot<fb::Graph>(s.blob.data());
}

std::unique_ptr<fb::GraphT> graph_of(const fb::SegmentT& s) {
  const fb::Graph* g = flat_graph(s);
  return g == nullptr ? nullptr : std::unique_ptr<fb::GraphT>(g->UnPack());
}

uint64_t bytes_at(const fb::ValueT& v, const std::vector<int64_t>& dims) {
  uint64_t n = element_size(format::to_dtype(v.dtype).value_or(DType::F32));
  for (const fb::DimRef& d : v.shape) {
    n *= static_cast<uint64_t>(d.dim() < 0 ? d.value() : d.value() * dims[static_cast<size_t>(d.dim())]);
  }
  return n;
}

// Everything item 1 of the brief promises for one engine segment of method `m`.
void check_engine(const fb::MethodT& m, const fb::SegmentT& s) {
  SCOPED_TRACE("engine segment " + s.name);
  ASSERT_EQ(s.backend, "engine");
  const fb::Graph* flat = flat_graph(s);
  ASSERT_NE(flat, nullptr);
  std::unique_ptr<fb::GraphT> g(flat->UnPack());

  // Kinds: graph inputs/outputs are the Delegate's operands (Temporary), weights Constant,
  // every other value Planned in the scratch (buffer 0).
  std::set<uint32_t> io(g->inputs.begin(), g->inputs.end());
  io.insert(g->outputs.begin(), g->outputs.end());
  std::set<int32_t> used_dims;
  for (uint32_t v = 0; v < g->values.size(); ++v) {
    const fb::ValueT& value = *g->values[v];
    for (const fb::DimRef& d : value.shape) {
      if (d.dim() >= 0) used_dims.insert(d.dim());
    }
    if (io.contains(v)) {
      EXPECT_EQ(value.kind, fb::ValueKind::Temporary) << value.name;
    } else if (value.kind != fb::ValueKind::Constant) {
      EXPECT_EQ(value.kind, fb::ValueKind::Planned) << value.name;
      EXPECT_EQ(value.buffer, 0u) << value.name;
    }
  }

  // Profile: each method dim the graph's shapes use, in dim order, with the method's bounds.
  ASSERT_EQ(g->profile.size(), used_dims.size());
  size_t i = 0;
  for (int32_t d : used_dims) {
    EXPECT_EQ(g->profile[i].dim(), static_cast<uint32_t>(d));
    EXPECT_EQ(g->profile[i].min(), m.dims[static_cast<size_t>(d)]->min);
    EXPECT_EQ(g->profile[i].max(), m.dims[static_cast<size_t>(d)]->max);
    ++i;
  }

  // scratch_bytes and the offsets are plan_engine_scratch's at the profile max, kernel
  // workspace included on CUDA.
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> max_dims, profile_max_dims(*flat, m.dims.size()));
  ASSERT_OK_AND_ASSIGN(EngineScratchPlan plan, plan_engine_scratch(*flat, max_dims, !device_of(s).is_cpu()));
  EXPECT_EQ(g->scratch_bytes, plan.scratch_bytes);

  // The offsets, checked on their own: lifetimes from the graph's steps, sizes at the max,
  // verify_plan (no two values alive at once overlap, all inside the scratch, aligned).
  std::vector<TensorLifetime> lives;
  MemoryPlan placed;
  placed.arena_bytes = g->scratch_bytes;
  for (uint32_t v = 0; v < g->values.size(); ++v) {
    const fb::ValueT& value = *g->values[v];
    if (value.kind != fb::ValueKind::Planned) continue;
    EXPECT_EQ(value.offset, plan.value_offsets[v]) << value.name;
    TensorLifetime life{bytes_at(value, max_dims), -1, -1};
    for (size_t k = 0; k < g->instructions.size(); ++k) {
      const fb::InstructionT& ins = *g->instructions[k];
      bool touches = std::count(ins.inputs.begin(), ins.inputs.end(), v) + std::count(ins.outputs.begin(), ins.outputs.end(), v) > 0;
      if (!touches) continue;
      if (life.first_use < 0) life.first_use = static_cast<int64_t>(k);
      life.last_use = static_cast<int64_t>(k);
    }
    ASSERT_GE(life.first_use, 0) << value.name << " is Planned but no step touches it";
    lives.push_back(life);
    placed.offsets.push_back(value.offset);
  }
  Status verified = verify_plan(lives, placed, kEngineScratchAlignment);
  EXPECT_TRUE(verified.ok()) << verified.to_string();
  if (lives.empty()) {
    EXPECT_EQ(g->scratch_bytes, 0u);
  }
}

// A cuda segment's graph as before: intermediates allocated per call, no profile.
// A cuda segment as the builder makes it by default: intermediates Planned in a scratch the
// Delegate passes (planned scratch, docs/design.md §6), operands Temporary, and a profile
// of the method's bounds.
void check_cuda_segment(const fb::SegmentT& s) {
  SCOPED_TRACE("cuda segment " + s.name);
  ASSERT_EQ(s.backend, "cuda");
  std::unique_ptr<fb::GraphT> g = graph_of(s);
  ASSERT_NE(g, nullptr);
  std::set<uint32_t> io(g->inputs.begin(), g->inputs.end());
  io.insert(g->outputs.begin(), g->outputs.end());
  for (uint32_t i = 0; i < g->values.size(); ++i) {
    const fb::ValueT& v = *g->values[i];
    if (v.kind == fb::ValueKind::Constant) continue;
    EXPECT_EQ(v.kind, io.contains(i) ? fb::ValueKind::Temporary : fb::ValueKind::Planned) << v.name;
  }
  EXPECT_FALSE(g->profile.empty());
  EXPECT_GT(g->scratch_bytes, 0u);
  EXPECT_TRUE(g->scratch_operand);
  EXPECT_TRUE(g->scratch_plan_fusion_safe);
}

// The instructions are: copy x in, one Delegate per segment in order, copy y out (none of
// the copies when the segments run on the host); crossing values live on `device`.
void check_method_shape(const fb::MethodT& m, Device device) {
  const size_t copies = device.is_cpu() ? 0 : 2;
  ASSERT_EQ(m.instructions.size(), m.segments.size() + copies);
  for (size_t i = 0; i < m.segments.size(); ++i) {
    const fb::InstructionT& d = *m.instructions[i + copies / 2];
    ASSERT_EQ(d.kind, K::Delegate) << i;
    EXPECT_EQ(d.segment, static_cast<int32_t>(i));
    EXPECT_EQ(device_of(*m.segments[i]), device) << m.segments[i]->name;
    for (uint32_t id : d.outputs) {
      EXPECT_EQ(device_of_buffer(m, m.values[id]->buffer), device) << m.values[id]->name;
    }
  }
  if (device.is_cpu()) {
    // Host only: one planned buffer, no copies at all.
    ASSERT_EQ(m.planned_buffers.size(), 1u);
    EXPECT_EQ(device_of_buffer(m, 0), Device::cpu());
  } else {
    EXPECT_EQ(m.instructions.front()->kind, K::Copy);
    EXPECT_EQ(m.instructions.back()->kind, K::Copy);
    ASSERT_EQ(m.planned_buffers.size(), 2u);
    EXPECT_EQ(device_of_buffer(m, 1), device);
  }
}

TEST(EnginePartition, EngineIsOneEngineForAllNodes) {
  for (const char* device : {"cuda:0", "cpu", "cuda:1"}) {
    for (int64_t layers : {1, 2}) {
      SCOPED_TRACE(fmt::format("{} layers={}", device, layers));
      ASSERT_OK_AND_ASSIGN(BuiltProgram built, build(small(layers, "engine", device)));
      btest::expect_plans_valid(built.program());
      const fb::MethodT& m = *built.program().methods[0];
      ASSERT_EQ(m.segments.size(), 1u);
      EXPECT_EQ(m.segments[0]->name, "engine0");
      EXPECT_EQ(m.segments[0]->num_nodes, static_cast<uint32_t>(layers) * nodes_per_block(device));
      check_method_shape(m, *parse_device(device));
      check_engine(m, *m.segments[0]);
      std::unique_ptr<fb::GraphT> g = graph_of(*m.segments[0]);
      ASSERT_EQ(g->inputs.size(), 1u);
      ASSERT_EQ(g->outputs.size(), 1u);
      EXPECT_EQ(g->values[g->inputs[0]]->name, "x");
      EXPECT_EQ(g->values[g->outputs[0]]->name, "y");
      EXPECT_GT(g->scratch_bytes, 0u);
    }
  }
}

TEST(EnginePartition, EnginePerBlockIsOneEnginePerBlock) {
  for (const char* device : {"cuda:0", "cpu"}) {
    SCOPED_TRACE(device);
    ASSERT_OK_AND_ASSIGN(BuiltProgram built, build(small(3, "engine-per-block", device)));
    btest::expect_plans_valid(built.program());
    const fb::MethodT& m = *built.program().methods[0];
    ASSERT_EQ(m.segments.size(), 3u);
    for (size_t i = 0; i < m.segments.size(); ++i) {
      EXPECT_EQ(m.segments[i]->name, fmt::format("block{}", i));
      EXPECT_EQ(m.segments[i]->num_nodes, nodes_per_block(device));
      check_engine(m, *m.segments[i]);
    }
    check_method_shape(m, *parse_device(device));
    // Block i's output is block i+1's input: planned once, on the engines' device.
    const fb::ValueT* crossing = btest::find_value(m, "blocks.0.out");
    ASSERT_NE(crossing, nullptr);
    EXPECT_EQ(crossing->kind, fb::ValueKind::Planned);
    EXPECT_EQ(device_of_buffer(m, crossing->buffer), *parse_device(device));
  }
}

TEST(EnginePartition, InterleavedMakesAttentionEnginesAndCudaMlps) {
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build(small(3, "engine-cuda-interleaved", "cuda:1")));
  btest::expect_plans_valid(built.program());
  const fb::MethodT& m = *built.program().methods[0];
  ASSERT_EQ(m.segments.size(), 6u);
  for (size_t b = 0; b < 3; ++b) {
    const fb::SegmentT& attn = *m.segments[2 * b];
    const fb::SegmentT& mlp = *m.segments[2 * b + 1];
    EXPECT_EQ(attn.name, fmt::format("block{}.attn", b));
    EXPECT_EQ(mlp.name, fmt::format("block{}.mlp", b));
    EXPECT_EQ(attn.num_nodes, kAttentionNodes);
    EXPECT_EQ(mlp.num_nodes, kNodesPerBlock - kAttentionNodes);
    check_engine(m, attn);
    check_cuda_segment(mlp);
    // The halves exchange the residual stream h: the engine's one output.
    std::unique_ptr<fb::GraphT> g = graph_of(attn);
    ASSERT_EQ(g->outputs.size(), 1u);
    EXPECT_EQ(g->values[g->outputs[0]]->name, fmt::format("blocks.{}.attn.residual", b));
    EXPECT_EQ(g->instructions.front()->op, "layer_norm");
    EXPECT_EQ(g->instructions.back()->op, "add");
  }
  check_method_shape(m, Device::cuda(1));
  // Engines of one shape ask for the same scratch.
  EXPECT_EQ(graph_of(*m.segments[0])->scratch_bytes, graph_of(*m.segments[4])->scratch_bytes);
}

TEST(EnginePartition, PerBlockFfnWidthsGiveEnginesDifferentScratch) {
  TransformerOptions o = small(3, "engine-per-block");
  o.ffn_per_block = {256, 1024, 4096};
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build(o));
  const fb::MethodT& m = *built.program().methods[0];
  ASSERT_EQ(m.segments.size(), 3u);
  std::vector<uint64_t> scratch;
  for (const auto& s : m.segments) {
    check_engine(m, *s);
    scratch.push_back(graph_of(*s)->scratch_bytes);
  }
  EXPECT_LT(scratch[0], scratch[1]);
  EXPECT_LT(scratch[1], scratch[2]);
  // The MLP's two [S, ffn] intermediates alive at once set the widest block's scratch.
  EXPECT_GE(scratch[2], 2u * 128 * 4096 * 4);
}

TEST(EnginePartition, CudaEnginesPlanTheAttentionWorkspace) {
  // A narrow MLP, so the attention step (q, k, v, its output and the score workspace of
  // the CUDA kernel) is the peak; the CPU kernels take no workspace.
  TransformerOptions o = small(1, "engine");
  o.ffn = 64;
  ASSERT_OK_AND_ASSIGN(BuiltProgram on_cuda, build(o));
  o.device = "cpu";
  ASSERT_OK_AND_ASSIGN(BuiltProgram on_cpu, build(o));
  std::unique_ptr<fb::GraphT> cuda_graph = graph_of(*on_cuda.program().methods[0]->segments[0]);
  std::unique_ptr<fb::GraphT> cpu_graph = graph_of(*on_cpu.program().methods[0]->segments[0]);
  EXPECT_GT(cuda_graph->scratch_bytes, cpu_graph->scratch_bytes);
  // The same graph otherwise: the same values, steps and profile, but for the GELU, which on
  // the host runs inside the FFN's first linear (one step and its output value fewer).
  ASSERT_EQ(cuda_graph->values.size(), cpu_graph->values.size() + 1);
  EXPECT_EQ(cuda_graph->instructions.size(), cpu_graph->instructions.size() + 1);
  ASSERT_EQ(cuda_graph->profile.size(), 1u);
  ASSERT_EQ(cpu_graph->profile.size(), 1u);
  EXPECT_EQ(cuda_graph->profile[0].max(), cpu_graph->profile[0].max());
  // At least the scores of the heads processed at once: 4 heads x 128 x 128 f32.
  EXPECT_GE(cuda_graph->scratch_bytes - cpu_graph->scratch_bytes, 4u * 128 * 128 * 4 / 2);
}

// At head dim 64 only the `fused` attribute decides whether the CUDA attention keeps its
// scores, so the engine's plan must read the step's attributes as the kernel does (issue
// 13: the plan took the defaults, planned no workspace for --attention unfused, and the
// engine failed on the GPU). The figure is the kernel's own: every head's [S, S] f32
// scores at the profile max when they fit kScoreBudget, none when fused.
TEST(EnginePartition, CudaEnginesPlanTheWorkspaceTheAttentionsFusedAttributeAsks) {
  for (bool fused : {false, true}) {
    for (const char* partition : {"engine", "engine-per-block"}) {
      SCOPED_TRACE(fmt::format("{} fused={}", partition, fused));
      TransformerOptions o = small(2, partition);
      o.d_model = 256;  // 4 heads of 64: the fused kernel's head dim
      o.max_seq = 512;
      o.fused_attention = fused;
      ASSERT_OK_AND_ASSIGN(BuiltProgram built, build(o));
      const fb::MethodT& m = *built.program().methods[0];
      int attention_steps = 0;
      for (const auto& segment : m.segments) {
        check_engine(m, *segment);
        const fb::Graph* flat = flat_graph(*segment);
        ASSERT_NE(flat, nullptr);
        ASSERT_OK_AND_ASSIGN(std::vector<int64_t> max_dims, profile_max_dims(*flat, m.dims.size()));
        ASSERT_OK_AND_ASSIGN(EngineScratchPlan plan, plan_engine_scratch(*flat, max_dims, true));
        for (size_t k = 0; k < flat->instructions()->size(); ++k) {
          if (flat->instructions()->Get(k)->op()->string_view() != "scaled_dot_product_attention") continue;
          ++attention_steps;
          EXPECT_EQ(plan.workspace_bytes[k], fused ? 0u : 4u * 512 * 512 * sizeof(float)) << "step " << k;
        }
        if (!fused) {
          EXPECT_GE(flat->scratch_bytes(), 4u * 512 * 512 * sizeof(float));
        }
      }
      EXPECT_EQ(attention_steps, 2);
    }
  }
}

TEST(EnginePartition, ProfileListsOnlyTheDimsTheEngineUses) {
  btest::OneMethod m;
  m.dims = R"({"B": {"min": 1, "max": 4}, "S": {"min": 2, "max": 16}})";
  m.inputs = R"([{"name": "x", "dtype": "f32", "shape": ["S", 8]},
                 {"name": "z", "dtype": "f32", "shape": ["B", 8]}])";
  m.outputs = R"(["y", "w"])";
  m.nodes = R"({"op": "relu", "inputs": ["x"], "outputs": ["a"], "backend": "engine", "segment": "uses_s"},
               {"op": "relu", "inputs": ["a"], "outputs": ["y"], "backend": "engine", "segment": "uses_s"},
               {"op": "relu", "inputs": ["z"], "outputs": ["w"], "backend": "engine", "segment": "uses_b",
                "device": "cpu"})";
  ASSERT_OK_AND_ASSIGN(Model model, parse_model_json(m.json()));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  const fb::MethodT& f = *built.program().methods[0];
  ASSERT_EQ(f.segments.size(), 2u);
  std::unique_ptr<fb::GraphT> s = graph_of(*f.segments[0]);
  ASSERT_EQ(s->profile.size(), 1u);
  EXPECT_EQ(s->profile[0].dim(), 1u);
  EXPECT_EQ(s->profile[0].min(), 2);
  EXPECT_EQ(s->profile[0].max(), 16);
  EXPECT_EQ(s->scratch_bytes, 16u * 8 * 4);  // a, at S = 16
  check_engine(f, *f.segments[0]);
  // An engine whose only values are its operands needs no scratch.
  std::unique_ptr<fb::GraphT> b = graph_of(*f.segments[1]);
  ASSERT_EQ(b->profile.size(), 1u);
  EXPECT_EQ(b->profile[0].dim(), 0u);
  EXPECT_EQ(b->profile[0].max(), 4);
  EXPECT_EQ(b->scratch_bytes, 0u);
  EXPECT_EQ(device_of(*f.segments[1]), Device::cpu());
  check_engine(f, *f.segments[1]);
}

TEST(EnginePartition, StaticShapedEngineHasAnEmptyProfile) {
  btest::OneMethod m;
  m.dims = "{}";
  m.inputs = R"([{"name": "x", "dtype": "f32", "shape": [4, 8]}])";
  m.backend = "engine";
  m.nodes = R"({"op": "relu", "inputs": ["x"], "outputs": ["a"]},
               {"op": "relu", "inputs": ["a"], "outputs": ["y"]})";
  ASSERT_OK_AND_ASSIGN(Model model, parse_model_json(m.json()));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  const fb::MethodT& f = *built.program().methods[0];
  std::unique_ptr<fb::GraphT> g = graph_of(*f.segments[0]);
  EXPECT_TRUE(g->profile.empty());
  EXPECT_EQ(g->scratch_bytes, 256u);  // a: 128 bytes, aligned to 256
  check_engine(f, *f.segments[0]);
}

TEST(EnginePartition, NoReuseLeavesEngineScratchToTheEnginePlanner) {
  // The backend checks scratch_bytes against its own plan, so --no-reuse (a debugging aid
  // for the method's buffers) cannot change it.
  ASSERT_OK_AND_ASSIGN(BuiltProgram reuse, build(small(1, "engine")));
  BuildOptions no_reuse;
  no_reuse.no_reuse = true;
  ASSERT_OK_AND_ASSIGN(BuiltProgram plain, build(small(1, "engine"), no_reuse));
  EXPECT_EQ(graph_of(*reuse.program().methods[0]->segments[0])->scratch_bytes,
            graph_of(*plain.program().methods[0]->segments[0])->scratch_bytes);
  check_engine(*plain.program().methods[0], *plain.program().methods[0]->segments[0]);
}

TEST(EnginePartition, EngineProgramsReadBackThroughTheVerifyingReader) {
  for (const char* partition : {"engine", "engine-per-block", "engine-cuda-interleaved"}) {
    SCOPED_TRACE(partition);
    ASSERT_OK_AND_ASSIGN(BuiltProgram built, build(small(2, partition)));
    ASSERT_OK_AND_ASSIGN(auto bytes, built.serialize());
    ASSERT_OK_AND_ASSIGN(auto file, format::ProgramFile::from_bytes(std::move(bytes)));
    const fb::Method* fm = file.program().methods()->Get(0);
    for (const fb::Segment* s : *fm->segments()) {
      if (s->backend()->string_view() != "engine") continue;
      const fb::Graph* g = s->blob_nested_root();
      ASSERT_NE(g, nullptr);
      ASSERT_NE(g->profile(), nullptr);
      EXPECT_EQ(g->profile()->size(), 1u);
      EXPECT_GT(g->scratch_bytes(), 0u);
    }
  }
}

TEST(EnginePartition, CudaPartitionsRefuseTheCpuDevice) {
  for (const char* partition : {"cuda", "cuda-per-block", "cuda-per-op", "engine-cuda-interleaved"}) {
    SCOPED_TRACE(partition);
    TransformerOptions o = small(1, partition, "cpu");
    std::string want = fmt::format("partition '{}' makes cuda segments, which need a CUDA device, but "
                                   "device is 'cpu'", partition);
    EXPECT_ERROR_CONTAINS(make_transformer(o), want);
    EXPECT_EQ(check_transformer_options(o).code(), ErrorCode::InvalidArgument);
    EXPECT_ERROR_CONTAINS(check_transformer_options(o), want);
  }
  // The host-capable partitions accept it.
  for (const char* partition : {"cpu", "engine", "engine-per-block"}) {
    Status s = check_transformer_options(small(1, partition, "cpu"));
    EXPECT_TRUE(s.ok()) << partition << ": " << s.to_string();
  }
}

TEST(EnginePartition, BadDeviceNamesAreRefused) {
  for (const char* bad : {"gpu", "cuda:", "cuda:256", "cuda:-1", "CPU", ""}) {
    SCOPED_TRACE(bad);
    TransformerOptions o = small(1, "engine", bad);
    EXPECT_ERROR_CONTAINS(make_transformer(o), fmt::format("transformer: device: unknown device '{}'", bad));
    EXPECT_EQ(check_transformer_options(o).code(), ErrorCode::InvalidArgument);
  }
  // Checked even where no segment would use it.
  EXPECT_ERROR_CONTAINS(make_transformer(small(1, "cpu", "tpu")), "unknown device 'tpu'");
}

TEST(EnginePartition, CheckTransformerOptionsRefusesWhatMakeTransformerRefuses) {
  TransformerOptions o = small(2, "engine");
  Status ok = check_transformer_options(o);
  EXPECT_TRUE(ok.ok()) << ok.to_string();
  o.heads = 5;
  EXPECT_ERROR_CONTAINS(check_transformer_options(o), "d_model 64 is not divisible by heads 5");
  o = small(2, "engine");
  o.ffn_per_block = {64};
  EXPECT_ERROR_CONTAINS(check_transformer_options(o), "ffn_per_block has 1 entries for 2 layers");
  o = small(2, "engine");
  o.weights = "random:x";
  EXPECT_ERROR_CONTAINS(check_transformer_options(o), "expected random:SEED");
  o.weights = "";
  EXPECT_ERROR_CONTAINS(check_transformer_options(o), "weights must be random:SEED or a path");
  o = small(2, "engine-per-op");
  EXPECT_ERROR_CONTAINS(check_transformer_options(o), "unknown partition 'engine-per-op'");
}

TEST(EnginePartition, CpuPartitionIgnoresTheDevice) {
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build(small(1, "cpu", "cuda:3")));
  const fb::MethodT& m = *built.program().methods[0];
  ASSERT_EQ(m.planned_buffers.size(), 1u);
  EXPECT_EQ(device_of_buffer(m, 0), Device::cpu());
}

TEST(EnginePartition, SharedScratchWritesTheProgramCompileSpecAndOnlyThen) {
  ASSERT_OK_AND_ASSIGN(BuiltProgram plain, build(small(1, "engine-per-block")));
  EXPECT_TRUE(plain.program().compile_specs.empty());
  for (const auto& s : plain.program().methods[0]->segments) EXPECT_TRUE(s->compile_specs.empty());
  BuildOptions shared;
  shared.shared_scratch = true;
  ASSERT_OK_AND_ASSIGN(BuiltProgram pooled, build(small(1, "engine-per-block"), shared));
  const auto& specs = pooled.program().compile_specs;
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0]->key, "use_shared_activation_scratch");
  EXPECT_EQ(specs[0]->value, "true");
  // Program level only: the segments carry nothing of their own.
  for (const auto& s : pooled.program().methods[0]->segments) EXPECT_TRUE(s->compile_specs.empty());
  // And it survives the file.
  ASSERT_OK_AND_ASSIGN(auto bytes, pooled.serialize());
  ASSERT_OK_AND_ASSIGN(auto file, format::ProgramFile::from_bytes(std::move(bytes)));
  ASSERT_NE(file.program().compile_specs(), nullptr);
  ASSERT_EQ(file.program().compile_specs()->size(), 1u);
  EXPECT_EQ(file.program().compile_specs()->Get(0)->key()->str(), "use_shared_activation_scratch");
  EXPECT_EQ(file.program().compile_specs()->Get(0)->value()->str(), "true");
}

// JSON models: "device" per method (where its delegate nodes run) and per node.
TEST(EngineDevice, MethodDevicePlacesDelegateNodes) {
  btest::OneMethod m;
  m.backend = "engine";
  m.extra = R"("device": "cpu",)";
  m.nodes = R"({"op": "relu", "inputs": ["x"], "outputs": ["a"]},
               {"op": "relu", "inputs": ["a"], "outputs": ["b"], "backend": "cpu"},
               {"op": "relu", "inputs": ["b"], "outputs": ["y"], "backend": "engine", "device": "cuda:2"})";
  ASSERT_OK_AND_ASSIGN(Model model, parse_model_json(m.json()));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  btest::expect_plans_valid(built.program());
  const fb::MethodT& f = *built.program().methods[0];
  ASSERT_EQ(f.segments.size(), 3u);
  EXPECT_EQ(device_of(*f.segments[0]), Device::cpu());     // the method's device
  EXPECT_EQ(device_of(*f.segments[1]), Device::cpu());     // a cpu node: the host
  EXPECT_EQ(device_of(*f.segments[2]), Device::cuda(2));   // its own
  m.extra = R"("device": "cuda:1",)";
  ASSERT_OK_AND_ASSIGN(Model on_gpu, parse_model_json(m.json()));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built_gpu, build_program(on_gpu));
  const fb::MethodT& g = *built_gpu.program().methods[0];
  EXPECT_EQ(device_of(*g.segments[0]), Device::cuda(1));
  EXPECT_EQ(device_of(*g.segments[1]), Device::cpu());  // cpu nodes ignore the method's device
}

TEST(EngineDevice, MethodDeviceErrorsNameTheMethodAndWhereTheDeviceCameFrom) {
  btest::OneMethod m;
  m.backend = "cuda";
  m.extra = R"("device": "cpu",)";
  m.nodes = R"({"op": "relu", "inputs": ["x"], "outputs": ["y"]})";
  EXPECT_ERROR_CONTAINS(parse_model_json(m.json()),
                        "method 'forward', node 0 (op relu, output 'y'): backend cuda needs a cuda "
                        "device, got cpu (from the method's \"device\")");
  m.extra = R"("device": "gpu0",)";
  EXPECT_ERROR_CONTAINS(parse_model_json(m.json()), "method 'forward': unknown device 'gpu0'");
  m.extra = R"("device": 1,)";
  EXPECT_ERROR_CONTAINS(parse_model_json(m.json()), "method 'forward': \"device\" must be a string");
}

}  // namespace
}  // namespace planrt::builder
