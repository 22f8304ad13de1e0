// Partitioning mixed cpu/cuda/engine models: segments, Delegate blobs, Copy instructions and
// the device-tagged planned buffers (docs/program-format.md).
#include <gtest/gtest.h>

#include <cstdlib>

#include "builder_test_util.h"
#include "format/program_file.h"
#include "model_json_util.h"

namespace planrt::builder {
namespace {

using btest::data_dir;
using btest::find_method;
using btest::OneMethod;

std::vector<std::string> names(const fb::MethodT& m, const std::vector<uint32_t>& ids) {
  std::vector<std::string> out;
  for (uint32_t id : ids) out.push_back(m.values[id]->name);
  return out;
}

std::vector<fb::InstructionKind> kinds(const fb::MethodT& m) {
  std::vector<fb::InstructionKind> out;
  for (const auto& ins : m.instructions) out.push_back(ins->kind);
  return out;
}

Device device_of_buffer(const fb::MethodT& m, uint32_t buffer) {
  const fb::DeviceRef& d = *m.planned_buffers[buffer]->device;
  return Device{static_cast<DeviceType>(d.type()), d.index()};
}

Device device_of(const fb::MethodT& m, const std::string& value) {
  const fb::ValueT* v = btest::find_value(m, value);
  EXPECT_NE(v, nullptr) << value;
  EXPECT_EQ(v->kind, fb::ValueKind::Planned) << value;
  return device_of_buffer(m, v->buffer);
}

using K = fb::InstructionKind;

TEST(Partition, TwoMethodExampleHasCpuAndCudaMethods) {
  ASSERT_OK_AND_ASSIGN(Model model, read_model_json(data_dir() + "/models/two_methods.json"));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  btest::expect_plans_valid(built.program());
  const fb::ProgramT& p = built.program();
  ASSERT_EQ(p.methods.size(), 2u);
  // Shared by both methods; ln.bias and fc2.bias (zeros of one shape) are stored once.
  EXPECT_EQ(p.constants.size(), 5u);

  const fb::MethodT& cpu = *find_method(p, "forward");
  EXPECT_EQ(kinds(cpu), std::vector<K>(4, K::Kernel));  // the gelu runs inside fc1 on the host
  ASSERT_EQ(cpu.planned_buffers.size(), 1u);
  EXPECT_EQ(device_of_buffer(cpu, 0), Device::cpu());

  const fb::MethodT& m = *find_method(p, "forward_cuda");
  ASSERT_EQ(m.segments.size(), 2u);
  EXPECT_EQ(m.segments[0]->name, "cpu0");
  EXPECT_EQ(m.segments[0]->backend, "cpu");
  EXPECT_EQ(m.segments[0]->num_nodes, 1u);
  EXPECT_TRUE(m.segments[0]->blob.empty());
  EXPECT_EQ(m.segments[1]->name, "cuda1");
  EXPECT_EQ(m.segments[1]->backend, "cuda");
  EXPECT_EQ(m.segments[1]->device->type(), fb::DeviceType::CUDA);
  EXPECT_EQ(m.segments[1]->device->index(), 0);
  EXPECT_EQ(m.segments[1]->num_nodes, 4u);

  // ln on the host; h and x copied to the device; one delegate; y copied back.
  EXPECT_EQ(kinds(m), (std::vector<K>{K::Kernel, K::Copy, K::Copy, K::Delegate, K::Copy}));
  EXPECT_EQ(m.instructions[0]->segment, 0);
  EXPECT_EQ(names(m, m.instructions[1]->inputs), std::vector<std::string>{"h"});
  EXPECT_EQ(names(m, m.instructions[1]->outputs), std::vector<std::string>{"h@cuda:0"});
  EXPECT_EQ(names(m, m.instructions[2]->outputs), std::vector<std::string>{"x@cuda:0"});
  const fb::InstructionT& d = *m.instructions[3];
  EXPECT_EQ(d.segment, 1);
  EXPECT_EQ(names(m, d.inputs), (std::vector<std::string>{"h@cuda:0", "x@cuda:0"}));
  // The segment's output, then its planned scratch (docs/design.md §6).
  EXPECT_EQ(names(m, d.outputs), (std::vector<std::string>{"y@cuda:0", "cuda1#scratch"}));
  EXPECT_EQ(names(m, m.instructions[4]->inputs), std::vector<std::string>{"y@cuda:0"});
  EXPECT_EQ(names(m, m.instructions[4]->outputs), std::vector<std::string>{"y"});
  EXPECT_EQ(names(m, m.inputs), std::vector<std::string>{"x"});
  EXPECT_EQ(names(m, m.outputs), std::vector<std::string>{"y"});

  ASSERT_EQ(m.planned_buffers.size(), 2u);
  EXPECT_EQ(device_of_buffer(m, 0), Device::cpu());
  EXPECT_EQ(device_of_buffer(m, 1), Device::cuda(0));
  EXPECT_EQ(device_of(m, "x"), Device::cpu());
  EXPECT_EQ(device_of(m, "h"), Device::cpu());
  EXPECT_EQ(device_of(m, "y"), Device::cpu());
  EXPECT_EQ(device_of(m, "y@cuda:0"), Device::cuda(0));
  EXPECT_EQ(device_of(m, "h@cuda:0"), Device::cuda(0));
  // f1, g, f2 never leave the segment: no method values for them.
  EXPECT_EQ(btest::find_value(m, "f1"), nullptr);
  ASSERT_EQ(m.plan.size(), 2u);
  EXPECT_EQ(m.plan[1]->device->type(), fb::DeviceType::CUDA);
  EXPECT_EQ(m.planned_buffers[1]->size_bytes % 256, 0u);

  // The whole program passes the verifying reader.
  ASSERT_OK_AND_ASSIGN(auto bytes, built.serialize());
  ASSERT_OK_AND_ASSIGN(auto file, format::ProgramFile::from_bytes(std::move(bytes)));
  EXPECT_EQ(file.program().methods()->size(), 2u);
}

TEST(Partition, DelegateBlobIsANestedGraph) {
  ASSERT_OK_AND_ASSIGN(Model model, read_model_json(data_dir() + "/models/two_methods.json"));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  const fb::MethodT& m = *find_method(built.program(), "forward_cuda");
  const std::vector<uint8_t>& blob = m.segments[1]->blob;
  flatbuffers::Verifier verifier(blob.data(), blob.size());
  ASSERT_TRUE(verifier.VerifyBuffer<fb::Graph>(nullptr));
  std::unique_ptr<fb::GraphT> g(flatbuffers::GetRoot<fb::Graph>(blob.data())->UnPack());
  ASSERT_EQ(g->inputs.size(), 2u);
  ASSERT_EQ(g->outputs.size(), 1u);
  EXPECT_EQ(g->values[g->inputs[0]]->name, "h");
  EXPECT_EQ(g->values[g->inputs[1]]->name, "x");
  EXPECT_EQ(g->values[g->outputs[0]]->name, "y");
  ASSERT_EQ(g->instructions.size(), 4u);
  std::vector<std::string> ops;
  for (const auto& ins : g->instructions) {
    EXPECT_EQ(ins->kind, fb::InstructionKind::Kernel);
    ops.push_back(ins->op);
  }
  EXPECT_EQ(ops, (std::vector<std::string>{"linear", "gelu", "linear", "add"}));
  int constants = 0, temporaries = 0, planned = 0;
  for (const auto& v : g->values) {
    if (v->kind == fb::ValueKind::Constant) {
      ++constants;
      // The entry may carry another constant's name: equal bytes are stored once.
      const fb::ConstantT& c = *built.program().constants[v->constant];
      ASSERT_EQ(c.shape.size(), v->shape.size()) << v->name;
      for (size_t d = 0; d < c.shape.size(); ++d) EXPECT_EQ(c.shape[d], v->shape[d].value()) << v->name;
      EXPECT_EQ(c.dtype, v->dtype) << v->name;
    }
    if (v->kind == fb::ValueKind::Temporary) ++temporaries;
    if (v->kind == fb::ValueKind::Planned) ++planned;
  }
  EXPECT_EQ(constants, 4);
  EXPECT_EQ(temporaries, 3);  // the operands h, x, y
  EXPECT_EQ(planned, 3);      // f1, g, f2 in the planned scratch
  EXPECT_GT(g->scratch_bytes, 0u);
  EXPECT_TRUE(g->scratch_operand);
  // The Delegate passes it as its last output.
  const fb::InstructionT* call = nullptr;
  for (const auto& ins : m.instructions) {
    if (ins->kind == fb::InstructionKind::Delegate && ins->segment == 1) call = ins.get();
  }
  ASSERT_NE(call, nullptr);
  ASSERT_EQ(call->outputs.size(), 2u);
  EXPECT_EQ(m.values[call->outputs[1]]->name, m.segments[1]->name + "#scratch");

  // Built with the warm-pool form, the same segment keeps its Temporaries and takes no scratch.
  BuildOptions pool;
  pool.plan_cuda_scratch = false;
  ASSERT_OK_AND_ASSIGN(BuiltProgram pooled, build_program(model, pool));
  const fb::MethodT& pm = *find_method(pooled.program(), "forward_cuda");
  std::unique_ptr<fb::GraphT> pg(flatbuffers::GetRoot<fb::Graph>(pm.segments[1]->blob.data())->UnPack());
  int pool_temporaries = 0;
  for (const auto& v : pg->values) pool_temporaries += v->kind == fb::ValueKind::Temporary ? 1 : 0;
  EXPECT_EQ(pool_temporaries, 6);  // h, x, f1, g, f2, y
  EXPECT_EQ(pg->scratch_bytes, 0u);
  EXPECT_FALSE(pg->scratch_operand);
}

TEST(Partition, ConsecutiveNodesOfOneBackendFormOneSegmentUnlessNamedApart) {
  OneMethod m;
  m.nodes = R"({"op": "relu", "inputs": ["x"], "outputs": ["a"], "backend": "cuda"},
               {"op": "relu", "inputs": ["a"], "outputs": ["b"], "backend": "cuda"},
               {"op": "relu", "inputs": ["b"], "outputs": ["c"], "backend": "cuda", "segment": "second"},
               {"op": "relu", "inputs": ["c"], "outputs": ["d"], "backend": "cuda", "segment": "second"},
               {"op": "relu", "inputs": ["d"], "outputs": ["y"]})";
  ASSERT_OK_AND_ASSIGN(Model model, parse_model_json(m.json()));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  btest::expect_plans_valid(built.program());
  const fb::MethodT& f = *built.program().methods[0];
  ASSERT_EQ(f.segments.size(), 3u);
  EXPECT_EQ(f.segments[0]->name, "cuda0");
  EXPECT_EQ(f.segments[0]->num_nodes, 2u);
  EXPECT_EQ(f.segments[1]->name, "second");
  EXPECT_EQ(f.segments[1]->num_nodes, 2u);
  EXPECT_EQ(f.segments[2]->name, "cpu2");
  // x to the device; b passes from one cuda segment to the next without a copy; d comes
  // back to the host for the cpu relu.
  EXPECT_EQ(kinds(f), (std::vector<K>{K::Copy, K::Delegate, K::Delegate, K::Copy, K::Kernel}));
  EXPECT_EQ(names(f, f.instructions[1]->outputs), (std::vector<std::string>{"b", "cuda0#scratch"}));
  EXPECT_EQ(names(f, f.instructions[2]->inputs), std::vector<std::string>{"b"});
  EXPECT_EQ(device_of(f, "b"), Device::cuda(0));
  EXPECT_EQ(names(f, f.instructions[3]->outputs), std::vector<std::string>{"d@cpu"});
  EXPECT_EQ(f.instructions[4]->segment, 2);
}

TEST(Partition, AnEngineOnTheHostMakesTheMethodOutputUnderItsOwnName) {
  OneMethod m;
  m.nodes = R"({"op": "relu", "inputs": ["x"], "outputs": ["a"], "backend": "engine", "device": "cpu"},
               {"op": "relu", "inputs": ["a"], "outputs": ["y"], "backend": "engine", "device": "cpu"})";
  ASSERT_OK_AND_ASSIGN(Model model, parse_model_json(m.json()));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  btest::expect_plans_valid(built.program());
  const fb::MethodT& f = *built.program().methods[0];
  // No copy: the engine writes y on the host, and y is what the caller reads (it was once
  // named "y@cpu", which `planrt run` then wrote as y@cpu.npy).
  EXPECT_EQ(kinds(f), (std::vector<K>{K::Delegate}));
  EXPECT_EQ(names(f, f.instructions[0]->outputs), std::vector<std::string>{"y"});
  EXPECT_EQ(names(f, f.outputs), std::vector<std::string>{"y"});
}

