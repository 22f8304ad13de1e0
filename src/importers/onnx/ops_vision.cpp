// The run-time side of the convolutional networks' ONNX ops: Conv, the pools, batch
// normalization, Clip, HardSigmoid, HardSwish, Pad, Resize and Upsample (docs/onnx.md).
// Convolutions and pools over 2-D images (NCHW) and 1-D inputs (NCL, run as images of height
// 1); the channels and spatial dims must be fixed sizes.
#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "importers/onnx/importer.h"
#include "importers/onnx/ops_support.h"
#include "kernels/op_plans.h"

namespace planrt::importers::onnx {
namespace {

Status not_supported(const OpContext& c, std::string what) {
  return Status(ErrorCode::NotSupported, fmt::format("{} {}", c.node.op_type(), what));
}

// A spatial op's input as a 2-D image: [N, C, H, W] as it is, and a 1-D [N, C, L] as
// [N, C, 1, L] (a 1-D op runs as the 2-D one over a height of 1, its window attributes
// given a leading 1, and its output reshaped back). C and the spatial sizes fixed.
struct Image {
  Value x;             // [N, C, H, W]
  bool one_d = false;  // x is the input reshaped
};

Result<Image> image_input(OpContext& c) {
  const Value& x = c.input(0);
  if (!x.is_runtime()) return not_supported(c, "of a tensor known when the program is built");
  if (x.rank() != 4 && x.rank() != 3) {
    return not_supported(c, fmt::format("over {} spatial dims (only 1-D [N, C, L] and 2-D [N, C, H, W] inputs)",
                                        x.rank() - 2));
  }
  for (int d = 1; d < x.rank(); ++d) {
    if (!sym_is_const(x.shape[d])) {
      return not_supported(c, "over an input whose channels or size are not fixed (give them with --dim NAME=N)");
    }
  }
  PLANRT_RETURN_IF_ERROR(require_float_input(c, 0));
  Image img;
  if (x.rank() == 4) {
    img.x = x;
    return img;
  }
  img.one_d = true;
  PLANRT_ASSIGN_OR_RETURN(img.x, reshape_to_shape(c, x, {x.shape[0], x.shape[1], sym_const(1), x.shape[2]},
                                                  c.node.output(0) + ".2d_in"));
  return img;
}

// An ONNX window attribute of a 1-D op as the 2-D op's: a leading 1 (strides, dilations,
// kernel) or, for pads [begin, end], [0, begin, 0, end].
std::vector<int64_t> lift_1d(const std::vector<int64_t>& v, bool pads) {
  if (pads) return v.size() == 2 ? std::vector<int64_t>{0, v[0], 0, v[1]} : v;
  return v.size() == 1 ? std::vector<int64_t>{1, v[0]} : v;
}

// The 2-D op's output `y` back as the 1-D op's [N, K, L'] when the input was 1-D.
Status push_image_output(OpContext& c, const Image& img, Value y) {
  if (img.one_d) {
    PLANRT_ASSIGN_OR_RETURN(y, reshape_to_shape(c, y, {y.shape[0], y.shape[1], y.shape[3]}, c.node.output(0)));
  }
  c.out.push_back(std::move(y));
  return {};
}

// The window attributes every spatial op shares: strides, dilations, and pads from `pads`
// or auto_pad, in planrt's [top, left, bottom, right]. `kernel` is the 2-D op's [kh, kw].
Status window_attrs(OpContext& c, const Image& img, const std::vector<int64_t>& kernel, ir::Attrs& attrs,
                    bool dilations) {
  const Value& x = img.x;
  const size_t spatial = img.one_d ? 1 : 2;
  PLANRT_ASSIGN_OR_RETURN(auto strides, c.attr_ints("strides"));
  std::vector<int64_t> s = strides.value_or(std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> d(spatial, 1);
  if (dilations) {
    PLANRT_ASSIGN_OR_RETURN(auto dil, c.attr_ints("dilations"));
    d = dil.value_or(d);
  }
  if (s.size() != spatial || d.size() != spatial) {
    return c.error(fmt::format("strides and dilations must have {} entries (a {}-D input)", spatial, spatial));
  }
  if (img.one_d) {
    s = lift_1d(s, false);
    d = lift_1d(d, false);
  }
  PLANRT_ASSIGN_OR_RETURN(std::string auto_pad, c.attr_string("auto_pad", "NOTSET"));
  PLANRT_ASSIGN_OR_RETURN(auto pads_attr, c.attr_ints("pads"));
  std::vector<int64_t> pads{0, 0, 0, 0};
  if (auto_pad == "NOTSET") {
    if (pads_attr) {
      if (pads_attr->size() != 2 * spatial) {
        return c.error(fmt::format("pads has {} entries; a {}-D input takes {}", pads_attr->size(), spatial,
                                   2 * spatial));
      }
      pads = img.one_d ? lift_1d(*pads_attr, true) : *pads_attr;
    }
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
  PLANRT_ASSIGN_OR_RETURN(Image img, image_input(c));
  const Value& w = c.input(1);
  if (w.rank() != c.input(0).rank()) {
    return c.error(fmt::format("W has rank {}; the input's is {}", w.rank(), c.input(0).rank()));
  }
  std::vector<int64_t> kernel;
  for (int i = 2; i < w.rank(); ++i) {
    if (!sym_is_const(w.shape[i])) return not_supported(c, "with a kernel whose size is not fixed");
    kernel.push_back(w.shape[i].coeff);
  }
  PLANRT_ASSIGN_OR_RETURN(auto kernel_attr, c.attr_ints("kernel_shape"));
  if (kernel_attr && *kernel_attr != kernel) return c.error("kernel_shape disagrees with W's shape");
  if (img.one_d) kernel = lift_1d(kernel, false);
  PLANRT_ASSIGN_OR_RETURN(int64_t group, c.attr_int("group", 1));
  ir::Attrs attrs{{"groups", group}};
  PLANRT_RETURN_IF_ERROR(window_attrs(c, img, kernel, attrs, true));
  std::vector<std::string> inputs;
  for (size_t i = 0; i < 3; ++i) {
    if (!c.has(i)) continue;
    Value v = i == 0 ? img.x : c.input(i);
    if (i == 1 && img.one_d) {  // W [K, C/groups, KL] as [K, C/groups, 1, KL]
      const std::vector<SymInt> target{w.shape[0], w.shape[1], sym_const(1), w.shape[2]};
      if (v.known) {
        v.known->shape = {w.shape[0].coeff, w.shape[1].coeff, 1, w.shape[2].coeff};
        v.shape = target;
      } else {
        PLANRT_ASSIGN_OR_RETURN(v, reshape_to_shape(c, v, target, c.node.output(0) + ".2d_weight"));
      }
    }
    PLANRT_ASSIGN_OR_RETURN(std::string in, operand_of_type(c, v, c.input(0).elem));
    inputs.push_back(in);
  }
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("conv2d", inputs, std::move(attrs),
                                             img.one_d ? c.node.output(0) + ".2d" : c.node.output(0)));
  return push_image_output(c, img, std::move(y));
}

Status pool(OpContext& c, const char* op) {
  PLANRT_ASSIGN_OR_RETURN(Image img, image_input(c));
  if (c.node.output_size() > 1 && !c.node.output(1).empty()) return not_supported(c, "with its Indices output");
  const size_t spatial = img.one_d ? 1 : 2;
  PLANRT_ASSIGN_OR_RETURN(auto kernel, c.attr_ints("kernel_shape"));
  if (!kernel || kernel->size() != spatial) {
    return c.error(fmt::format("kernel_shape must have {} entries (a {}-D input)", spatial, spatial));
  }
  if (img.one_d) *kernel = lift_1d(*kernel, false);
  const bool average = std::string_view(op) == "avg_pool2d";
  ir::Attrs attrs{{"kernel", *kernel}};
  PLANRT_RETURN_IF_ERROR(window_attrs(c, img, *kernel, attrs, !average));
  PLANRT_ASSIGN_OR_RETURN(int64_t ceil_mode, c.attr_int("ceil_mode", 0));
  attrs["ceil_mode"] = ceil_mode != 0;
  if (average) {
    PLANRT_ASSIGN_OR_RETURN(int64_t include, c.attr_int("count_include_pad", 0));
    attrs["count_include_pad"] = include != 0;
    PLANRT_ASSIGN_OR_RETURN(auto dil, c.attr_ints("dilations"));
    if (dil && std::any_of(dil->begin(), dil->end(), [](int64_t v) { return v != 1; })) {
      return not_supported(c, "with dilations");
    }
  } else {
    PLANRT_ASSIGN_OR_RETURN(int64_t order, c.attr_int("storage_order", 0));
    if (order != 0) return not_supported(c, "with storage_order 1 (column-major indices)");
  }
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(img.x));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit(op, {in}, std::move(attrs),
                                             img.one_d ? c.node.output(0) + ".2d" : c.node.output(0)));
  return push_image_output(c, img, std::move(y));
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

// ---- Resize and Upsample ---------------------------------------------------------------
// planrt's resize (kernels/op_plans.h) takes every number as an attribute: scales, sizes
// and roi must be known when the program is built.

// An input that is absent, or an empty tensor (exporters write an empty constant for an
// unused roi or scales).
bool absent_or_empty(const OpContext& c, size_t i) {
  if (!c.has(i)) return true;
  const Value& v = c.input(i);
  if (v.known) return v.known->numel() == 0;
  for (const SymInt& d : v.shape) {
    if (sym_is_const(d) && d.coeff == 0) return true;
  }
  return false;
}

// A known floating-point input as doubles (the values exactly: ONNX's float32 widened).
Result<std::vector<double>> known_floats(const OpContext& c, size_t i, std::string_view role) {
  const Value& v = c.input(i);
  if (!v.known) return needs_known(c, i, role, "resize's scales and roi are constants of the kernel");
  if (!elem_is_float(v.elem)) return c.error(fmt::format("input {} ({}) must be a floating-point tensor", i, role));
  return v.known->to_f64();
}

// The output IR node: resize of the run-time x.
Status emit_resize(OpContext& c, ir::Attrs attrs) {
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(c.input(0)));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("resize", {in}, std::move(attrs), c.node.output(0)));
  c.out.push_back(std::move(y));
  return {};
}

