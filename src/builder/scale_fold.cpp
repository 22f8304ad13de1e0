#include "builder/scale_fold.h"

#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "builder/rewrite_support.h"
#include "planrt/core/dtype.h"

namespace planrt::builder {
namespace {

float load(const ir::Constant& c, int64_t i) {
  if (c.dtype == DType::BF16 || c.dtype == DType::F16) {
    uint16_t bits;
    std::memcpy(&bits, c.bytes.data() + 2 * i, 2);
    return c.dtype == DType::BF16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
  }
  float v;
  std::memcpy(&v, c.bytes.data() + 4 * i, 4);
  return v;
}

void store(uint8_t* out, DType dtype, int64_t i, float v) {
  if (dtype == DType::BF16 || dtype == DType::F16) {
    const uint16_t bits = dtype == DType::BF16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
    std::memcpy(out + 2 * i, &bits, 2);
  } else {
    std::memcpy(out + 4 * i, &v, 4);
  }
}

bool has_bytes(const ir::Constant& c) { return c.bytes.size() == c.nbytes(); }

// The elements of s as a per-feature scale of n features: n along the last dim and ones
// elsewhere, or a single value (0 when it is neither).
int64_t scale_count(const ir::Constant& s, int64_t n) {
  int64_t total = 1;
  for (int64_t d : s.shape) total *= d;
  if (total == 1) return 1;
  if (s.shape.empty() || s.shape.back() != n || total != n) return 0;
  return n;
}

// source * scale per row (rows of `row` elements, one scale value each), as a new constant
// of source's dtype; nullopt when memory runs out.
std::optional<ir::Constant> scaled(const ir::Constant& source, const ir::Constant& scale, int64_t rows, int64_t row,
                                   std::string name) {
  auto bytes = std::shared_ptr<std::vector<uint8_t>>(new (std::nothrow) std::vector<uint8_t>());
  if (bytes == nullptr) return std::nullopt;
  try {
    bytes->resize(source.nbytes());
  } catch (const std::bad_alloc&) {
    return std::nullopt;
  }
  const bool one_value = scale_count(scale, rows) == 1;
  for (int64_t r = 0; r < rows; ++r) {
    const float s = load(scale, one_value ? 0 : r);
    for (int64_t k = 0; k < row; ++k) store(bytes->data(), source.dtype, r * row + k, s * load(source, r * row + k));
  }
  ir::Constant c;
  c.name = std::move(name);
  c.dtype = source.dtype;
  c.shape = source.shape;
  c.init = source.init;
  c.bytes = std::span<const uint8_t>(bytes->data(), bytes->size());
  c.owner = std::shared_ptr<const void>(std::move(bytes));
  return c;
}

}  // namespace

int fold_scales_into_linears(ir::Model& model, ir::Method& method, const ir::CheckedMethod& types,
                             MadeNames& names, ScaleFoldState& state) {
  names.note(model, method);
  auto fresh = [&](const std::string& base) { return names.fresh(base, "#scaled"); };
  // A constant made for (source, scale), or made now; empty when it cannot be.
  auto scaled_name = [&](const std::string& source, const std::string& scale, int64_t rows, int64_t row) {
    const auto key = std::make_pair(source, scale);
    if (auto it = state.made.find(key); it != state.made.end()) return it->second;
    std::optional<ir::Constant> c =
        scaled(*model.find_constant(source), *model.find_constant(scale), rows, row, fresh(source));
    if (!c) return std::string();
    state.made.emplace(key, c->name);
    std::string name = c->name;
    model.constants.push_back(std::move(*c));
    return name;
  };
  Uses uses(method);
  std::vector<bool> removed(method.nodes.size(), false);
  int folded = 0;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    const ir::Node& mul = method.nodes[i];
    if (mul.op != "mul" || mul.inputs.size() != 2 || mul.outputs.size() != 1 || !mul.attrs.empty()) continue;
    const int scale_at = model.find_constant(mul.inputs[0]) != nullptr ? 0 : 1;
    const std::string& scale_name = mul.inputs[scale_at];
    const std::string& value = mul.inputs[1 - scale_at];
    const ir::Constant* scale = model.find_constant(scale_name);
    auto made = uses.producer.find(value);
    if (scale == nullptr || model.find_constant(value) != nullptr || made == uses.producer.end() ||
        removed[made->second] || uses.read_count(value) != 1) {
      continue;
    }
    ir::Node& lin = method.nodes[made->second];
    if (lin.op != "linear" || !lin.attrs.empty() || lin.inputs.size() < 2 || lin.inputs.size() > 3 ||
        !one_run(method, removed, made->second, i, mul)) {
      continue;
    }
    const ir::Constant* w = model.find_constant(lin.inputs[1]);
    const bool has_bias = lin.inputs.size() == 3 && !lin.inputs[2].empty();
    const ir::Constant* b = has_bias ? model.find_constant(lin.inputs[2]) : nullptr;
    auto in_type = types.values.find(value);
    auto out_type = types.values.find(mul.outputs[0]);
    if (w == nullptr || w->shape.size() != 2 || (has_bias && b == nullptr) || in_type == types.values.end() ||
        out_type == types.values.end() || !(in_type->second == out_type->second)) {
      continue;
    }
    const DType dtype = w->dtype;
    const int64_t n = w->shape[0], k = w->shape[1];
    if ((dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16) || scale->dtype != dtype || in_type->second.dtype != dtype ||
        (b != nullptr && (b->dtype != dtype || b->shape != std::vector<int64_t>{n})) || scale_count(*scale, n) == 0 ||
        !has_bytes(*w) || !has_bytes(*scale) || (b != nullptr && !has_bytes(*b))) {
      continue;
    }
    // Copies of the names: the constants move when the model's vector grows below, so no
    // pointer to one is used past this point.
    const std::string w_name = w->name, b_name = b != nullptr ? b->name : std::string();
    w = b = scale = nullptr;
    const std::string new_w = scaled_name(w_name, scale_name, n, k);
    const std::string new_b = has_bias ? scaled_name(b_name, scale_name, n, 1) : std::string();
    if (new_w.empty() || (has_bias && new_b.empty())) continue;
    lin.inputs = {lin.inputs[0], new_w};
    if (has_bias) lin.inputs.push_back(new_b);
    lin.outputs = mul.outputs;
    removed[i] = true;
    ++folded;
  }
  if (folded > 0) drop_removed(method, removed);
  return folded;
}

}  // namespace planrt::builder