TEST(Partition, DeviceOverrideAndCopiesBetweenDevicesGoThroughTheHost) {
  OneMethod m;
  m.nodes = R"({"op": "relu", "inputs": ["x"], "outputs": ["a"], "backend": "cuda"},
               {"op": "relu", "inputs": ["a"], "outputs": ["y"], "backend": "cuda", "device": "cuda:1"})";
  ASSERT_OK_AND_ASSIGN(Model model, parse_model_json(m.json()));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  btest::expect_plans_valid(built.program());
  const fb::MethodT& f = *built.program().methods[0];
  EXPECT_EQ(kinds(f), (std::vector<K>{K::Copy, K::Delegate, K::Copy, K::Copy, K::Delegate, K::Copy}));
  EXPECT_EQ(names(f, f.instructions[2]->outputs), std::vector<std::string>{"a@cpu"});
  EXPECT_EQ(names(f, f.instructions[3]->outputs), std::vector<std::string>{"a@cuda:1"});
  ASSERT_EQ(f.planned_buffers.size(), 3u);
  EXPECT_EQ(device_of_buffer(f, 0), Device::cpu());
  EXPECT_EQ(device_of_buffer(f, 1), Device::cuda(0));
  EXPECT_EQ(device_of_buffer(f, 2), Device::cuda(1));
  EXPECT_EQ(device_of(f, "y@cuda:1"), Device::cuda(1));
  EXPECT_EQ(f.segments[1]->device->index(), 1);
}

