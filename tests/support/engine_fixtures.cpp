#include "support/engine_fixtures.h"

#include <flatbuffers/flatbuffers.h>

#include "planning/engine_scratch.h"
#include "support/program_fixtures.h"

namespace planrt::fixtures {

EngineFixture engine_fixture(int64_t features, int64_t max_s, Device device, bool no_scratch,
                             int64_t min_s) {
  EngineFixture f;
  f.no_scratch = no_scratch;
  f.features = features;
  f.max_s = max_s;
  f.device = device;
  f.dims = {DimSpec{"S", min_s, max_s}};
  for (int64_t i = 0; i < features; ++i) f.c.push_back(0.25f * static_cast<float>(i) - 0.5f);
  std::vector<fb::DimRef> sf = {named_dim(0), fixed_dim(features)};
  fb::GraphT g;
  auto operand = [&](std::string name) {
    auto v = planned_value(std::move(name), sf, 0, 0);
    v->kind = fb::ValueKind::Temporary;  // an operand: the caller's memory
    return v;
  };
  g.values.push_back(operand("x"));                                  // 0
  g.values.push_back(constant_value("c", {fixed_dim(features)}, 0)); // 1
  g.values.push_back(operand("y"));                                  // 2
  g.inputs = {0};
  g.outputs = {2};
  if (no_scratch) {
    g.instructions.push_back(kernel_instruction("add", {0, 1}, {2}));
  } else {
    g.values.push_back(planned_value("t", sf, 0, 0));   // 3 = x + c
    g.values.push_back(planned_value("r", sf, 0, 0));   // 4 = relu(t)
    g.values.push_back(planned_value("q", sf, 0, 0));   // 5 = r * r
    g.instructions.push_back(kernel_instruction("add", {0, 1}, {3}));
    g.instructions.push_back(kernel_instruction("relu", {3}, {4}));
    g.instructions.push_back(kernel_instruction("mul", {4, 4}, {5}));
    g.instructions.push_back(kernel_instruction("add", {5, 0}, {2}));
  }
  g.profile.push_back(fb::DimBound(0, min_s, max_s));
  // Offsets and scratch_bytes from the shared engine planner at the profile max, exactly
  // as the builder records them.
  std::vector<uint8_t> first = pack_graph(g);
  const fb::Graph* flat = flatbuffers::GetRoot<fb::Graph>(first.data());
  std::vector<int64_t> max_dims = {max_s};
  auto plan = planning::plan_engine_scratch(*flat, max_dims, device.type == DeviceType::CUDA);
  if (plan.ok()) {
    for (size_t v = 0; v < g.values.size(); ++v) {
      if (g.values[v]->kind == fb::ValueKind::Planned) g.values[v]->offset = plan->value_offsets[v];
    }
    g.scratch_bytes = plan->scratch_bytes;
  }
  f.blob = pack_graph(g);
  return f;
}

BackendInitContext EngineFixture::context(std::span<const BackendOption> options) const {
  BackendInitContext ctx;
  ctx.device = device;
  ctx.method_name = "forward";
  ctx.segment_name = "engine0";
  ctx.dims = dims;
  ctx.options = options;
  ctx.num_constants = 1;
  const std::vector<float>* cv = &c;
  int64_t f = features;
  ctx.constant = [cv, f](uint32_t index) -> Result<ConstantRef> {
    if (index != 0) return make_error(ErrorCode::OutOfRange, "constant {}", index);
    ConstantRef r;
    r.name = "c";
    r.dtype = DType::F32;
    r.shape = *Shape::from(std::vector<int64_t>{f});
    r.data = {reinterpret_cast<const uint8_t*>(cv->data()), cv->size() * sizeof(float)};
    return r;
  };
  return ctx;
}

std::vector<float> EngineFixture::reference(const std::vector<float>& x) const {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    float t = x[i] + c[i % static_cast<size_t>(features)];
    if (no_scratch) {
      y[i] = t;
      continue;
    }
    float r = t > 0 ? t : 0;
    y[i] = r * r + x[i];
  }
  return y;
}

}  // namespace planrt::fixtures
