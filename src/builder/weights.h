// Weights of a Model: random ones made from a seed, or tensors of a safetensors file.
//
// Random weights are deterministic across machines and compilers: each tensor draws from
// its own splitmix64 stream seeded by (seed, tensor name), turned into normals with
// Box-Muller in double precision and rounded to the tensor's dtype. A tensor's bytes
// therefore depend only on the seed, std, its name, dtype, shape and init, never on the
// order constants are declared in. std::normal_distribution is not used: its output is
// implementation-defined.
//
// Loaded weights stay in the read-only mapping of the file (shared by every constant that
// points into it); nothing is copied. Errors name the tensor, the file and what differs.
// Allocation failures return OutOfMemory with the tensor and its byte count.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "builder/graph.h"
#include "planrt/builder/builder.h"
#include "planrt/core/result.h"

namespace planrt::builder {

// A stream of standard normal samples from a 64-bit seed.
class NormalGenerator {
 public:
  explicit NormalGenerator(uint64_t seed) : state_(seed) {}
  uint64_t next_u64();
  double next_normal();

 private:
  uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

// The seed of one tensor's stream.
uint64_t tensor_seed(uint64_t seed, std::string_view name);


struct RandomWeights {
  uint64_t seed = 0;
  double std = 0.02;
  // ReadOptions::max_random_weight_bytes (0: none).
  uint64_t max_bytes = 0;
};

// Makes the bytes of every constant that has none yet, following its Init. OutOfMemory,
// before allocating anything, when they add up to more than spec.max_bytes.
Status generate_random_weights(ir::Model& model, const RandomWeights& spec,
                               const WeightProgressFn& progress);

// Points every constant of the model at the tensor of that name in the safetensors file at
// `path`. Constants with a declared dtype/shape must match the file. `names` lists
// constants to add from the file (their dtype and shape come from the file) when the model
// did not declare them.
Status load_safetensors_weights(ir::Model& model, const std::string& path,
                                std::span<const std::string> names, const WeightProgressFn& progress);

}  // namespace planrt::builder
