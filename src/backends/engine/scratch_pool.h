// The shared per-device activation-scratch pool (docs/design.md §6). Private to the engine backend.
//
// One slot per device, created on first use and kept for the process. A slot holds one
// buffer, grown to the largest requirement any pooled call on that device has made, and
// the device's ScratchDevice (memory and the handoff event).
//
// A pooled run (run()):
//   1. refuse with NotSupported when `stream` is capturing a CUDA graph, before anything a
//      capture cannot take (the handoff wait on an event recorded outside the capture would
//      invalidate it under every capture mode);
//   2. a call whose bound shapes need zero bytes installs nothing, grows nothing and takes
//      no lock: it runs with no scratch;
//   3. otherwise take the device lock; make the stream wait on the handoff event; grow if
//      the buffer is smaller than the call needs (allocate the new buffer first: on failure
//      the old one stays and the call returns the error; then free the old one
//      stream-ordered after the wait, so after every earlier user); install; enqueue; record
//      the handoff event on the stream; release the lock. The lock is held from the claim
//      through the record: a window between enqueue and record would let a second run take
//      the same buffer unordered, which silently corrupts outputs.
// The registry lock guards only find-or-insert of a slot (no device call under it), so
// runs on different devices never wait on each other.
//
// trim(device): waits (host) for the last recorded run, frees the buffer and resets the
// capacity; the next pooled run grows it again. Growth counts and the high-water stay.
//
// Statistics per device: capacity, high-water, growths, trims, pooled runs; and the
// contexts registered with the slot: pooled contexts and the sum of what their private
// scratch would have cost (scratch_bytes() each), private contexts and their bytes.
//
// Thread safety: everything here may be called from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>

#include "planrt/backends/engine.h"
#include "planrt/core/result.h"

namespace planrt::engine {

class ScratchPool {
 public:
  // `enqueue(scratch, bytes)` installs and enqueues the call's work on `stream`.
  using Enqueue = std::function<Status(void* scratch, uint64_t bytes)>;
  static Status run(Device device, uint64_t required, void* stream, const Enqueue& enqueue);

  static Status trim(Device device);
  static Result<EngineScratchStats> stats(Device device);

  // Context bookkeeping (for the statistics); add returns an id for remove.
  static uint64_t add_context(Device device, EngineContextInfo info);
  static void remove_context(Device device, uint64_t id);
};

namespace testing {
// The next growth's allocation fails with OutOfMemory (as if the device were full).
void fail_next_growth();
// Holds `device`'s lock (as a pooled run on it does) until the returned lock is released:
// for the test that runs on other devices do not wait for it.
std::unique_lock<std::mutex> hold_device_lock(Device device);
// Sleeps this long between a pooled run's enqueue and its handoff record (0: off), so a
// test can widen the window in which a run that released the lock too early would let
// another run take the buffer unordered.
void set_record_delay(std::chrono::microseconds delay);
}  // namespace testing

}  // namespace planrt::engine
