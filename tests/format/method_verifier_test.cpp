// The deep checks of methods, values, instructions and segment graphs: each corruption
// must be refused with an error naming what is wrong.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "format/program_corruption.h"

namespace planrt::format {
namespace {

using fixtures::FixtureProgram;
using fixtures::ReluAddOptions;

FixtureProgram host() { return fixtures::relu_add_program(); }
FixtureProgram cuda() {
  ReluAddOptions o;
  o.on_cuda = true;
  return fixtures::relu_add_program(o);
}

fb::MethodT& method(fb::ProgramT& p) { return *p.methods[0]; }

// Unpacks segment 0's graph, applies `f` and packs it back.
Mutation on_graph(std::function<void(fb::GraphT&)> f) {
  return [f](fb::ProgramT& p) {
    auto& seg = *method(p).segments[0];
    std::unique_ptr<fb::GraphT> g(flatbuffers::GetRoot<fb::Graph>(seg.blob.data())->UnPack());
    f(*g);
    seg.blob = fixtures::pack_graph(*g);
  };
}

// The cuda fixture with its graph's scratch passed as a planned method value (value 4 on the
// cuda buffer, after what is there), of `words` floats, as the builder's planned scratch is.
Mutation with_planned_scratch(int64_t words, std::vector<fb::DimRef> shape = {}) {
  return [=](fb::ProgramT& p) {
    on_graph([](fb::GraphT& g) { g.scratch_operand = true; })(p);
    fb::MethodT& m = method(p);
    const uint64_t end = m.planned_buffers[1]->size_bytes;
    std::vector<fb::DimRef> dims = shape;
    if (dims.empty()) dims = {fixtures::fixed_dim(words)};
    m.values.push_back(fixtures::planned_value("cuda0#scratch", dims, 1, end));
    m.planned_buffers[1]->size_bytes = end + static_cast<uint64_t>(words) * 4 * 16;
    m.instructions[1]->outputs.push_back(4);
  };
}

TEST(MethodVerifier, APlannedScratchIsOneMoreStaticOutputThatHoldsTheGraphsScratch) {
  const uint64_t need = flatbuffers::GetRoot<fb::Graph>(cuda().program.methods[0]->segments[0]->blob.data())
                            ->scratch_bytes();
  const auto words = static_cast<int64_t>(need / 4);
  EXPECT_TRUE(ProgramFile::from_bytes(corrupt(cuda(), with_planned_scratch(words))).ok());
  // The flag without the operand, the operand too small, or sized by a dim.
  expect_invalid(corrupt(cuda(), on_graph([](fb::GraphT& g) { g.scratch_operand = true; })),
                 {"passes 1 inputs and 1 outputs", "plus its planned scratch"});
  expect_invalid(corrupt(cuda(), with_planned_scratch(words - 1)),
                 {"passes planned scratch", "value 4 'cuda0#scratch'", "whose graph needs " + std::to_string(need)});
  expect_invalid(corrupt(cuda(), with_planned_scratch(words, {fixtures::named_dim(0, words)})),
                 {"value 4 'cuda0#scratch' with a dynamic shape"});
  // The scratch may not also be another operand (here the delegate's input).
  expect_invalid(corrupt(cuda(),
                         [&](fb::ProgramT& p) {
                           with_planned_scratch(words)(p);
                           method(p).instructions[1]->outputs.back() = method(p).instructions[1]->inputs[0];
                         }),
                 {"as its planned scratch and as another operand"});
  // A scratch operand that is not planned on the segment's device.
  expect_invalid(corrupt(cuda(),
                         [&](fb::ProgramT& p) {
                           with_planned_scratch(words)(p);
                           // Moved to the end of the host buffer, grown to hold it.
                           fb::MethodT& m = method(p);
                           m.values[4]->buffer = 0;
                           m.values[4]->offset = m.planned_buffers[0]->size_bytes;
                           m.planned_buffers[0]->size_bytes += static_cast<uint64_t>(words) * 4;
                         }),
                 {"value 4 'cuda0#scratch' is not planned on the segment's device"});
}

TEST(MethodVerifier, AcceptsTheFixtures) {
  for (const FixtureProgram& f : {host(), cuda(), fixtures::two_method_program()}) {
    auto bytes = corrupt(f, [](fb::ProgramT&) {});
    EXPECT_TRUE(ProgramFile::from_bytes(bytes).ok());
  }
}

TEST(MethodVerifier, RefusesDuplicateAndEmptyMethodNames) {
  expect_invalid(corrupt(fixtures::two_method_program(),
                         [](fb::ProgramT& p) { p.methods[1]->name = "forward"; }),
                 {"two methods are named 'forward'"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).name = ""; }),
                 {"method 0 has an empty name"});
}

