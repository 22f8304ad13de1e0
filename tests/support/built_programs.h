// Programs the builder makes, for the runtime and backend tests that run what `planrt
// build` would write: a Model (a model file or the transformer template) built with
// builder::build_program, serialized to .prog bytes and loaded with Program::load_bytes.
// (The hand-made programs of program_fixtures.h involve no builder.) Every error of a step
// is returned as that step reported it.
#pragma once

#include <cstdint>
#include <vector>

#include "planrt/builder/builder.h"
#include "planrt/core/result.h"
#include "planrt/runtime/program.h"

namespace planrt::fixtures {

// The .prog bytes of build_program(model, options).
Result<std::vector<uint8_t>> built_program_bytes(const builder::Model& model,
                                                 const builder::BuildOptions& options = {});
// Those bytes, loaded.
Result<Program> load_built_program(const builder::Model& model,
                                   const builder::BuildOptions& options = {});
// make_transformer(transformer), built with `options` and loaded.
Result<Program> load_transformer(const builder::TransformerOptions& transformer,
                                 const builder::BuildOptions& options = {});

}  // namespace planrt::fixtures
