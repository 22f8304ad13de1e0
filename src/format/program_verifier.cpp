#include "format/program_verifier.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "format/checked_math.h"
#include "format/fb_types.h"

namespace planrt::format {
namespace {

using Dims = flatbuffers::Vector<flatbuffers::Offset<fb::DimSpec>>;
using Values = flatbuffers::Vector<flatbuffers::Offset<fb::Value>>;
using Ids = flatbuffers::Vector<uint32_t>;


Status invalid(std::string message) { return Status(ErrorCode::InvalidProgram, std::move(message)); }

// The size limit's one predicate and message, for the verifier and verify_sizes: `what`
// ("method 'forward' buffer 0", "... segment 1 ('engine0') graph") asks for `bytes` of
// `unit`.
Status check_size(const std::string& what, uint64_t bytes, uint64_t limit, std::string_view unit) {
  if (bytes <= limit) return {};
  return invalid(fmt::format("{} asks for {} {}, above the limit of {}", what, bytes, unit, limit));
}
std::string method_where(std::string_view name) { return fmt::format("method '{}'", name); }
std::string segment_where(const std::string& method, uint32_t index, std::string_view name) {
  std::string where = fmt::format("{} segment {}", method, index);
  if (!name.empty()) where += fmt::format(" ('{}')", name);
  return where;
}

// The values an instruction list refers to: a method's, or a segment graph's (whose
// Planned values live in one scratch buffer and whose dims are the method's).
struct Scope {
  std::string where;  // "method 'forward'" or "method 'forward' segment 1 ('enc') graph"
  const Values* values = nullptr;
  const Dims* dims = nullptr;
  const fb::Program* program = nullptr;
  const fb::Method* method = nullptr;  // the method's own planned buffers and segments
  bool is_graph = false;
  bool reshape_views = false;  // Graph.scratch_plan_views
  uint64_t scratch_bytes = 0;
  const ReadLimits* limits = nullptr;

