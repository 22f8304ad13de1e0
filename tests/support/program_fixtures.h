// Small, valid programs built by hand (fb::ProgramT), for the format, runtime and tools
// tests: no builder involved, so a runtime test does not depend on the builder being right.
//
// The main fixture is one method "y = relu(x + c)": input x [S, F] f32 with S in
// [min_s, max_s], a constant c [F] f32 named "c", output y [S, F]. Its planned memory is
// laid out without reuse, each value at a 256-byte-aligned offset. Variants put the work on
// a device buffer (cuda:0, as a Delegate to a segment graph) or add a second method.
// Everything returned is a plain value the test owns; mutate it to build bad programs.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "planrt/core/result.h"
#include "planrt/format/program_generated.h"

namespace planrt::fixtures {

struct FixtureProgram {
  fb::ProgramT program;
  std::vector<std::vector<uint8_t>> constants;  // the bytes of program.constants[i]

  std::vector<std::span<const uint8_t>> constant_spans() const;
  // The .prog bytes (through format::serialize_program).
  Result<std::vector<uint8_t>> serialize() const;
  Status write(const std::string& path) const;
  // Writes the constants to `dir`/`weights_name` (safetensors) and the program, naming that
  // file as its external constants, to `dir`/`program_name`.
  Status write_with_external_weights(const std::string& dir, const std::string& program_name,
                                     const std::string& weights_name) const;
};

struct ReluAddOptions {
  std::string method_name = "forward";
  int64_t features = 4;  // F
  int64_t min_s = 1;
  int64_t max_s = 16;
  // false: one CPU buffer; Kernel add then Kernel relu.
  // true: buffer 0 on the CPU holds x and y, buffer 1 on cuda:0 holds x_dev and y_dev;
  //       Copy x -> x_dev, Delegate segment 0 (backend `cuda_backend`, device cuda:0, a Graph
  //       running add + relu with its intermediate in scratch), Copy y_dev -> y.
  bool on_cuda = false;
  std::string cuda_backend = "cuda";
};

// Value ids of the host variant: x = 0, c = 1, t = 2 (x + c), y = 3.
FixtureProgram relu_add_program(const ReluAddOptions& options = {});

// Two methods sharing constant "c": options.method_name (relu(x + c), as above) and
// "scale" (y = x * c, host only, S in [1, 2 * max_s], so its buffer 0 is larger).
FixtureProgram two_method_program(const ReluAddOptions& options = {});

// c[i] = 0.5 * i - 1: negative and positive entries, so relu matters.
std::vector<float> constant_c(int64_t features);
// What the methods compute, for x of shape [S, features] in row-major order.
std::vector<float> relu_add_reference(std::span<const float> x, int64_t features);
std::vector<float> scale_reference(std::span<const float> x, int64_t features);

// Building blocks for tests that assemble their own programs.
fb::DimRef fixed_dim(int64_t size);
fb::DimRef named_dim(int32_t dim_index, int64_t multiplier = 1);
std::unique_ptr<fb::ValueT> planned_value(std::string name, std::vector<fb::DimRef> shape,
                                          uint32_t buffer, uint64_t offset,
                                          fb::DType dtype = fb::DType::F32);
std::unique_ptr<fb::ValueT> constant_value(std::string name, std::vector<fb::DimRef> shape,
                                           uint32_t constant, fb::DType dtype = fb::DType::F32);
std::unique_ptr<fb::InstructionT> kernel_instruction(std::string op, std::vector<uint32_t> inputs,
                                                     std::vector<uint32_t> outputs);
std::unique_ptr<fb::PlannedBufferT> planned_buffer(uint64_t size_bytes, fb::DeviceType type,
                                                   uint8_t index = 0);
// The bytes of a Graph table, as a Segment blob holds them.
std::vector<uint8_t> pack_graph(const fb::GraphT& graph);
std::vector<uint8_t> float_bytes(std::span<const float> values);

}  // namespace planrt::fixtures
