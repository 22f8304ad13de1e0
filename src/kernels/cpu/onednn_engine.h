// The oneDNN CPU engine the prepared kernels share (packed_linear.h, packed_conv.h), and the
// error code a oneDNN failure maps to. Thread-safe.
#pragma once

#include <dnnl.hpp>

#include "planrt/core/status.h"

namespace planrt::kernels::cpu {

// One engine per process (an engine is cheap to share and oneDNN's objects are bound to it).
inline dnnl::engine& onednn_cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// OutOfMemory for oneDNN's out-of-memory status; NotSupported for anything else it refuses.
inline ErrorCode onednn_error_code(dnnl_status_t s) {
  return s == dnnl_out_of_memory ? ErrorCode::OutOfMemory : ErrorCode::NotSupported;
}

}  // namespace planrt::kernels::cpu
