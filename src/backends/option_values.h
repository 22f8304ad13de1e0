// Option values the built-in backends accept, parsed the same way everywhere so a user sees
// one rule and one message. Pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "planrt/core/result.h"

namespace planrt::backends {

// "true"/"1" or "false"/"0"; InvalidArgument naming the key and the value otherwise.
Result<bool> parse_bool_option(std::string_view key, std::string_view value);

// The CUDA linears' cuBLASLt algorithm choice ("gemm_algorithm", kernels/cuda/gemm_lt.h):
// true for "timed" (the fastest of the heuristic's top answers, timed on a shape's first
// call), false for "heuristic" (its first answer); InvalidArgument naming the key otherwise.
Result<bool> parse_gemm_algorithm_option(std::string_view key, std::string_view value);

// Where CUDA bf16 attention runs ("attention", kernels/cuda/attention.cpp): true for "cudnn"
// (cuDNN's fused attention where it takes the call, planrt's kernel elsewhere), false for
// "planrt" (planrt's kernel always); InvalidArgument naming the key otherwise.
Result<bool> parse_attention_option(std::string_view key, std::string_view value);

// A byte count or "max"; InvalidArgument naming the key and the value otherwise.
Result<uint64_t> parse_bytes_option(std::string_view key, std::string_view value);

}  // namespace planrt::backends
