// The channels-last rewrite: convolutions and what lies between them run on NHWC tensors,
// the model's boundary keeps the NCHW it was written with.
//
// Why: oneDNN's CPU convolutions and cuDNN's tensor-core ones (bf16 above all) run on
// channels-last tensors; given NCHW they transpose every call (on the host 34-40% of a
// mobilenet's or resnet18's time went to those reorders, docs/performance.md) or pick slower
// kernels. Converting each convolution alone would only move those transposes into the
// graph; the rewrite keeps a whole region channels-last so that they happen at its edges.
//
// Where: per run of consecutive nodes that share backend, segment and device (so the
// partition is the author's; a run's node list may grow by the permutes at its edges), the
// runs where channels-last was measured faster (docs/performance.md, "Channels-last
// convolutions"): every run on the host (oneDNN); on a GPU a run with two or more 16-bit
// convolutions (cuDNN's tensor-core kernels want NHWC; depthwise ones then run planrt's
// kernel), or an f32 run with two or more whose model permutes NCHW <-> NHWC at least
// as often as it has dense convolutions (cuDNN's NHWC f32 kernels were slower than its NCHW
// ones on the H200; the permutes go). Other runs are left as written.
//
// Algorithm, per run chosen:
//   1. every conv2d over a constant rank-4 weight becomes layout "nhwc" with the weight
//      permuted once at build to [K, KH, KW, C/groups] (a derived constant "<w>#nhwc");
//   2. walking the run in order, a value keeps a channels-last twin once a node produced it
//      so; a node whose inputs have twins runs on the twins when it can without changing its
//      meaning: elementwise ops (broadcast operands permuted the same way: constants at build,
//      values that only move size-1 dims by a reshape, others by a permute), the pools
//      (layout "nhwc"), concat / slice / pad / reduce_mean (their axes renumbered), a permute
//      (composed with the twin's; one that undoes it disappears), a reshape that reads the
//      same element order;
//   3. an NCHW value still read in NCHW (by another node, another run or as a method output)
//      is made from its twin by one permute (or a reshape when only size-1 dims move) right
//      after the twin's producer; permutes and reshapes nobody reads are dropped.
// The input permute of the region's first convolution and those output permutes are the
// only copies it adds. A run without a convolution it can convert is left as it is.
//
// Limits: conv2d whose weight is a value (not a constant) stays NCHW; normalisations and
// softmax over the channel dim of an NCHW tensor are not converted (their twins are
// permuted back first); reshapes that reorder elements end the region.
#pragma once

#include <map>
#include <set>
#include <string>

#include "builder/graph.h"
#include "builder/made_names.h"
#include "planrt/core/result.h"

namespace planrt::builder {

// What the rewrites of one model's methods share: every name taken in the model (so that a
// made name meets none), and the constants derived so far (source -> "<source>#nhwc...", made
// once for every method that needs it). One per model; filled by the first call.
struct ChannelsLastNames {
  MadeNames names;
  std::map<std::string, std::string, std::less<>> derived;
};

// Rewrites `method` of `model` as above. Derived constants are appended to
// model.constants. Returns how many conv2d nodes now run channels-last; a method that does
// not check (the caller reports that) is left as it is. OutOfMemory if a derived constant
// cannot be made.
Result<int> rewrite_channels_last(ir::Model& model, ir::Method& method, ChannelsLastNames& names);

}  // namespace planrt::builder
