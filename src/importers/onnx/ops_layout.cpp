// ONNX ops that planrt computes by moving elements with its layout ops (reshape, permute,
// expand) or from a few others, as the spec defines them: DepthToSpace, SpaceToDepth, Tile,
// OneHot, EyeLike, InstanceNormalization (layer_norm over each channel's elements) and
// GlobalMaxPool (reduce_max over the spatial dims).
#include <numeric>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "importers/onnx/fold_support.h"
#include "importers/onnx/ops_support.h"

namespace planrt::importers::onnx {
namespace {

Result<Value> permute(OpContext& c, const Value& x, std::vector<int64_t> dims, const std::string& name) {
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x));
  return c.im.emit("permute", {in}, {{"dims", std::move(dims)}}, name);
}

SymInt times(const SymInt& a, int64_t k) { return shape_product({a, sym_const(k)}, 0, 2); }

// a / k for a constant a that k divides; nullopt otherwise.
std::optional<SymInt> divided(const SymInt& a, int64_t k) {
  if (!sym_is_const(a) || k <= 0 || a.coeff % k != 0) return std::nullopt;
  return sym_const(a.coeff / k);
}

Result<int64_t> block_size(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(int64_t b, c.attr_int("blocksize", std::nullopt));
  if (b < 1) return c.error(fmt::format("blocksize is {}; expected at least 1", b));
  if (c.input(0).rank() != 4) {
    return c.error(fmt::format("takes [N, C, H, W]; got rank {}", c.input(0).rank()));
  }
  return b;
}

// DepthToSpace: channels into b x b blocks of pixels. DCR (the default): the channel is
// (block row, block column, C'); CRD: (C', block row, block column).
Status handle_depth_to_space(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(int64_t b, block_size(c));
  PLANRT_ASSIGN_OR_RETURN(std::string mode, c.attr_string("mode", std::string("DCR")));
  if (mode != "DCR" && mode != "CRD") return c.error(fmt::format("mode is '{}'; expected \"DCR\" or \"CRD\"", mode));
  const Value& x = c.input(0);
  const std::vector<SymInt>& s = x.shape;
  std::optional<SymInt> cc = divided(s[1], b * b);
  if (!cc) return c.error(fmt::format("channels {} are not a fixed multiple of blocksize^2 = {}", c.im.shape_str({s[1]}), b * b));
  const std::string& name = c.node.output(0);
  const SymInt bs = sym_const(b);
  std::vector<SymInt> split = mode == "DCR" ? std::vector<SymInt>{s[0], bs, bs, *cc, s[2], s[3]}
                                            : std::vector<SymInt>{s[0], *cc, bs, bs, s[2], s[3]};
  std::vector<int64_t> perm = mode == "DCR" ? std::vector<int64_t>{0, 3, 4, 1, 5, 2} : std::vector<int64_t>{0, 1, 4, 2, 5, 3};
  PLANRT_ASSIGN_OR_RETURN(Value blocks, reshape_to_shape(c, x, split, name + ".blocks"));
  PLANRT_ASSIGN_OR_RETURN(Value moved, permute(c, blocks, perm, name + ".moved"));
  PLANRT_ASSIGN_OR_RETURN(Value y, reshape_to_shape(c, moved, {s[0], *cc, times(s[2], b), times(s[3], b)}, name));
  c.out.push_back(std::move(y));
  return {};
}

