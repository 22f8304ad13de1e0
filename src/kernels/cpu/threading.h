// Threads of the CPU kernels.
//
// planrt's CPU kernels and oneDNN (which runs their matrix products) share one thread pool:
// OpenMP's (libgomp, the runtime Debian's oneDNN is built on), so a run never holds two pools
// competing for the same cores. (libgomp keeps a team per calling thread: two runs on two
// threads at N threads each use 2N.) The count is per calling thread: a method's run sets it
// for its own thread (ThreadCountScope), so two methods run from two threads may use
// different counts. Kernels split their work with parallel_for, which runs inline when the
// count is 1, when the work is small, or inside another parallel region.
//
// Defaults (default_num_threads): PLANRT_NUM_THREADS, else OMP_NUM_THREADS (its first
// entry), else the CPUs this process may run on (sched_getaffinity), never the machine's
// core count: a container or `taskset` limits the default as it limits the process.
//
// Thread safety: every function may be called from any thread.
#pragma once

#include <cstdint>
#include <type_traits>
#include <string_view>

#include "planrt/core/result.h"

namespace planrt::kernels::cpu {

// CPUs in this process's affinity mask; 1 when it cannot be read.
int available_cpus();

// The count a run uses when no option sets one (see above). An environment value that is not
// a positive integer is ignored with a warning, once.
int default_num_threads();

// Parses a `num_threads` option value: a positive integer up to 1024, or "auto"
// (default_num_threads()). InvalidArgument naming the value otherwise.
Result<int> parse_num_threads(std::string_view value);

// Threads the kernels on the calling thread will use now.
int current_num_threads();

// Sets the calling thread's kernel thread count for its lifetime (num_threads <= 0: the
// default) and restores the thread's OpenMP setting after, as it was, so that a caller's own
// omp_set_num_threads (or a library's in the same process: PyTorch's) survives a run. Not
// copyable or movable: it lives on the stack of the run it covers.
class ThreadCountScope {
 public:
  explicit ThreadCountScope(int num_threads);
  ~ThreadCountScope();
  ThreadCountScope(const ThreadCountScope&) = delete;
  ThreadCountScope& operator=(const ThreadCountScope&) = delete;

 private:
  int previous_openmp_ = 1;
  bool previous_set_ = false;
};

// Elements of streaming work (a pointwise op, a copy, a sum) worth a thread of their own. A
// fork and join of two OpenMP threads costs ~3 us on the 2-core development VM, even with
// the worker spinning (docs/performance.md); a core streams 64K floats of a pointwise op in
// about 10 us, so a smaller op runs faster on one thread than split.
constexpr int64_t kElementsPerThread = int64_t{1} << 16;

// Multiply-adds of a product (a convolution, an attention tile) worth a thread of their
// own: about 10 us of one core's work against ~3 us to fork and join a second thread. Chosen
// on mobilenet_v3_small at two threads, whose convolutions span 15K to 5M multiply-adds at
// batch 1: at 2^19, batch 1 ran ~10% slower, at 2^21 batch 8 did (docs/performance.md).
constexpr int64_t kMacsPerThread = int64_t{1} << 20;

// The threads worth using for `work` units when each thread should get at least
// `work_per_thread` of them: between 1 and `available`.
int threads_for_work(int available, int64_t work, int64_t work_per_thread);

// Calls body(begin, end) over disjoint ranges covering [0, count), on up to
// current_num_threads() threads and never more than count / grain of them: each thread gets
// at least `grain` items, so that work smaller than what waking a thread costs is not split.
// body must be safe to run concurrently on disjoint ranges. An exception from a body stays
// inside: the call returns OutOfMemory (std::bad_alloc) or Internal, after every range has
// ended. Allocates nothing itself.
using RangeFn = void (*)(void* context, int64_t begin, int64_t end);
Status parallel_for_ranges(int64_t count, int64_t grain, RangeFn fn, void* context);

template <typename Body>
[[nodiscard]] Status parallel_for(int64_t count, int64_t grain, Body&& body) {
  using B = std::remove_reference_t<Body>;
  return parallel_for_ranges(
      count, grain, [](void* c, int64_t begin, int64_t end) { (*static_cast<B*>(c))(begin, end); },
      const_cast<void*>(static_cast<const void*>(&body)));
}

}  // namespace planrt::kernels::cpu
