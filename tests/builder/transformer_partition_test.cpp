// The transformer template's cuda partitions (builder.h TransformerOptions::partition):
// "cuda" (one segment), "cuda-per-block" (one per block), "cuda-per-op" (one per node).
// Whatever the split, values crossing segments stay planned on cuda:0 and only the method
// input and output cross to and from the host.
#include <gtest/gtest.h>

#include <iostream>
#include <set>
#include <string>

#include <fmt/format.h>

#include "builder/graph.h"
#include "builder_test_util.h"
#include "format/program_file.h"
#include "planrt/builder/builder.h"

namespace planrt::builder {
namespace {

using btest::find_value;
using btest::small;
using K = fb::InstructionKind;

// Nodes of a block as the template writes it, and as it runs where its attention absorbs the
// head permutes and reshapes and reads one packed q|k|v projection (builder/rewrite.h: not
// across per-op segments).
constexpr uint32_t kWrittenNodesPerBlock = 20;
constexpr uint32_t kNodesPerBlock = kWrittenNodesPerBlock - 10;

Device device_of_buffer(const fb::MethodT& m, uint32_t buffer) {
  const fb::DeviceRef& d = *m.planned_buffers[buffer]->device;
  return Device{static_cast<DeviceType>(d.type()), d.index()};
}

// The device a method value lives on (values are Planned in a method's top level).
Device device_of_value(const fb::MethodT& m, uint32_t id) {
  const fb::ValueT& v = *m.values[id];
  EXPECT_EQ(v.kind, fb::ValueKind::Planned) << v.name;
  return device_of_buffer(m, v.buffer);
}

size_t expected_segments(const std::string& partition, int64_t layers) {
  if (partition == "cuda") return 1;
  if (partition == "cuda-per-block") return static_cast<size_t>(layers);
  return static_cast<size_t>(layers) * kWrittenNodesPerBlock;  // cuda-per-op
}

std::string expected_name(const std::string& partition, size_t index) {
  if (partition == "cuda") return "cuda0";
  if (partition == "cuda-per-block") return fmt::format("block{}", index);
  return fmt::format("op{}", index);
}

// Everything the brief promises for one built program of the template.
void check_cuda_program(const BuiltProgram& built, const std::string& partition, int64_t layers) {
  btest::expect_plans_valid(built.program());
  const fb::ProgramT& p = built.program();
  ASSERT_EQ(p.methods.size(), 1u);
  const fb::MethodT& m = *p.methods[0];
  const size_t segments = expected_segments(partition, layers);

  // Segments: the expected count and names, all cuda on cuda:0, covering every node.
  ASSERT_EQ(m.segments.size(), segments);
  uint32_t nodes = 0;
  for (size_t i = 0; i < m.segments.size(); ++i) {
    const fb::SegmentT& s = *m.segments[i];
    EXPECT_EQ(s.name, expected_name(partition, i));
    EXPECT_EQ(s.backend, "cuda") << s.name;
    ASSERT_NE(s.device, nullptr) << s.name;
    EXPECT_EQ(s.device->type(), fb::DeviceType::CUDA) << s.name;
    EXPECT_EQ(s.device->index(), 0) << s.name;
    EXPECT_FALSE(s.blob.empty()) << s.name;
    if (partition == "cuda-per-block") {
      EXPECT_EQ(s.num_nodes, kNodesPerBlock) << s.name;
    } else if (partition == "cuda-per-op") {
      EXPECT_EQ(s.num_nodes, 1u) << s.name;
    }
    nodes += s.num_nodes;
  }
  EXPECT_EQ(nodes, static_cast<uint32_t>(layers) *
                       (partition == "cuda-per-op" ? kWrittenNodesPerBlock : kNodesPerBlock));

  // Instructions: copy x to the device, one delegate per segment in order, copy y back.
  ASSERT_EQ(m.instructions.size(), segments + 2);
  const fb::InstructionT& in_copy = *m.instructions.front();
  const fb::InstructionT& out_copy = *m.instructions.back();
  ASSERT_EQ(in_copy.kind, K::Copy);
  ASSERT_EQ(out_copy.kind, K::Copy);
  ASSERT_EQ(in_copy.inputs.size(), 1u);
  ASSERT_EQ(in_copy.outputs.size(), 1u);
  ASSERT_EQ(out_copy.inputs.size(), 1u);
  ASSERT_EQ(out_copy.outputs.size(), 1u);
  EXPECT_EQ(m.values[in_copy.inputs[0]]->name, "x");
  EXPECT_EQ(device_of_value(m, in_copy.inputs[0]), Device::cpu());
  EXPECT_EQ(device_of_value(m, in_copy.outputs[0]), Device::cuda(0));
  EXPECT_EQ(m.values[out_copy.outputs[0]]->name, "y");
  EXPECT_EQ(device_of_value(m, out_copy.outputs[0]), Device::cpu());
  EXPECT_EQ(device_of_value(m, out_copy.inputs[0]), Device::cuda(0));
  for (size_t i = 1; i + 1 < m.instructions.size(); ++i) {
    const fb::InstructionT& d = *m.instructions[i];
    ASSERT_EQ(d.kind, K::Delegate) << "instruction " << i;
    EXPECT_EQ(d.segment, static_cast<int32_t>(i - 1));
    for (uint32_t id : d.inputs) EXPECT_EQ(device_of_value(m, id), Device::cuda(0)) << m.values[id]->name;
    for (uint32_t id : d.outputs) EXPECT_EQ(device_of_value(m, id), Device::cuda(0)) << m.values[id]->name;
  }

  // Only x and y live on the host; every other planned value (all values crossing
  // segments) is in the cuda:0 buffer.
  std::set<std::string> host;
  for (const auto& v : m.values) {
    if (v->kind != fb::ValueKind::Planned) continue;
    Device d = device_of_buffer(m, v->buffer);
    if (d.is_cpu()) {
      host.insert(v->name);
    } else {
      EXPECT_EQ(d, Device::cuda(0)) << v->name;
    }
  }
  EXPECT_EQ(host, (std::set<std::string>{"x", "y"}));
  // The block outputs cross segments (per block, with two or more blocks), and so does
  // every intermediate (per op).
  std::string crossing;
  if (partition == "cuda-per-op") crossing = "blocks.0.attn.residual";
  if (partition == "cuda-per-block" && layers > 1) crossing = "blocks.0.out";
  if (!crossing.empty()) {
    const fb::ValueT* v = find_value(m, crossing);
    ASSERT_NE(v, nullptr) << crossing;
    EXPECT_EQ(device_of_buffer(m, v->buffer), Device::cuda(0)) << crossing;
  }

  // Plans: one on the host, one on cuda:0, each within 5% of its lower bound.
  ASSERT_EQ(m.planned_buffers.size(), 2u);
  EXPECT_EQ(device_of_buffer(m, 0), Device::cpu());
  EXPECT_EQ(device_of_buffer(m, 1), Device::cuda(0));
  auto plans = built.plans();
  ASSERT_EQ(plans.size(), 2u);
  for (const PlanSummary& plan : plans) {
    EXPECT_GE(plan.ratio(), 1.0) << to_string(plan.device);
    EXPECT_LE(plan.ratio(), 1.05) << to_string(plan.device) << ": " << plan.planned_bytes << " / "
                                  << plan.lower_bound_bytes;
    std::cout << fmt::format("[ plan     ] {} layers={} {}: {} segments, planned {} B, lower bound {} B, "
                             "ratio {:.4f}\n",
                             partition, layers, to_string(plan.device), m.segments.size(),
                             plan.planned_bytes, plan.lower_bound_bytes, plan.ratio());
  }

  // The program reads back through the verifying reader, segments and all.
  ASSERT_OK_AND_ASSIGN(auto bytes, built.serialize());
  ASSERT_OK_AND_ASSIGN(auto file, format::ProgramFile::from_bytes(std::move(bytes)));
  const fb::Method* fm = file.program().methods()->Get(0);
  ASSERT_NE(fm->segments(), nullptr);
  EXPECT_EQ(fm->segments()->size(), segments);
  EXPECT_EQ(fm->instructions()->size(), segments + 2);
  for (size_t i = 0; i < fm->segments()->size(); ++i) {
    EXPECT_EQ(fm->segments()->Get(i)->name()->str(), expected_name(partition, i));
  }
}

TEST(TransformerPartition, CudaIsOneSegment) {
  for (int64_t layers : {1, 2, 3}) {
    SCOPED_TRACE(testing::Message() << "layers " << layers);
    ASSERT_OK_AND_ASSIGN(Model model, make_transformer(small(layers, "cuda")));
    ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
    check_cuda_program(built, "cuda", layers);
  }
}

TEST(TransformerPartition, CudaPerBlockIsOneSegmentPerBlock) {
  for (int64_t layers : {1, 2, 4}) {
    SCOPED_TRACE(testing::Message() << "layers " << layers);
    ASSERT_OK_AND_ASSIGN(Model model, make_transformer(small(layers, "cuda-per-block")));
    for (const ir::Node& n : model.graph().methods[0].nodes) EXPECT_FALSE(n.segment.empty());
    ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
    check_cuda_program(built, "cuda-per-block", layers);
  }
}

TEST(TransformerPartition, CudaPerOpIsOneSegmentPerNode) {
  for (int64_t layers : {1, 2, 3}) {
    SCOPED_TRACE(testing::Message() << "layers " << layers);
    ASSERT_OK_AND_ASSIGN(Model model, make_transformer(small(layers, "cuda-per-op")));
    ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
    check_cuda_program(built, "cuda-per-op", layers);
  }
  // Two layers make a model of many delegates (the pool benchmark needs >= 25).
  ASSERT_OK_AND_ASSIGN(Model model, make_transformer(small(2, "cuda-per-op")));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  EXPECT_GE(built.program().methods[0]->segments.size(), 25u);
}

TEST(TransformerPartition, PerOpDelegatesHoldOneKernelEach) {
  ASSERT_OK_AND_ASSIGN(Model model, make_transformer(small(1, "cuda-per-op")));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  const fb::MethodT& m = *built.program().methods[0];
  const auto& nodes = model.graph().methods[0].nodes;
  ASSERT_EQ(m.segments.size(), nodes.size());
  for (size_t i = 0; i < m.segments.size(); ++i) {
    const std::vector<uint8_t>& blob = m.segments[i]->blob;
    flatbuffers::Verifier verifier(blob.data(), blob.size());
    ASSERT_TRUE(verifier.VerifyBuffer<fb::Graph>(nullptr)) << m.segments[i]->name;
    std::unique_ptr<fb::GraphT> g(flatbuffers::GetRoot<fb::Graph>(blob.data())->UnPack());
    ASSERT_EQ(g->instructions.size(), 1u) << m.segments[i]->name;
    EXPECT_EQ(g->instructions[0]->op, nodes[i].op) << m.segments[i]->name;
  }
}

TEST(TransformerPartition, PerBlockWithPerBlockFfnWidthsAndBigModel) {
  TransformerOptions o = small(3, "cuda-per-block");
  o.ffn_per_block = {32, 96, 256};
  ASSERT_OK_AND_ASSIGN(Model model, make_transformer(o));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  check_cuda_program(built, "cuda-per-block", 3);
  // The default sizes (d_model 512, max_seq 2048), per op.
  TransformerOptions big;
  big.partition = "cuda-per-op";
  ASSERT_OK_AND_ASSIGN(Model big_model, make_transformer(big));
  ASSERT_OK_AND_ASSIGN(BuiltProgram big_built, build_program(big_model));
  check_cuda_program(big_built, "cuda-per-op", big.layers);
}

TEST(TransformerPartition, UnknownPartitionListsEveryAcceptedName) {
  for (std::string bad : {"tpu", "CUDA", "cuda-per-layer", ""}) {
    EXPECT_ERROR_CONTAINS(make_transformer(small(1, bad)),
                          fmt::format("unknown partition '{}' (accepted: cpu, cuda, cuda-per-block, "
                                      "cuda-per-op, engine, engine-per-block, "
                                      "engine-cuda-interleaved)", bad));
  }
}

}  // namespace
}  // namespace planrt::builder