// SpaceToDepth: each b x b block of pixels into channels (block row, block column, C).
Status handle_space_to_depth(OpContext& c) {
  PLANRT_ASSIGN_OR_RETURN(int64_t b, block_size(c));
  const Value& x = c.input(0);
  const std::vector<SymInt>& s = x.shape;
  std::optional<SymInt> h = divided(s[2], b), w = divided(s[3], b);
  if (!h || !w) {
    return c.error(fmt::format("height and width {} x {} are not fixed multiples of blocksize {}",
                               c.im.shape_str({s[2]}), c.im.shape_str({s[3]}), b));
  }
  const std::string& name = c.node.output(0);
  const SymInt bs = sym_const(b);
  PLANRT_ASSIGN_OR_RETURN(Value blocks, reshape_to_shape(c, x, {s[0], s[1], *h, bs, *w, bs}, name + ".blocks"));
  PLANRT_ASSIGN_OR_RETURN(Value moved, permute(c, blocks, {0, 3, 5, 1, 2, 4}, name + ".moved"));
  PLANRT_ASSIGN_OR_RETURN(Value y, reshape_to_shape(c, moved, {s[0], times(s[1], b * b), *h, *w}, name));
  c.out.push_back(std::move(y));
  return {};
}

// Tile(x, repeats): x [d0, d1, ...] seen as [1, d0, 1, d1, ...], expanded to [r0, d0, r1,
// d1, ...] and merged to [r0 d0, r1 d1, ...]. The repeats are known at build time.
Status handle_tile(OpContext& c) {
  const Value& x = c.input(0);
  PLANRT_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, c.known_ints(1, "repeats"));
  if (static_cast<int>(repeats.size()) != x.rank()) {
    return c.error(fmt::format("repeats has {} entries for a tensor of rank {}", repeats.size(), x.rank()));
  }
  const std::string& name = c.node.output(0);
  std::vector<SymInt> spread, expanded, out;
  for (size_t i = 0; i < repeats.size(); ++i) {
    if (repeats[i] < 1) return c.error(fmt::format("repeats[{}] is {}; expected at least 1", i, repeats[i]));
    spread.insert(spread.end(), {sym_const(1), x.shape[i]});
    expanded.insert(expanded.end(), {sym_const(repeats[i]), x.shape[i]});
    out.push_back(times(x.shape[i], repeats[i]));
  }
  if (std::all_of(repeats.begin(), repeats.end(), [](int64_t r) { return r == 1; })) {
    c.out.push_back(x);
    return {};
  }
  PLANRT_ASSIGN_OR_RETURN(Value s, reshape_to_shape(c, x, spread, name + ".spread"));
  PLANRT_ASSIGN_OR_RETURN(Value e, expand_to(c, s, expanded, name + ".repeated"));
  PLANRT_ASSIGN_OR_RETURN(Value y, reshape_to_shape(c, e, out, name));
  c.out.push_back(std::move(y));
  return {};
}