TEST(MethodVerifier, RefusesBadDimBounds) {
  auto set = [](int64_t min, int64_t max) {
    return [=](fb::ProgramT& p) {
      method(p).dims[0]->min = min;
      method(p).dims[0]->max = max;
    };
  };
  expect_invalid(corrupt(host(), set(5, 4)), {"method 'forward' dim 'S' has bounds [5, 4]"});
  expect_invalid(corrupt(host(), set(-1, 4)), {"dim 'S' has bounds [-1, 4]"});
  expect_invalid(corrupt(host(), set(0, 0)), {"dim 'S' has bounds [0, 0]"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) {
                   method(p).dims.push_back(std::make_unique<fb::DimSpecT>(*method(p).dims[0]));
                 }),
                 {"two dims named 'S'"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).dims[0]->name = ""; }),
                 {"dim 0 has an empty name"});
}

TEST(MethodVerifier, RefusesAnUnknownDtypeKindOrTooHighARank) {
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).values[2]->dtype = static_cast<fb::DType>(9); }),
                 {"method 'forward' value 2 't' has an unknown dtype 9"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).values[2]->kind = static_cast<fb::ValueKind>(7); }),
                 {"value 2 't' has an unknown kind 7"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) {
                   method(p).values[2]->shape.assign(9, fixtures::fixed_dim(1));
                 }),
                 {"value 2 't' has rank 9, above the maximum 8"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).values[2]->kind = fb::ValueKind::Temporary; }),
                 {"value 2 't' is Temporary"});
}

TEST(MethodVerifier, RefusesBadShapeEntries) {
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).values[2]->shape[0] = fixtures::named_dim(3); }),
                 {"value 2 't' refers to dim 3 at shape entry 0, but there are 1 dims"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).values[2]->shape[0] = fixtures::named_dim(0, 0); }),
                 {"value 2 't' has multiplier 0"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).values[2]->shape[1] = fixtures::fixed_dim(-4); }),
                 {"value 2 't' has a negative size -4 at shape entry 1"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) {
                   method(p).values[2]->shape = {fixtures::fixed_dim(INT64_MAX), fixtures::fixed_dim(INT64_MAX)};
                 }),
                 {"value 2 't'", "overflows"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) {
                   method(p).values[2]->shape[0] = fixtures::named_dim(0, INT64_MAX / 2);
                 }),
                 {"value 2 't'", "overflow"});
}

// A zero dim makes a value empty but leaves the other dims' strides: [0, 2^58, 64] is 0
// bytes, yet its outer stride is 2^64 elements, which overflowed contiguous_strides (UBSan;
// tests/fuzz/regressions/program/zero-dim-beside-huge-dims.prog). The same in a segment graph.
TEST(MethodVerifier, RefusesAnEmptyShapeWhoseStridesOverflow) {
  const std::vector<fb::DimRef> empty_but_huge = {fixtures::fixed_dim(0), fixtures::fixed_dim(int64_t{1} << 58),
                                                  fixtures::fixed_dim(64)};
  expect_invalid(corrupt(host(), [&](fb::ProgramT& p) { method(p).values[2]->shape = empty_but_huge; }),
                 {"value 2 't'", "a stride) overflows 64 bits at shape entry 2"});
  expect_invalid(corrupt(cuda(), on_graph([&](fb::GraphT& g) { g.values[2]->shape = empty_but_huge; })),
                 {"graph value 2 't'", "a stride) overflows 64 bits"});
  // Empty with strides that fit is a valid (0-byte) value.
  auto bytes = corrupt(host(), [](fb::ProgramT& p) {
    method(p).values[2]->shape = {fixtures::fixed_dim(0), fixtures::fixed_dim(1 << 20), fixtures::fixed_dim(64)};
  });
  EXPECT_TRUE(ProgramFile::from_bytes(bytes).ok());
}

