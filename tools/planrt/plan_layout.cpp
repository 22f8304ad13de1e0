#include "plan_layout.h"

#include <algorithm>

#include <fmt/format.h>

namespace planrt::cli {
namespace {

Device to_device(const fb::DeviceRef* ref) {
  if (ref == nullptr) return Device::cpu();
  return Device{static_cast<DeviceType>(ref->type()), ref->index()};
}

// first/last instruction touching each value (-1 when none).
void compute_lifetimes(const fb::Method& method, std::vector<int64_t>* first,
                       std::vector<int64_t>* last) {
  size_t n_values = method.values() ? method.values()->size() : 0;
  first->assign(n_values, -1);
  last->assign(n_values, -1);
  int64_t n_instr = method.instructions() ? method.instructions()->size() : 0;
  auto touch = [&](uint32_t id, int64_t i) {
    if (id >= n_values) return;  // kNoValue: an absent optional operand
    if ((*first)[id] < 0 || i < (*first)[id]) (*first)[id] = i;
    (*last)[id] = std::max((*last)[id], i);
  };
  if (method.inputs()) {
    for (uint32_t id : *method.inputs()) touch(id, 0);
  }
  for (int64_t i = 0; i < n_instr; ++i) {
    const fb::Instruction* ins = method.instructions()->Get(static_cast<uint32_t>(i));
    if (ins->inputs()) {
      for (uint32_t id : *ins->inputs()) touch(id, i);
    }
    if (ins->outputs()) {
      for (uint32_t id : *ins->outputs()) touch(id, i);
    }
  }
  if (method.outputs()) {
    for (uint32_t id : *method.outputs()) touch(id, std::max<int64_t>(n_instr - 1, 0));
  }
}

}  // namespace

Result<std::vector<BufferLayout>> plan_layouts(const format::ProgramFile& file) {
  std::vector<BufferLayout> layouts;
  const fb::Program& program = file.program();
  if (program.methods() == nullptr) return layouts;
  for (const fb::Method* mp : *program.methods()) {
    const fb::Method& m = *mp;
    if (m.planned_buffers() == nullptr) continue;
    size_t first_layout = layouts.size();
    int64_t n_instr = m.instructions() ? m.instructions()->size() : 0;
    for (uint32_t b = 0; b < m.planned_buffers()->size(); ++b) {
      const fb::PlannedBuffer* pb = m.planned_buffers()->Get(b);
      BufferLayout layout{m.name()->str(), b, to_device(pb->device()), pb->size_bytes(), 0, n_instr, {}};
      if (m.plan()) {
        for (const fb::PlanStat* p : *m.plan()) {
          if (to_device(p->device()) == layout.device) layout.lower_bound_bytes = p->lower_bound_bytes();
        }
      }
      layouts.push_back(std::move(layout));
    }
    std::vector<int64_t> first, last;
    compute_lifetimes(m, &first, &last);
    if (m.values() == nullptr) continue;
    for (uint32_t id = 0; id < m.values()->size(); ++id) {
      const fb::Value& v = *m.values()->Get(id);
      if (v.kind() != fb::ValueKind::Planned || first[id] < 0) continue;
      PLANRT_ASSIGN_OR_RETURN(uint64_t size, format::value_max_nbytes(v, m.dims()));
      std::string name = v.name() && v.name()->size() > 0 ? v.name()->str() : fmt::format("%{}", id);
      layouts[first_layout + v.buffer()].tensors.push_back(
          {id, std::move(name), v.offset(), size, first[id], last[id]});
    }
  }
  return layouts;
}

}  // namespace planrt::cli
