#include "platform/cuda/graph.h"

#include <utility>

#include "planrt/core/log.h"
#include "platform/cuda/cuda_status.h"

namespace planrt::cuda {

Result<GraphExec> GraphExec::capture_end(cudaStream_t stream, int device, bool instantiate) {
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(stream, &graph);
  GraphExec out;
  out.device_ = device;
  if (err == cudaSuccess && instantiate) err = cudaGraphInstantiate(&out.exec_, graph, 0);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    out.exec_ = nullptr;
    return cuda_error(err, "ending and instantiating a CUDA graph capture", device);
  }
  return out;
}

GraphExec::GraphExec(GraphExec&& other) noexcept
    : exec_(std::exchange(other.exec_, nullptr)), device_(std::exchange(other.device_, -1)) {}

GraphExec& GraphExec::operator=(GraphExec&& other) noexcept {
  if (this != &other) {
    reset();
    exec_ = std::exchange(other.exec_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

void GraphExec::reset() {
  if (exec_ == nullptr) return;
  cudaError_t err = cudaGraphExecDestroy(exec_);
  if (err != cudaSuccess) PLANRT_LOG_ERROR("{}", cuda_error(err, "cudaGraphExecDestroy", device_).to_string());
  exec_ = nullptr;
}

Status GraphExec::launch(cudaStream_t stream) const {
  PLANRT_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec_, stream), "cudaGraphLaunch", device_);
  return {};
}

}  // namespace planrt::cuda
