#include "kernels/cpu/checks.h"

#include <fmt/format.h>

#include <climits>

namespace planrt::kernels::cpu {
namespace {

Status check_view(std::string_view op, const std::string& role, const TensorView& v) {
  if (!v.device.is_cpu()) {
    return make_error(ErrorCode::InvalidArgument, "{}: {} is on {}, the CPU kernel needs cpu", op,
                      role, to_string(v.device));
  }
  for (int64_t d : v.sizes.dims()) {
    if (d < 0) {
      return make_error(ErrorCode::InvalidArgument, "{}: {} has a negative size in {}", op, role,
                        v.sizes.to_string());
    }
  }
  if (!v.is_contiguous()) {
    return make_error(ErrorCode::InvalidArgument,
                      "{}: {} of shape {} has strides {}, the CPU kernel needs contiguous", op,
                      role, v.sizes.to_string(), v.strides.to_string());
  }
  if (v.data == nullptr && v.numel() > 0) {
    return make_error(ErrorCode::InvalidArgument, "{}: {} of shape {} has no data", op, role,
                      v.sizes.to_string());
  }
  return {};
}

}  // namespace

Status check_operands(std::string_view op, std::span<const TensorView> inputs,
                      std::span<const TensorView> outputs) {
  const OpInfo* info = find_op(op);
  if (info == nullptr) {
    return make_error(ErrorCode::Internal, "{}: kernel has no entry in the op table", op);
  }
  const auto n_in = static_cast<int64_t>(inputs.size());
  if (n_in < info->min_inputs || (info->max_inputs >= 0 && n_in > info->max_inputs)) {
    if (info->max_inputs < 0) {
      return make_error(ErrorCode::InvalidArgument, "{}: got {} inputs, expected at least {}", op,
                        n_in, info->min_inputs);
    }
    return make_error(ErrorCode::InvalidArgument, "{}: got {} inputs, expected {} to {}", op, n_in,
                      info->min_inputs, info->max_inputs);
  }
  const auto n_out = static_cast<int64_t>(outputs.size());
  if (n_out < info->num_outputs || n_out > info->num_outputs + info->optional_outputs) {
    if (info->optional_outputs == 0) {
      return make_error(ErrorCode::InvalidArgument, "{}: got {} outputs, expected {}", op, n_out,
                        info->num_outputs);
    }
    return make_error(ErrorCode::InvalidArgument, "{}: got {} outputs, expected {} to {}", op, n_out,
                      info->num_outputs, info->num_outputs + info->optional_outputs);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].is_none()) {
      if (static_cast<int64_t>(i) < info->min_inputs) {
        return make_error(ErrorCode::InvalidArgument, "{}: required input {} is absent", op,
                          input_role(op, i));
      }
      continue;
    }
    PLANRT_RETURN_IF_ERROR(check_view(op, input_role(op, i), inputs[i]));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string role = outputs.size() == 1 ? "output" : fmt::format("output {}", i);
    if (outputs[i].is_none()) {
      return make_error(ErrorCode::InvalidArgument, "{}: {} is absent", op, role);
    }
    PLANRT_RETURN_IF_ERROR(check_view(op, role, outputs[i]));
  }
  return {};
}

Status require_f32(std::string_view op, std::string_view role, const TensorView& view) {
  if (view.dtype == DType::F32) return {};
  return make_error(ErrorCode::NotSupported, "{}: {} has dtype {}; the CPU kernel supports f32", op,
                    role, dtype_name(view.dtype));
}

Status require_f32_inputs(std::string_view op, std::span<const TensorView> inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].is_none()) continue;
    PLANRT_RETURN_IF_ERROR(require_f32(op, input_role(op, i), inputs[i]));
  }
  return {};
}

Status check_blas_dim(std::string_view op, std::string_view what, int64_t value) {
  if (value <= INT_MAX) return {};
  return make_error(ErrorCode::NotSupported, "{}: {} = {} exceeds the BLAS limit {}", op, what,
                    value, INT_MAX);
}

}  // namespace planrt::kernels::cpu