TEST(Partition, MethodOutputIsCopiedBackRightAfterItsSegment) {
  OneMethod m;
  m.outputs = R"(["a", "y"])";
  m.nodes = R"({"op": "relu", "inputs": ["x"], "outputs": ["a"], "backend": "cuda"},
               {"op": "relu", "inputs": ["x"], "outputs": ["b"]},
               {"op": "add", "inputs": ["a", "b"], "outputs": ["y"], "backend": "cuda"})";
  ASSERT_OK_AND_ASSIGN(Model model, parse_model_json(m.json()));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  btest::expect_plans_valid(built.program());
  const fb::MethodT& f = *built.program().methods[0];
  // copy x; delegate a; copy a back (a method output); kernel b; copy b; delegate y; copy y.
  EXPECT_EQ(kinds(f), (std::vector<K>{K::Copy, K::Delegate, K::Copy, K::Kernel, K::Copy, K::Delegate, K::Copy}));
  EXPECT_EQ(names(f, f.instructions[2]->outputs), std::vector<std::string>{"a"});
  // The second delegate reads a on the device, where it still is.
  EXPECT_EQ(names(f, f.instructions[5]->inputs), (std::vector<std::string>{"a@cuda:0", "b@cuda:0"}));
  EXPECT_EQ(names(f, f.outputs), (std::vector<std::string>{"a", "y"}));
  EXPECT_EQ(device_of(f, "a"), Device::cpu());
}

