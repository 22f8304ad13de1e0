// GraphExec: the owner of one instantiated CUDA graph (cudaGraphExec_t) on one device, as
// Stream and Event (stream.h) own theirs.
//
// capture_end(stream, device, instantiate) ends a capture begun on `stream` and, when
// `instantiate`, instantiates what was recorded (else it returns an empty owner: a capture
// whose work failed is ended and dropped); the captured cudaGraph_t is destroyed right after
// (the executable graph is independent of it). Ownership: move-only; the destructor destroys the executable graph,
// logging (never throwing) a failure. Errors name the call and the device.
// Thread safety: an owner is not synchronized; launches follow CUDA's rules for streams.
#pragma once

#include <cuda_runtime.h>

#include "planrt/core/result.h"

namespace planrt::cuda {

class GraphExec {
 public:
  GraphExec() = default;
  // Ends the capture on `stream` and instantiates it when `instantiate`. The capture is
  // ended even when the instantiation fails, so `stream` is usable again either way.
  static Result<GraphExec> capture_end(cudaStream_t stream, int device, bool instantiate);

  GraphExec(GraphExec&& other) noexcept;
  GraphExec& operator=(GraphExec&& other) noexcept;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec() { reset(); }

  cudaGraphExec_t get() const { return exec_; }
  bool empty() const { return exec_ == nullptr; }
  Status launch(cudaStream_t stream) const;
  void reset();

 private:
  cudaGraphExec_t exec_ = nullptr;
  int device_ = -1;
};

}  // namespace planrt::cuda
