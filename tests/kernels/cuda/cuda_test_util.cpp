#include "kernels/cuda/cuda_test_util.h"

#include <fmt/format.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace planrt::kernels::cuda::testing {

HostTensor::HostTensor(DType dtype, Shape shape)
    : none_(false),
      dtype_(dtype),
      shape_(shape),
      storage_((static_cast<size_t>(shape.numel()) * element_size(dtype) + 7) / 8 + 1, 0) {}

HostTensor HostTensor::random(Shape shape, uint32_t seed, float lo, float hi, DType dtype) {
  HostTensor t(dtype, shape);
  std::mt19937 gen(seed);
  if (dtype == DType::F32) {
    std::uniform_real_distribution<float> dist(lo, hi);
    for (int64_t i = 0; i < shape.numel(); ++i) t.f()[i] = dist(gen);
  } else {
    auto* bytes = static_cast<unsigned char*>(t.data());
    for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(gen());
  }
  return t;
}

HostTensor HostTensor::ids(DType dtype, Shape shape, uint32_t seed, int64_t lo, int64_t hi) {
  HostTensor t(dtype, shape);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi - 1);
  for (int64_t i = 0; i < shape.numel(); ++i) {
    if (dtype == DType::I64) {
      static_cast<int64_t*>(t.data())[i] = dist(gen);
    } else {
      static_cast<int32_t*>(t.data())[i] = static_cast<int32_t>(dist(gen));
    }
  }
  return t;
}

TensorView HostTensor::view() const {
  if (none_) return TensorView::none();
  return TensorView::contiguous(data(), dtype_, shape_);
}

double relative_error(const HostTensor& out, const HostTensor& ref) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (out.dtype() != DType::F32 || ref.dtype() != DType::F32 ||
      out.shape().numel() != ref.shape().numel()) {
    return kInf;
  }
  double diff = 0.0;
  double norm = 0.0;
  for (int64_t i = 0; i < ref.shape().numel(); ++i) {
    const double o = out.f()[i];
    const double r = ref.f()[i];
    if (std::isnan(o) || std::isnan(r)) return kInf;
    diff += (o - r) * (o - r);
    norm += r * r;
  }
  if (std::isnan(diff)) return kInf;
  return norm == 0.0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

DeviceMemory::DeviceMemory(size_t bytes) {
  EXPECT_EQ(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes), cudaSuccess);
}
DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept : ptr_(other.ptr_) {
  other.ptr_ = nullptr;
}
DeviceMemory::~DeviceMemory() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}

CudaRunner::CudaRunner(CublasOptions options) {
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  Result<CublasHandle> handle = CublasHandle::create(options);
  EXPECT_TRUE(handle.ok()) << handle.status().to_string();
  if (handle.ok()) cublas_ = std::move(*handle);
  buffers_.reserve(64);
  buffers_.emplace_back(sizeof(CudaDeviceError));
  EXPECT_EQ(cudaMemset(buffers_.back().get(), 0, sizeof(CudaDeviceError)), cudaSuccess);
  ctx_.stream = stream_;
  ctx_.cublas = cublas_.get();
  ctx_.temp = &temp_;
  ctx_.device_errors = static_cast<CudaDeviceError*>(buffers_.back().get());
}

bool CudaRunner::enable_cudnn() {
  if (cudnn_.get() == nullptr) {
    Result<CudnnHandle> h = CudnnHandle::create(false);
    EXPECT_TRUE(h.ok()) << h.status().to_string();
    if (!h.ok()) return false;
    cudnn_ = std::move(*h);
  }
  ctx_.cudnn = &cudnn_;
  return true;
}