// Upsample (opsets 7-9) and Resize-10: x / scale (asymmetric), nearest or linear. Nearest
// takes ONNX Runtime's rule (floor when upsampling, ceil when downsampling; Upsample's
// scales are >= 1, so floor, which is the reference's repeat); a resize that upsamples one
// dim and downsamples another in nearest mode is refused.
Status emit_legacy_resize(OpContext& c, const std::vector<double>& scales, const std::string& mode) {
  const Value& x = c.input(0);
  if (mode != "nearest" && mode != "linear") {
    return not_supported(c, fmt::format("in mode '{}' (nearest and linear are)", mode));
  }
  if (static_cast<int>(scales.size()) != x.rank()) {
    return c.error(fmt::format("scales has {} entries; X has rank {}", scales.size(), x.rank()));
  }
  ir::Attrs attrs{{"mode", mode}, {"coordinate_transformation_mode", std::string("asymmetric")}};
  for (double v : scales) {
    if (!(v > 0) || !std::isfinite(v)) return c.error(fmt::format("scale {} is not finite and > 0", v));
  }
  if (mode == "nearest") {
    const bool up = std::any_of(scales.begin(), scales.end(), [](double v) { return v > 1; });
    const bool down = std::any_of(scales.begin(), scales.end(), [](double v) { return v < 1; });
    if (up && down) return not_supported(c, "in nearest mode upsampling one dim and downsampling another");
    attrs["nearest_mode"] = std::string(down ? "ceil" : "floor");
  }
  attrs["scales"] = kernels::format_float_list(scales);
  return emit_resize(c, std::move(attrs));
}

