// find_cpu_kernel: op name -> CPU implementation. The test OpTable.EveryOpHasACpuKernel
// keeps this list and the op table in step.
#include "kernels/cpu/cpu_kernels.h"

namespace planrt::kernels {
namespace {

struct Entry {
  std::string_view name;
  KernelFn fn;
};

constexpr Entry kCpuKernels[] = {
    {"linear", cpu::linear},
    {"matmul", cpu::matmul},
    {"add", cpu::add},
    {"sub", cpu::sub},
    {"mul", cpu::mul},
    {"div", cpu::div},
    {"layer_norm", cpu::layer_norm},
    {"rms_norm", cpu::rms_norm},
    {"softmax", cpu::softmax},
    {"gelu", cpu::gelu},
    {"relu", cpu::relu},
    {"silu", cpu::silu},
    {"sqrt", cpu::unary_sqrt},
    {"neg", cpu::unary_neg},
    {"exp", cpu::unary_exp},
    {"erf", cpu::unary_erf},
    {"tanh", cpu::unary_tanh},
    {"sigmoid", cpu::unary_sigmoid},
    {"pow", cpu::power},
    {"reduce_mean", cpu::reduce_mean},
    {"reduce_sum", cpu::reduce_sum},
    {"reduce_max", cpu::reduce_max},
    {"reduce_min", cpu::reduce_min},
    {"reduce_prod", cpu::reduce_prod},
    {"argmax", cpu::argmax},
    {"argmin", cpu::argmin},
    {"cumsum", cpu::cumsum},
    {"log_softmax", cpu::log_softmax},
    {"reshape", cpu::reshape},
    {"permute", cpu::permute},
    {"transpose", cpu::transpose},
    {"scaled_dot_product_attention", cpu::scaled_dot_product_attention},
    {"embedding", cpu::embedding},
    {"concat", cpu::concat},
    {"slice", cpu::slice},
    {"conv2d", cpu::conv2d},
    {"max_pool2d", cpu::max_pool2d},
    {"avg_pool2d", cpu::avg_pool2d},
    {"clip", cpu::clip},
    {"hard_sigmoid", cpu::hard_sigmoid},
    {"hard_swish", cpu::hard_swish},
    {"pad", cpu::pad},
    {"expand", cpu::expand},
    {"gather_elements", cpu::gather_elements},
    {"size", cpu::size},
    {"take", cpu::take},
    {"resize", cpu::resize},
#define PLANRT_CPU_ENTRY(fn) {#fn, cpu::fn},
    PLANRT_ELEMENTWISE_OPS(PLANRT_CPU_ENTRY)
#undef PLANRT_CPU_ENTRY
};

}  // namespace

Result<KernelFn> find_cpu_kernel(std::string_view name) {
  for (const Entry& e : kCpuKernels) {
    if (e.name == name) return e.fn;
  }
  return make_error(ErrorCode::NotFound, "no CPU kernel for op '{}'", name);
}

}  // namespace planrt::kernels
