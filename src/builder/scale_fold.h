// Folding a constant per-feature scale into the linear before it, at build time:
//   y = mul(linear(x, W, b), s)   (s constant: one value per output feature, or one for all)
// becomes
//   y = linear(x, W', b')         W'[n, :] = s[n] * W[n, :], b'[n] = s[n] * b[n]
// one pass over the activations fewer. ConvNeXt's layer scale is this product after its
// second pointwise linear (once the channels-last rewrite has removed the permute between
// them): 18 multiplies of convnext_tiny, each a full read and write of the block's output.
//
// Conditions: the linear's output is read only by the mul, in the same run of nodes (same
// backend, segment and device); W [N, K] and b [N] (if any) are constants with their bytes,
// in the dtype of s and of the activations, f32, bf16 or f16; s has N elements along the last
// dim and ones elsewhere (or is a single value), and the mul's output type is the linear's.
// The linear takes the mul's output name, so readers and method outputs are unchanged.
//
// Numerics: W' and b' are the products computed in f32 and rounded once to the dtype, so
// the output is x W' + b' where it was round(x W + b) * s: the rounding moves from the
// product's output onto the weights (a few ulp in f32; in bf16 or f16 one rounding of a
// weight instead of one of an output). The scaled constants are new (the originals stay for
// their other readers), made once per model for a (W, s) pair.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>

#include "builder/check.h"
#include "builder/graph.h"
#include "builder/made_names.h"

namespace planrt::builder {

// The scaled constants made so far ((source, scale) -> name).
struct ScaleFoldState {
  std::map<std::pair<std::string, std::string>, std::string> made;
};

// Rewrites every foldable mul of `method` as above (new constants appended to
// model.constants, named through `names`, the model's set shared with the other rewrites);
// returns how many it folded.
int fold_scales_into_linears(ir::Model& model, ir::Method& method, const ir::CheckedMethod& types,
                             MadeNames& names, ScaleFoldState& state);

}  // namespace planrt::builder
