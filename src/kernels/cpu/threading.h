// Threads of the CPU kernels.
//
// planrt's CPU kernels and oneDNN (which runs their matrix products) share one thread pool:
// OpenMP's (libgomp, the runtime Debian's oneDNN is built on), so the process never holds two
// pools competing for the same cores. The count is per calling thread: a method's run sets it
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
#include <functional>
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

// Sets the calling thread's kernel thread count for its lifetime and restores the previous
// count after. Not copyable or movable: it lives on the stack of the run it covers.
class ThreadCountScope {
 public:
  explicit ThreadCountScope(int num_threads);
  ~ThreadCountScope();
  ThreadCountScope(const ThreadCountScope&) = delete;
  ThreadCountScope& operator=(const ThreadCountScope&) = delete;

 private:
  int previous_;
};

// Calls body(begin, end) over disjoint ranges covering [0, count), on up to
// current_num_threads() threads, each range at least `grain` items (so that small work is not
// split). body must not throw and must be safe to run concurrently on disjoint ranges.
void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace planrt::kernels::cpu