TEST(MethodVerifier, RefusesACorruptedBufferId) {
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).values[3]->buffer = 5; }),
                 {"value 3 'y' refers to buffer 5 but the method has 1 planned buffers"});
}

TEST(MethodVerifier, RefusesAValuePastTheEndOfItsBuffer) {
  // y is 16 x 4 x 4 = 256 bytes at its max shape; the buffer is 768 bytes.
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).values[3]->offset = 768 - 255; }),
                 {"value 3 'y' at offset 513 with 256 bytes (max shape) exceeds buffer 0 of 768 bytes"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).values[3]->offset = UINT64_MAX - 100; }),
                 {"value 3 'y'", "exceeds buffer 0"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).dims[0]->max = 17; }),
                 {"with 272 bytes (max shape) exceeds buffer 0"});
}

// Kernels store typed elements at the planned offset: an f32 two bytes into its buffer was
// a misaligned store (UBSan, tests/fuzz/regressions/program/misaligned-planned-offset.prog).
TEST(MethodVerifier, RefusesAPlannedOffsetOffItsElementSize) {
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).values[3]->offset = 258; }),
                 {"value 3 'y' at offset 258 is not aligned to its 4-byte elements"});
  expect_invalid(corrupt(cuda(), on_graph([](fb::GraphT& g) {
                   g.scratch_bytes = 512;
                   g.values[2]->offset = 6;
                 })),
                 {"graph value 2 't' at offset 6 is not aligned to its 4-byte elements"});
}

// A kernel writes its output while reading its input: concat's memcpy over an output that
// overlapped its input was undefined behaviour (ASan memcpy-param-overlap,
// tests/fuzz/regressions/program/kernel-output-overlapping-its-input.prog).
TEST(MethodVerifier, RefusesAnOutputOverlappingAnOperand) {
  auto y_at_t_plus = [](uint64_t delta) {
    return [delta](fb::ProgramT& p) { method(p).values[3]->offset = method(p).values[2]->offset + delta; };
  };
  for (uint64_t delta : {0, 4, 252}) {
    expect_invalid(corrupt(host(), y_at_t_plus(delta)),
                   {"instruction 1 (relu)", "output 0 (method 'forward' value 3 'y') overlaps its "
                                            "input 0 (method 'forward' value 2 't') in planned memory"});
  }
  // Right after t is fine, and so is writing t itself in place (relu(t) -> t).
  EXPECT_TRUE(ProgramFile::from_bytes(corrupt(host(), y_at_t_plus(256))).ok());
  EXPECT_TRUE(ProgramFile::from_bytes(corrupt(host(), [](fb::ProgramT& p) {
                method(p).instructions[1]->outputs = {2};
              })).ok());
}

// The FlatBuffers verifier checks a vector's length field alignment, not its elements': a
// crafted graph put its [DimBound] profile at a 4-byte boundary, and the engine read the
// 8-byte bounds misaligned (UBSan; found by the program fuzz target, replayed from
// tests/fuzz/regressions/program/misaligned-engine-profile.prog). The builder cannot write
// such a file, so the test reads the fuzzer's.
TEST(MethodVerifier, RefusesAMisalignedEngineProfile) {
  const char* data = std::getenv("PLANRT_TEST_DATA");
  ASSERT_NE(data, nullptr) << "PLANRT_TEST_DATA is set by ctest";
  std::ifstream in(std::string(data) + "/../fuzz/regressions/program/misaligned-engine-profile.prog",
                   std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(bytes.empty());
  expect_invalid(bytes, {"graph has a profile vector that is not 8-byte aligned"});
}

TEST(MethodVerifier, RefusesABufferAboveTheReadLimit) {
  ReadLimits limits;
  limits.max_planned_buffer_bytes = 512;
  expect_invalid(corrupt(host(), [](fb::ProgramT&) {}), {"buffer 0 asks for 768 bytes, above the limit of 512"},
                 limits);
}

TEST(MethodVerifier, RefusesAnUnknownBufferDeviceType) {
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) {
                   method(p).planned_buffers[0]->device = std::make_unique<fb::DeviceRef>(static_cast<fb::DeviceType>(5), 0);
                 }),
                 {"buffer 0 has an unknown device type 5"});
}

