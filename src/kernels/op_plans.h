// One plan function per op (or family): it checks what the op's operands and attributes
// must be and returns the sizes a kernel needs. Every back end calls the same plan, so the
// ops mean the same thing and reject a bad call in the same words wherever they run;
// a back end keeps only what is its own (devices, the dtypes it implements, library limits).
//
// Contract: the back end has already checked the operands (counts as the op table says,
// required operands present, readable views) and, for arithmetic ops, that the inputs have
// a dtype it supports; a plan relies on both. A plan checks the output's dtype and shape
// (kernels/operands.h: check_output) and reads the op's attributes (defaults in kernel.h).
// Errors: InvalidArgument for shapes, ranks and attribute values; NotFound for a required
// attribute missing; NotSupported for what no back end implements (slice steps, id dtypes).
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/attention_layout.h"
#include "kernels/kernel.h"

namespace planrt::kernels {

// add, sub, mul, div, pow: the broadcast shape, which is the output's.
Result<Shape> plan_binary(std::string_view op, std::span<const TensorView> inputs,
                          std::span<const TensorView> outputs);

// relu, silu, gelu, sqrt, neg, exp, erf, tanh, sigmoid: the output has x's shape (nothing to
// derive).
Status plan_unary(std::string_view op, std::span<const TensorView> inputs,
                  std::span<const TensorView> outputs);

enum class GeluApproximation { None, Tanh };
// gelu's `approximate` attribute: InvalidArgument for a mode other than none and tanh.
Result<GeluApproximation> plan_gelu(const OpAttrs& attrs);

// linear: y [M, N] = x [M, K] @ weight[N, K]^T (+ bias [N]), x's leading dims folded into M.
struct LinearPlan {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};
Result<LinearPlan> plan_linear(std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs);

// linear's optional fused activation (the builder's host fusion, builder/rewrite.h): the
// attribute `activation` ("none", "relu" or "gelu") and, for gelu, `approximate` ("none"
// or "tanh"). InvalidArgument for anything else, naming it.
enum class LinearActivation { None, Relu, Gelu, GeluTanh };
Result<LinearActivation> plan_linear_activation(const OpAttrs& attrs);
std::string_view linear_activation_name(LinearActivation a);

// matmul: `batch` products of a [m, k] @ b [k, n]; a_batch and b_batch broadcast to batch
// (a 1-D operand has an empty batch and m or n of 1).
struct MatmulPlan {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  Shape a_batch;
  Shape b_batch;
  Shape batch;
};
Result<MatmulPlan> plan_matmul(std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs);

// layer_norm, rms_norm: `rows` rows of `n` features (rows is 0 when n is).
struct NormPlan {
  int64_t rows = 0;
  int64_t n = 0;
  double eps = 0.0;
};
Result<NormPlan> plan_layer_norm(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                 std::span<const TensorView> outputs);
Result<NormPlan> plan_rms_norm(const OpAttrs& attrs, std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs);

// softmax and log_softmax along `dim`: x viewed as [outer, n, inner] (outer is 0 for an
// empty x). `op` names the op in errors.
struct SoftmaxPlan {
  int64_t outer = 0;
  int64_t n = 0;
  int64_t inner = 0;
};
Result<SoftmaxPlan> plan_softmax(std::string_view op, const OpAttrs& attrs,
                                 std::span<const TensorView> inputs,
                                 std::span<const TensorView> outputs);

// The reductions (reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod) over the
// adjacent dims `dims`: x viewed as [outer, n, inner], each (o, i) line of n reduced to one
// value of x's dtype. The output has x's shape with those dims either kept as 1 or dropped
// (both are accepted: the shape is the caller's, as for reshape). Over no elements (n == 0)
// each gives its identity, as ONNX says: sum 0, prod 1, max -inf, min +inf; mean NaN.
// max and min propagate NaN (torch.amax, numpy.max).
enum class ReduceFn : uint8_t { Sum, Mean, Max, Min, Prod };
struct ReducePlan {
  ReduceFn fn = ReduceFn::Sum;
  int64_t outer = 0;
  int64_t n = 0;
  int64_t inner = 0;
};
// The reduction an op name names (reduce_sum ... reduce_prod); nullopt for any other op.
std::optional<ReduceFn> reduce_fn_of(std::string_view op);
Result<ReducePlan> plan_reduce(std::string_view op, const OpAttrs& attrs,
                               std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs);

// argmax, argmin along `dim` (attribute, default 0): x viewed as [outer, n, inner], each
// line's index of its largest (smallest) element as i64; ties go to the first index, or the
// last with attribute `select_last_index` (ONNX's). A NaN counts as the largest and the
// smallest (torch.argmax). The output is x's shape with `dim` kept as 1 or dropped
// (attribute `keepdim`, default false, as torch.argmax). n must be positive.
struct ArgReducePlan {
  bool max = true;
  bool select_last = false;
  int64_t outer = 0;
  int64_t n = 0;
  int64_t inner = 0;
};
Result<ArgReducePlan> plan_arg_reduce(std::string_view op, const OpAttrs& attrs,
                                      std::span<const TensorView> inputs,
                                      std::span<const TensorView> outputs);

// cumsum along `dim` (attribute, required): x viewed as [outer, n, inner]; y has x's shape
// and dtype. Attributes `exclusive` (y[i] sums x[< i], as ONNX's) and `reverse` (sums run
// from the end), both default false. Integers sum in their own type (wrapping); floats in
// double, rounded once per element.
struct CumsumPlan {
  bool exclusive = false;
  bool reverse = false;
  int64_t outer = 0;
  int64_t n = 0;
  int64_t inner = 0;
};
Result<CumsumPlan> plan_cumsum(const OpAttrs& attrs, std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs);

// scaled_dot_product_attention: `heads` independent [sq, d] x [sk, d] -> [sq, dv] problems,
// their rows where `layout` (attribute "bhsd", the default, "bshd" or "sbhd", the last two
// with or without attribute heads; kernels/attention_layout.h) puts them.
struct AttentionPlan {
  int64_t heads = 0;  // batch x heads
  int64_t sq = 0;
  int64_t sk = 0;
  int64_t d = 0;
  int64_t dv = 0;
  bool causal = false;
  double scale = 0.0;
  bool fused = true;  // attribute `fused`: may the CUDA kernel skip the score matrix
  AttentionLayout layout;
};
Result<AttentionPlan> plan_attention(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                     std::span<const TensorView> outputs);
// Inputs: q, k, v and an optional mask (input 3; kernels/attention_layout.h says how it
// broadcasts), or one packed q|k|v input with k and v absent (attribute heads).
inline bool attention_is_packed(std::span<const TensorView> inputs) {
  return inputs.size() == 1 || (inputs.size() > 2 && inputs[1].is_none() && inputs[2].is_none());
}
// The tensor operand `which` (0 q, 1 k, 2 v) lies in: its own input, or the one packed input
// (the plan's strides then start each operand at its place in the row).
inline const TensorView& attention_source(std::span<const TensorView> inputs, size_t which) {
  return attention_is_packed(inputs) ? inputs[0] : inputs[which];
}
// The mask input's data (plan.layout.mask says how to read it), or null when there is none.
inline const void* attention_mask_data(std::span<const TensorView> inputs) {
  return inputs.size() > 3 && !inputs[3].is_none() ? inputs[3].data : nullptr;
}
Result<AttentionMask> plan_attention_mask(const TensorView& mask, DType dtype, const Shape& heads_shape, int64_t sq,
                                          int64_t sk);

// gather_elements(x, indices) along `dim` (attribute, default 0): out[i] = x[i with its `dim`
// entry replaced by indices[i]] (ONNX GatherElements, torch.gather). indices are i32 or i64
// of x's rank, each size at most x's except along dim; a negative index counts from the
// end. The output has indices' shape and x's dtype.
struct GatherElementsPlan {
  int dim = 0;
  bool i64_indices = false;
  Shape x_strides;  // contiguous strides of x, in elements
};
Result<GatherElementsPlan> plan_gather_elements(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                                std::span<const TensorView> outputs);

// take(x, indices): x's elements at flat positions (torch.take): indices i32 or i64, negative
// counting from the end of x's numel; the output has indices' shape and x's dtype.
struct TakePlan {
  bool i64_indices = false;
  int64_t numel = 0;  // of x
};
Result<TakePlan> plan_take(std::span<const TensorView> inputs, std::span<const TensorView> outputs);

// size(x): x's size along `dim` (attribute, required; negative from the end), written as an
// i64 scalar.
Result<int64_t> plan_size(const OpAttrs& attrs, std::span<const TensorView> inputs,
                          std::span<const TensorView> outputs);

// embedding: n ids gather rows of row_bytes from a table of `rows` rows.
struct EmbeddingPlan {
  bool i64_ids = false;
  int64_t n = 0;
  int64_t rows = 0;
  int64_t row_bytes = 0;
};
Result<EmbeddingPlan> plan_embedding(std::span<const TensorView> inputs,
                                     std::span<const TensorView> outputs);

// reshape: only the element count and dtype (the output's shape is the caller's).
Status plan_reshape(std::span<const TensorView> inputs, std::span<const TensorView> outputs);

// permute, transpose: output dim i reads x along src_strides[i] (elements).
struct PermutePlan {
  Shape shape;
  Shape src_strides;
};
Result<PermutePlan> plan_permute(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                 std::span<const TensorView> outputs);
Result<PermutePlan> plan_transpose(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                   std::span<const TensorView> outputs);

// expand: x broadcast to the output's shape; output dim i reads x along src_strides[i]
// (0 where x broadcasts).
Result<PermutePlan> plan_expand(std::span<const TensorView> inputs, std::span<const TensorView> outputs);

// concat: for each of `outer` rows, every input contributes sizes[dim] * inner_bytes bytes,
// in order, to an output row of out_row_bytes.
struct ConcatPlan {
  int dim = 0;
  int64_t outer = 0;
  int64_t inner_bytes = 0;
  int64_t out_row_bytes = 0;
};
Result<ConcatPlan> plan_concat(const OpAttrs& attrs, std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs);

// slice: `outer` rows of out_row_bytes copied from x + offset_bytes, one every in_row_bytes.
struct SlicePlan {
  int64_t outer = 0;
  int64_t offset_bytes = 0;
  int64_t in_row_bytes = 0;
  int64_t out_row_bytes = 0;
};
Result<SlicePlan> plan_slice(const OpAttrs& attrs, std::span<const TensorView> inputs,
                             std::span<const TensorView> outputs);

// The output length of a sliding window (convolution, pooling) over `in` elements padded by
// `pad_begin` and `pad_end`: floor((in + pads - dilation * (kernel - 1) - 1) / stride) + 1, or
// with ceil_mode rounded up, less a last window that would start in the end padding (as
// PyTorch and ONNX Runtime). InvalidArgument when it is < 1 or an argument is out of range.
Result<int64_t> window_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                                   int64_t pad_end, int64_t dilation, bool ceil_mode);