// OneHot(indices, depth, values = [off, on]): out[..., j, ...] = on where j == index (a
// negative index counts from depth), else off; the new axis at `axis`. depth is known at
// build time; indices of a float type are truncated to integers first, as ONNX says.
Status handle_one_hot(OpContext& c) {
  const Value& indices = c.input(0);
  // depth: one number of any numeric type (a float one truncated), known at build time.
  const Value& depth_value = c.input(1);
  if (!depth_value.known) {
    PLANRT_RETURN_IF_ERROR(c.known_ints(1, "depth").status());  // the error naming the flag
  }
  const std::vector<double> depth_values = depth_value.known ? depth_value.known->to_f64() : std::vector<double>{};
  if (depth_values.size() != 1 || !(depth_values[0] >= 1) || depth_values[0] > double(int64_t{1} << 31)) {
    return c.error("depth must be one positive number");
  }
  const auto depth = static_cast<int64_t>(depth_values[0]);
  PLANRT_ASSIGN_OR_RETURN(int64_t axis, c.attr_int("axis", -1));
  const int64_t rank = indices.rank() + 1;
  if (axis < -rank || axis >= rank) return c.error(fmt::format("axis {} is out of range for rank {}", axis, rank));
  if (axis < 0) axis += rank;
  const Value& values = c.input(2);
  if (values.shape.size() != 1 || !(values.shape[0] == sym_const(2))) return c.error("values must hold [off, on]");
  const std::string& name = c.node.output(0);
  // The indices as int64 with the new axis, and the positions 0..depth-1 along it.
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(indices));
  std::string idx = in;
  if (indices.elem != Elem::Int64) {
    PLANRT_ASSIGN_OR_RETURN(Value cast, c.im.emit("cast", {in}, {{"dtype", std::string("i64")}}, name + ".indices"));
    idx = cast.ir;
  }
  PLANRT_ASSIGN_OR_RETURN(std::string depth_const, c.im.constant(Tensor::from_i64(Elem::Int64, {}, {depth}), name + ".depth"));
  PLANRT_ASSIGN_OR_RETURN(std::string zero, c.im.constant(Tensor::from_i64(Elem::Int64, {}, {0}), name + ".zero"));
  PLANRT_ASSIGN_OR_RETURN(Value negative, c.im.emit("less", {idx, zero}, {}, name + ".negative"));
  PLANRT_ASSIGN_OR_RETURN(Value wrapped, c.im.emit("add", {idx, depth_const}, {}, name + ".wrapped"));
  PLANRT_ASSIGN_OR_RETURN(Value index, c.im.emit("where", {negative.ir, wrapped.ir, idx}, {}, name + ".index"));
  std::vector<SymInt> with_axis = indices.shape;
  with_axis.insert(with_axis.begin() + axis, sym_const(1));
  PLANRT_ASSIGN_OR_RETURN(Value at_axis, reshape_to_shape(c, index, with_axis, name + ".at_axis"));
  std::vector<int64_t> positions_shape(static_cast<size_t>(rank), 1);
  positions_shape[static_cast<size_t>(axis)] = depth;
  std::vector<int64_t> positions(static_cast<size_t>(depth));
  std::iota(positions.begin(), positions.end(), int64_t{0});
  PLANRT_ASSIGN_OR_RETURN(std::string iota,
                          c.im.constant(Tensor::from_i64(Elem::Int64, positions_shape, positions), name + ".positions"));
  PLANRT_ASSIGN_OR_RETURN(Value hot, c.im.emit("equal", {at_axis.ir, iota}, {}, name + ".hot"));
  // off and on: the two values, as scalars of their type.
  PLANRT_ASSIGN_OR_RETURN(std::string vi, c.im.ir_of(values));
  std::string on, off;
  for (int64_t k : {0, 1}) {
    PLANRT_ASSIGN_OR_RETURN(Value part, c.im.emit("slice", {vi}, {{"dim", int64_t{0}}, {"start", k}, {"end", k + 1}},
                                                  name + (k == 0 ? ".off" : ".on")));
    (k == 0 ? off : on) = part.ir;
  }
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("where", {hot.ir, on, off}, {}, name));
  c.out.push_back(std::move(y));
  return {};
}

// EyeLike(x): ones on the k-th diagonal of x's [rows, cols], zeros elsewhere, of x's type
// or `dtype`; x's shape is fixed, so the result is a constant.
Status handle_eye_like(OpContext& c) {
  const Value& x = c.input(0);
  if (x.rank() != 2 || !sym_is_const(x.shape[0]) || !sym_is_const(x.shape[1])) {
    return c.error(fmt::format("takes a 2-D tensor of fixed size; got {}", c.im.shape_str(x.shape)));
  }
  PLANRT_ASSIGN_OR_RETURN(int64_t k, c.attr_int("k", 0));
  PLANRT_ASSIGN_OR_RETURN(int64_t dtype, c.attr_int("dtype", static_cast<int64_t>(x.elem)));
  const int64_t rows = x.shape[0].coeff, cols = x.shape[1].coeff;
  std::vector<double> eye(static_cast<size_t>(rows * cols), 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    if (i + k >= 0 && i + k < cols) eye[static_cast<size_t>(i * cols + i + k)] = 1.0;
  }
  const Elem elem = static_cast<Elem>(dtype);
  PLANRT_RETURN_IF_ERROR(to_dtype(elem).status().with_context(fmt::format("{} dtype", c.node.op_type())));
  c.out.push_back(fold::make_known(Tensor::from_f64(elem, {rows, cols}, eye)));
  return {};
}