TEST(Partition, EngineIntermediatesArePlannedInItsScratch) {
  OneMethod m;
  m.nodes = R"({"op": "relu", "inputs": ["x"], "outputs": ["a"]},
               {"op": "relu", "inputs": ["a"], "outputs": ["b"]},
               {"op": "relu", "inputs": ["b"], "outputs": ["y"]})";
  m.backend = "engine";
  ASSERT_OK_AND_ASSIGN(Model model, parse_model_json(m.json()));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  const fb::MethodT& f = *built.program().methods[0];
  ASSERT_EQ(f.segments.size(), 1u);
  EXPECT_EQ(f.segments[0]->backend, "engine");
  std::unique_ptr<fb::GraphT> g(flatbuffers::GetRoot<fb::Graph>(f.segments[0]->blob.data())->UnPack());
  // a and b: [16, 8] f32 at max = 512 bytes each, alive at once (a is read by the node
  // that writes b), so 1024 bytes of scratch.
  int planned = 0;
  for (const auto& v : g->values) planned += v->kind == fb::ValueKind::Planned;
  EXPECT_EQ(planned, 2);
  EXPECT_EQ(g->scratch_bytes, 1024u);
}

TEST(Partition, CompileSpecsReachEverySegmentOfTheirBackend) {
  OneMethod m;
  m.nodes = R"({"op": "relu", "inputs": ["x"], "outputs": ["y"], "backend": "engine"})";
  std::string text = m.json();
  text.insert(1, R"("compile_specs": {"engine": {"use_shared_activation_scratch": true, "workspace": 64}}, )");
  ASSERT_OK_AND_ASSIGN(Model model, parse_model_json(text));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  const auto& specs = built.program().methods[0]->segments[0]->compile_specs;
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0]->key, "use_shared_activation_scratch");
  EXPECT_EQ(specs[0]->value, "true");
  EXPECT_EQ(specs[1]->key, "workspace");
  EXPECT_EQ(specs[1]->value, "64");
}