  uint32_t num_values() const { return count(values); }
  const fb::Value& value(uint32_t id) const { return *values->Get(id); }
};

std::string value_label(const Scope& s, uint32_t id) {
  std::string_view name = str(s.value(id).name());
  if (name.empty()) return fmt::format("{} value {}", s.where, id);
  return fmt::format("{} value {} '{}'", s.where, id, name);
}

std::optional<Device> buffer_device(const fb::Method& m, uint32_t buffer) {
  return to_device(m.planned_buffers()->Get(buffer)->device());
}

// True when the value is read or written in host memory (a CPU kernel can touch it).
bool on_host(const Scope& s, uint32_t id) {
  const fb::Value& v = s.value(id);
  if (v.kind() == fb::ValueKind::Constant) return true;
  auto d = buffer_device(*s.method, v.buffer());
  return d && d->is_cpu();
}

Status check_constant_value(const Scope& s, uint32_t id, const fb::Value& v) {
  const uint32_t n = count(s.program->constants());
  if (v.constant() >= n) {
    return invalid(fmt::format("{} refers to constant {} but the program has {} constants",
                               value_label(s, id), v.constant(), n));
  }
  const fb::Constant& c = *s.program->constants()->Get(v.constant());
  if (c.dtype() != v.dtype()) {
    return invalid(fmt::format("{} has dtype {} but constant {} '{}' has dtype {}",
                               value_label(s, id), static_cast<int>(v.dtype()), v.constant(),
                               str(c.name()), static_cast<int>(c.dtype())));
  }
  const uint32_t rank = count(v.shape());
  bool same = rank == count(c.shape());
  for (uint32_t i = 0; same && i < rank; ++i) {
    const fb::DimRef* r = v.shape()->Get(i);
    same = r->dim() < 0 && r->value() == c.shape()->Get(i);
  }
  if (!same) {
    return invalid(fmt::format("{} does not have the static shape of constant {} '{}'",
                               value_label(s, id), v.constant(), str(c.name())));
  }
  return {};
}

Status check_value(const Scope& s, uint32_t id) {
  const fb::Value& v = s.value(id);
  const auto kind = static_cast<int>(v.kind());
  if (kind > static_cast<int>(fb::ValueKind::MAX)) {
    return invalid(fmt::format("{} has an unknown kind {}", value_label(s, id), kind));
  }
  if (v.kind() == fb::ValueKind::Temporary && !s.is_graph) {
    return invalid(fmt::format("{} is Temporary, which only a segment graph may hold",
                               value_label(s, id)));
  }
  if (!to_dtype(v.dtype())) {
    return invalid(fmt::format("{} has an unknown dtype {}", value_label(s, id),
                               static_cast<int>(v.dtype())));
  }
  if (!elements_aligned(v.shape())) {
    return invalid(fmt::format("{} has a misaligned shape vector", value_label(s, id)));
  }
  const uint32_t rank = count(v.shape());
  if (rank > static_cast<uint32_t>(kMaxRank)) {
    return invalid(fmt::format("{} has rank {}, above the maximum {}", value_label(s, id), rank,
                               kMaxRank));
  }
  for (uint32_t i = 0; i < rank; ++i) {
    const fb::DimRef* r = v.shape()->Get(i);
    if (r->dim() < 0 && r->value() < 0) {
      return invalid(fmt::format("{} has a negative size {} at shape entry {}", value_label(s, id),
                                 r->value(), i));
    }
    if (r->dim() >= 0 && static_cast<uint32_t>(r->dim()) >= count(s.dims)) {
      return invalid(fmt::format("{} refers to dim {} at shape entry {}, but there are {} dims",
                                 value_label(s, id), r->dim(), i, count(s.dims)));
    }
    // The runtime divides an input's size by the multiplier to bind the dim.
    if (r->dim() >= 0 && r->value() < 1) {
      return invalid(fmt::format("{} has multiplier {} (must be >= 1) at shape entry {}",
                                 value_label(s, id), r->value(), i));
    }
  }
  auto nbytes = value_max_nbytes(v, s.dims);
  if (!nbytes.ok()) return nbytes.status().with_context(value_label(s, id));

  switch (v.kind()) {
    case fb::ValueKind::Planned: {
      if (s.is_graph) {
        if (!range_within(v.offset(), *nbytes, s.scratch_bytes)) {
          return invalid(fmt::format("{} at offset {} with {} bytes exceeds the scratch of {} bytes",
                                     value_label(s, id), v.offset(), *nbytes, s.scratch_bytes));
        }
      } else {
        const uint32_t nbuf = count(s.method->planned_buffers());
        if (v.buffer() >= nbuf) {
          return invalid(fmt::format("{} refers to buffer {} but the method has {} planned buffers",
                                     value_label(s, id), v.buffer(), nbuf));
        }
        const uint64_t size = s.method->planned_buffers()->Get(v.buffer())->size_bytes();
        if (!range_within(v.offset(), *nbytes, size)) {
          return invalid(fmt::format(
              "{} at offset {} with {} bytes (max shape) exceeds buffer {} of {} bytes",
              value_label(s, id), v.offset(), *nbytes, v.buffer(), size));
        }
      }
      // Kernels access planned memory as typed elements, and every arena and scratch buffer
      // is at least 64-byte aligned: an offset off its element size would make those
      // accesses misaligned (undefined behaviour; tests/fuzz/regressions/program).
      const size_t element = element_size(*to_dtype(v.dtype()));
      if (v.offset() % element != 0) {
        return invalid(fmt::format("{} at offset {} is not aligned to its {}-byte elements",
                                   value_label(s, id), v.offset(), element));
      }
      return {};
    }
    case fb::ValueKind::Constant:
      return check_constant_value(s, id, v);
    case fb::ValueKind::Temporary:
      return {};
  }
  return {};
}

Status check_operand_ids(const Scope& s, const std::string& label, const Ids* ids,
                         std::string_view what, bool allow_none) {
  for (uint32_t i = 0; i < count(ids); ++i) {
    uint32_t id = ids->Get(i);
    if (id == kNoValue && allow_none) continue;
    if (id >= s.num_values()) {
      return invalid(fmt::format("{} {} {} is value id {} but there are {} values", label, what, i,
                                 id == kNoValue ? std::string("kNoValue") : std::to_string(id),
                                 s.num_values()));
    }
    // Writing a constant would write into the read-only mapping of the file.
    if (what == "output" && s.value(id).kind() == fb::ValueKind::Constant) {
      return invalid(fmt::format("{} output {} is {}, a constant", label, i, value_label(s, id)));
    }
  }
  return {};
}

bool same_shape(const fb::Value& a, const fb::Value& b) {
  if (count(a.shape()) != count(b.shape())) return false;
  for (uint32_t i = 0; i < count(a.shape()); ++i) {
    const fb::DimRef* x = a.shape()->Get(i);
    const fb::DimRef* y = b.shape()->Get(i);
    if (x->dim() != y->dim() || x->value() != y->value()) return false;
  }
  return true;
}

const fb::Graph* segment_graph(const fb::Segment& seg) {
  return seg.blob() && seg.blob()->size() > 0 ? seg.blob_nested_root() : nullptr;
}

Status check_delegate(const Scope& s, const std::string& label, const fb::Instruction& ins) {
  const uint32_t nseg = count(s.method->segments());
  if (ins.segment() < 0 || static_cast<uint32_t>(ins.segment()) >= nseg) {
    return invalid(fmt::format("{} calls segment {} but the method has {} segments", label,
                               ins.segment(), nseg));
  }
  const fb::Segment& seg = *s.method->segments()->Get(static_cast<uint32_t>(ins.segment()));
  const fb::Graph* g = segment_graph(seg);
  if (g == nullptr) {
    return invalid(fmt::format("{} calls segment {} ('{}'), which has no blob", label,
                               ins.segment(), str(seg.name())));
  }
  // A planned scratch (Graph.scratch_operand) is one more output after the graph's.
  const uint32_t scratch_operands = g->scratch_operand() ? 1 : 0;
  if (count(g->inputs()) != count(ins.inputs()) ||
      count(g->outputs()) + scratch_operands != count(ins.outputs())) {
    return invalid(fmt::format(
        "{} passes {} inputs and {} outputs but segment {} graph takes {} and {}{}", label,
        count(ins.inputs()), count(ins.outputs()), ins.segment(), count(g->inputs()),
        count(g->outputs()), scratch_operands ? " plus its planned scratch" : ""));
  }
  auto seg_device = to_device(seg.device());
  for (const Ids* ids : {ins.inputs(), ins.outputs()}) {
    for (uint32_t i = 0; i < count(ids); ++i) {
      uint32_t id = ids->Get(i);
      if (id == kNoValue) continue;
      const fb::Value& v = s.value(id);
      if (v.kind() != fb::ValueKind::Planned || buffer_device(*s.method, v.buffer()) != seg_device) {
        return invalid(fmt::format("{} operand {} is not planned on the segment's device {}",
                                   label, value_label(s, id),
                                   seg_device ? to_string(*seg_device) : "?"));
      }
    }
  }
  if (scratch_operands != 0) {
    const uint32_t id = ins.outputs()->Get(count(ins.outputs()) - 1);
    if (id == kNoValue) {
      return invalid(fmt::format("{} passes no planned scratch to segment {}", label, ins.segment()));
    }
    // Its own value: the backend writes it throughout the call, so it may not also be one of
    // the instruction's other operands (which the in-place exemption of the overlap check
    // below would otherwise let through).
    for (const Ids* ids : {ins.inputs(), ins.outputs()}) {
      for (uint32_t i = 0; i < count(ids); ++i) {
        if (ids == ins.outputs() && i + 1 == count(ids)) continue;
        if (ids->Get(i) == id) {
          return invalid(fmt::format("{} passes {} as its planned scratch and as another operand",
                                     label, value_label(s, id)));
        }
      }
    }
    // A static shape, so that it holds the plan at whatever dims a call binds.
    const fb::Value& v = s.value(id);
    const bool is_static = v.shape() == nullptr ||
                           std::all_of(v.shape()->begin(), v.shape()->end(),
                                       [](const fb::DimRef* d) { return d->dim() < 0; });
    if (!is_static) {
      return invalid(fmt::format("{} passes planned scratch {} with a dynamic shape to segment {}",
                                 label, value_label(s, id), ins.segment()));
    }
    auto bytes = value_max_nbytes(v, s.dims);
    if (!bytes.ok() || *bytes < g->scratch_bytes()) {
      return invalid(fmt::format("{} passes planned scratch {} of {} bytes to segment {}, whose "
                                 "graph needs {}", label, value_label(s, id),
                                 bytes.ok() ? fmt::format("{}", *bytes) : std::string("?"),
                                 ins.segment(), g->scratch_bytes()));
    }
  }
  return {};
}

// The bytes a Planned value may occupy, at its max shape: [begin, end) of `buffer` (0 for
// a segment graph's scratch). Empty for other kinds and for values of no bytes.
struct PlannedRange {
  uint32_t buffer = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
};

std::optional<PlannedRange> planned_range(const Scope& s, uint32_t id) {
  const fb::Value& v = s.value(id);
  if (v.kind() != fb::ValueKind::Planned) return std::nullopt;
  auto nbytes = value_max_nbytes(v, s.dims);  // checked with the value: does not fail here
  if (!nbytes.ok() || *nbytes == 0) return std::nullopt;
  return PlannedRange{s.is_graph ? 0u : v.buffer(), v.offset(), v.offset() + *nbytes};
}

// An instruction writes its outputs while it reads its inputs, and kernels copy with memcpy:
// an output sharing bytes with a different value among its operands is undefined behaviour
// (the program fuzz target found a concat whose output overlapped its input). The planner
// never places them so: lifetimes are inclusive, so an instruction's operands are all alive
// at it and get disjoint ranges. An output that is itself one of the inputs (in place,
// y = y + x, which hand-built programs use) stays within that one value's bytes. And in a
// graph planned with views (Graph.scratch_plan_views), a reshape's output may lie exactly on
// its input: the same bytes, which the reshape kernels leave where they are.
Status check_outputs_overlap_nothing(const Scope& s, const std::string& label,
                                     const fb::Instruction& ins) {
  for (uint32_t o = 0; o < count(ins.outputs()); ++o) {
    const uint32_t out = ins.outputs()->Get(o);
    const std::optional<PlannedRange> written = planned_range(s, out);
    if (!written) continue;
    if (s.reshape_views && str(ins.op()) == "reshape" && count(ins.inputs()) == 1 && count(ins.outputs()) == 1) {
      const uint32_t in = ins.inputs()->Get(0);
      const std::optional<PlannedRange> read = in == kNoValue ? std::nullopt : planned_range(s, in);
      if (read && read->begin == written->begin && read->end == written->end) continue;
    }
    auto overlapping = [&](const Ids* ids, uint32_t n, std::string_view what) -> Status {
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t id = ids->Get(i);
        if (id == kNoValue || id == out) continue;
        const std::optional<PlannedRange> other = planned_range(s, id);
        if (other && other->buffer == written->buffer && other->begin < written->end &&
            written->begin < other->end) {
          return invalid(fmt::format("{} output {} ({}) overlaps its {} {} ({}) in planned memory",
                                     label, o, value_label(s, out), what, i, value_label(s, id)));
        }
      }
      return {};
    };
    PLANRT_RETURN_IF_ERROR(overlapping(ins.inputs(), count(ins.inputs()), "input"));
    PLANRT_RETURN_IF_ERROR(overlapping(ins.outputs(), o, "output"));
  }
  return {};
}

Status check_instruction(const Scope& s, uint32_t index, const fb::Instruction& ins) {
  std::string label = fmt::format("{} instruction {}", s.where, index);
  if (!str(ins.op()).empty()) label += fmt::format(" ({})", str(ins.op()));
  if (!str(ins.node()).empty()) label += fmt::format(" of node '{}'", str(ins.node()));

  const auto kind = static_cast<int>(ins.kind());
  if (kind > static_cast<int>(fb::InstructionKind::MAX)) {
    return invalid(fmt::format("{} has an unknown kind {}", label, kind));
  }
  PLANRT_RETURN_IF_ERROR(check_operand_ids(s, label, ins.inputs(), "input", true));
  PLANRT_RETURN_IF_ERROR(check_operand_ids(s, label, ins.outputs(), "output", false));
  for (uint32_t i = 0; i < count(ins.attrs()); ++i) {
    const fb::Attr* a = ins.attrs()->Get(i);
    if (!elements_aligned(a->ints())) {
      return invalid(fmt::format("{} attribute '{}' has a misaligned ints vector", label,
                                 str(a->name())));
    }
    if (static_cast<int>(a->type()) > static_cast<int>(fb::AttrType::MAX)) {
      return invalid(fmt::format("{} attribute '{}' has an unknown type {}", label,
                                 str(a->name()), static_cast<int>(a->type())));
    }
  }
  if (s.is_graph && ins.kind() != fb::InstructionKind::Kernel) {
    return invalid(fmt::format("{} is not a Kernel instruction (the only kind a graph holds)", label));
  }
  PLANRT_RETURN_IF_ERROR(check_outputs_overlap_nothing(s, label, ins));

  switch (ins.kind()) {
    case fb::InstructionKind::Kernel: {
      if (str(ins.op()).empty()) return invalid(fmt::format("{} is a Kernel without an op", label));
      if (s.is_graph) return {};
      const uint32_t nseg = count(s.method->segments());
      if (ins.segment() < -1 || (ins.segment() >= 0 && static_cast<uint32_t>(ins.segment()) >= nseg)) {
        return invalid(fmt::format("{} names segment {} but the method has {} segments", label,
                                   ins.segment(), nseg));
      }
      for (const Ids* ids : {ins.inputs(), ins.outputs()}) {
        for (uint32_t i = 0; i < count(ids); ++i) {
          uint32_t id = ids->Get(i);
          if (id != kNoValue && !on_host(s, id)) {
            return invalid(fmt::format("{} is a CPU kernel but its operand {} is not in host memory",
                                       label, value_label(s, id)));
          }
        }
      }
      return {};
    }
    case fb::InstructionKind::Delegate:
      return check_delegate(s, label, ins);
    case fb::InstructionKind::Copy: {
      if (count(ins.inputs()) != 1 || count(ins.outputs()) != 1 || ins.inputs()->Get(0) == kNoValue) {
        return invalid(fmt::format("{} is a Copy with {} inputs and {} outputs (needs 1 and 1)",
                                   label, count(ins.inputs()), count(ins.outputs())));
      }
      const uint32_t in = ins.inputs()->Get(0);
      const uint32_t out = ins.outputs()->Get(0);
      if (s.value(in).dtype() != s.value(out).dtype() || !same_shape(s.value(in), s.value(out))) {
        return invalid(fmt::format("{} copies {} to {}, which differ in dtype or shape", label,
                                   value_label(s, in), value_label(s, out)));
      }
      return {};
    }
  }
  return {};
}

Status check_values_and_instructions(const Scope& s, const Ids* inputs, const Ids* outputs,
                                     const flatbuffers::Vector<flatbuffers::Offset<fb::Instruction>>* instructions) {
  for (uint32_t id = 0; id < s.num_values(); ++id) PLANRT_RETURN_IF_ERROR(check_value(s, id));
  for (auto [ids, what] : {std::pair{inputs, "input"}, std::pair{outputs, "output"}}) {
    for (uint32_t i = 0; i < count(ids); ++i) {
      uint32_t id = ids->Get(i);
      if (id >= s.num_values()) {
        return invalid(fmt::format("{} {} {} is value id {} but there are {} values", s.where,
                                   what, i, id, s.num_values()));
      }
      if (s.is_graph) continue;
      const fb::Value& v = s.value(id);
      if (v.kind() != fb::ValueKind::Planned || !on_host(s, id)) {
        return invalid(fmt::format("{} {} {} ({}) is not a Planned value on a CPU buffer",
                                   s.where, what, i, value_label(s, id)));
      }
    }
  }
  for (uint32_t i = 0; i < count(instructions); ++i) {
    PLANRT_RETURN_IF_ERROR(check_instruction(s, i, *instructions->Get(i)));
  }
  return {};
}

Status check_segment(const Scope& method_scope, uint32_t index, const fb::Segment& seg) {
  const std::string where = segment_where(method_scope.where, index, str(seg.name()));
  if (str(seg.backend()).empty()) return invalid(fmt::format("{} has an empty backend name", where));
  if (!to_device(seg.device())) {
    return invalid(fmt::format("{} has an unknown device type {}", where,
                               static_cast<int>(seg.device()->type())));
  }
  if (seg.blob() == nullptr || seg.blob()->size() == 0) return {};
  // The writer aligns blobs (force_align in the schema); a Graph read in place from a
  // misaligned blob would load its 8-byte fields misaligned.
  if (reinterpret_cast<uintptr_t>(seg.blob()->data()) % 8 != 0) {
    return invalid(fmt::format("{} has a blob that is not 8-byte aligned", where));
  }
  flatbuffers::Verifier verifier(seg.blob()->data(), seg.blob()->size(), verifier_options());
  if (!verifier.VerifyBuffer<fb::Graph>(nullptr)) {
    return invalid(fmt::format("{} has a blob that is not a valid Graph FlatBuffer ({} bytes)",
                               where, seg.blob()->size()));
  }
  const fb::Graph* g = seg.blob_nested_root();
  // DimBound holds 8-byte fields and is read in place (elements_aligned says why the
  // FlatBuffers verifier does not catch this).
  if (!elements_aligned(g->profile())) {
    return invalid(fmt::format("{} graph has a profile vector that is not 8-byte aligned", where));
  }
  if (!elements_aligned(g->scratch_workspace_offsets())) {
    return invalid(fmt::format("{} graph has a workspace offsets vector that is not 8-byte aligned", where));
  }
  if (g->scratch_plan_stored()) {
    const size_t steps = g->instructions() ? g->instructions()->size() : 0;
    const size_t offsets = g->scratch_workspace_offsets() ? g->scratch_workspace_offsets()->size() : 0;
    if (offsets != steps) {
      return invalid(fmt::format("{} graph stores its scratch plan with {} workspace offsets for {} "
                                 "instructions", where, offsets, steps));
    }
  }
  PLANRT_RETURN_IF_ERROR(check_size(where + " graph", g->scratch_bytes(),
                                    method_scope.limits->max_planned_buffer_bytes, "scratch bytes"));
  Scope gs = method_scope;
  gs.where = where + " graph";
  gs.values = g->values();
  gs.is_graph = true;
  gs.reshape_views = g->scratch_plan_views();
  gs.scratch_bytes = g->scratch_bytes();
  return check_values_and_instructions(gs, g->inputs(), g->outputs(), g->instructions());
}

Status check_dims(const std::string& where, const Dims* dims) {
  std::set<std::string_view> names;
  for (uint32_t i = 0; i < count(dims); ++i) {
    const fb::DimSpec& d = *dims->Get(i);
    std::string_view name = str(d.name());
    if (name.empty()) return invalid(fmt::format("{} dim {} has an empty name", where, i));
    if (!names.insert(name).second) {
      return invalid(fmt::format("{} has two dims named '{}'", where, name));
    }
    if (d.min() < 0 || d.max() < 1 || d.min() > d.max()) {
      return invalid(fmt::format("{} dim '{}' has bounds [{}, {}] (need 0 <= min <= max, max >= 1)",
                                 where, name, d.min(), d.max()));
    }
  }
  return {};
}

Status check_method(const fb::Program& program, const fb::Method& m, const ReadLimits& limits) {
  Scope s;
  s.where = method_where(str(m.name()));
  s.values = m.values();
  s.dims = m.dims();
  s.program = &program;
  s.method = &m;
  s.limits = &limits;
  PLANRT_RETURN_IF_ERROR(check_dims(s.where, m.dims()));
  for (uint32_t b = 0; b < count(m.planned_buffers()); ++b) {
    const fb::PlannedBuffer& buf = *m.planned_buffers()->Get(b);
    if (!to_device(buf.device())) {
      return invalid(fmt::format("{} buffer {} has an unknown device type {}", s.where, b,
                                 static_cast<int>(buf.device()->type())));
    }
    PLANRT_RETURN_IF_ERROR(
        check_size(fmt::format("{} buffer {}", s.where, b), buf.size_bytes(), limits.max_planned_buffer_bytes, "bytes"));
  }
  for (uint32_t i = 0; i < count(m.segments()); ++i) {
    PLANRT_RETURN_IF_ERROR(check_segment(s, i, *m.segments()->Get(i)));
  }
  for (uint32_t i = 0; i < count(m.plan()); ++i) {
    if (!to_device(m.plan()->Get(i)->device())) {
      return invalid(fmt::format("{} plan entry {} has an unknown device type", s.where, i));
    }
  }
  return check_values_and_instructions(s, m.inputs(), m.outputs(), m.instructions());
}

}  // namespace

