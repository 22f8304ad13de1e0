// The run-time side of the convolutional networks' ONNX ops: Conv, the pools, batch
// normalization, Clip, HardSigmoid, HardSwish, Pad (docs/onnx.md). 2-D images only (NCHW);
// the spatial dims must be fixed sizes.
#include <cmath>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "importers/onnx/importer.h"
#include "importers/onnx/ops_support.h"

namespace planrt::importers::onnx {
namespace {

Status not_supported(const OpContext& c, std::string what) {
  return Status(ErrorCode::NotSupported, fmt::format("{} {}", c.node.op_type(), what));
}

// A spatial op's [N, C, H, W] input with H and W fixed.
Status require_image(const OpContext& c) {
  const Value& x = c.input(0);
  if (!x.is_runtime()) return not_supported(c, "of a tensor known when the program is built");
  if (x.rank() != 4) {
    return not_supported(c, fmt::format("over {} spatial dims (only 2-D images, [N, C, H, W])", x.rank() - 2));
  }
  if (!sym_is_const(x.shape[2]) || !sym_is_const(x.shape[3]) || !sym_is_const(x.shape[1])) {
    return not_supported(c, "over an image whose channels or size are not fixed (give them with --dim NAME=N)");
  }
  return require_float_input(c, 0);
}

// The window attributes every spatial op shares: strides, dilations, and pads from `pads`
// or auto_pad, in planrt's [top, left, bottom, right].
Status window_attrs(OpContext& c, const std::vector<int64_t>& kernel, ir::Attrs& attrs, bool dilations) {
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(auto strides, c.attr_ints("strides"));
  std::vector<int64_t> s = strides.value_or(std::vector<int64_t>{1, 1});
  std::vector<int64_t> d{1, 1};
  if (dilations) {
    PLANRT_ASSIGN_OR_RETURN(auto dil, c.attr_ints("dilations"));
    d = dil.value_or(d);
  }
  if (s.size() != 2 || d.size() != 2) return c.error("strides and dilations must have two entries (a 2-D image)");
  PLANRT_ASSIGN_OR_RETURN(std::string auto_pad, c.attr_string("auto_pad", "NOTSET"));
  PLANRT_ASSIGN_OR_RETURN(auto pads_attr, c.attr_ints("pads"));
  std::vector<int64_t> pads{0, 0, 0, 0};
  if (auto_pad == "NOTSET") {
    if (pads_attr) pads = *pads_attr;
    if (pads.size() != 4) return c.error(fmt::format("pads has {} entries; a 2-D image takes 4", pads.size()));
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // Output ceil(in / stride); the padding that needs, the odd one at the end (UPPER) or
    // at the beginning (LOWER).
    for (int i = 0; i < 2; ++i) {
      const int64_t in = x.shape[2 + i].coeff;
      const int64_t out = (in + s[i] - 1) / s[i];
      const int64_t total = std::max<int64_t>((out - 1) * s[i] + (kernel[i] - 1) * d[i] + 1 - in, 0);
      const int64_t small = total / 2, large = total - small;
      pads[i] = auto_pad == "SAME_UPPER" ? small : large;
      pads[2 + i] = auto_pad == "SAME_UPPER" ? large : small;
    }
  } else if (auto_pad != "VALID") {
    return c.error(fmt::format("auto_pad '{}' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", auto_pad));
  }
  attrs["strides"] = s;
  attrs["pads"] = pads;
  if (dilations) attrs["dilations"] = d;
  return {};
}

Status handle_conv(OpContext& c) {
  PLANRT_RETURN_IF_ERROR(require_image(c));
  const Value& w = c.input(1);
  if (w.rank() != 4) return c.error(fmt::format("W has rank {}; a 2-D convolution's is 4", w.rank()));
  std::vector<int64_t> kernel;
  for (int i = 2; i < 4; ++i) {
    if (!sym_is_const(w.shape[i])) return not_supported(c, "with a kernel whose size is not fixed");
    kernel.push_back(w.shape[i].coeff);
  }
  PLANRT_ASSIGN_OR_RETURN(auto kernel_attr, c.attr_ints("kernel_shape"));
  if (kernel_attr && *kernel_attr != kernel) return c.error("kernel_shape disagrees with W's shape");
  PLANRT_ASSIGN_OR_RETURN(int64_t group, c.attr_int("group", 1));
  ir::Attrs attrs{{"groups", group}};
  PLANRT_RETURN_IF_ERROR(window_attrs(c, kernel, attrs, true));
  std::vector<std::string> inputs;
  for (size_t i = 0; i < 3; ++i) {
    if (!c.has(i)) continue;
    PLANRT_ASSIGN_OR_RETURN(std::string in, operand_of_type(c, c.input(i), c.input(0).elem));
    inputs.push_back(in);
  }
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("conv2d", inputs, std::move(attrs), c.node.output(0)));
  c.out.push_back(std::move(y));
  return {};
}

Status pool(OpContext& c, const char* op) {
  PLANRT_RETURN_IF_ERROR(require_image(c));
  if (c.node.output_size() > 1 && !c.node.output(1).empty()) return not_supported(c, "with its Indices output");
  PLANRT_ASSIGN_OR_RETURN(auto kernel, c.attr_ints("kernel_shape"));
  if (!kernel || kernel->size() != 2) return c.error("kernel_shape must have two entries (a 2-D image)");
  const bool average = std::string_view(op) == "avg_pool2d";
  ir::Attrs attrs{{"kernel", *kernel}};
  PLANRT_RETURN_IF_ERROR(window_attrs(c, *kernel, attrs, !average));
  PLANRT_ASSIGN_OR_RETURN(int64_t ceil_mode, c.attr_int("ceil_mode", 0));
  attrs["ceil_mode"] = ceil_mode != 0;
  if (average) {
    PLANRT_ASSIGN_OR_RETURN(int64_t include, c.attr_int("count_include_pad", 0));
    attrs["count_include_pad"] = include != 0;
    PLANRT_ASSIGN_OR_RETURN(auto dil, c.attr_ints("dilations"));
    if (dil && *dil != std::vector<int64_t>{1, 1}) return not_supported(c, "with dilations");
  } else {
    PLANRT_ASSIGN_OR_RETURN(int64_t order, c.attr_int("storage_order", 0));
    if (order != 0) return not_supported(c, "with storage_order 1 (column-major indices)");
  }
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(c.input(0)));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit(op, {in}, std::move(attrs), c.node.output(0)));
  c.out.push_back(std::move(y));
  return {};
}
Status handle_max_pool(OpContext& c) { return pool(c, "max_pool2d"); }
Status handle_average_pool(OpContext& c) { return pool(c, "avg_pool2d"); }

