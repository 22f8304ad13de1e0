#include "support/built_programs.h"

#include <utility>

namespace planrt::fixtures {

Result<std::vector<uint8_t>> built_program_bytes(const builder::Model& model,
                                                 const builder::BuildOptions& options) {
  PLANRT_ASSIGN_OR_RETURN(builder::BuiltProgram built, builder::build_program(model, options));
  return built.serialize();
}

Result<Program> load_built_program(const builder::Model& model,
                                   const builder::BuildOptions& options) {
  PLANRT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, built_program_bytes(model, options));
  return Program::load_bytes(std::move(bytes));
}

Result<Program> load_transformer(const builder::TransformerOptions& transformer,
                                 const builder::BuildOptions& options) {
  PLANRT_ASSIGN_OR_RETURN(builder::Model model, builder::make_transformer(transformer));
  return load_built_program(model, options);
}

}  // namespace planrt::fixtures
