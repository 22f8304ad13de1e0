#include "random_inputs.h"

#include <cmath>
#include <vector>

namespace planrt::cli {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double uniform01(uint64_t& state) {
  return (static_cast<double>(splitmix64(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

}  // namespace

Result<Tensor> random_input(const TensorSpec& spec, std::span<const DimSpec> dims,
                            const std::map<std::string, int64_t>& dim_values, uint64_t seed) {
  std::vector<int64_t> bound(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    auto it = dim_values.find(dims[i].name);
    bound[i] = it != dim_values.end() ? it->second : dims[i].max;
  }
  PLANRT_ASSIGN_OR_RETURN(Shape shape, concrete_shape(spec.shape, bound, dims));
  for (int i = 0; i < shape.rank(); ++i) {
    if (shape[i] < 0) {
      return make_error(ErrorCode::InvalidArgument, "dim {} of input '{}' is negative ({})", i,
                        spec.name, shape[i]);
    }
  }
  PLANRT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(spec.dtype, shape));
  uint64_t state = seed * 0x2545F4914F6CDD1Dull + 1;
  int64_t n = t.numel();
  auto normal = [&state] {  // Box-Muller: one normal sample per pair of uniforms
    double r = std::sqrt(-2.0 * std::log(uniform01(state)));
    return static_cast<float>(r * std::cos(6.283185307179586 * uniform01(state)));
  };
  switch (spec.dtype) {
    case DType::F32: {
      float* p = static_cast<float*>(t.data());
      for (int64_t i = 0; i < n; ++i) p[i] = normal();
      return t;
    }
    case DType::BF16: {  // the same samples as f32, rounded
      auto* p = static_cast<uint16_t*>(t.data());
      for (int64_t i = 0; i < n; ++i) p[i] = f32_to_bf16_bits(normal());
      return t;
    }
    case DType::F16: {  // the same samples as f32, rounded
      auto* p = static_cast<uint16_t*>(t.data());
      for (int64_t i = 0; i < n; ++i) p[i] = f32_to_f16_bits(normal());
      return t;
    }
    case DType::I32: {
      int32_t* p = static_cast<int32_t*>(t.data());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(splitmix64(state) % 8);
      return t;
    }
    case DType::I64: {
      int64_t* p = static_cast<int64_t*>(t.data());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(splitmix64(state) % 8);
      return t;
    }
    case DType::U8:
    case DType::Bool: {  // bool: 0 or 1; u8: 0..7 like the other integers
      auto* p = static_cast<uint8_t*>(t.data());
      const uint64_t range = spec.dtype == DType::Bool ? 2 : 8;
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(splitmix64(state) % range);
      return t;
    }
    default:
      return make_error(ErrorCode::NotSupported,
                        "random values for a {} input ('{}') are not supported: pass --input",
                        dtype_name(spec.dtype), spec.name);
  }
}

}  // namespace planrt::cli