// The mean over every dim after the channels, kept as size 1.
Status handle_global_average_pool(OpContext& c) {
  const Value& x = c.input(0);
  if (!x.is_runtime() || x.rank() < 3) return not_supported(c, "of an input of rank < 3 or known at build time");
  PLANRT_RETURN_IF_ERROR(require_float_input(c, 0));
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < x.rank(); ++d) dims.push_back(d);
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("reduce_mean", {in}, {{"dims", dims}, {"keepdim", true}}, c.node.output(0)));
  c.out.push_back(std::move(y));
  return {};
}

// A graph input where a constant is needed: the error names it, as --input-value takes it.
Status needs_known(const OpContext& c, size_t i, std::string_view role, std::string_view why) {
  return c.error(fmt::format("input {} ({}, '{}') is computed at run time, but planrt needs its value when the "
                             "program is built: {}. If it is a graph input, fix it with --input-value NAME=FILE",
                             i, role, c.node.input(static_cast<int>(i)), why));
}

// A one-element known input as a number (absent: nullopt).
Result<std::optional<double>> known_scalar(const OpContext& c, size_t i, std::string_view role) {
  if (!c.has(i)) return std::optional<double>{};
  const Value& v = c.input(i);
  if (!v.known) return needs_known(c, i, role, "it is a constant of the kernel");
  if (v.known->numel() != 1) return c.error(fmt::format("{} must hold one value, not {}", role, v.known->numel()));
  return std::optional<double>{v.known->to_f64()[0]};
}