// The sliding-window attributes of conv2d and the pools (defaults in kernel.h), checked:
// two kernel sizes, strides and dilations >= 1, four pads >= 0.
struct Window2d {
  int64_t kh = 1, kw = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  bool ceil_mode = false;
};
// `kernel`: the kernel sizes when the op carries them (pools); conv2d passes its weight's.
Result<Window2d> parse_window2d(std::string_view op, const OpAttrs& attrs,
                                const int64_t* kernel_hw);

// clip, hard_sigmoid, hard_swish: y = (times_x ? x : 1) * clamp(scale * x + shift, lo, hi).
struct ClampPlan {
  float scale = 1.0f, shift = 0.0f;
  float lo = 0.0f, hi = 0.0f;
  bool times_x = false;
};

// What conv2d applies after its bias: nothing, relu, or one of the clamp ops (clip,
// hard_sigmoid, hard_swish: `clamp`, with that op's own attributes on the conv2d).
enum class ConvActivation { None, Relu, Clamp };

// conv2d: y [n, k, oh, ow] = x [n, c, h, w] * weight [k, c / groups, kh, kw] (+ bias [k]),
// groups independent convolutions of c / groups input and k / groups output channels.
// channels_last (layout "nhwc"): x [n, h, w, c], weight [k, kh, kw, c / groups], y [n, oh, ow, k].
struct Conv2dPlan {
  bool channels_last = false;
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t k = 0, oh = 0, ow = 0;
  int64_t groups = 1;
  Window2d window;
  bool has_bias = false;
  ConvActivation activation = ConvActivation::None;
  std::string activation_name = "none";
  ClampPlan clamp;  // ConvActivation::Clamp
  uint64_t workspace_bytes = 0;  // what the workspace output holds (0: none given)
};
// Checks a workspace output, when given, against the plan's need on the host
// (workspace.h: conv2d_workspace_bytes); the output's shape is computed here.
Result<Conv2dPlan> plan_conv2d(const OpAttrs& attrs, std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs);