TEST(MethodVerifier, RefusesBadConstantValues) {
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).values[1]->constant = 3; }),
                 {"value 1 'c' refers to constant 3 but the program has 1 constants"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).values[1]->dtype = fb::DType::F16; }),
                 {"value 1 'c' has dtype 1 but constant 0 'c' has dtype 0"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).values[1]->shape = {fixtures::fixed_dim(5)}; }),
                 {"value 1 'c' does not have the static shape of constant 0 'c'"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).values[1]->shape = {fixtures::named_dim(0)}; }),
                 {"static shape"});
}

TEST(MethodVerifier, RefusesBadMethodInputsAndOutputs) {
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).inputs = {9}; }),
                 {"method 'forward' input 0 is value id 9 but there are 4 values"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).outputs = {1}; }),
                 {"output 0 (method 'forward' value 1 'c') is not a Planned value on a CPU buffer"});
  expect_invalid(corrupt(cuda(), [](fb::ProgramT& p) { method(p).outputs = {3}; }),
                 {"value 3 'y_dev') is not a Planned value on a CPU buffer"});
}

TEST(MethodVerifier, RefusesACorruptedValueIdInAnInstruction) {
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).instructions[1]->inputs[0] = 4; }),
                 {"method 'forward' instruction 1 (relu) of node 'relu' input 0 is value id 4 but there are 4 values"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).instructions[1]->outputs[0] = kNoValue; }),
                 {"instruction 1 (relu)", "output 0 is value id kNoValue"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).instructions[0]->outputs[0] = 1; }),
                 {"instruction 0 (add)", "output 0 is method 'forward' value 1 'c', a constant"});
}

TEST(MethodVerifier, AcceptsAnAbsentOptionalOperand) {
  auto bytes = corrupt(host(), [](fb::ProgramT& p) { method(p).instructions[0]->inputs.push_back(kNoValue); });
  EXPECT_TRUE(ProgramFile::from_bytes(bytes).ok());
}

TEST(MethodVerifier, RefusesBadInstructionKindsOpsAndAttrs) {
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).instructions[0]->kind = static_cast<fb::InstructionKind>(9); }),
                 {"instruction 0 (add) of node 'add' has an unknown kind 9"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).instructions[0]->op = ""; }),
                 {"instruction 0 of node 'add' is a Kernel without an op"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) { method(p).instructions[0]->segment = 2; }),
                 {"instruction 0 (add)", "names segment 2 but the method has 0 segments"});
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) {
                   auto a = std::make_unique<fb::AttrT>();
                   a->name = "alpha";
                   a->type = static_cast<fb::AttrType>(11);
                   method(p).instructions[0]->attrs.push_back(std::move(a));
                 }),
                 {"attribute 'alpha' has an unknown type 11"});
}

TEST(MethodVerifier, RefusesACpuKernelOnDeviceMemory) {
  expect_invalid(corrupt(cuda(), [](fb::ProgramT& p) {
                   method(p).instructions[0] = fixtures::kernel_instruction("relu", {0}, {2});
                 }),
                 {"instruction 0 (relu) is a CPU kernel but its operand method 'forward' value 2 'x_dev' is not in host memory"});
}

TEST(MethodVerifier, RefusesBadCopies) {
  expect_invalid(corrupt(cuda(), [](fb::ProgramT& p) { method(p).instructions[0]->inputs = {0, 1}; }),
                 {"instruction 0 is a Copy with 2 inputs and 1 outputs"});
  expect_invalid(corrupt(cuda(), [](fb::ProgramT& p) { method(p).instructions[0]->inputs = {kNoValue}; }),
                 {"Copy with 1 inputs"});
  expect_invalid(corrupt(cuda(), [](fb::ProgramT& p) {
                   method(p).values[2]->dtype = fb::DType::F16;
                 }),
                 {"instruction 0 copies method 'forward' value 0 'x' to method 'forward' value 2 'x_dev', which differ"});
}