CudaRunner::~CudaRunner() {
  if (stream_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

TensorView CudaRunner::upload(const HostTensor& t, size_t offset_bytes) {
  if (t.is_none()) return TensorView::none();
  buffers_.emplace_back(t.nbytes() + offset_bytes);
  void* p = static_cast<char*>(buffers_.back().get()) + offset_bytes;
  EXPECT_EQ(cudaMemcpy(p, t.data(), t.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
  // cudaMemcpy from pageable memory may return before its DMA lands, and kernels run on a
  // non-blocking stream that does not wait for the legacy stream: without this, an
  // output's NaN fill could land after a fast kernel (the no-keys attention memset) and
  // fail the comparison — seen once on an H200.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int device = 0;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  return TensorView::contiguous(p, t.dtype(), t.shape(), Device::cuda(device));
}

TensorView CudaRunner::device_output(DType dtype, const Shape& shape, size_t offset_bytes) {
  HostTensor fill(dtype, shape);
  std::memset(fill.data(), 0xff, fill.nbytes());
  return upload(fill, offset_bytes);
}

HostTensor CudaRunner::download(const TensorView& v) {
  HostTensor t(v.dtype, v.sizes);
  EXPECT_EQ(cudaMemcpy(t.data(), v.data, t.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  return t;
}

Status CudaRunner::synchronize() {
  cudaError_t err = cudaStreamSynchronize(stream_);
  if (err == cudaSuccess) return {};
  return make_error(ErrorCode::Internal, "cudaStreamSynchronize: {}", cudaGetErrorString(err));
}

CudaDeviceError CudaRunner::device_errors() {
  CudaDeviceError e;
  EXPECT_EQ(cudaMemcpy(&e, ctx_.device_errors, sizeof(e), cudaMemcpyDeviceToHost), cudaSuccess);
  return e;
}

Comparison CudaRunner::compare(std::string_view op, const OpAttrs& attrs,
                               const std::vector<HostTensor>& inputs, DType out_dtype,
                               const Shape& out_shape) {
  Comparison c;
  c.cpu_out = HostTensor(out_dtype, out_shape);
  std::vector<TensorView> host_in;
  std::vector<TensorView> dev_in;
  for (const HostTensor& t : inputs) {
    host_in.push_back(t.view());
    dev_in.push_back(upload(t));
  }
  std::vector<TensorView> host_out{c.cpu_out.view()};
  std::vector<TensorView> dev_out{device_output(out_dtype, out_shape)};
  Result<KernelFn> cpu_fn = find_cpu_kernel(op);
  Result<CudaKernelFn> cuda_fn = find_cuda_kernel(op);
  c.cpu = cpu_fn.ok() ? (*cpu_fn)(attrs, host_in, host_out) : cpu_fn.status();
  c.cuda = cuda_fn.ok() ? (*cuda_fn)(ctx_, attrs, dev_in, dev_out) : cuda_fn.status();
  Status synced = synchronize();
  if (c.cuda.ok()) c.cuda = synced;
  c.cuda_out = download(dev_out[0]);
  c.error = out_dtype == DType::F32 ? relative_error(c.cuda_out, c.cpu_out)
                                    : (same_bytes(c.cuda_out, c.cpu_out)
                                           ? 0.0
                                           : std::numeric_limits<double>::infinity());
  return c;
}

std::vector<AttentionInputs> fused_attention_inputs(uint32_t seed) {
  std::vector<AttentionInputs> out;
  for (const AttentionCase& c : kFusedAttentionCases) {
    for (bool causal : {false, true}) {
      AttentionInputs in;
      in.q = rnd({1, c.heads, c.sq, 64}, seed++, -2.0f, 2.0f);
      in.k = rnd({1, c.heads, c.sk, 64}, seed++, -2.0f, 2.0f);
      in.v = rnd({1, c.heads, c.sk, 64}, seed++);
      in.out = Shape{1, c.heads, c.sq, 64};
      in.causal = causal;
      in.label = fmt::format("heads {} Sq {} Sk {} causal {}", c.heads, c.sq, c.sk, causal);
      out.push_back(std::move(in));
    }
  }
  return out;
}

void ExpectAgree(CudaRunner& runner, std::string_view op, const OpAttrs& attrs,
                 const std::vector<HostTensor>& inputs, DType out_dtype, const Shape& out_shape) {
  Comparison c = runner.compare(op, attrs, inputs, out_dtype, out_shape);
  EXPECT_TRUE(c.cpu.ok()) << op << " (CPU): " << c.cpu.to_string();
  EXPECT_TRUE(c.cuda.ok()) << op << " (CUDA): " << c.cuda.to_string();
  EXPECT_LT(c.error, kTolerance) << op << " output " << out_shape.to_string();
}

}  // namespace planrt::kernels::cuda::testing
