// The DeviceAllocator contract (planrt/platform/device_allocator.h) as one test suite, run
// over every allocator: the built-in host allocator and the test allocator
// (tests/platform/device_allocator_test.cpp), the CUDA allocator
// (tests/platform/cuda/cuda_allocator_test.cpp). What an allocator promises beyond the
// contract (CUDA's device guard, the test allocator's counts) stays in its own tests.
//
// An allocator joins by describing itself in an AllocatorCase and instantiating both suites:
//
//   INSTANTIATE_TEST_SUITE_P(Cuda, DeviceAllocatorContract, ::testing::Values(cuda_case()),
//                            AllocatorCaseName);
//   INSTANTIATE_TEST_SUITE_P(Cuda, DeviceAllocatorFailureContract,
//                            ::testing::Values(cuda_case()), AllocatorCaseName);
//
// The tests themselves are in device_allocator_contract.cpp, in the test-support library:
// a binary gets them by naming AllocatorCaseName (defined there), so always instantiate with it.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "planrt/platform/device_allocator.h"

namespace planrt::testing {

struct AllocatorCase {
  std::string name;  // the instantiation's suffix: "HostAllocator", "CudaAllocator"
  // The allocator a test uses: a fresh one per test, or the process's instance (borrowed()).
  std::function<std::shared_ptr<DeviceAllocator>()> make;
  Device device = Device::cpu();  // one it serves
  Device foreign = Device::cpu();  // one of a type it does not serve
  // What allocate() on `foreign` returns (device_allocator.h says NotSupported; the CUDA
  // allocator documents InvalidArgument).
  ErrorCode foreign_code = ErrorCode::NotSupported;
  size_t alignment = 1;     // every non-empty allocation starts at a multiple of it
  size_t absurd_bytes = 0;  // more than the device can ever hold: allocate() says OutOfMemory
  bool knows_total_memory = false;  // total_memory(device) is not 0
  bool needs_gpu = false;           // the tests skip without one (support/gpu.h)
  // Arms the n-th allocate() from now (1-based) to fail with OutOfMemory; 0 disarms. Only
  // for DeviceAllocatorFailureContract.
  std::function<void(DeviceAllocator&, int64_t n)> fail_nth_allocation;
  // Checks after each test that the allocator was used as the contract says (the test
  // allocator: every allocation and stream given back exactly); may be empty.
  std::function<void(DeviceAllocator&)> verify;
};

// A shared_ptr that does not own `allocator` (the process's instance).
std::shared_ptr<DeviceAllocator> borrowed(DeviceAllocator& allocator);

// The built-in host allocator and the test allocator (a fresh TestDeviceAllocator for CUDA
// per test, its counts verified after it).
AllocatorCase host_allocator_case();
AllocatorCase test_allocator_case();

// The instantiations' name generator: the case's name.
std::string AllocatorCaseName(const ::testing::TestParamInfo<AllocatorCase>& info);
void PrintTo(const AllocatorCase& c, std::ostream* os);

class DeviceAllocatorContract : public ::testing::TestWithParam<AllocatorCase> {
 protected:
  void SetUp() override;
  void TearDown() override;

  DeviceAllocator& allocator() { return *allocator_; }
  bool has_allocator() const { return allocator_ != nullptr; }  // false once SetUp skipped
  Device device() const { return GetParam().device; }

 private:
  std::shared_ptr<DeviceAllocator> allocator_;
};

// The failures injected through fail_nth_allocation, for the allocators that have it.
class DeviceAllocatorFailureContract : public DeviceAllocatorContract {
 protected:
  void TearDown() override;
};

}  // namespace planrt::testing