// Inference-mode batch normalization as x * s + t per channel (dim 1), with s and t made
// from the statistics at build time; a convolution before it absorbs both (patterns.cpp).
Status handle_batch_norm(OpContext& c) {
  const Value& x = c.input(0);
  if (!x.is_runtime() || x.rank() < 2) return not_supported(c, "of an input of rank < 2 or known at build time");
  PLANRT_RETURN_IF_ERROR(require_float_input(c, 0));
  PLANRT_ASSIGN_OR_RETURN(int64_t training, c.attr_int("training_mode", 0));
  if (training != 0) return not_supported(c, "in training mode (planrt runs inference: export in eval mode)");
  PLANRT_ASSIGN_OR_RETURN(int64_t spatial, c.attr_int("spatial", 1));
  if (spatial != 1) return not_supported(c, "with spatial = 0");
  if (c.node.output_size() > 1) {
    for (int i = 1; i < c.node.output_size(); ++i) {
      if (!c.node.output(i).empty()) return not_supported(c, "with its running statistics outputs (training only)");
    }
  }
  PLANRT_ASSIGN_OR_RETURN(double eps, c.attr_float("epsilon", 1e-5));
  if (!sym_is_const(x.shape[1])) return not_supported(c, "over a channel count that is not fixed");
  const int64_t channels = x.shape[1].coeff;
  std::vector<std::vector<double>> params;
  const char* roles[] = {"scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) {
    const Value& v = c.input(i);
    if (!v.known) return needs_known(c, i, roles[i - 1], "the statistics are folded into constants");
    if (v.known->numel() != channels) {
      return c.error(fmt::format("{} has {} values; the input has {} channels", roles[i - 1], v.known->numel(), channels));
    }
    params.push_back(v.known->to_f64());
  }
  std::vector<double> s(channels), t(channels);
  for (int64_t k = 0; k < channels; ++k) {
    s[k] = params[0][k] / std::sqrt(params[3][k] + eps);
    t[k] = params[1][k] - params[2][k] * s[k];
  }
  std::vector<int64_t> shape{channels};
  for (int64_t d = 2; d < x.rank(); ++d) shape.push_back(1);
  PLANRT_ASSIGN_OR_RETURN(std::string scale, c.im.constant(Tensor::from_f64(x.elem, shape, s), c.node.output(0) + ".scale"));
  PLANRT_ASSIGN_OR_RETURN(std::string shift, c.im.constant(Tensor::from_f64(x.elem, shape, t), c.node.output(0) + ".shift"));
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x));
  PLANRT_ASSIGN_OR_RETURN(Value scaled, c.im.emit("mul", {in, scale}, {}, c.node.output(0) + ".scaled"));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("add", {scaled.ir, shift}, {}, c.node.output(0)));
  c.out.push_back(std::move(y));
  return {};
}

Status emit_elementwise(OpContext& c, const char* op, ir::Attrs attrs) {
  PLANRT_RETURN_IF_ERROR(require_float_input(c, 0));
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x, false));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit(op, {in}, std::move(attrs), c.node.output(0)));
  keep_folded_like(y, x);
  c.out.push_back(std::move(y));
  return {};
}

Status handle_clip(OpContext& c) {
  ir::Attrs attrs;
  if (c.im.opset() < 11) {
    PLANRT_ASSIGN_OR_RETURN(double lo, c.attr_float("min", -INFINITY));
    PLANRT_ASSIGN_OR_RETURN(double hi, c.attr_float("max", INFINITY));
    if (std::isfinite(lo)) attrs["min"] = lo;
    if (std::isfinite(hi)) attrs["max"] = hi;
  } else {
    PLANRT_ASSIGN_OR_RETURN(std::optional<double> lo, known_scalar(c, 1, "min"));
    PLANRT_ASSIGN_OR_RETURN(std::optional<double> hi, known_scalar(c, 2, "max"));
    if (lo) attrs["min"] = *lo;
    if (hi) attrs["max"] = *hi;
  }
  return emit_elementwise(c, "clip", std::move(attrs));
}

