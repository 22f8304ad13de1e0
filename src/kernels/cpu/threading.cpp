#include "kernels/cpu/threading.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <new>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "planrt/core/log.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace planrt::kernels::cpu {
namespace {

constexpr int kMaxThreads = 1024;

std::optional<int> positive_int(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > kMaxThreads) {
    return std::nullopt;
  }
  return value;
}

// The environment's count, or nullopt. OMP_NUM_THREADS may list one count per nesting level
// ("4,2"): the first is the one that applies here.
std::optional<int> env_num_threads() {
  for (const char* name : {"PLANRT_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* raw = std::getenv(name);
    if (raw == nullptr || *raw == '\0') continue;
    std::string_view text(raw);
    text = text.substr(0, text.find(','));
    if (std::optional<int> n = positive_int(text)) return n;
    static std::once_flag warned;
    std::call_once(warned, [&] {
      PLANRT_LOG_WARN("{}='{}' is not a thread count from 1 to {}: ignored", name, raw, kMaxThreads);
    });
  }
  return std::nullopt;
}

Status failed_status(int failure, int64_t count) {
  if (failure == 0) return {};
  return make_error(failure == 1 ? ErrorCode::OutOfMemory : ErrorCode::Internal,
                    "a parallel kernel loop over {} items {}", count,
                    failure == 1 ? "ran out of memory" : "failed with an exception");
}

}  // namespace

int available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

int default_num_threads() {
  static const int n = env_num_threads().value_or(available_cpus());
  return n;
}

Result<int> parse_num_threads(std::string_view value) {
  if (value == "auto") return default_num_threads();
  if (std::optional<int> n = positive_int(value)) return *n;
  return make_error(ErrorCode::InvalidArgument,
                    "num_threads '{}' is not a thread count: give an integer from 1 to {}, or auto",
                    value, kMaxThreads);
}

int threads_for_work(int available, int64_t work, int64_t work_per_thread) {
  const int64_t worth = work / std::max<int64_t>(work_per_thread, 1);
  return static_cast<int>(std::clamp<int64_t>(worth, 1, std::max(available, 1)));
}

#ifdef _OPENMP
// OpenMP's count is a per-thread setting (its nthreads ICV), which is what lets two runs on
// two threads use different counts. A thread outside any scope reports the default here,
// not OpenMP's own (which would count every online CPU when OMP_NUM_THREADS is unset).
namespace {
thread_local bool set_here = false;
}

int current_num_threads() {
  if (!set_here) return default_num_threads();
  return omp_get_max_threads();
}

ThreadCountScope::ThreadCountScope(int num_threads)
    : previous_openmp_(omp_get_max_threads()), previous_set_(set_here) {
  omp_set_num_threads(num_threads > 0 ? num_threads : default_num_threads());
  set_here = true;
}

ThreadCountScope::~ThreadCountScope() {
  omp_set_num_threads(previous_openmp_);
  set_here = previous_set_;
}

Status parallel_for_ranges(int64_t count, int64_t grain, RangeFn fn, void* context) {
  if (count <= 0) return {};
  grain = std::max<int64_t>(grain, 1);
  const int64_t threads = std::min<int64_t>(current_num_threads(), count / grain);
  std::atomic<int> failure{0};  // 1: bad_alloc, 2: anything else
  auto guarded = [&](int64_t begin, int64_t end) {
    try {
      fn(context, begin, end);
    } catch (const std::bad_alloc&) {
      failure.store(1);
    } catch (...) {
      failure.store(2);
    }
  };
  if (threads <= 1 || omp_in_parallel()) {
    guarded(0, count);
  } else {
#pragma omp parallel num_threads(static_cast<int>(threads))
    {
      const int64_t t = omp_get_thread_num();
      const int64_t team = omp_get_num_threads();
      const int64_t begin = count * t / team;
      const int64_t end = count * (t + 1) / team;
      if (begin < end) guarded(begin, end);
    }
  }
  return failed_status(failure.load(), count);
}
#else
// Built without OpenMP (the clang fuzz build): one thread, whatever was asked.
int current_num_threads() { return 1; }
ThreadCountScope::ThreadCountScope(int) {}
ThreadCountScope::~ThreadCountScope() = default;
Status parallel_for_ranges(int64_t count, int64_t, RangeFn fn, void* context) {
  if (count <= 0) return {};
  try {
    fn(context, 0, count);
  } catch (const std::bad_alloc&) {
    return failed_status(1, count);
  } catch (...) {
    return failed_status(2, count);
  }
  return {};
}
#endif

}  // namespace planrt::kernels::cpu
