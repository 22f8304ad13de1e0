// Fuzz target: the bytes of an .onnx file -> parse_model_onnx (protobuf, the graph walk,
// folding, patterns) -> the builder -> the program bytes -> the loader. What
// `planrt build model.onnx` does, in memory.
//
// Beyond "no crash": a model the importer accepts must build into a program the loader
// verifies (the importer hands out only checked models). External data resolves against
// tests/fuzz/data, which holds no .onnx data: a location there is reported missing.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "planrt/builder/builder.h"
#include "planrt/importers/onnx.h"
#include "planrt/runtime/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace planrt;
  importers::OnnxImportOptions options;
  // Any dim a fuzzed model names: bounded small, so plans stay small.
  for (const char* d : {"batch", "seq", "b", "s", "N"}) options.dims[d] = {1, 8};
  Result<builder::Model> model =
      importers::parse_model_onnx(std::span<const uint8_t>(data, size), PLANRT_FUZZ_DATA_DIR, options);
  if (!model.ok()) return 0;
  Result<builder::BuiltProgram> built = builder::build_program(*model);
  if (!built.ok()) return 0;
  Result<std::vector<uint8_t>> bytes = built->serialize();
  if (!bytes.ok()) return 0;
  Result<Program> program = Program::load_bytes(std::move(bytes).value());
  fuzz::require(program.ok(), "the loader accepts a program built from an imported model");
  return 0;
}
