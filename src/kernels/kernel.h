// The kernel interface and the op table (docs/design.md §9): one table of op names shared by the
// builder (which ops exist, how many operands) and the runtime (which function runs one).
//
// A kernel reads `inputs` and writes `outputs`. Every view is contiguous; outputs already
// have their final shapes (the runtime computes them from the program's shapes) and point
// at memory the caller owns. A kernel checks that the shapes and dtypes it was given are
// consistent and returns InvalidArgument naming the op and the operands otherwise; it never
// allocates from the planned arenas, never throws, never aborts. An absent optional operand
// is TensorView::none(). Kernels are stateless and may run concurrently on distinct outputs.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "planrt/core/result.h"
#include "planrt/core/tensor_view.h"

namespace planrt::kernels {

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, bool>;

// Attributes of one op call, parsed once at load time (never on the hot path).
class OpAttrs {
 public:
  void set(std::string name, AttrValue value) { values_[std::move(name)] = std::move(value); }
  bool has(std::string_view name) const;
  // Absent: `fallback`. Present with another type: an error naming the attribute.
  Result<int64_t> get_int(std::string_view name, int64_t fallback) const;
  Result<double> get_float(std::string_view name, double fallback) const;  // ints widen
  Result<bool> get_bool(std::string_view name, bool fallback) const;
  Result<std::string> get_string(std::string_view name, std::string fallback) const;
  Result<std::vector<int64_t>> get_ints(std::string_view name) const;  // absent: NotFound
  const std::map<std::string, AttrValue, std::less<>>& values() const { return values_; }

 private:
  std::map<std::string, AttrValue, std::less<>> values_;
};

using KernelFn = Status (*)(const OpAttrs& attrs, std::span<const TensorView> inputs,
                            std::span<const TensorView> outputs);

struct OpInfo {
  std::string_view name;
  int min_inputs;   // required operands
  int max_inputs;   // with optional ones; -1: variadic (concat)
  int num_outputs;       // required outputs
  int optional_outputs = 0;  // more the program may give (conv2d's planned workspace)
};

// Every op of §9; nullptr for an unknown name.
//
// Attributes the CPU kernels read (absent: the default; present with another type:
// InvalidArgument; a required one absent: NotFound). Dims may be negative (from the end).
//   linear, matmul, add, sub, mul, div, pow, relu, silu, sqrt, neg, exp, erf, tanh, sigmoid,
//     embedding, reshape: none (reshape's output shape is the caller's; `shape` is not read)
//   reduce_mean: dims (ints, required: adjacent dims, the output keeps them as size 1 or
//     drops them as its shape says)
//   layer_norm: eps (float, 1e-5)       rms_norm: eps (float, 1e-6; PyTorch's None means
//                                        finfo(f32).eps, models pass their own)
//   softmax: dim (int, -1)              gelu: approximate ("none" | "tanh", "none")
//   permute: dims (ints, required)      transpose: dim0, dim1 (ints, required)
//   concat: dim (int, 0)                slice: dim (int, 0), start (int, 0),
//                                        end (int; absent: start + the output's length
//                                        along dim), step (int, only 1)
//   conv2d: strides (ints [sh, sw], [1, 1]), pads (ints [top, left, bottom, right], zeros),
//     dilations (ints [dh, dw], [1, 1]), groups (int, 1), activation ("none" | "relu" | "clip"
//     | "hard_sigmoid" | "hard_swish", "none": applied after the bias; a clamp one with that
//     op's own attributes, min/max or alpha/beta, on the conv2d; host only, the builder fuses
//     them there), layout ("nchw" | "nhwc", "nchw"). Operands x [N, C, H, W],
//     weight [K, C/groups, KH, KW], bias [K]?; output [N, K, OH, OW]; in layout nhwc x
//     [N, H, W, C], weight [K, KH, KW, C/groups], output [N, OH, OW, K] (the builder's
//     channels-last rewrite, builder/layout.h). An optional second output is the workspace
//     (kernels/workspace.h: conv2d_workspace_bytes), planned by the builder.
//   max_pool2d, avg_pool2d: kernel (ints [kh, kw], required), strides (ints, [1, 1]), pads
//     (ints [top, left, bottom, right], zeros), dilations (ints, [1, 1]; max only),
//     ceil_mode (bool, false), count_include_pad (bool, false; avg only), layout ("nchw" |
//     "nhwc", "nchw": x [N, H, W, C] -> [N, OH, OW, C])
//   clip: min, max (floats; absent: unbounded)
//   hard_sigmoid: alpha (float, 0.2), beta (float, 0.5): max(0, min(1, alpha x + beta))
//   hard_swish: none: x * max(0, min(1, x / 6 + 1 / 2))
//   pad: pads (ints [begin_0 .. begin_{r-1}, end_0 .. end_{r-1}], required; negative crops),
//     mode ("constant" | "reflect" | "edge", "constant"), value (float, 0; constant only)
//   expand: none (x broadcasts to the output's shape, which is the caller's; `shape` is not
//     read)
//   scaled_dot_product_attention: causal (bool, false; top-left aligned as PyTorch's
//     is_causal), scale (float, 1/sqrt(D)), fused (bool, true: the CUDA kernel may run in
//     one pass without the [Sq, Sk] scores; false keeps them, see workspace.h), layout
//     ("bhsd" | "bshd" | "sbhd", "bhsd": q, k, v, out as [..., S, D], as [..., S, H, D] or
//     as [S, ..., H, D], kernels/attention_layout.h), heads (int, 0; bshd and sbhd only:
//     the last two dims one, [..., H * D], and one input alone is a packed q|k|v projection
//     [..., 3 * H * D]); inputs q, k, v and an optional mask (input 3, bool or q's dtype,
//     broadcast to [batch..., H, Sq, Sk]: kernels/attention_layout.h), or packed qkv with k
//     and v absent
//   resize: mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a (-0.75),
//     exclude_outside (false), extrapolation_value (0), sizes (ints, -1 keeps), scales / roi
//     (strings of numbers; see op_plans.h): ONNX Resize over any rank
//   gather_elements: dim (int, 0); x, indices (i32 or i64, x's rank) -> indices' shape
//   take: none; x, indices (i32 or i64) -> indices' shape: x's elements at those flat
//     (row-major) positions, negative from the end (torch.take; ONNX Gather on 1-D data)
//   size: dim (int, required): an i64 scalar holding x's size along dim as the method runs
//     (a dim's value used as data: transformers' mask index arithmetic); x's bytes are not read
//   cos, sin, log, floor, ceil, round, reciprocal, abs, sign, isnan, isinf, logical_not, equal,
//     less, less_equal, greater, greater_equal, logical_and, logical_or, logical_xor, minimum,
//     maximum, mod, where, cast: the typed elementwise family, its dtypes, semantics and
//     attributes (isinf: positive, negative; mod: fmod; cast: dtype) in
//     kernels/elementwise_ops.h
// Dtypes: arithmetic ops are f32 on the CPU (f32 and bf16 on CUDA), add, sub, mul, div, pow
// and neg also i32, i64 and u8 (elementwise_ops.h); another input dtype: NotSupported;
// embedding takes i32 or i64 ids and a table of any dtype; data movement works for every
// dtype.
// Aliasing: elementwise ops and reshape may write over an input of the output's shape;
// other kernels need outputs disjoint from inputs.
const OpInfo* find_op(std::string_view name);
std::span<const OpInfo> all_ops();

// The CPU implementation of `name`; NotFound for an unknown op.
Result<KernelFn> find_cpu_kernel(std::string_view name);

}  // namespace planrt::kernels
