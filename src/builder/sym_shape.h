// Arithmetic on symbolic shapes (graph.h Dim): what shape inference needs and no more.
//
// A Dim is `value` or `value * dims[dim]`; only results of that form are expressible in a
// program (program.fbs DimRef). Anything else (a product or a sum of two different named
// dims, a quotient that leaves a remainder) is an error saying so; the caller adds the
// node. Pure functions, no state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "builder/graph.h"
#include "planrt/core/result.h"

namespace planrt::builder::ir {

// coeff * product of named dims (a multiset, sorted): the element count of a shape.
struct Monomial {
  int64_t coeff = 1;
  std::vector<int32_t> dims;
  friend bool operator==(const Monomial&, const Monomial&) = default;
};

Result<Monomial> numel(const SymShape& shape);
// a / b when it is a Dim; an error otherwise.
Result<Dim> divide(const Monomial& a, const Monomial& b);
std::string monomial_to_string(const Monomial& m, std::span<const DimDecl> dims);

// PyTorch broadcasting of two sizes: equal, or one of them the constant 1.
bool broadcast_dim(Dim a, Dim b, Dim* out);
// Right-aligned broadcasting of two shapes; the error names both shapes.
Result<SymShape> broadcast_shapes(const SymShape& a, const SymShape& b, std::span<const DimDecl> dims);
// a + b (concatenation): both constant, or multiples of the same named dim.
bool add_dims(Dim a, Dim b, Dim* out);
// a * b: at most one of them named.
bool multiply_dims(Dim a, Dim b, Dim* out);
// a / b without remainder: b constant, or both multiples of the same named dim.
bool divide_dims(Dim a, Dim b, Dim* out);

// The smallest and largest size `d` takes within its dim's bounds.
int64_t min_size(Dim d, std::span<const DimDecl> dims);
int64_t max_size(Dim d, std::span<const DimDecl> dims);

}  // namespace planrt::builder::ir
