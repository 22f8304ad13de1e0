#include "builder/weights.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "format/safetensors.h"

namespace planrt::builder {

uint64_t NormalGenerator::next_u64() {
  // splitmix64 (Steele, Lea, Flood 2014): full period, good enough for initial weights.
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double NormalGenerator::next_normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  constexpr double kScale = 1.0 / 9007199254740992.0;  // 2^-53
  double u1 = static_cast<double>((next_u64() >> 11) + 1) * kScale;  // (0, 1]: log is finite
  double u2 = static_cast<double>(next_u64() >> 11) * kScale;        // [0, 1)
  double r = std::sqrt(-2.0 * std::log(u1));
  double theta = 6.283185307179586 * u2;
  spare_ = r * std::sin(theta);
  has_spare_ = true;
  return r * std::cos(theta);
}

uint64_t tensor_seed(uint64_t seed, std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ull;
  }
  NormalGenerator mix(seed ^ h);
  return mix.next_u64();
}


namespace {

// Owned bytes for one constant, allocated without throwing.
Result<std::shared_ptr<std::vector<uint8_t>>> allocate(const ir::Constant& c) {
  try {
    return std::make_shared<std::vector<uint8_t>>(c.nbytes());
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::OutOfMemory, "cannot allocate {} bytes for constant '{}'",
                      c.nbytes(), c.name);
  } catch (const std::length_error&) {
    return make_error(ErrorCode::OutOfMemory, "cannot allocate {} bytes for constant '{}'",
                      c.nbytes(), c.name);
  }
}

template <typename T>
void store(uint8_t* dst, size_t i, T v) {
  std::memcpy(dst + i * sizeof(T), &v, sizeof(T));
}

void fill(const ir::Constant& c, const RandomWeights& spec, uint8_t* dst) {
  size_t n = c.nbytes() / element_size(c.dtype);
  NormalGenerator gen(tensor_seed(spec.seed, c.name));
  for (size_t i = 0; i < n; ++i) {
    double v = 0;
    switch (c.init) {
      case ir::Init::Normal: v = gen.next_normal() * spec.std; break;
      case ir::Init::Zeros: v = 0; break;
      case ir::Init::Ones: v = 1; break;
    }
    switch (c.dtype) {
      case DType::F32: store(dst, i, static_cast<float>(v)); break;
      case DType::F16: store(dst, i, f32_to_f16_bits(static_cast<float>(v))); break;
      case DType::BF16: store(dst, i, f32_to_bf16_bits(static_cast<float>(v))); break;
      // Random indices would be out of range for most tables: integers are 0 (or 1).
      case DType::I32: store(dst, i, static_cast<int32_t>(c.init == ir::Init::Ones)); break;
      case DType::I64: store(dst, i, static_cast<int64_t>(c.init == ir::Init::Ones)); break;
      case DType::U8:
      case DType::Bool: store(dst, i, static_cast<uint8_t>(c.init == ir::Init::Ones)); break;
    }
  }
}

}  // namespace

Status generate_random_weights(ir::Model& model, const RandomWeights& spec,
                               const WeightProgressFn& progress) {
  if (!(spec.std >= 0) || !std::isfinite(spec.std)) {
    return make_error(ErrorCode::InvalidArgument, "random weights: std must be finite and >= 0, got {}",
                      spec.std);
  }
  WeightProgress p;
  p.stage = "generate";
  bool total_overflows = false;
  for (const ir::Constant& c : model.constants) {
    if (c.bytes.empty()) {
      total_overflows = total_overflows || __builtin_add_overflow(p.total_bytes, c.nbytes(), &p.total_bytes);
      ++p.total_tensors;
    }
  }
  if (spec.max_bytes != 0 && (total_overflows || p.total_bytes > spec.max_bytes)) {
    return make_error(ErrorCode::OutOfMemory,
                      "random weights: {} constants need {} bytes, above the limit of {} "
                      "(ReadOptions::max_random_weight_bytes)",
                      p.total_tensors, total_overflows ? std::string("more than 2^64") : std::to_string(p.total_bytes),
                      spec.max_bytes);
  }
  for (ir::Constant& c : model.constants) {
    if (!c.bytes.empty()) continue;
    PLANRT_ASSIGN_OR_RETURN(auto bytes, allocate(c));
    fill(c, spec, bytes->data());
    c.bytes = {bytes->data(), bytes->size()};
    c.owner = std::move(bytes);
    p.tensor = c.name;
    p.done_bytes += c.nbytes();
    ++p.done_tensors;
    if (progress) progress(p);
  }
  return {};
}

namespace {

std::string shape_str(std::span<const int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace

Status load_safetensors_weights(ir::Model& model, const std::string& path,
                                std::span<const std::string> names, const WeightProgressFn& progress) {
  auto opened = format::SafetensorsFile::open(path);
  if (!opened.ok()) return opened.status().with_context("weights");
  auto file = std::make_shared<format::SafetensorsFile>(std::move(opened).value());
  for (const std::string& name : names) {
    if (model.find_constant(name) != nullptr) continue;
    const format::SafetensorsTensor* t = file->find(name);
    if (t == nullptr) continue;  // reported by the check as a missing constant, with its node
    ir::Constant c;
    c.name = name;
    c.dtype = t->dtype;
    c.shape = t->shape;
    model.constants.push_back(std::move(c));
  }
  WeightProgress p;
  p.stage = "load";
  p.total_tensors = model.constants.size();
  for (const ir::Constant& c : model.constants) p.total_bytes += c.nbytes();
  for (ir::Constant& c : model.constants) {
    const format::SafetensorsTensor* t = file->find(c.name);
    if (t == nullptr) {
      return make_error(ErrorCode::NotFound, "weights: constant '{}' is not in '{}'", c.name, path);
    }
    if (t->dtype != c.dtype || t->shape != c.shape) {
      return make_error(ErrorCode::InvalidArgument,
                        "weights: tensor '{}' in '{}' is {} {} but the model declares {} {}", c.name,
                        path, dtype_name(t->dtype), shape_str(t->shape), dtype_name(c.dtype),
                        shape_str(c.shape));
    }
    if (t->data.size() != c.nbytes()) {
      return make_error(ErrorCode::InvalidArgument, "weights: tensor '{}' in '{}' holds {} bytes, expected {}",
                        c.name, path, t->data.size(), c.nbytes());
    }
    c.bytes = t->data;
    c.owner = file;
    p.tensor = c.name;
    p.done_bytes += c.nbytes();
    ++p.done_tensors;
    if (progress) progress(p);
  }
  return {};
}

}  // namespace planrt::builder
