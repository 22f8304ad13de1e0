// A fake device for CI machines without a GPU: an allocator that serves a device type
// (CUDA by default) from HOST memory and counts everything, and a delegate backend that
// runs a segment's Graph blob with the CPU kernels on those host pointers. Together they
// drive the whole device path of the runtime (device arenas, Copy instructions, Delegate
// calls) and let tests check what was allocated and freed.
//
// Streams: the allocator hands out TestStreams, queues whose work runs only when the stream
// is synchronized (or destroyed). Asynchronous copies and the backend's execute on a
// stream are deferred that way, so a runtime that reads device results without waiting
// for them reads stale memory and the tests see wrong numbers.
//
// Ownership: the Scoped* guards register on construction and unregister on destruction;
// declare them before any Program/Method that uses them so they outlive it.
// Thread safety: as device_allocator.h and backend.h require of a real allocator and
// backend: every call may come from any thread (one lock each guards the live allocations,
// streams and counts); a TestStream is used by one thread at a time (it has a lock of its
// own for enqueue and drain all the same). The test hooks (fail_next_*, use_streams,
// check_device_memory) are for a test's single-threaded set-up.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "planrt/platform/device_allocator.h"
#include "planrt/runtime/backend.h"

namespace planrt::testing {

struct AllocatorCounts {
  int64_t allocations = 0;       // successful allocate() calls with nbytes > 0
  int64_t deallocations = 0;
  int64_t failed_allocations = 0;
  int64_t bytes_allocated = 0;   // total over all successful allocations
  int64_t bytes_live = 0;
  int64_t bad_deallocations = 0; // unknown pointer, or a size or device other than allocated
  int64_t copies_h2d = 0;
  int64_t copies_d2h = 0;
  int64_t copies_d2d = 0;
  int64_t bytes_copied = 0;
  int64_t streams_created = 0;
  int64_t streams_destroyed = 0;
  int64_t synchronizations = 0;   // synchronize() calls on a stream
  int64_t bad_stream_uses = 0;    // a stream this allocator did not create, or destroyed
  int64_t pins = 0;               // pin_host_memory() calls that pinned
  int64_t unpins = 0;
  int64_t bad_unpins = 0;         // a range that is not pinned, or another size
};

// A device stream on the host: work runs in order, when the stream is drained.
class TestStream {
 public:
  explicit TestStream(Device device) : device_(device) {}
  Device device() const { return device_; }
  void enqueue(std::function<void()> work);
  // Runs everything queued so far, in order.
  void drain();
  size_t queued() const;

 private:
  Device device_;
  mutable std::mutex mu_;
  std::vector<std::function<void()>> queue_;
};

class TestDeviceAllocator final : public DeviceAllocator {
 public:
  explicit TestDeviceAllocator(DeviceType type = DeviceType::CUDA) : type_(type) {}
  ~TestDeviceAllocator() override;

  DeviceType device_type() const override { return type_; }
  Result<void*> allocate(size_t nbytes, Device device) override;
  void deallocate(void* ptr, size_t nbytes, Device device) override;
  Status copy_host_to_device(void* dst, const void* src, size_t nbytes, Device device) override;
  Status copy_device_to_host(void* dst, const void* src, size_t nbytes, Device device) override;
  Status copy_device_to_device(void* dst, const void* src, size_t nbytes, Device device) override;
  Result<void*> create_stream(Device device) override;
  void destroy_stream(void* stream, Device device) override;
  Status synchronize(void* stream, Device device) override;
  Status copy_host_to_device_async(void* dst, const void* src, size_t nbytes, Device device,
                                   void* stream) override;
  Status copy_device_to_host_async(void* dst, const void* src, size_t nbytes, Device device,
                                   void* stream) override;
  Status copy_device_to_device_async(void* dst, const void* src, size_t nbytes, Device device,
                                     void* stream) override;
  // Pins like a real device: a host-to-device copy whose source is pinned reads it when the
  // stream runs, not when the call returns, so a runtime that wrote pinned memory before
  // synchronizing would copy the wrong bytes.
  Result<bool> pin_host_memory(void* ptr, size_t nbytes, Device device) override;
  void unpin_host_memory(void* ptr, size_t nbytes, Device device) override;
  // What total_memory() reports (0, unknown, by default).
  void set_total_memory(uint64_t bytes) { total_memory_ = bytes; }
  uint64_t total_memory(Device) override { return total_memory_; }
  // Off: pin_host_memory() pins nothing (on by default).
  void pin_host(bool on) { pin_host_ = on; }

  // Off: create_stream() returns nullptr, as for a synchronous device (on by default).
  void use_streams(bool on) { use_streams_ = on; }
  // The next create_stream() fails with Internal.
  void fail_next_stream() { fail_next_stream_ = true; }

