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
#include <span>
#include <string_view>

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

// softmax along `dim`: x viewed as [outer, n, inner] (outer is 0 for an empty x).
struct SoftmaxPlan {
  int64_t outer = 0;
  int64_t n = 0;
  int64_t inner = 0;
};
Result<SoftmaxPlan> plan_softmax(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                 std::span<const TensorView> outputs);

// reduce_mean over the adjacent dims `dims`: x viewed as [outer, n, inner], each (o, i)
// line of n averaged. The output has x's shape with those dims either kept as 1 or dropped
// (both are accepted: the shape is the caller's, as for reshape).
struct ReducePlan {
  int64_t outer = 0;
  int64_t n = 0;
  int64_t inner = 0;
};
Result<ReducePlan> plan_reduce_mean(const OpAttrs& attrs, std::span<const TensorView> inputs,
                                    std::span<const TensorView> outputs);

// scaled_dot_product_attention: `heads` independent [sq, d] x [sk, d] -> [sq, dv] problems.
struct AttentionPlan {
  int64_t heads = 0;
  int64_t sq = 0;
  int64_t sk = 0;
  int64_t d = 0;
  int64_t dv = 0;
  bool causal = false;
  double scale = 0.0;
  bool fused = true;  // attribute `fused`: may the CUDA kernel skip the score matrix
};
Result<AttentionPlan> plan_attention(const OpAttrs& attrs, std::span<const TensorView> inputs,
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

}  // namespace planrt::kernels