// max_pool2d, avg_pool2d: x [n, c, h, w] -> [n, c, oh, ow]; channels_last (layout "nhwc"):
// x [n, h, w, c] -> [n, oh, ow, c].
struct Pool2dPlan {
  bool channels_last = false;
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t oh = 0, ow = 0;
  Window2d window;
  bool count_include_pad = false;  // avg_pool2d
};
Result<Pool2dPlan> plan_pool2d(std::string_view op, const OpAttrs& attrs,
                               std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs);

Result<ClampPlan> plan_clamp(std::string_view op, const OpAttrs& attrs,
                             std::span<const TensorView> inputs,
                             std::span<const TensorView> outputs);
// The parameters alone, from the op's attributes (conv2d's fused activation reads them too).
Result<ClampPlan> clamp_params(std::string_view op, const OpAttrs& attrs);

// pad: output dim d is x's plus begin[d] + end[d] (negative pads crop).
enum class PadMode { Constant, Reflect, Edge };
struct PadPlan {
  std::vector<int64_t> begin;  // per dim
  PadMode mode = PadMode::Constant;
  double value = 0.0;
  uint64_t fill_bits = 0;  // `value` as one element of x's dtype (its low element_size bytes)
};
Result<PadPlan> plan_pad(const OpAttrs& attrs, std::span<const TensorView> inputs,
                         std::span<const TensorView> outputs);

