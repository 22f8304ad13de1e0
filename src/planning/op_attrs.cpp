#include "planning/op_attrs.h"

#include "format/fb_types.h"

namespace planrt::planning {

using format::str;

Result<kernels::OpAttrs> parse_op_attrs(const fb::Instruction& instruction) {
  kernels::OpAttrs attrs;
  if (instruction.attrs() == nullptr) return attrs;
  for (const fb::Attr* a : *instruction.attrs()) {
    std::string name(str(a->name()));
    switch (a->type()) {
      case fb::AttrType::Int: attrs.set(name, a->i()); break;
      case fb::AttrType::Float: attrs.set(name, a->f()); break;
      case fb::AttrType::String: attrs.set(name, std::string(str(a->s()))); break;
      case fb::AttrType::Bool: attrs.set(name, a->i() != 0); break;
      case fb::AttrType::Ints: {
        std::vector<int64_t> ints;
        if (a->ints() != nullptr) ints.assign(a->ints()->begin(), a->ints()->end());
        attrs.set(name, std::move(ints));
        break;
      }
      default:
        return make_error(ErrorCode::InvalidProgram, "attribute '{}' has unknown type {}", name,
                          static_cast<int>(a->type()));
    }
  }
  return attrs;
}

}  // namespace planrt::planning
