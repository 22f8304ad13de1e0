// A fake device for CI machines without a GPU: an allocator that serves a device type
// (CUDA by default) from HOST memory and counts everything, and a delegate backend that
// runs a segment's Graph blob with the CPU kernels on those host pointers. Together they
// drive the whole device path of the runtime (device arenas, Copy instructions, Delegate
// calls) and let tests check what was allocated and freed.
//
// Ownership: the Scoped* guards register on construction and unregister on destruction;
// declare them before any Program/Method that uses them so they outlive it. Not
// thread-safe beyond the counters being atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

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

  // The n-th allocate() call from now (1-based) fails with OutOfMemory; 0: none fails.
  void fail_nth_allocation(int64_t n);
  AllocatorCounts counts() const;
  // True when [ptr, ptr + nbytes) lies inside one live allocation of this allocator.
  bool owns(const void* ptr, size_t nbytes) const;

 private:
  Status check_range(const void* p, size_t nbytes, Device device, const char* what) const;

  DeviceType type_;
  mutable std::mutex mu_;
  std::map<const uint8_t*, std::pair<size_t, Device>> live_;
  AllocatorCounts counts_;
  int64_t calls_ = 0;
  int64_t fail_at_ = 0;
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
  int64_t destroys = 0;
};

// Runs a segment's Graph blob (program.fbs) with the CPU kernels. Temporary values and
// the graph's scratch are allocated from the host per call. When given an allocator, every
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

  // Operands must lie in memory `device_memory` handed out (nullptr: no check).
  void check_device_memory(const TestDeviceAllocator* device_memory) { device_memory_ = device_memory; }
  // Test hooks: the next init fails with Internal; options seen by the last init.
  void fail_next_init() { fail_next_init_ = true; }
  std::vector<BackendOption> last_options() const;
  std::vector<BackendOption> last_compile_specs() const;
  BackendCounts counts() const;

 private:
  const TestDeviceAllocator* device_memory_;
  mutable std::mutex mu_;
  BackendCounts counts_;
  bool fail_next_init_ = false;
  std::vector<BackendOption> last_options_;
  std::vector<BackendOption> last_compile_specs_;
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
