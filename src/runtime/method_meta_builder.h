// Builds a MethodMeta from a verified program (rule 6: nothing is allocated or loaded).
#pragma once

#include "format/program_file.h"
#include "planrt/runtime/method_meta.h"

namespace planrt::runtime_detail {

MethodMeta build_method_meta(const format::ProgramFile& file, const fb::Method& method);

}  // namespace planrt::runtime_detail
