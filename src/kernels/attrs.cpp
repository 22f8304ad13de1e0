// OpAttrs accessors. A present attribute of the wrong type is an error, never a silent
// fallback: a model that says {"dim": "1"} is wrong, and running softmax over the default
// dim would hide that.
#include <type_traits>

#include "kernels/kernel.h"

namespace planrt::kernels {
namespace {

std::string_view type_name(const AttrValue& v) {
  switch (v.index()) {
    case 0:
      return "an int";
    case 1:
      return "a float";
    case 2:
      return "a string";
    case 3:
      return "a list of ints";
    case 4:
      return "a bool";
  }
  return "an unknown type";
}

Status wrong_type(std::string_view name, const AttrValue& v, std::string_view expected) {
  return make_error(ErrorCode::InvalidArgument, "attribute '{}' is {}, expected {}", name,
                    type_name(v), expected);
}

template <typename T>
Result<T> get_as(const std::map<std::string, AttrValue, std::less<>>& values, std::string_view name,
                 T fallback, std::string_view expected) {
  auto it = values.find(name);
  if (it == values.end()) return fallback;
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  return wrong_type(name, it->second, expected);
}

}  // namespace

bool OpAttrs::has(std::string_view name) const { return values_.find(name) != values_.end(); }

Result<int64_t> OpAttrs::get_int(std::string_view name, int64_t fallback) const {
  return get_as<int64_t>(values_, name, fallback, "an int");
}

Result<double> OpAttrs::get_float(std::string_view name, double fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  if (const double* v = std::get_if<double>(&it->second)) return *v;
  // JSON writes 1 for 1.0; an int where a float is expected is what the author meant.
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return static_cast<double>(*v);
  return wrong_type(name, it->second, "a float");
}

Result<bool> OpAttrs::get_bool(std::string_view name, bool fallback) const {
  return get_as<bool>(values_, name, fallback, "a bool");
}

Result<std::string> OpAttrs::get_string(std::string_view name, std::string fallback) const {
  return get_as<std::string>(values_, name, std::move(fallback), "a string");
}

Result<std::vector<int64_t>> OpAttrs::get_ints(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    return make_error(ErrorCode::NotFound, "attribute '{}' is required and missing", name);
  }
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  return wrong_type(name, it->second, "a list of ints");
}

}  // namespace planrt::kernels
