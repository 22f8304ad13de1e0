// Graph rewrites every front end gets (the template, JSON models, the ONNX importer),
// applied to each method by lower_model before it is partitioned. A rewrite keeps the
// method's outputs (names and types); a value it removes, renames or gives another shape is
// read only by nodes it rewrites. It only fuses nodes of one run of nodes sharing backend,
// segment and device, so the partition is the one the author wrote (its segments may only
// have fewer nodes). On a method that checks, a rewrite after which it would not is undone.
//
// First the layout chains (layout_chains.h): runs of reshapes and permutes become at most
// reshape -> permute -> reshape, linears letting them meet across, so that what reaches the
// rewrites below is a head split or merge they recognise at any batch size.
//
// absorb_attention_permutes: the head split and merge around attention,
//   q = permute(xq, swap S/H), k = permute(xk, ...), v = permute(xv, ...),
//   o = scaled_dot_product_attention(q, k, v), y = permute(o, swap S/H)
// (swap S/H: dims [.., S, H, D] <-> [.., H, S, D], e.g. [0, 2, 1, 3]) becomes
//   y = scaled_dot_product_attention(xq, xk, xv, layout = "bshd")
// (kernels/attention_layout.h): the attention kernels read the projections' rows and write
// the output projection's input where they lie, four activation copies fewer per block.
// A permute that another node also reads, or that is a method output, stays; so does one
// that another attention's rewrite already absorbed (chained attentions, e.g. axial).
//
// The typed rewrites (each on the value types the one before left):
// lead_head_splits_with_their_permute and keep_unit_dims_in_head_merges (first, so that
// absorb_attention_permutes runs on their result too): torch 2's nn.MultiheadAttention
// export splits heads of a unit batch as reshape [S, H, D] -> permute [H, S, D] -> reshape
// [1, H, S, D] and merges them with permute(2, 0, 1, 3) [1, H, S, D] -> [S, 1, H, D]: the
// first becomes reshape [1, S, H, D] -> permute [1, H, S, D] (the reshape reading the
// split's source directly), the second permute [1, S, H, D] -> reshape [S, 1, H, D], the
// same bytes in the forms the attention rewrites below take in place.
// move_row_reshapes_past_linears: y = reshape(x) keeping the last dim, read only by linears
// whose outputs only reshapes read: the linears read x (rows map alone, in the same order),
// so an exporter's [1, S, E] <-> [S, 1, E] transposes no longer separate a projection from
// the attention's head reshapes.
// absorb_attention_reshapes: a bshd attention whose q, k, v are reshapes [.., S, H * D] ->
// [.., S, H, D] read only by it (the flat operand may have more leading unit dims), and whose
// output only reshapes read, takes the flat operands itself (attribute heads = H) and writes
// [.., S, H * Dv]: the same bytes, three or four copies fewer (the output's reshape goes
// when it makes exactly that type).
// drop_identity_reshapes: a reshape to the type it reads (left by the moves above), not a
// method output, whose readers all follow in its run, goes.
//
// pack_attention_projections: an attention with attribute heads whose q, k, v are linears of
// one input over constant [N, K] weights (biases all or none), each read only by it, reads one
// linear over the stacked [3N, K] weight (and [3N] bias) instead: one GEMM three times as wide
// (small M products run far below the GPU's peak; one launch instead of three). The stacked
// constants are made once per model (RewriteState) and share the sources' bytes when those lie
// back to back (an ONNX in_proj split into q, k, v by the importer); otherwise they are a copy
// the program stores in place of the three (beside them if another method still reads them).
//
// fold_scales_into_linears (scale_fold.h): mul(linear(x, W, b), s) with s a constant
// per-feature scale becomes linear(x, s * W, s * b), the products made at build (ConvNeXt's
// layer scale, once the channels-last rewrite has put it right after its linear).
//
// fuse_host_activations: on the host, a conv2d whose output only a relu, clip, hard_sigmoid
// or hard_swish of its run reads, and a linear whose output only a relu or gelu reads, take
// it as their `activation` (with the op's own attributes): oneDNN applies it as a post-op
// while the output is in cache, one pass over the activations fewer (mobilenet_v3's
// hard_swish after most convolutions, the GELU after every FFN product). Not on a GPU:
// cuDNN's call is followed by a separate bias kernel there anyway, and cuBLASLt's GELU
// epilogue is the tanh form, not torch's exact one.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "builder/graph.h"
#include "builder/made_names.h"
#include "builder/scale_fold.h"
#include "planrt/core/result.h"

namespace planrt::builder {

// Which optional rewrites lower_model applies (the attention one above always runs).
struct RewriteOptions {
  // Convolution regions run channels-last inside (layout.h); off keeps every tensor as the
  // model wrote it.
  bool channels_last = true;
  // Constants of equal dtype, shape and bytes stored once (lower.cpp's constant table). Off
  // for a program whose weights go to a file beside it: that file is read by name, and a
  // user may replace it with other weights, which need every name of the model.
  bool merge_equal_constants = true;
};

// What the rewrites of one model's methods share: the names taken in the model (made names
// meet none; one set for the packing and the scale fold), the stacked projections made so
// far (sources -> weight, bias names) and the scaled constants.
struct RewriteState {
  MadeNames names;
  std::map<std::string, std::vector<std::string>, std::less<>> packed;
  ScaleFoldState scales;
};

// The rewrites above, in order, on `method` of `model` (stacked weights are appended to
// model.constants); returns how many nodes they rewrote. The two that need value types skip
// a method that does not check (the caller reports that).
int rewrite_method(ir::Model& model, ir::Method& method, RewriteState& state);

}  // namespace planrt::builder
