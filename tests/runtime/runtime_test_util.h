// Helpers for the runtime tests: programs from the fixtures, float inputs, and checks.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planrt/runtime/program.h"
#include "planrt/runtime/tensor.h"
#include "support/program_fixtures.h"

namespace planrt::runtime_test {

inline constexpr int64_t kFeatures = 4;  // the fixtures' default F
inline constexpr uint64_t kArena = 256;  // one [16, 4] f32 value rounded to 256 bytes

inline Program load_fixture(const fixtures::FixtureProgram& f) {
  Result<std::vector<uint8_t>> bytes = f.serialize();
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  Result<Program> p = Program::load_bytes(std::move(bytes).value());
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return std::move(p).value();
}

// x[s, f] = s - 1.5 + 0.25 f: both signs, so relu matters.
inline std::vector<float> make_x(int64_t s) {
  std::vector<float> x(static_cast<size_t>(s * kFeatures));
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(i / kFeatures) - 1.5f + 0.25f * static_cast<float>(i % kFeatures);
  }
  return x;
}

inline TensorView view_of(std::vector<float>& x, Shape shape) {
  return TensorView::contiguous(x.data(), DType::F32, shape);
}

inline std::vector<float> floats(const Tensor& t) {
  auto v = t.values<float>();
  return {v.begin(), v.end()};
}

// A program with two methods computing the same relu(x + c): "host" on the CPU and
// "device" delegated to a "cuda" segment on cuda:0 (the reference's two-method program).
inline fixtures::FixtureProgram host_and_device_program() {
  fixtures::ReluAddOptions host_opts;
  host_opts.method_name = "host";
  fixtures::FixtureProgram f = fixtures::relu_add_program(host_opts);
  fixtures::ReluAddOptions dev_opts;
  dev_opts.method_name = "device";
  dev_opts.on_cuda = true;
  fixtures::FixtureProgram d = fixtures::relu_add_program(dev_opts);
  f.program.methods.push_back(std::move(d.program.methods[0]));
  return f;
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace planrt::runtime_test
