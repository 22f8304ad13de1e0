#include "program_steps.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "format/fb_types.h"

namespace planrt::cli {
namespace {

using Values = flatbuffers::Vector<flatbuffers::Offset<fb::Value>>;
using Dims = flatbuffers::Vector<flatbuffers::Offset<fb::DimSpec>>;
using Instructions = flatbuffers::Vector<flatbuffers::Offset<fb::Instruction>>;

constexpr uint32_t kNoValue = 0xFFFFFFFFu;

std::string shape_string(const fb::Value& v, const Dims* dims) {
  std::vector<std::string> parts;
  if (v.shape() != nullptr) {
    for (const fb::DimRef* d : *v.shape()) {
      if (d->dim() < 0) {
        parts.push_back(std::to_string(d->value()));
        continue;
      }
      const bool named = dims != nullptr && static_cast<uint32_t>(d->dim()) < dims->size();
      std::string name = named ? dims->Get(static_cast<uint32_t>(d->dim()))->name()->str() : fmt::format("dim#{}", d->dim());
      parts.push_back(d->value() == 1 ? name : fmt::format("{}*{}", d->value(), name));
    }
  }
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

// "name f32 [S, 512] @buffer+offset" (planned), "... const", "... temp"; `in_graph`: a
// segment graph's Planned values lie in its scratch, not a method buffer.
std::string value_string(const Values* values, const Dims* dims, uint32_t id, bool in_graph) {
  if (id == kNoValue) return "-";
  if (values == nullptr || id >= values->size()) return fmt::format("#{}?", id);
  const fb::Value& v = *values->Get(id);
  const auto dtype = format::to_dtype(v.dtype());
  std::string out = fmt::format("{} {} {}", v.name() ? v.name()->str() : fmt::format("#{}", id),
                                dtype ? dtype_name(*dtype) : std::string_view("?"), shape_string(v, dims));
  switch (v.kind()) {
    case fb::ValueKind::Planned:
      return in_graph ? fmt::format("{} @scratch+{}", out, v.offset())
                      : fmt::format("{} @#{}+{}", out, v.buffer(), v.offset());
    case fb::ValueKind::Constant: return out + " const";
    default: return out + " temp";
  }
}

void print_steps(const Instructions* steps, const Values* values, const Dims* dims, bool in_graph, bool views,
                 const fb::Method& method, std::string_view indent);

// A reshape whose output lies on its input (Graph.scratch_plan_views): no bytes move.
bool is_view(const fb::Instruction& ins, const Values* values, bool views) {
  if (!views || ins.op() == nullptr || ins.op()->string_view() != "reshape" || ins.inputs() == nullptr ||
      ins.outputs() == nullptr || ins.inputs()->size() != 1 || ins.outputs()->size() != 1 || values == nullptr) {
    return false;
  }
  const uint32_t in = ins.inputs()->Get(0), out = ins.outputs()->Get(0);
  if (in >= values->size() || out >= values->size()) return false;
  const fb::Value& a = *values->Get(in);
  const fb::Value& b = *values->Get(out);
  return a.kind() == fb::ValueKind::Planned && b.kind() == fb::ValueKind::Planned && a.offset() == b.offset();
}

void print_step(size_t k, const fb::Instruction& ins, const Values* values, const Dims* dims, bool in_graph,
                bool views, const fb::Method& method, std::string_view indent) {
  auto list = [&](const flatbuffers::Vector<uint32_t>* ids) {
    std::vector<std::string> parts;
    if (ids != nullptr) {
      for (uint32_t id : *ids) parts.push_back(value_string(values, dims, id, in_graph));
    }
    return fmt::format("{}", fmt::join(parts, ", "));
  };
  std::string what;
  switch (ins.kind()) {
    case fb::InstructionKind::Copy: what = "copy"; break;
    case fb::InstructionKind::Delegate: what = "delegate"; break;
    default: what = ins.op() ? ins.op()->str() : "?"; break;
  }
  fmt::print("{}{:>4}  {}{}  {} <- {}\n", indent, k, what, is_view(ins, values, views) ? " (view)" : "",
             list(ins.outputs()), list(ins.inputs()));
  if (ins.kind() != fb::InstructionKind::Delegate || method.segments() == nullptr || ins.segment() < 0 ||
      static_cast<uint32_t>(ins.segment()) >= method.segments()->size()) {
    return;
  }
  const fb::Segment* seg = method.segments()->Get(static_cast<uint32_t>(ins.segment()));
  const fb::Graph* graph = seg->blob() != nullptr && seg->blob()->size() != 0 ? seg->blob_nested_root() : nullptr;
  fmt::print("{}      segment '{}' ({}), {} steps, scratch {} bytes\n", indent, seg->name() ? seg->name()->str() : "",
             seg->backend()->str(), graph && graph->instructions() ? graph->instructions()->size() : 0,
             graph ? graph->scratch_bytes() : 0);
  if (graph != nullptr) {
    print_steps(graph->instructions(), graph->values(), dims, true, graph->scratch_plan_views(), method,
                std::string(indent) + "        ");
  }
}

void print_steps(const Instructions* steps, const Values* values, const Dims* dims, bool in_graph, bool views,
                 const fb::Method& method, std::string_view indent) {
  if (steps == nullptr) return;
  for (size_t k = 0; k < steps->size(); ++k) {
    print_step(k, *steps->Get(static_cast<uint32_t>(k)), values, dims, in_graph, views, method, indent);
  }
}

}  // namespace

void print_method_steps(const format::ProgramFile& file, std::string_view name) {
  const auto* methods = file.program().methods();
  if (methods == nullptr) return;
  for (const fb::Method* m : *methods) {
    if (m->name() == nullptr || m->name()->string_view() != name) continue;
    fmt::print("  steps (outputs <- inputs; @#B+O: planned buffer B at offset O)\n");
    print_steps(m->instructions(), m->values(), m->dims(), false, false, *m, "  ");
  }
}

}  // namespace planrt::cli