  // The n-th allocate() call from now (1-based) fails with OutOfMemory; 0: none fails.
  void fail_nth_allocation(int64_t n);
  AllocatorCounts counts() const;
  // True when [ptr, ptr + nbytes) lies inside one live allocation of this allocator.
  bool owns(const void* ptr, size_t nbytes) const;

 private:
  Status check_range(const void* p, size_t nbytes, Device device, const char* what) const;
  // The live TestStream behind `stream`; nullptr (and counted) when it is not one.
  TestStream* live_stream(void* stream);
  void count_copy(int64_t AllocatorCounts::*counter, size_t nbytes);

  DeviceType type_;
  mutable std::mutex mu_;
  std::map<const uint8_t*, std::pair<size_t, Device>> live_;
  AllocatorCounts counts_;
  int64_t calls_ = 0;
  int64_t fail_at_ = 0;
  std::atomic<bool> use_streams_{true};
  std::atomic<bool> pin_host_{true};
  std::map<const uint8_t*, size_t> pinned_;  // host ranges pinned, by start
  std::atomic<bool> fail_next_stream_{false};
  std::atomic<uint64_t> total_memory_{0};
  std::set<TestStream*> streams_;
};

// Registers a TestDeviceAllocator for its type while in scope.
class ScopedTestAllocator {
 public:
  explicit ScopedTestAllocator(DeviceType type = DeviceType::CUDA);
  ~ScopedTestAllocator();
  ScopedTestAllocator(const ScopedTestAllocator&) = delete;
  ScopedTestAllocator& operator=(const ScopedTestAllocator&) = delete;

  const Status& status() const { return status_; }  // of the registration
  TestDeviceAllocator& allocator() { return allocator_; }
  TestDeviceAllocator* operator->() { return &allocator_; }

 private:
  TestDeviceAllocator allocator_;
  Status status_;
};

struct BackendCounts {
  int64_t inits = 0;
  int64_t executes = 0;
  int64_t executes_on_stream = 0;  // deferred to a TestStream
  int64_t finishes = 0;
  int64_t destroys = 0;
};

// Runs a segment's Graph blob (program.fbs) with the CPU kernels. Temporary values and
// the graph's scratch are allocated from the host per call, except a planned scratch
// (Graph.scratch_operand): the call's last output, in the method's device arena. With a stream (a TestStream) the
// kernels run when the stream is drained and their errors come back from finish(). When given an allocator, every
// operand it receives must lie in memory that allocator handed out: that is how the tests
// prove device-planned values really live in device memory.
class TestDeviceBackend final : public Backend {
 public:
  explicit TestDeviceBackend(const TestDeviceAllocator* device_memory = nullptr)
      : device_memory_(device_memory) {}

  Result<BackendHandle> init(std::span<const uint8_t> blob,
                             std::span<const BackendOption> compile_specs,
                             const BackendInitContext& context) override;
  Status execute(BackendHandle handle, std::span<const TensorView> inputs,
                 std::span<const TensorView> outputs, void* stream) override;
  void destroy(BackendHandle handle) override;
  Status finish(BackendHandle handle) override;

  // Operands must lie in memory `device_memory` handed out (nullptr: no check).
  void check_device_memory(const TestDeviceAllocator* device_memory) { device_memory_ = device_memory; }
  // Test hooks: the next init fails with Internal; options seen by the last init.
  void fail_next_init() { fail_next_init_ = true; }
  std::vector<BackendOption> last_options() const;
  // Called at the start of every execute (from the executing thread), e.g. to hold a run
  // inside the backend while a test does something else. Set before the runs start.
  void set_execute_hook(std::function<void()> hook) { execute_hook_ = std::move(hook); }
  std::vector<BackendOption> last_compile_specs() const;
  BackendCounts counts() const;

 private:
  const TestDeviceAllocator* device_memory_;
  mutable std::mutex mu_;
  BackendCounts counts_;
  bool fail_next_init_ = false;
  std::vector<BackendOption> last_options_;
  std::vector<BackendOption> last_compile_specs_;
  std::function<void()> execute_hook_;
};

// Registers a TestDeviceBackend under `name` while in scope.
class ScopedTestBackend {
 public:
  explicit ScopedTestBackend(std::string name = "cuda",
                             const TestDeviceAllocator* device_memory = nullptr);
  ~ScopedTestBackend();
  ScopedTestBackend(const ScopedTestBackend&) = delete;
  ScopedTestBackend& operator=(const ScopedTestBackend&) = delete;

  const Status& status() const { return status_; }
  TestDeviceBackend& backend() { return backend_; }
  TestDeviceBackend* operator->() { return &backend_; }

 private:
  std::string name_;
  TestDeviceBackend backend_;
  Status status_;
};

}  // namespace planrt::testing
