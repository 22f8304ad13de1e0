#include "builder/sym_shape.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include <fmt/format.h>

namespace planrt::builder::ir {

Result<Monomial> numel(const SymShape& shape) {
  Monomial m;
  for (const Dim& d : shape) {
    if (__builtin_mul_overflow(m.coeff, d.value, &m.coeff)) {
      return make_error(ErrorCode::InvalidArgument, "element count overflows 64 bits");
    }
    if (!d.is_static()) m.dims.push_back(d.dim);
  }
  std::sort(m.dims.begin(), m.dims.end());
  return m;
}

Result<Dim> divide(const Monomial& a, const Monomial& b) {
  if (b.coeff == 0 || a.coeff % b.coeff != 0) {
    return make_error(ErrorCode::InvalidArgument, "does not divide");
  }
  std::vector<int32_t> rest;
  std::set_difference(a.dims.begin(), a.dims.end(), b.dims.begin(), b.dims.end(),
                      std::back_inserter(rest));
  if (!std::includes(a.dims.begin(), a.dims.end(), b.dims.begin(), b.dims.end()) ||
      rest.size() > 1) {
    return make_error(ErrorCode::InvalidArgument, "is not a multiple of one named dim");
  }
  int64_t coeff = a.coeff / b.coeff;
  return rest.empty() ? Dim::fixed(coeff) : Dim::named(rest[0], coeff);
}

std::string monomial_to_string(const Monomial& m, std::span<const DimDecl> dims) {
  std::string out = std::to_string(m.coeff);
  for (int32_t d : m.dims) {
    out += "*";
    out += static_cast<size_t>(d) < dims.size() ? dims[d].name : fmt::format("dim#{}", d);
  }
  return out;
}

bool broadcast_dim(Dim a, Dim b, Dim* out) {
  if (a == b || (b.is_static() && b.value == 1)) {
    *out = a;
    return true;
  }
  if (a.is_static() && a.value == 1) {
    *out = b;
    return true;
  }
  return false;
}

Result<SymShape> broadcast_shapes(const SymShape& a, const SymShape& b, std::span<const DimDecl> dims) {
  size_t rank = std::max(a.size(), b.size());
  SymShape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    Dim da = i < rank - a.size() ? Dim::fixed(1) : a[i - (rank - a.size())];
    Dim db = i < rank - b.size() ? Dim::fixed(1) : b[i - (rank - b.size())];
    if (!broadcast_dim(da, db, &out[i])) {
      return make_error(ErrorCode::InvalidArgument,
                        "shapes {} and {} do not broadcast (dim {} of the result: {} vs {})",
                        shape_to_string(a, dims), shape_to_string(b, dims), i,
                        shape_to_string({da}, dims), shape_to_string({db}, dims));
    }
  }
  return out;
}

bool add_dims(Dim a, Dim b, Dim* out) {
  if (a.dim != b.dim) return false;
  *out = Dim{a.value + b.value, a.dim};
  return true;
}

bool multiply_dims(Dim a, Dim b, Dim* out) {
  int64_t value = 0;
  if ((!a.is_static() && !b.is_static()) || __builtin_mul_overflow(a.value, b.value, &value)) return false;
  *out = Dim{value, a.is_static() ? b.dim : a.dim};
  return true;
}

bool divide_dims(Dim a, Dim b, Dim* out) {
  if (b.value <= 0) return false;
  Result<Monomial> ma = numel(SymShape{a});
  Result<Monomial> mb = numel(SymShape{b});
  if (!ma.ok() || !mb.ok()) return false;
  Result<Dim> q = divide(*ma, *mb);
  if (!q.ok()) return false;
  *out = *q;
  return true;
}

int64_t min_size(Dim d, std::span<const DimDecl> dims) {
  int64_t out = d.value;
  if (!d.is_static() && __builtin_mul_overflow(d.value, dims[d.dim].min, &out)) return INT64_MAX;
  return out;
}

int64_t max_size(Dim d, std::span<const DimDecl> dims) {
  int64_t out = d.value;
  if (!d.is_static() && __builtin_mul_overflow(d.value, dims[d.dim].max, &out)) return INT64_MAX;
  return out;
}

}  // namespace planrt::builder::ir
