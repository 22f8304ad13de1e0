#include "platform/cuda/stream.h"

#include <utility>

#include "planrt/core/log.h"
#include "platform/cuda/cuda_status.h"
#include "platform/cuda/device_guard.h"

namespace planrt::cuda {

Result<Stream> Stream::create(int device, unsigned int flags) {
  PLANRT_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::set(device));
  Stream s;
  PLANRT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s.stream_, flags),
                              "cudaStreamCreateWithFlags", device);
  s.device_ = device;
  return s;
}

Status Stream::create_if_empty(int device, unsigned int flags) {
  if (!empty()) return {};
  Result<Stream> made = create(device, flags);
  if (!made.ok()) return made.status();
  *this = std::move(made).value();
  return {};
}

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(std::exchange(other.device_, -1)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    reset();
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

Status Stream::synchronize() const {
  PLANRT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", device_);
  return {};
}

void Stream::reset() {
  if (stream_ == nullptr) return;
  // cudaStreamDestroy does not wait: queued work finishes, then the driver frees it.
  cudaError_t err = cudaStreamDestroy(stream_);
  if (err != cudaSuccess) {
    cudaGetLastError();
    PLANRT_LOG_ERROR("cudaStreamDestroy on cuda:{} failed: {}", device_, cuda_error_text(err));
  }
  stream_ = nullptr;
  device_ = -1;
}

Result<Event> Event::create(int device, unsigned int flags) {
  PLANRT_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::set(device));
  Event e;
  PLANRT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e.event_, flags),
                              "cudaEventCreateWithFlags", device);
  e.device_ = device;
  return e;
}

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)), device_(std::exchange(other.device_, -1)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    reset();
    event_ = std::exchange(other.event_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

Status Event::record(cudaStream_t stream) const {
  PLANRT_CUDA_RETURN_IF_ERROR(cudaEventRecord(event_, stream), "cudaEventRecord", device_);
  return {};
}

Status Event::wait_on(cudaStream_t stream) const {
  PLANRT_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, event_, 0), "cudaStreamWaitEvent",
                              device_);
  return {};
}

Status Event::synchronize() const {
  PLANRT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(event_), "cudaEventSynchronize", device_);
  return {};
}

void Event::reset() {
  if (event_ == nullptr) return;
  cudaError_t err = cudaEventDestroy(event_);
  if (err != cudaSuccess) {
    cudaGetLastError();
    PLANRT_LOG_ERROR("cudaEventDestroy on cuda:{} failed: {}", device_, cuda_error_text(err));
  }
  event_ = nullptr;
  device_ = -1;
}

}  // namespace planrt::cuda