flatbuffers::Verifier::Options verifier_options() {
  flatbuffers::Verifier::Options o;
  o.max_depth = 32;
  o.max_tables = 1u << 22;
  o.check_alignment = true;
  o.check_nested_flatbuffers = true;
  return o;
}

Status verify_methods(const fb::Program& program, const ReadLimits& limits) {
  std::set<std::string_view> names;
  for (uint32_t i = 0; i < count(program.methods()); ++i) {
    const fb::Method& m = *program.methods()->Get(i);
    std::string_view name = str(m.name());
    if (name.empty()) return invalid(fmt::format("method {} has an empty name", i));
    if (!names.insert(name).second) return invalid(fmt::format("two methods are named '{}'", name));
    PLANRT_RETURN_IF_ERROR(check_method(program, m, limits));
  }
  return {};
}

Status verify_sizes(const fb::ProgramT& program, const ReadLimits& limits) {
  for (const auto& m : program.methods) {
    if (m == nullptr) continue;
    const std::string where = method_where(m->name);
    for (size_t b = 0; b < m->planned_buffers.size(); ++b) {
      if (m->planned_buffers[b] == nullptr) continue;
      PLANRT_RETURN_IF_ERROR(check_size(fmt::format("{} buffer {}", where, b), m->planned_buffers[b]->size_bytes,
                                        limits.max_planned_buffer_bytes, "bytes"));
    }
    for (size_t i = 0; i < m->segments.size(); ++i) {
      const fb::SegmentT* seg = m->segments[i].get();
      if (seg == nullptr || seg->blob.empty()) continue;
      // The builder's own bytes: a Graph it has just written, read without a verifier.
      const fb::Graph* g = flatbuffers::GetRoot<fb::Graph>(seg->blob.data());
      PLANRT_RETURN_IF_ERROR(check_size(segment_where(where, static_cast<uint32_t>(i), seg->name) + " graph",
                                        g->scratch_bytes(), limits.max_planned_buffer_bytes, "scratch bytes"));
    }
  }
  return {};
}

}  // namespace planrt::format
