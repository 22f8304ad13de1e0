// Random inputs for `planrt run --random-inputs SEED`: deterministic for a seed on every
// machine (own generator, not <random>'s implementation-defined distributions).
// Floating inputs are standard normal; integer inputs (ids) are uniform in [0, 8).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "planrt/runtime/tensor.h"
#include "planrt/runtime/tensor_spec.h"

namespace planrt::cli {

// Dims named in `dim_values` take that value, the others their maximum. A value outside
// the dim's bounds is passed through: execute reports it with the bounds.
Result<Tensor> random_input(const TensorSpec& spec, std::span<const DimSpec> dims,
                            const std::map<std::string, int64_t>& dim_values, uint64_t seed);

}  // namespace planrt::cli