TEST(MethodVerifier, RefusesBadDelegates) {
  expect_invalid(corrupt(cuda(), [](fb::ProgramT& p) { method(p).instructions[1]->segment = 1; }),
                 {"instruction 1 of node 'add' calls segment 1 but the method has 1 segments"});
  expect_invalid(corrupt(cuda(), [](fb::ProgramT& p) { method(p).segments[0]->blob.clear(); }),
                 {"calls segment 0 ('cuda0'), which has no blob"});
  expect_invalid(corrupt(cuda(), [](fb::ProgramT& p) { method(p).instructions[1]->inputs.push_back(2); }),
                 {"passes 2 inputs and 1 outputs but segment 0 graph takes 1 and 1"});
  expect_invalid(corrupt(cuda(), [](fb::ProgramT& p) { method(p).instructions[1]->inputs = {0}; }),
                 {"operand method 'forward' value 0 'x' is not planned on the segment's device cuda:0"});
}

TEST(MethodVerifier, RefusesBadSegments) {
  expect_invalid(corrupt(cuda(), [](fb::ProgramT& p) { method(p).segments[0]->backend = ""; }),
                 {"method 'forward' segment 0 ('cuda0') has an empty backend name"});
  expect_invalid(corrupt(cuda(), [](fb::ProgramT& p) {
                   method(p).segments[0]->device = std::make_unique<fb::DeviceRef>(static_cast<fb::DeviceType>(3), 0);
                 }),
                 {"segment 0 ('cuda0') has an unknown device type 3"});
}

TEST(MethodVerifier, RefusesACorruptNestedGraph) {
  expect_invalid(corrupt(cuda(), [](fb::ProgramT& p) {
                   auto& blob = method(p).segments[0]->blob;
                   for (size_t i = 0; i < blob.size(); i += 3) blob[i] ^= 0x5A;
                 }),
                 {"segment 0 ('cuda0') has a blob that is not a valid Graph FlatBuffer"});
  expect_invalid(corrupt(cuda(), [](fb::ProgramT& p) { method(p).segments[0]->blob = {1, 2, 3}; }),
                 {"not a valid Graph FlatBuffer (3 bytes)"});
}

TEST(MethodVerifier, RefusesBadIdsInsideANestedGraph) {
  expect_invalid(corrupt(cuda(), on_graph([](fb::GraphT& g) { g.instructions[1]->inputs[0] = 7; })),
                 {"method 'forward' segment 0 ('cuda0') graph instruction 1 (relu) input 0 is value id 7 but there are 4 values"});
  expect_invalid(corrupt(cuda(), on_graph([](fb::GraphT& g) { g.outputs = {4}; })),
                 {"graph output 0 is value id 4"});
  expect_invalid(corrupt(cuda(), on_graph([](fb::GraphT& g) { g.values[1]->constant = 2; })),
                 {"graph value 1 'c' refers to constant 2"});
  expect_invalid(corrupt(cuda(), on_graph([](fb::GraphT& g) { g.instructions[0]->kind = fb::InstructionKind::Copy; })),
                 {"graph instruction 0 (add) is not a Kernel instruction"});
  expect_invalid(corrupt(cuda(), on_graph([](fb::GraphT& g) { g.values[0]->shape[0] = fixtures::named_dim(1); })),
                 {"graph value 0 'x' refers to dim 1"});
}

TEST(MethodVerifier, RefusesGraphValuesPastTheScratch) {
  // t is 256 bytes at max shape and the scratch is exactly that.
  expect_invalid(corrupt(cuda(), on_graph([](fb::GraphT& g) { g.values[2]->offset = 64; })),
                 {"graph value 2 't' at offset 64 with 256 bytes exceeds the scratch of 256 bytes"});
  expect_invalid(corrupt(cuda(), on_graph([](fb::GraphT& g) { g.scratch_bytes = 255; })),
                 {"exceeds the scratch of 255 bytes"});
  ReadLimits limits;
  limits.max_planned_buffer_bytes = 1024;  // the planned buffers are 512 bytes
  auto bytes = corrupt(cuda(), on_graph([](fb::GraphT& g) { g.scratch_bytes = 1 << 20; }));
  expect_invalid(bytes, {"graph asks for 1048576 scratch bytes, above the limit of 1024"}, limits);
}