// ---- resize (ONNX Resize, opsets 10-19, and Upsample) -----------------------------------
// resize(x): x of any rank >= 1, each dim interpolated independently (separable), as ONNX's
// reference implementation (onnx/reference/ops/op_resize.py) defines it. Attributes
// (defaults in kernel.h):
//   mode: "nearest" | "linear" | "cubic" ("nearest": 1 tap, linear 2, cubic 4 per dim)
//   coordinate_transformation_mode: "half_pixel" (default) | "half_pixel_symmetric" |
//     "pytorch_half_pixel" | "align_corners" | "asymmetric" | "tf_half_pixel_for_nn" |
//     "tf_crop_and_resize"
//   nearest_mode: "round_prefer_floor" (default) | "round_prefer_ceil" | "floor" | "ceil"
//   cubic_coeff_a (float, -0.75), exclude_outside (bool, false: taps outside x get weight
//   0 and the rest are renormalized), extrapolation_value (float, 0: tf_crop_and_resize's
//   value outside the roi's image)
//   sizes (ints, one per dim of x; -1 keeps x's size): the output's shape
//   scales (string of decimal numbers separated by commas, one per dim, each > 0): the
//     coordinate transforms' scale; absent, out / in per dim. Without sizes, the output's
//     size is floor(in * scale). (A string: attributes have no list of floats; the numbers
//     are written so that they read back exactly, e.g. ONNX's float32 scales.)
//   roi (string of 2 * rank numbers, starts then ends; tf_crop_and_resize only; default
//     0s then 1s)
// Every coordinate is computed in double. f32 on the CPU; f32, bf16 and f16 on CUDA.
enum class ResizeMode { Nearest, Linear, Cubic };
enum class ResizeCoordinates {
  HalfPixel, HalfPixelSymmetric, PytorchHalfPixel, AlignCorners, Asymmetric, TfHalfPixelForNn,
  TfCropAndResize
};
enum class ResizeNearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

struct ResizeAttrs {
  ResizeMode mode = ResizeMode::Nearest;
  ResizeCoordinates coordinates = ResizeCoordinates::HalfPixel;
  ResizeNearest nearest = ResizeNearest::RoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
  std::vector<int64_t> sizes;  // per dim (-1: x's size); empty: from the scales
  std::vector<double> scales;  // per dim; empty: out / in
  std::vector<double> roi;     // 2 * rank; empty: 0s then 1s
};
// The attributes checked against x's rank: InvalidArgument naming a bad one (a mode not in
// the lists above, a count that is not the rank's, a scale <= 0, neither sizes nor scales).
Result<ResizeAttrs> parse_resize_attrs(const OpAttrs& attrs, int rank);
// The output's size along `axis` for x's size `in` (sizes, else floor(in * scale));
// InvalidArgument when it is < 1, or when it interpolates from an empty dim.
Result<int64_t> resize_output_size(const ResizeAttrs& attrs, int axis, int64_t in);
// "1,2.5": the numbers of a scales or roi attribute (InvalidArgument naming `what`).
Result<std::vector<double>> parse_float_list(std::string_view text, std::string_view what);
// The inverse: each number written so that it reads back to the same double.
std::string format_float_list(const std::vector<double>& values);

struct ResizeAxis {
  int64_t in = 1, out = 1;
  double scale = 1.0;                     // the transform's scale
  double roi_start = 0.0, roi_end = 1.0;  // tf_crop_and_resize
  bool identity = false;                  // every output position reads x's at its index
};
struct ResizePlan {
  ResizeAttrs attrs;
  std::vector<ResizeAxis> axes;  // one per dim of x
};
Result<ResizePlan> plan_resize(const OpAttrs& attrs, std::span<const TensorView> inputs,
                               std::span<const TensorView> outputs);

// What output position x along one axis reads: up to 4 taps, each an index into x along that
// axis (edge-clamped to [0, in)) with its weight; taps sharing an index are merged and
// weight-0 taps dropped. `outside`: tf_crop_and_resize's coordinate fell outside the image
// (the output is extrapolation_value).
struct ResizeTaps {
  int count = 0;
  bool outside = false;
  int64_t index[4] = {};
  double weight[4] = {};
};
ResizeTaps resize_taps(const ResizeAttrs& attrs, const ResizeAxis& axis, int64_t x);

}  // namespace planrt::kernels
