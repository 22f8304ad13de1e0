// Stream and Event: owners of one CUDA stream / event on one device.
//
// Ownership: move-only; destroying (or moving over) an owner destroys the handle. The
// destructor never throws and never blocks: work still queued on a destroyed stream runs
// to completion, and an event destroyed before it completes is released by the driver
// afterwards (CUDA's documented behaviour). Errors from destruction are logged.
// Creation errors come back as Status naming the device (it may not exist, or be out of
// resources). A default-constructed owner is empty (get() == nullptr); note that a null
// cudaStream_t is CUDA's legacy default stream, so check empty() before using one.
// Thread safety: an owner is not synchronized; the CUDA handle itself may be used from any
// thread, as CUDA allows.
#pragma once

#include <cuda_runtime.h>

#include "planrt/core/result.h"

namespace planrt::cuda {

class Stream {
 public:
  Stream() = default;
  // A stream on `device`; non-blocking by default, so it never waits on the legacy default
  // stream that code outside planrt may be using.
  static Result<Stream> create(int device, unsigned int flags = cudaStreamNonBlocking);
  // create() into this owner unless it holds a stream already: for streams made on first
  // use rather than up front (a delegate's own stream, which the runtime never needs).
  Status create_if_empty(int device, unsigned int flags = cudaStreamNonBlocking);

  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { reset(); }

  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }
  bool empty() const { return stream_ == nullptr; }

  // Blocks until everything queued on the stream has run; the error names the device.
  Status synchronize() const;
  void reset();

 private:
  cudaStream_t stream_ = nullptr;
  int device_ = -1;
};

class Event {
 public:
  Event() = default;
  // Timing off by default: such events are the cheap kind, for ordering only.
  static Result<Event> create(int device, unsigned int flags = cudaEventDisableTiming);

  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { reset(); }

  cudaEvent_t get() const { return event_; }
  int device() const { return device_; }
  bool empty() const { return event_ == nullptr; }

  // `stream` must be on this event's device (CUDA's rule).
  Status record(cudaStream_t stream) const;
  // Makes `stream` wait for the last record (any device's stream may wait).
  Status wait_on(cudaStream_t stream) const;
  Status synchronize() const;
  void reset();

 private:
  cudaEvent_t event_ = nullptr;
  int device_ = -1;
};

}  // namespace planrt::cuda
