// Layout chains: the reshapes and permutes an exporter writes between a projection and an
// attention (or an attention and its output projection) when the batch is a named dim, so
// that no transpose of it is a plain reshape (torch 2's dynamo export of
// nn.MultiheadAttention: [B, S, E] -> [S, B, E] -> projection -> [S, B * H, D] -> [B * H, S, D]
// -> [B, H, S, D], and back). Part of rewrite_method (rewrite.h); each pass keeps the
// method's outputs and only moves or fuses nodes of one run sharing a place.
//
// simplify_layout_chains: a chain of reshape and permute nodes, each read only by the next,
//   moves whole factors of its first input's dims; aligning each reshape's dims against
//   those factors (a dim of one is split where a later reshape needs a part of it) finds
//   them, and the chain becomes at most reshape -> permute -> reshape: one copy, not one per
//   permute. Taken when it has fewer permutes, or as many and fewer nodes. A chain whose
//   dims do not factor so (a product of two named dims, a size that divides none) stays.
// move_permutes_past_linears: x' = permute(x) keeping the last dim, read only by linears (as
//   their input) whose outputs a layout chain holding a permute reads: each linear reads x
//   and its output is permuted after it (a linear maps each row alone), so that the two
//   permutes meet in one chain.
// move_layout_chains_before_linears: y = linear(x), x made by a layout chain holding a
//   permute, y read only by a chain holding a permute that keeps the last dim whole and
//   last: the chain runs on x instead (its reshapes with x's last dim), so that it meets x's.
//
// The two moves pay only when the chains they join simplify; rewrite_method keeps them only
// when the method ends with fewer permutes (count_permutes).
#pragma once

#include "builder/check.h"
#include "builder/graph.h"

namespace planrt::builder {

int simplify_layout_chains(ir::Method& method, const ir::CheckedMethod& types);
int move_permutes_past_linears(ir::Method& method, const ir::CheckedMethod& types);
int move_layout_chains_before_linears(ir::Method& method, const ir::CheckedMethod& types);
int count_permutes(const ir::Method& method);

}  // namespace planrt::builder
