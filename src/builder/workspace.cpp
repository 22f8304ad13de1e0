#include "builder/workspace.h"

#include <fmt/format.h>

#include "builder/sym_shape.h"
#include "kernels/op_plans.h"
#include "kernels/workspace.h"

namespace planrt::builder {
namespace {

// The attributes as the kernels read them (reshape's shape spec is never one of theirs).
kernels::OpAttrs kernel_attrs(const ir::Attrs& attrs) {
  kernels::OpAttrs out;
  for (const auto& [name, value] : attrs) {
    if (const auto* i = std::get_if<int64_t>(&value)) out.set(name, *i);
    if (const auto* d = std::get_if<double>(&value)) out.set(name, *d);
    if (const auto* b = std::get_if<bool>(&value)) out.set(name, *b);
    if (const auto* s = std::get_if<std::string>(&value)) out.set(name, *s);
    if (const auto* v = std::get_if<std::vector<int64_t>>(&value)) out.set(name, *v);
  }
  return out;
}

// A view of `type` at the dims' max, without data: what the kernels' plans read.
Result<TensorView> max_view(const ir::TensorType& type, std::span<const ir::DimDecl> dims) {
  std::vector<int64_t> sizes;
  for (const ir::Dim& d : type.shape) sizes.push_back(ir::max_size(d, dims));
  PLANRT_ASSIGN_OR_RETURN(Shape shape, Shape::from(sizes));
  return TensorView::contiguous(nullptr, type.dtype, shape, Device::cpu());
}

}  // namespace

std::string workspace_value_name(const std::string& output) { return output + "#workspace"; }

Result<std::optional<ir::TensorType>> kernel_workspace_type(const ir::Model& model, const ir::Method& method,
                                                            const ir::CheckedMethod& checked, size_t n,
                                                            Device device) {
  const ir::Node& node = method.nodes[n];
  if (node.op != "conv2d") return std::optional<ir::TensorType>{};
  std::vector<TensorView> inputs;
  for (const std::string& name : node.inputs) {
    if (name.empty()) {
      inputs.push_back(TensorView::none());
      continue;
    }
    ir::TensorType type;
    if (auto it = checked.values.find(name); it != checked.values.end()) {
      type = it->second;
    } else if (const ir::Constant* c = model.find_constant(name)) {
      type.dtype = c->dtype;
      for (int64_t d : c->shape) type.shape.push_back(ir::Dim::fixed(d));
    } else {
      return make_error(ErrorCode::Internal, "conv2d workspace: operand '{}' is unknown", name);
    }
    PLANRT_ASSIGN_OR_RETURN(TensorView v, max_view(type, method.dims));
    inputs.push_back(v);
  }
  const ir::TensorType& y = checked.nodes[n].outputs.front();
  PLANRT_ASSIGN_OR_RETURN(TensorView out, max_view(y, method.dims));
  const TensorView outs[] = {out};
  PLANRT_ASSIGN_OR_RETURN(kernels::Conv2dPlan plan, kernels::plan_conv2d(kernel_attrs(checked.nodes[n].attrs), inputs, outs));
  plan.n = 1;
  uint64_t per_image = 0;
  if (device.is_cpu()) {
    PLANRT_ASSIGN_OR_RETURN(per_image, kernels::conv2d_host_workspace_bytes_per_image(plan));
  } else {
    const kernels::CudaConvWorkspace ws = kernels::conv2d_cuda_workspace_per_image(plan, inputs[0].dtype);
    per_image = ws.padded_copy_bytes + ws.algorithm_bytes;
  }
  if (per_image == 0) return std::optional<ir::TensorType>{};  // e.g. a CUDA depthwise convolution
  const auto floats = static_cast<int64_t>((per_image + sizeof(float) - 1) / sizeof(float));
  return std::optional<ir::TensorType>{ir::TensorType{DType::F32, {y.shape.front(), ir::Dim::fixed(floats)}}};
}

}  // namespace planrt::builder