Status handle_hard_sigmoid(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(double alpha, c.attr_float("alpha", 0.2));
  PLANRT_ASSIGN_OR_RETURN(double beta, c.attr_float("beta", 0.5));
  return emit_elementwise(c, "hard_sigmoid", {{"alpha", alpha}, {"beta", beta}});
}

Status handle_hard_swish(OpContext& c) { return emit_elementwise(c, "hard_swish", {}); }

Status handle_pad(OpContext& c) {
  const Value& x = c.input(0);
  if (!x.is_runtime()) return not_supported(c, "of a tensor known when the program is built");
  PLANRT_ASSIGN_OR_RETURN(std::string mode, c.attr_string("mode", "constant"));
  if (mode != "constant" && mode != "reflect" && mode != "edge") {
    return not_supported(c, fmt::format("in mode '{}' (constant, reflect and edge are)", mode));
  }
  std::vector<int64_t> pads;
  double value = 0.0;
  if (c.im.opset() < 11) {
    PLANRT_ASSIGN_OR_RETURN(auto p, c.attr_ints("pads"));
    if (!p) return c.error("pads is required");
    pads = *p;
    PLANRT_ASSIGN_OR_RETURN(value, c.attr_float("value", 0.0));
  } else {
    PLANRT_ASSIGN_OR_RETURN(pads, c.known_ints(1, "pads"));
    PLANRT_ASSIGN_OR_RETURN(std::optional<double> v, known_scalar(c, 2, "constant_value"));
    value = v.value_or(0.0);
  }
  const auto rank = static_cast<int64_t>(x.rank());
  if (c.has(3)) {  // opset 18: pads for these axes only
    PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> axes, c.known_ints(3, "axes"));
    if (pads.size() != 2 * axes.size()) return c.error(fmt::format("pads has {} entries for {} axes", pads.size(), axes.size()));
    std::vector<int64_t> full(2 * rank, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
      if (a < 0 || a >= rank) return c.error(fmt::format("axis {} is out of range for rank {}", axes[i], rank));
      full[a] = pads[i];
      full[a + rank] = pads[i + axes.size()];
    }
    pads = std::move(full);
  }
  if (static_cast<int64_t>(pads.size()) != 2 * rank) {
    return c.error(fmt::format("pads has {} entries; an input of rank {} takes {}", pads.size(), rank, 2 * rank));
  }
  ir::Attrs attrs{{"pads", pads}, {"mode", mode}};
  if (mode == "constant") attrs["value"] = value;
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("pad", {in}, std::move(attrs), c.node.output(0)));
  c.out.push_back(std::move(y));
  return {};
}

}  // namespace

// clang-format off
const OpSpec kVisionOps[] = {
    {"AveragePool", 1, 1, 1, {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"}, handle_average_pool},
    {"BatchNormalization", 5, 5, 5, {"epsilon", "momentum", "spatial", "training_mode"}, handle_batch_norm},
    {"Clip", 1, 3, 1, {"min", "max"}, handle_clip},
    {"Conv", 2, 3, 1, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}, handle_conv},
    {"GlobalAveragePool", 1, 1, 1, {}, handle_global_average_pool},
    {"HardSigmoid", 1, 1, 1, {"alpha", "beta"}, handle_hard_sigmoid},
    {"HardSwish", 1, 1, 1, {}, handle_hard_swish},
    {"MaxPool", 1, 1, 2, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}, handle_max_pool},
    {"Pad", 1, 4, 1, {"mode", "pads", "value"}, handle_pad},
};
// clang-format on
const std::span<const OpSpec> vision_ops{kVisionOps};

}  // namespace planrt::importers::onnx