Status handle_upsample(OpContext& c) {
  PLANRT_RETURN_IF_ERROR(require_float_input(c, 0));
  PLANRT_ASSIGN_OR_RETURN(std::string mode, c.attr_string("mode", "nearest"));
  std::vector<double> scales;
  if (c.has(1)) {  // opset 9
    PLANRT_ASSIGN_OR_RETURN(scales, known_floats(c, 1, "scales"));
  } else {  // opset 7: an attribute
    const ::onnx::AttributeProto* a = c.attr("scales");
    if (a == nullptr) return c.error("scales is required (an attribute before opset 9, an input after)");
    for (float f : a->floats()) scales.push_back(f);
  }
  return emit_legacy_resize(c, scales, mode);
}

Status handle_resize(OpContext& c) {
  PLANRT_RETURN_IF_ERROR(require_float_input(c, 0));
  const Value& x = c.input(0);
  const auto rank = static_cast<int64_t>(x.rank());
  if (rank == 0) return c.error("X is a scalar: it has no dim to resize");
  PLANRT_ASSIGN_OR_RETURN(std::string mode, c.attr_string("mode", "nearest"));
  PLANRT_ASSIGN_OR_RETURN(int64_t antialias, c.attr_int("antialias", 0));
  if (antialias != 0) {
    return not_supported(c, "with antialias = 1 (planrt's resize interpolates without the antialiasing filter)");
  }
  if (c.im.opset() < 11) {  // Resize-10: X, scales
    if (!c.has(1)) return c.error("input 1 (scales) is required in opset 10");
    PLANRT_ASSIGN_OR_RETURN(std::vector<double> scales, known_floats(c, 1, "scales"));
    return emit_legacy_resize(c, scales, mode);
  }
  PLANRT_ASSIGN_OR_RETURN(std::string ctm, c.attr_string("coordinate_transformation_mode", "half_pixel"));
  PLANRT_ASSIGN_OR_RETURN(std::string nearest_mode, c.attr_string("nearest_mode", "round_prefer_floor"));
  PLANRT_ASSIGN_OR_RETURN(double cubic_a, c.attr_float("cubic_coeff_a", -0.75));
  PLANRT_ASSIGN_OR_RETURN(int64_t exclude_outside, c.attr_int("exclude_outside", 0));
  PLANRT_ASSIGN_OR_RETURN(double extrapolation, c.attr_float("extrapolation_value", 0.0));
  PLANRT_ASSIGN_OR_RETURN(std::string policy, c.attr_string("keep_aspect_ratio_policy", "stretch"));
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
    return c.error(fmt::format("keep_aspect_ratio_policy '{}' is not stretch, not_larger or not_smaller", policy));
  }
  // The axes resized (opset 18), each once; every dim by default.
  std::vector<int64_t> axes;
  PLANRT_ASSIGN_OR_RETURN(auto axes_attr, c.attr_ints("axes"));
  if (axes_attr) {
    for (int64_t a : *axes_attr) {
      const int64_t n = a < 0 ? a + rank : a;
      if (n < 0 || n >= rank) return c.error(fmt::format("axis {} is out of range for rank {}", a, rank));
      if (std::find(axes.begin(), axes.end(), n) != axes.end()) return c.error(fmt::format("axis {} repeats", a));
      axes.push_back(n);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  const size_t k = axes.size();
  const bool has_scales = !absent_or_empty(c, 2);
  const bool has_sizes = !absent_or_empty(c, 3);
  if (has_scales == has_sizes) return c.error("exactly one of scales (input 2) and sizes (input 3) must be given");
  ir::Attrs attrs{{"mode", mode},
                  {"coordinate_transformation_mode", ctm},
                  {"nearest_mode", nearest_mode},
                  {"cubic_coeff_a", cubic_a},
                  {"exclude_outside", exclude_outside != 0},
                  {"extrapolation_value", extrapolation}};
  if (ctm == "tf_crop_and_resize") {
    if (absent_or_empty(c, 1)) return c.error("coordinate_transformation_mode tf_crop_and_resize needs roi (input 1)");
    PLANRT_ASSIGN_OR_RETURN(std::vector<double> roi, known_floats(c, 1, "roi"));
    if (roi.size() != 2 * k) {
      return c.error(fmt::format("roi has {} entries; {} resized axes take {} (starts, then ends)", roi.size(), k, 2 * k));
    }
    std::vector<double> full(2 * rank, 0.0);
    std::fill(full.begin() + rank, full.end(), 1.0);
    for (size_t i = 0; i < k; ++i) {
      full[axes[i]] = roi[i];
      full[axes[i] + rank] = roi[i + k];
    }
    attrs["roi"] = kernels::format_float_list(full);
  }
  if (has_scales) {
    PLANRT_ASSIGN_OR_RETURN(std::vector<double> scales, known_floats(c, 2, "scales"));
    if (scales.size() != k) return c.error(fmt::format("scales has {} entries for {} axes", scales.size(), k));
    std::vector<double> full(rank, 1.0);
    for (size_t i = 0; i < k; ++i) full[axes[i]] = scales[i];
    for (double v : full) {
      if (!(v > 0) || !std::isfinite(v)) return c.error(fmt::format("scale {} is not finite and > 0", v));
    }
    attrs["scales"] = kernels::format_float_list(full);
    return emit_resize(c, std::move(attrs));
  }
  // Known, or symbolic (Shape arithmetic): an entry that is X's own dim keeps it (-1), which
  // is how an export with a dynamic batch writes it.
  PLANRT_ASSIGN_OR_RETURN(std::vector<SymInt> sizes, c.sym_ints(3, "sizes"));
  if (sizes.size() != k) return c.error(fmt::format("sizes has {} entries for {} axes", sizes.size(), k));
  std::vector<int64_t> full(rank, -1);
  for (size_t i = 0; i < k; ++i) {
    if (sizes[i] == x.shape[axes[i]]) continue;
    if (!sym_is_const(sizes[i])) {
      return c.error(fmt::format("sizes[{}] is {}, which depends on the dims and is not X's dim {} ({}); planrt "
                                 "needs it constant", i, sym_to_string(sizes[i], c.im.dims()), axes[i],
                                 sym_to_string(x.shape[axes[i]], c.im.dims())));
    }
    if (sizes[i].coeff < 1) return c.error(fmt::format("sizes[{}] is {} (sizes are >= 1)", i, sizes[i].coeff));
    full[axes[i]] = sizes[i].coeff;
  }
  if (policy != "stretch") {
    // One scale for every resized axis: the smallest (not_larger) or largest (not_smaller)
    // of size / in, and each size round(scale * in) (half up), as ONNX's reference.
    std::optional<double> scale;
    for (int64_t a : axes) {
      if (!sym_is_const(x.shape[a])) {
        return not_supported(c, fmt::format("with keep_aspect_ratio_policy {} over dim {}, which is not a fixed size",
                                            policy, a));
      }
      const double r = full[a] < 0 ? 1.0 : static_cast<double>(full[a]) / static_cast<double>(x.shape[a].coeff);
      if (!scale || (policy == "not_larger" ? r < *scale : r > *scale)) scale = r;
    }
    std::vector<double> scales(rank, 1.0);
    for (int64_t a : axes) {
      scales[a] = *scale;
      full[a] = static_cast<int64_t>(*scale * static_cast<double>(x.shape[a].coeff) + 0.5);
    }
    attrs["scales"] = kernels::format_float_list(scales);
  }
  attrs["sizes"] = full;
  return emit_resize(c, std::move(attrs));
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
    {"Resize", 1, 4, 1, {"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside", "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode"}, handle_resize},
    {"Upsample", 1, 2, 1, {"mode", "scales"}, handle_upsample},
};
// clang-format on
const std::span<const OpSpec> vision_ops{kVisionOps};

}  // namespace planrt::importers::onnx
