// An attention block as a JSON model (d_model 128, 2 heads of 64: the CUDA kernels' fused
// path), for the attention rewrites' end-to-end tests on the CPU and on a GPU.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "builder/builder_test_util.h"
#include "planrt/builder/builder.h"
#include "planrt/runtime/program.h"
#include "support/built_programs.h"

namespace planrt::attention_block {

// How much of the block the builder may rewrite: an intermediate that is also a method
// output stays, which stops the rewrite that would remove it.
enum class Rewritten {
  Nothing,     // the attention's output is observed: no permute or reshape absorbed
  HeadsOnly,   // the q projection is observed: heads absorbed, projections not packed
  Everything,  // one packed projection, flat heads
};

inline std::string model_json(const std::string& backend, Rewritten r) {
  std::string outputs = "\"y\"";
  if (r == Rewritten::Nothing) outputs += ", \"o\"";
  if (r == Rewritten::HeadsOnly) outputs += ", \"q\"";
  std::string constants, nodes;
  for (const char* p : {"q", "k", "v", "o"}) {
    if (!constants.empty()) constants += ", ";
    constants += fmt::format(R"("w{0}": {{"dtype": "f32", "shape": [128, 128]}}, "b{0}": {{"dtype": "f32", "shape": [128]}})", p);
  }
  for (const char* p : {"q", "k", "v"}) {
    nodes += fmt::format(R"(
      {{"op": "linear", "inputs": ["x", "w{0}", "b{0}"], "outputs": ["{0}"]}},
      {{"op": "reshape", "inputs": ["{0}"], "outputs": ["{0}s"], "attrs": {{"shape": ["B", "S", 2, 64]}}}},
      {{"op": "permute", "inputs": ["{0}s"], "outputs": ["{0}h"], "attrs": {{"dims": [0, 2, 1, 3]}}}},)", p);
  }
  return fmt::format(R"({{
  "format": "planrt-model/1",
  "weights": {{"random": {{"seed": 7, "std": 0.2}}}},
  "constants": {{ {} }},
  "methods": [{{"name": "forward", "backend": "{}", "dims": {{"B": {{"min": 1, "max": 4}}, "S": {{"min": 1, "max": 40}}}},
    "inputs": [{{"name": "x", "dtype": "f32", "shape": ["B", "S", 128]}}],
    "outputs": [{}],
    "nodes": [{}
      {{"op": "scaled_dot_product_attention", "inputs": ["qh", "kh", "vh"], "outputs": ["o"], "attrs": {{"causal": true}}}},
      {{"op": "permute", "inputs": ["o"], "outputs": ["om"], "attrs": {{"dims": [0, 2, 1, 3]}}}},
      {{"op": "reshape", "inputs": ["om"], "outputs": ["m"], "attrs": {{"shape": ["B", "S", 128]}}}},
      {{"op": "linear", "inputs": ["m", "wo", "bo"], "outputs": ["y"]}}
    ]}}]}})",
                     constants, backend, outputs, nodes);
}

// y of the block at [batch, seq] (the first output).
inline Result<std::vector<float>> run(const std::string& backend, Rewritten r, int64_t batch, int64_t seq) {
  PLANRT_ASSIGN_OR_RETURN(builder::Model model, builder::parse_model_json(model_json(backend, r)));
  PLANRT_ASSIGN_OR_RETURN(Program program, fixtures::load_built_program(model, builder::BuildOptions{}));
  PLANRT_ASSIGN_OR_RETURN(Method method, program.load_method("forward"));
  std::vector<float> x(static_cast<size_t>(batch * seq * 128));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.31f * static_cast<float>(i)) + 0.05f;
  TensorView in = TensorView::contiguous(x.data(), DType::F32, {batch, seq, 128});
  PLANRT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, method.execute({&in, 1}));
  auto v = outs[0].values<float>();
  return std::vector<float>(v.begin(), v.end());
}

// The nodes the built program runs (every instruction's segment nodes, kernels counted once).
inline Result<uint32_t> nodes(const std::string& backend, Rewritten r) {
  PLANRT_ASSIGN_OR_RETURN(builder::Model model, builder::parse_model_json(model_json(backend, r)));
  PLANRT_ASSIGN_OR_RETURN(builder::BuiltProgram built, builder::build_program(model));
  uint32_t n = 0;
  for (const auto& segment : built.program().methods[0]->segments) n += segment->num_nodes;
  return n;
}

inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace planrt::attention_block
