#include "kernels/cpu/threading.h"

#include <sched.h>

#include <algorithm>
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

#ifdef _OPENMP
// OpenMP's count is a per-thread setting (its nthreads ICV), which is what lets two runs on
// two threads use different counts. A thread that never set it starts from the default here,
// not from OpenMP's own (which would count every online CPU when OMP_NUM_THREADS is unset).
namespace {
thread_local bool set_here = false;
}

int current_num_threads() {
  if (!set_here) return default_num_threads();
  return omp_get_max_threads();
}

ThreadCountScope::ThreadCountScope(int num_threads) : previous_(current_num_threads()) {
  omp_set_num_threads(num_threads > 0 ? num_threads : default_num_threads());
  set_here = true;
}

ThreadCountScope::~ThreadCountScope() { omp_set_num_threads(previous_); }

void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (count <= 0) return;
  const int64_t threads = std::min<int64_t>(current_num_threads(), (count + grain - 1) / std::max<int64_t>(grain, 1));
  if (threads <= 1 || omp_in_parallel()) {
    body(0, count);
    return;
  }
#pragma omp parallel num_threads(static_cast<int>(threads))
  {
    const int64_t t = omp_get_thread_num();
    const int64_t team = omp_get_num_threads();
    const int64_t begin = count * t / team;
    const int64_t end = count * (t + 1) / team;
    if (begin < end) body(begin, end);
  }
}
#else
// Built without OpenMP (the clang fuzz build): one thread, whatever was asked.
int current_num_threads() { return 1; }
ThreadCountScope::ThreadCountScope(int) : previous_(1) {}
ThreadCountScope::~ThreadCountScope() = default;
void parallel_for(int64_t count, int64_t, const std::function<void(int64_t, int64_t)>& body) {
  if (count > 0) body(0, count);
}
#endif

}  // namespace planrt::kernels::cpu
