// The op table of docs/design.md §9. Arity only: shapes and dtypes are each kernel's business.
#include "kernels/kernel.h"

namespace planrt::kernels {
namespace {

// clang-format off
constexpr OpInfo kOps[] = {
    // name                          min max outputs
    {"linear",                        2,  3, 1},  // x, weight[out, in], bias[out]?
    {"matmul",                        2,  2, 1},
    {"add",                           2,  2, 1},
    {"sub",                           2,  2, 1},
    {"mul",                           2,  2, 1},
    {"div",                           2,  2, 1},
    {"layer_norm",                    1,  3, 1},  // x, weight?, bias?
    {"rms_norm",                      1,  2, 1},  // x, weight?
    {"softmax",                       1,  1, 1},
    {"gelu",                          1,  1, 1},
    {"relu",                          1,  1, 1},
    {"silu",                          1,  1, 1},
    {"sqrt",                          1,  1, 1},
    {"neg",                           1,  1, 1},
    {"exp",                           1,  1, 1},
    {"erf",                           1,  1, 1},
    {"tanh",                          1,  1, 1},
    {"sigmoid",                       1,  1, 1},
    {"pow",                           2,  2, 1},  // base, exponent (broadcast)
    {"reduce_mean",                   1,  1, 1},
    {"reduce_sum",                    1,  1, 1},
    {"reduce_max",                    1,  1, 1},
    {"reduce_min",                    1,  1, 1},
    {"reduce_prod",                   1,  1, 1},
    {"argmax",                        1,  1, 1},
    {"argmin",                        1,  1, 1},
    {"cumsum",                        1,  1, 1},
    {"log_softmax",                   1,  1, 1},
    {"reshape",                       1,  1, 1},
    {"permute",                       1,  1, 1},
    {"transpose",                     1,  1, 1},
    {"scaled_dot_product_attention",  1,  4, 1},  // q, k, v, mask?; or packed qkv, -, -, mask? (attribute heads)
    {"embedding",                     2,  2, 1},  // ids, table[V, D]
    {"concat",                        1, -1, 1},  // xs... (variadic)
    {"slice",                         1,  1, 1},
    {"conv2d",                        2,  3, 1, 1},  // x, weight, bias?; y, workspace?
    {"max_pool2d",                    1,  1, 1},
    {"avg_pool2d",                    1,  1, 1},
    {"clip",                          1,  1, 1},
    {"hard_sigmoid",                  1,  1, 1},
    {"hard_swish",                    1,  1, 1},
    {"pad",                           1,  1, 1},
    {"expand",                        1,  1, 1},  // x broadcast to the output's shape
    {"gather_elements",               2,  2, 1},  // x, indices
    {"size",                          1,  1, 1},  // x (only its shape is read)
    {"take",                          2,  2, 1},  // x, indices
    {"resize",                        1,  1, 1},  // x (sizes, scales, roi are attributes)
    // The typed elementwise family (kernels/elementwise_ops.h).
    {"cos",                           1,  1, 1},
    {"sin",                           1,  1, 1},
    {"log",                           1,  1, 1},
    {"floor",                         1,  1, 1},
    {"ceil",                          1,  1, 1},
    {"round",                         1,  1, 1},
    {"reciprocal",                    1,  1, 1},
    {"tan",                           1,  1, 1},
    {"acos",                          1,  1, 1},
    {"asin",                          1,  1, 1},
    {"atan",                          1,  1, 1},
    {"sinh",                          1,  1, 1},
    {"cosh",                          1,  1, 1},
    {"asinh",                         1,  1, 1},
    {"acosh",                         1,  1, 1},
    {"atanh",                         1,  1, 1},
    {"softplus",                      1,  1, 1},
    {"softsign",                      1,  1, 1},
    {"mish",                          1,  1, 1},
    {"leaky_relu",                    1,  1, 1},
    {"elu",                           1,  1, 1},
    {"celu",                          1,  1, 1},
    {"selu",                          1,  1, 1},
    {"thresholded_relu",              1,  1, 1},
    {"shrink",                        1,  1, 1},
    {"abs",                           1,  1, 1},
    {"sign",                          1,  1, 1},
    {"isnan",                         1,  1, 1},
    {"isinf",                         1,  1, 1},
    {"logical_not",                   1,  1, 1},
    {"equal",                         2,  2, 1},
    {"less",                          2,  2, 1},
    {"less_equal",                    2,  2, 1},
    {"greater",                       2,  2, 1},
    {"greater_equal",                 2,  2, 1},
    {"logical_and",                   2,  2, 1},
    {"logical_or",                    2,  2, 1},
    {"logical_xor",                   2,  2, 1},
    {"minimum",                       2,  2, 1},
    {"maximum",                       2,  2, 1},
    {"mod",                           2,  2, 1},
    {"prelu",                         2,  2, 1},
    {"where",                         3,  3, 1},  // cond, a, b
    {"cast",                          1,  1, 1},
};
// clang-format on

}  // namespace

const OpInfo* find_op(std::string_view name) {
  for (const OpInfo& op : kOps) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

std::span<const OpInfo> all_ops() { return kOps; }

}  // namespace planrt::kernels