TEST(Partition, SegmentNamesMustBeContiguousAndUnique) {
  OneMethod m;
  m.nodes = R"({"op": "relu", "inputs": ["x"], "outputs": ["a"], "backend": "cuda", "segment": "s"},
               {"op": "relu", "inputs": ["a"], "outputs": ["b"]},
               {"op": "relu", "inputs": ["b"], "outputs": ["y"], "backend": "cuda", "segment": "s"})";
  ASSERT_OK_AND_ASSIGN(Model model, parse_model_json(m.json()));
  EXPECT_ERROR_CONTAINS(build_program(model), "method 'forward', node 2 (op relu, output 'y'): segment 's' was "
                                              "already closed by other nodes");
  m.nodes = R"({"op": "relu", "inputs": ["x"], "outputs": ["a"], "backend": "cuda", "segment": "s"},
               {"op": "relu", "inputs": ["a"], "outputs": ["y"], "segment": "s"})";
  ASSERT_OK_AND_ASSIGN(Model mixed, parse_model_json(m.json()));
  EXPECT_ERROR_CONTAINS(build_program(mixed), "segment 's' mixes backend cuda on cuda:0 with backend cpu on cpu");
  m.nodes = R"({"op": "relu", "inputs": ["x"], "outputs": ["a"], "backend": "cuda", "segment": "cpu1"},
               {"op": "relu", "inputs": ["a"], "outputs": ["y"]})";
  ASSERT_OK_AND_ASSIGN(Model clash, parse_model_json(m.json()));
  EXPECT_ERROR_CONTAINS(build_program(clash), "two segments are named 'cpu1'");
}

}  // namespace
}  // namespace planrt::builder