// In a graph planned with views (Graph.scratch_plan_views) a reshape's output may lie exactly
// on its input; nothing else may overlap, and without the flag not even that.
TEST(MethodVerifier, OnlyAReshapeInAGraphWithViewsMayLieExactlyOnItsInput) {
  // The cuda fixture's graph with one more step: u = op(t), u Planned like t at t's offset
  // plus `delta`, in a scratch of 512 bytes.
  auto with_step = [](std::string op, bool views, uint64_t delta) {
    return on_graph([=](fb::GraphT& g) {
      const fb::ValueT& t = *g.values[2];
      g.values.push_back(fixtures::planned_value("u", t.shape, 0, t.offset + delta));
      auto ins = std::make_unique<fb::InstructionT>();
      ins->kind = fb::InstructionKind::Kernel;
      ins->op = op;
      ins->inputs = {2};
      ins->outputs = {static_cast<uint32_t>(g.values.size() - 1)};
      g.instructions.push_back(std::move(ins));
      g.scratch_bytes = 512;
      g.scratch_plan_views = views;
    });
  };
  EXPECT_TRUE(ProgramFile::from_bytes(corrupt(cuda(), with_step("reshape", true, 0))).ok());
  const std::string overlap = "output 0 (method 'forward' segment 0 ('cuda0') graph value 4 'u') overlaps its input 0";
  expect_invalid(corrupt(cuda(), with_step("reshape", false, 0)), {"instruction 2 (reshape)", overlap});
  expect_invalid(corrupt(cuda(), with_step("reshape", true, 4)), {"instruction 2 (reshape)", overlap});
  expect_invalid(corrupt(cuda(), with_step("relu", true, 0)), {"instruction 2 (relu)", overlap});
}

TEST(MethodVerifier, RefusesAStoredScratchPlanWithoutAWorkspaceOffsetPerInstruction) {
  expect_invalid(corrupt(cuda(), on_graph([](fb::GraphT& g) {
                   g.scratch_plan_stored = true;
                   g.scratch_workspace_offsets.assign(g.instructions.size() + 1, 0);
                 })),
                 {"graph stores its scratch plan with 3 workspace offsets for 2 instructions"});
}

TEST(MethodVerifier, RefusesAnUnknownPlanStatDevice) {
  expect_invalid(corrupt(host(), [](fb::ProgramT& p) {
                   method(p).plan[0]->device = std::make_unique<fb::DeviceRef>(static_cast<fb::DeviceType>(8), 0);
                 }),
                 {"plan entry 0 has an unknown device type"});
}

}  // namespace
}  // namespace planrt::format

