// Fuzz target: model description text (docs/model-format.md) -> parse_model_json -> the
// builder (build_program: partition, plan memory, lower) -> the program bytes -> the loader.
// What `planrt build model.json` does, in memory.
//
// Beyond "no crash": a program the builder writes must pass the loader's verification and
// answer method_meta for every method (the builder and the verifier agree on the format).
//
// Weights: {"file": NAME} resolves against tests/fuzz/data, which holds one small
// safetensors file (weights.safetensors) the seed models name; random weights are made in
// memory, at most ReadOptions::max_random_weight_bytes (16 MiB here) of them.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "planrt/builder/builder.h"
#include "planrt/runtime/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace planrt;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  builder::ReadOptions options;
  options.max_random_weight_bytes = uint64_t{16} << 20;
  Result<builder::Model> model = builder::parse_model_json(text, PLANRT_FUZZ_DATA_DIR, options);
  if (!model.ok()) return 0;
  Result<builder::BuiltProgram> built = builder::build_program(*model);
  if (!built.ok()) return 0;
  Result<std::vector<uint8_t>> bytes = built->serialize();
  if (!bytes.ok()) return 0;
  Result<Program> program = Program::load_bytes(std::move(bytes).value());
  if (!program.ok()) {
    fuzz::require(false, "the loader accepts a program the builder wrote: " + program.status().to_string());
  }
  for (const std::string& name : program->method_names()) {
    fuzz::require(program->method_meta(name).ok(), "a built method answers method_meta");
  }
  return 0;
}