// InstanceNormalization(x [N, C, spatial...], scale [C], bias [C]): each (n, c)'s elements
// normalized (planrt's layer_norm over them, no affine), then scale and bias per channel.
Status handle_instance_norm(OpContext& c) {
  PLANRT_RETURN_IF_ERROR(require_float_input(c, 0));
  const Value& x = c.input(0);
  if (x.rank() < 3) return c.error(fmt::format("takes [N, C, spatial...]; got rank {}", x.rank()));
  PLANRT_ASSIGN_OR_RETURN(double eps, c.attr_float("epsilon", 1e-5));
  const SymInt spatial = shape_product(x.shape, 2, x.shape.size());
  if (!sym_is_const(spatial)) return c.error("takes spatial dims of fixed size");
  const std::string& name = c.node.output(0);
  PLANRT_ASSIGN_OR_RETURN(Value rows, reshape_to_shape(c, x, {x.shape[0], x.shape[1], spatial}, name + ".rows"));
  PLANRT_ASSIGN_OR_RETURN(Value normed, c.im.emit("layer_norm", {rows.ir}, {{"eps", eps}}, name + ".normalized"));
  // scale and bias as [C, 1] columns.
  std::string affine[2];
  for (size_t i : {1u, 2u}) {
    PLANRT_ASSIGN_OR_RETURN(Value column, reshape_to_shape(c, c.input(i), {x.shape[1], sym_const(1)},
                                                           name + (i == 1 ? ".scale" : ".bias")));
    PLANRT_ASSIGN_OR_RETURN(affine[i - 1], c.im.ir_of(column));
    if (c.input(i).elem != x.elem) return c.error("takes scale and bias of the input's type");
  }
  PLANRT_ASSIGN_OR_RETURN(Value scaled, c.im.emit("mul", {normed.ir, affine[0]}, {}, name + ".scaled"));
  PLANRT_ASSIGN_OR_RETURN(Value shifted, c.im.emit("add", {scaled.ir, affine[1]}, {}, name + ".shifted"));
  PLANRT_ASSIGN_OR_RETURN(Value y, reshape_to_shape(c, shifted, x.shape, name));
  c.out.push_back(std::move(y));
  return {};
}

// GlobalMaxPool: the largest element of each (n, c) over the spatial dims, kept as 1s.
Status handle_global_max_pool(OpContext& c) {
  PLANRT_RETURN_IF_ERROR(require_float_input(c, 0));
  const Value& x = c.input(0);
  if (x.rank() < 3) return c.error(fmt::format("takes [N, C, spatial...]; got rank {}", x.rank()));
  std::vector<int64_t> dims(static_cast<size_t>(x.rank() - 2));
  std::iota(dims.begin(), dims.end(), int64_t{2});
  PLANRT_ASSIGN_OR_RETURN(std::string in, c.im.ir_of(x));
  PLANRT_ASSIGN_OR_RETURN(Value y, c.im.emit("reduce_max", {in}, {{"dims", dims}, {"keepdim", true}}, c.node.output(0)));
  c.out.push_back(std::move(y));
  return {};
}

// clang-format off
const OpSpec kLayoutOps[] = {
    // op                        min max outs attributes                handler
    {"DepthToSpace",              1, 1, 1, {"blocksize", "mode"},        handle_depth_to_space},
    {"EyeLike",                   1, 1, 1, {"dtype", "k"},               handle_eye_like},
    {"GlobalMaxPool",             1, 1, 1, {},                           handle_global_max_pool},
    {"InstanceNormalization",     3, 3, 1, {"epsilon"},                  handle_instance_norm},
    {"OneHot",                    3, 3, 1, {"axis"},                     handle_one_hot},
    {"SpaceToDepth",              1, 1, 1, {"blocksize"},                handle_space_to_depth},
    {"Tile",                      2, 2, 1, {},                           handle_tile},
};
// clang-format on

}  // namespace

const std::span<const OpSpec> layout_ops = kLayoutOps;

}  // namespace planrt::importers::onnx