namespace planrt::format {
namespace {

// The generated Pack always aligns blobs, so build a segment by hand whose blob lands on a
// 4-but-not-8-aligned address, padding with a dummy string until it does.
std::vector<uint8_t> file_with_misaligned_blob() {
  fixtures::ReluAddOptions o;
  o.on_cuda = true;
  fixtures::FixtureProgram f = fixtures::relu_add_program(o);
  auto good = corrupt(f, [](fb::ProgramT&) {});
  auto loaded = ProgramFile::from_bytes(good);
  if (!loaded.ok()) {
    ADD_FAILURE() << loaded.status().to_string();
    return {};
  }
  std::unique_ptr<fb::ProgramT> p(loaded->program().UnPack());
  const fb::MethodT& m = *p->methods[0];
  for (size_t pad = 0; pad < 16; ++pad) {
    flatbuffers::FlatBufferBuilder fbb;
    fbb.CreateString(std::string(pad, 'x'));
    auto blob = fbb.CreateVector(m.segments[0]->blob);
    auto seg = fb::CreateSegment(fbb, fbb.CreateString("cuda0"), fbb.CreateString("cuda"),
                                 m.segments[0]->device.get(), 0, blob, 2);
    const fb::MethodT& rest = m;
    std::vector<flatbuffers::Offset<fb::Value>> values;
    for (const auto& v : rest.values) values.push_back(fb::CreateValue(fbb, v.get()));
    std::vector<flatbuffers::Offset<fb::Instruction>> ins;
    for (const auto& i : rest.instructions) ins.push_back(fb::CreateInstruction(fbb, i.get()));
    std::vector<flatbuffers::Offset<fb::PlannedBuffer>> bufs;
    for (const auto& b : rest.planned_buffers) bufs.push_back(fb::CreatePlannedBuffer(fbb, b.get()));
    std::vector<flatbuffers::Offset<fb::DimSpec>> dims;
    for (const auto& d : rest.dims) dims.push_back(fb::CreateDimSpec(fbb, d.get()));
    std::vector<flatbuffers::Offset<fb::Segment>> segs = {seg};
    auto method = fb::CreateMethod(fbb, fbb.CreateString("forward"), fbb.CreateVector(dims),
                              fbb.CreateVector(values), fbb.CreateVector(rest.inputs),
                              fbb.CreateVector(rest.outputs), fbb.CreateVector(ins),
                              fbb.CreateVector(bufs), fbb.CreateVector(segs));
    std::vector<flatbuffers::Offset<fb::Method>> methods = {method};
    std::vector<flatbuffers::Offset<fb::Constant>> constants;
    for (const auto& c : p->constants) constants.push_back(fb::CreateConstant(fbb, c.get()));
    fbb.Finish(fb::CreateProgram(fbb, kFormatVersion, fbb.CreateVector(methods), fbb.CreateVector(constants)),
               fb::ProgramIdentifier());
    const auto* root = fb::GetProgram(fbb.GetBufferPointer());
    const auto* b = root->methods()->Get(0)->segments()->Get(0)->blob();
    if ((b->data() - fbb.GetBufferPointer()) % 8 == 0) continue;
    // The file: the good file's header, this FlatBuffer, the good file's data segment.
    const FileHeader gh = read_header(good);
    FileHeader h = gh;
    std::vector<uint8_t> out(64 + fbb.GetSize());
    std::memcpy(out.data() + 64, fbb.GetBufferPointer(), fbb.GetSize());
    h.flatbuffer_size = fbb.GetSize();
    h.segment_offset = (out.size() + 4095) / 4096 * 4096;
    h.segment_size = gh.segment_size;
    out.resize(h.segment_offset);
    out.insert(out.end(), good.begin() + static_cast<long>(gh.segment_offset), good.end());
    write_header(out, h);
    return out;
  }
  ADD_FAILURE() << "could not misalign the blob";
  return {};
}

TEST(MethodVerifier, RefusesAMisalignedSegmentBlob) {
  expect_invalid(file_with_misaligned_blob(), {"segment 0 ('cuda0') has a blob that is not 8-byte aligned"});
}

}  // namespace
}  // namespace planrt::format

namespace planrt::format {
namespace {

// Points `field` (a uoffset in the table at `table`) 4 bytes further, so that the vector's
// length reads as the low half of its first 8-byte element and its data lands 4 bytes off
// an 8-byte boundary, still inside the buffer: the Verifier accepts that, planrt must not.
void shift_vector(std::vector<uint8_t>& bytes, const void* table, uint16_t field) {
  const auto* t = reinterpret_cast<const flatbuffers::Table*>(table);
  const uint8_t* at = reinterpret_cast<const uint8_t*>(table) + t->GetOptionalFieldOffset(field);
  const size_t pos = static_cast<size_t>(at - bytes.data());
  uint32_t off = 0;
  std::memcpy(&off, bytes.data() + pos, 4);
  off += 4;
  std::memcpy(bytes.data() + pos, &off, 4);
}

TEST(MethodVerifier, RefusesMisalignedVectorsOfEightByteElements) {
  auto good = fixtures::relu_add_program().serialize();
  ASSERT_TRUE(good.ok());
  {
    std::vector<uint8_t> bytes = *good;
    const fb::Program* p = fb::GetProgram(bytes.data() + 64);
    shift_vector(bytes, p->methods()->Get(0)->values()->Get(0), fb::Value::VT_SHAPE);
    expect_invalid(bytes, {"value 0 'x' has a misaligned shape vector"});
  }
  {
    std::vector<uint8_t> bytes = *good;
    const fb::Program* p = fb::GetProgram(bytes.data() + 64);
    shift_vector(bytes, p->constants()->Get(0), fb::Constant::VT_SHAPE);
    expect_invalid(bytes, {"constant 0 'c' has a misaligned shape vector"});
  }
}

}  // namespace
}  // namespace planrt::format
