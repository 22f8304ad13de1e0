#include "kernels/dtype_support.h"

#include <fmt/format.h>

#include "kernels/elementwise_ops.h"
#include "kernels/operands.h"

namespace planrt::kernels {
namespace {

// Ops whose kernels move elements as bytes: every dtype (their index operands are checked by
// their shape rules).
bool moves_bytes(std::string_view op) {
  for (std::string_view m : {"reshape", "permute", "transpose", "concat", "slice", "pad", "expand", "embedding",
                             "gather_elements", "size", "take"}) {
    if (m == op) return true;
  }
  return false;
}

bool is_integer_arithmetic(std::string_view op) { return integer_arithmetic_op(op) != nullptr; }

}  // namespace

Status check_kernel_dtypes(KernelBackend backend, std::string_view op, std::span<const DType> inputs) {
  // The typed elementwise family runs every dtype its rule admits on both back ends, and the
  // rule is shape inference's to check.
  if (find_elementwise_op(op) != nullptr || moves_bytes(op) || inputs.empty()) return {};
  const bool cpu = backend == KernelBackend::Cpu;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DType d = inputs[i];
    // CUDA computes f16 (IEEE half) wherever it computes bf16: storage only, f32 arithmetic,
    // the tensor cores with f32 accumulation for the products. The CPU computes neither.
    bool ok = d == DType::F32 || (!cpu && (d == DType::BF16 || d == DType::F16));
    std::string_view takes = cpu ? "f32" : "f32, f16 and bf16";
    if (op == "cumsum") {
      // Running sums of integer masks (position ids from an attention mask) as well.
      ok = ok || d == DType::I32 || d == DType::I64;
      takes = cpu ? "f32, i32 and i64" : "f32, f16, bf16, i32 and i64";
    }
    if (op == "scaled_dot_product_attention" && i > 0 && d == DType::Bool) {
      ok = true;  // the mask (shape inference checks that only the mask is bool)
    }
    if (is_integer_arithmetic(op)) {
      // The integer forms (elementwise_ops.h); the CPU also computes f16 and bf16 there.
      ok = ok || is_integer(d) || (cpu && is_floating(d));
      takes = cpu ? "every dtype but bool" : "f32, f16, bf16, i32, i64 and u8";
    }
    if (!ok) {
      return make_error(ErrorCode::NotSupported, "{}: {} has dtype {}; the {} kernel supports {}", op,
                        input_role(op, i), dtype_name(d), cpu ? "CPU" : "CUDA", takes);
    }
  }
  return {};
}

}  // namespace planrt::kernels
