#include "support/program_fixtures.h"

#include <algorithm>
#include <cstring>

#include "format/safetensors.h"
#include "format/writer.h"

namespace planrt::fixtures {
namespace {

constexpr uint64_t kAlign = 256;  // the CUDA planner's alignment, used on every buffer here
constexpr int32_t kDimS = 0;

uint64_t round_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

std::vector<fb::DimRef> s_by_f(int64_t features) { return {named_dim(kDimS), fixed_dim(features)}; }

std::unique_ptr<fb::DimSpecT> dim_spec(std::string name, int64_t min, int64_t max) {
  auto d = std::make_unique<fb::DimSpecT>();
  d->name = std::move(name);
  d->min = min;
  d->max = max;
  return d;
}

std::unique_ptr<fb::PlanStatT> plan_stat(fb::DeviceType type, uint64_t lower, uint64_t planned,
                                         uint32_t tensors) {
  auto p = std::make_unique<fb::PlanStatT>();
  p->device = std::make_unique<fb::DeviceRef>(type, 0);
  p->planner = "no-reuse";
  p->lower_bound_bytes = lower;
  p->planned_bytes = planned;
  p->num_tensors = tensors;
  return p;
}

std::unique_ptr<fb::ValueT> temporary_value(std::string name, std::vector<fb::DimRef> shape) {
  auto v = std::make_unique<fb::ValueT>();
  v->name = std::move(name);
  v->kind = fb::ValueKind::Temporary;
  v->shape = std::move(shape);
  return v;
}

std::unique_ptr<fb::ConstantT> constant_c_entry(int64_t features) {
  auto c = std::make_unique<fb::ConstantT>();
  c->name = "c";
  c->dtype = fb::DType::F32;
  c->shape = {features};
  return c;
}

// x [S, F] -> y [S, F] = relu(x + c), host kernels in one CPU buffer.
std::unique_ptr<fb::MethodT> host_relu_add(const ReluAddOptions& o) {
  const uint64_t a = round_up(static_cast<uint64_t>(o.max_s * o.features) * 4);
  auto m = std::make_unique<fb::MethodT>();
  m->name = o.method_name;
  m->dims.push_back(dim_spec("S", o.min_s, o.max_s));
  m->values.push_back(planned_value("x", s_by_f(o.features), 0, 0));
  m->values.push_back(constant_value("c", {fixed_dim(o.features)}, 0));
  m->values.push_back(planned_value("t", s_by_f(o.features), 0, a));
  m->values.push_back(planned_value("y", s_by_f(o.features), 0, 2 * a));
  m->inputs = {0};
  m->outputs = {3};
  auto add = kernel_instruction("add", {0, 1}, {2});
  add->node = "add";
  auto relu = kernel_instruction("relu", {2}, {3});
  relu->node = "relu";
  m->instructions.push_back(std::move(add));
  m->instructions.push_back(std::move(relu));
  m->planned_buffers.push_back(planned_buffer(3 * a, fb::DeviceType::CPU));
  m->plan.push_back(plan_stat(fb::DeviceType::CPU, 2 * a, 3 * a, 3));
  return m;
}

// The same computation delegated to a segment on cuda:0, with copies in and out.
std::unique_ptr<fb::MethodT> cuda_relu_add(const ReluAddOptions& o) {
  const uint64_t a = round_up(static_cast<uint64_t>(o.max_s * o.features) * 4);
  auto m = std::make_unique<fb::MethodT>();
  m->name = o.method_name;
  m->dims.push_back(dim_spec("S", o.min_s, o.max_s));
  m->values.push_back(planned_value("x", s_by_f(o.features), 0, 0));
  m->values.push_back(planned_value("y", s_by_f(o.features), 0, a));
  m->values.push_back(planned_value("x_dev", s_by_f(o.features), 1, 0));
  m->values.push_back(planned_value("y_dev", s_by_f(o.features), 1, a));
  m->inputs = {0};
  m->outputs = {1};

  auto to_dev = std::make_unique<fb::InstructionT>();
  to_dev->kind = fb::InstructionKind::Copy;
  to_dev->inputs = {0};
  to_dev->outputs = {2};
  auto call = std::make_unique<fb::InstructionT>();
  call->kind = fb::InstructionKind::Delegate;
  call->segment = 0;
  call->inputs = {2};
  call->outputs = {3};
  call->node = "add";
  auto to_host = std::make_unique<fb::InstructionT>();
  to_host->kind = fb::InstructionKind::Copy;
  to_host->inputs = {3};
  to_host->outputs = {1};
  m->instructions.push_back(std::move(to_dev));
  m->instructions.push_back(std::move(call));
  m->instructions.push_back(std::move(to_host));

  fb::GraphT g;
  g.values.push_back(temporary_value("x", s_by_f(o.features)));
  g.values.push_back(constant_value("c", {fixed_dim(o.features)}, 0));
  g.values.push_back(planned_value("t", s_by_f(o.features), 0, 0));
  g.values.push_back(temporary_value("y", s_by_f(o.features)));
  g.inputs = {0};
  g.outputs = {3};
  g.instructions.push_back(kernel_instruction("add", {0, 1}, {2}));
  g.instructions.push_back(kernel_instruction("relu", {2}, {3}));
  g.scratch_bytes = a;

  auto seg = std::make_unique<fb::SegmentT>();
  seg->name = "cuda0";
  seg->backend = o.cuda_backend;
  seg->device = std::make_unique<fb::DeviceRef>(fb::DeviceType::CUDA, 0);
  seg->blob = pack_graph(g);
  seg->num_nodes = 2;
  m->segments.push_back(std::move(seg));

  m->planned_buffers.push_back(planned_buffer(2 * a, fb::DeviceType::CPU));
  m->planned_buffers.push_back(planned_buffer(2 * a, fb::DeviceType::CUDA));
  m->plan.push_back(plan_stat(fb::DeviceType::CPU, a, 2 * a, 2));
  m->plan.push_back(plan_stat(fb::DeviceType::CUDA, 2 * a, 2 * a, 2));
  return m;
}

// y = x * c with S up to 2 * max_s.
std::unique_ptr<fb::MethodT> host_scale(const ReluAddOptions& o) {
  const int64_t max_s = 2 * o.max_s;
  const uint64_t b = round_up(static_cast<uint64_t>(max_s * o.features) * 4);
  auto m = std::make_unique<fb::MethodT>();
  m->name = "scale";
  m->dims.push_back(dim_spec("S", 1, max_s));
  m->values.push_back(planned_value("x", s_by_f(o.features), 0, 0));
  m->values.push_back(constant_value("c", {fixed_dim(o.features)}, 0));
  m->values.push_back(planned_value("y", s_by_f(o.features), 0, b));
  m->inputs = {0};
  m->outputs = {2};
  auto mul = kernel_instruction("mul", {0, 1}, {2});
  mul->node = "mul";
  m->instructions.push_back(std::move(mul));
  m->planned_buffers.push_back(planned_buffer(2 * b, fb::DeviceType::CPU));
  m->plan.push_back(plan_stat(fb::DeviceType::CPU, 2 * b, 2 * b, 2));
  return m;
}

FixtureProgram base_program(const ReluAddOptions& o) {
  FixtureProgram f;
  f.program.producer = "planrt test fixtures";
  f.program.constants.push_back(constant_c_entry(o.features));
  f.constants.push_back(float_bytes(constant_c(o.features)));
  f.program.methods.push_back(o.on_cuda ? cuda_relu_add(o) : host_relu_add(o));
  return f;
}

}  // namespace

std::vector<std::span<const uint8_t>> FixtureProgram::constant_spans() const {
  return {constants.begin(), constants.end()};
}

Result<std::vector<uint8_t>> FixtureProgram::serialize() const {
  return format::serialize_program(program, constant_spans());
}

Status FixtureProgram::write(const std::string& path) const {
  return format::write_program(program, constant_spans(), path);
}

Status FixtureProgram::write_with_external_weights(const std::string& dir,
                                                   const std::string& program_name,
                                                   const std::string& weights_name) const {
  std::vector<format::SafetensorsTensor> tensors;
  for (size_t i = 0; i < constants.size(); ++i) {
    const fb::ConstantT& c = *program.constants[i];
    tensors.push_back({c.name, static_cast<DType>(c.dtype), c.shape, constants[i]});
  }
  PLANRT_RETURN_IF_ERROR(format::write_safetensors(dir + "/" + weights_name, tensors));
  fb::ProgramT copy = program;
  copy.external_constants = weights_name;
  return format::write_program(std::move(copy), {}, dir + "/" + program_name);
}

FixtureProgram relu_add_program(const ReluAddOptions& options) { return base_program(options); }

FixtureProgram two_method_program(const ReluAddOptions& options) {
  FixtureProgram f = base_program(options);
  f.program.methods.push_back(host_scale(options));
  return f;
}

std::vector<float> constant_c(int64_t features) {
  std::vector<float> c(static_cast<size_t>(features));
  for (size_t i = 0; i < c.size(); ++i) c[i] = 0.5f * static_cast<float>(i) - 1.0f;
  return c;
}

std::vector<float> relu_add_reference(std::span<const float> x, int64_t features) {
  std::vector<float> c = constant_c(features), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = std::max(0.0f, x[i] + c[i % c.size()]);
  return y;
}

std::vector<float> scale_reference(std::span<const float> x, int64_t features) {
  std::vector<float> c = constant_c(features), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * c[i % c.size()];
  return y;
}

fb::DimRef fixed_dim(int64_t size) { return fb::DimRef(size, -1); }
fb::DimRef named_dim(int32_t dim_index, int64_t multiplier) { return fb::DimRef(multiplier, dim_index); }

std::unique_ptr<fb::ValueT> planned_value(std::string name, std::vector<fb::DimRef> shape,
                                          uint32_t buffer, uint64_t offset, fb::DType dtype) {
  auto v = std::make_unique<fb::ValueT>();
  v->name = std::move(name);
  v->kind = fb::ValueKind::Planned;
  v->dtype = dtype;
  v->shape = std::move(shape);
  v->buffer = buffer;
  v->offset = offset;
  return v;
}

std::unique_ptr<fb::ValueT> constant_value(std::string name, std::vector<fb::DimRef> shape,
                                           uint32_t constant, fb::DType dtype) {
  auto v = std::make_unique<fb::ValueT>();
  v->name = std::move(name);
  v->kind = fb::ValueKind::Constant;
  v->dtype = dtype;
  v->shape = std::move(shape);
  v->constant = constant;
  return v;
}

std::unique_ptr<fb::InstructionT> kernel_instruction(std::string op, std::vector<uint32_t> inputs,
                                                     std::vector<uint32_t> outputs) {
  auto i = std::make_unique<fb::InstructionT>();
  i->kind = fb::InstructionKind::Kernel;
  i->op = std::move(op);
  i->inputs = std::move(inputs);
  i->outputs = std::move(outputs);
  return i;
}

std::unique_ptr<fb::PlannedBufferT> planned_buffer(uint64_t size_bytes, fb::DeviceType type,
                                                   uint8_t index) {
  auto b = std::make_unique<fb::PlannedBufferT>();
  b->size_bytes = size_bytes;
  b->device = std::make_unique<fb::DeviceRef>(type, index);
  return b;
}

std::vector<uint8_t> pack_graph(const fb::GraphT& graph) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fb::Graph::Pack(fbb, &graph));
  return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
}

std::vector<uint8_t> float_bytes(std::span<const float> values) {
  std::vector<uint8_t> out(values.size_bytes());
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

}  // namespace planrt::fixtures
