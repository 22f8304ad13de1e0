#include "kernels/cuda/dtype_agreement.h"

#include "kernels/cuda/cuda_kernels.h"

namespace planrt::kernels::cuda::testing {

double tolerance_of(DType dtype) {
  switch (dtype) {
    case DType::BF16: return 5e-3;
    case DType::F16: return 1e-3;
    default: return kTolerance;
  }
}

HostTensor in_dtype(const HostTensor& t, DType dtype) {
  if (t.is_none() || dtype == DType::F32) return t;
  HostTensor out(dtype, t.shape());
  auto* dst = static_cast<uint16_t*>(out.data());
  for (int64_t i = 0; i < t.shape().numel(); ++i) {
    dst[i] = dtype == DType::F16 ? f32_to_f16_bits(t.f()[i]) : f32_to_bf16_bits(t.f()[i]);
  }
  return out;
}

HostTensor widened(const HostTensor& t) {
  if (t.is_none() || t.dtype() == DType::F32) return t;
  HostTensor out(DType::F32, t.shape());
  const auto* src = static_cast<const uint16_t*>(t.data());
  const bool half = t.dtype() == DType::F16;
  for (int64_t i = 0; i < t.shape().numel(); ++i) {
    out.f()[i] = half ? f16_bits_to_f32(src[i]) : bf16_bits_to_f32(src[i]);
  }
  return out;
}

HostTensor rounded_to(const HostTensor& t, DType dtype) { return widened(in_dtype(t, dtype)); }

DtypeRun run_in(DType dtype, CudaRunner& r, std::string_view op, const OpAttrs& attrs,
                const std::vector<HostTensor>& inputs, const Shape& out_shape,
                size_t offset_bytes) {
  std::vector<HostTensor> reference_in;
  std::vector<TensorView> host_in;
  std::vector<TensorView> dev_in;
  for (const HostTensor& t : inputs) reference_in.push_back(rounded_to(t, dtype));
  for (const HostTensor& t : reference_in) host_in.push_back(t.view());
  for (const HostTensor& t : inputs) dev_in.push_back(r.upload(in_dtype(t, dtype), offset_bytes));
  HostTensor reference(DType::F32, out_shape);
  std::vector<TensorView> host_out{reference.view()};
  Result<KernelFn> cpu = find_cpu_kernel(op);
  EXPECT_TRUE(cpu.ok());
  Status cpu_status = (*cpu)(attrs, host_in, host_out);
  EXPECT_TRUE(cpu_status.ok()) << op << " (CPU): " << cpu_status.to_string();
  std::vector<TensorView> dev_out{r.device_output(dtype, out_shape, offset_bytes)};
  Result<CudaKernelFn> kernel = find_cuda_kernel(op);
  EXPECT_TRUE(kernel.ok());
  DtypeRun run;
  run.cuda = (*kernel)(r.ctx(), attrs, dev_in, dev_out);
  if (run.cuda.ok()) run.cuda = r.synchronize();
  run.error = relative_error(widened(r.download(dev_out[0])), reference);
  return run;
}

void ExpectAgreeIn(DType dtype, CudaRunner& r, std::string_view op, const OpAttrs& attrs,
                   const std::vector<HostTensor>& inputs, const Shape& out_shape,
                   size_t offset_bytes) {
  DtypeRun run = run_in(dtype, r, op, attrs, inputs, out_shape, offset_bytes);
  EXPECT_TRUE(run.cuda.ok()) << op << " (CUDA, " << dtype_name(dtype) << "): " << run.cuda.to_string();
  EXPECT_LT(run.error, tolerance_of(dtype)) << op << " output " << out_shape.to_string() << " in "
                                            << dtype_name(dtype);
}

}  // namespace planrt::kernels::cuda::testing
