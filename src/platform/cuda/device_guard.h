// DeviceGuard: makes a CUDA device current for a scope and restores the previous one.
//
// The CUDA runtime keeps one current device per host thread; planrt code that touches a
// device other than the caller's (allocating on cuda:1, creating a pool or a stream) puts
// the caller's choice back when it is done, so a user's cudaSetDevice is never changed
// behind their back.
// Ownership: move-only; the destructor restores and never throws (a failed restore is
// logged). Thread safety: affects only the calling thread; do not move a guard to another
// thread. Errors: set() returns InvalidArgument/NotSupported naming the device when it
// does not exist, or the CUDA error of cudaGetDevice/cudaSetDevice.
#pragma once

#include "planrt/core/result.h"

namespace planrt::cuda {

class DeviceGuard {
 public:
  // Makes `device` current; the previous device comes back when the guard dies. Costs no
  // cudaSetDevice when `device` is already current.
  static Result<DeviceGuard> set(int device);

  DeviceGuard(DeviceGuard&& other) noexcept;
  DeviceGuard& operator=(DeviceGuard&&) = delete;
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard();

  int previous() const { return previous_; }
  int current() const { return current_; }

 private:
  DeviceGuard(int previous, int current) : previous_(previous), current_(current) {}
  int previous_ = -1;
  int current_ = -1;
  bool active_ = false;  // restores on destruction
};

}  // namespace planrt::cuda
