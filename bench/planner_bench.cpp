// Memory planner benchmark (docs/design.md §4): plans every case family of tests/support/plan_cases
// at the host and CUDA alignments and reports, per family, the worst and median ratio of
// arena bytes to the lower bound and the median planning time. Every plan is verified; a
// plan that fails verification fails the benchmark.
//
// Planners: greedy-by-size (best of its orderings), no-reuse, and, on the 5..200-tensor
// batch only, each greedy ordering alone ("greedy-by-size/<ordering>"; the first one is the
// planner before best-of), so one run shows what best-of gains.
//
// Appends JSON lines (one per family, alignment and planner; with --cases-dir one per case)
// to --out, by default bench/results/planner.jsonl (planner_cases.jsonl with --cases-dir)
// relative to the working directory (run it from the repository root): the results files
// are the history of every recorded run, so a run never truncates one. Timings: each case is planned --reps times and its median taken; the
// figure reported is the median of those over the family's cases.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench_stats.h"
#include "planner/planner_csv.h"
#include "planning/planner.h"
#include "support/plan_cases.h"

namespace {

using planrt::planning::MemoryPlan;
using planrt::planning::GreedyOrder;
using planrt::planning::PlannerKind;
using planrt::test::PlanCase;
using planrt::test::PlanFamily;

struct Options {
  std::string out = "bench/results/planner.jsonl";
  size_t cases = 2000;
  size_t min_tensors = 5;
  size_t max_tensors = 200;
  size_t large_cases = 5;  // at --large tensors, to show the O(n^2) cost
  size_t large_tensors = 10000;
  int reps = 5;
  std::string command;      // recorded instead of argv when given (e.g. the build command)
  std::string device_note;  // appended to the CPU name, e.g. "(2 cores, shared)"
  bool smoke = false;
  std::string cases_dir;   // --cases-dir: the CSV cases (planner_csv.h) instead of the families
  double budget_ms = 1000; // --budget-ms: the search's budget per CSV case
  bool minimize = false;   // --minimize: the CSV cases' capacity is not the search's good-enough arena
};

// One planner to benchmark: plan_memory(kind), or one greedy ordering alone.
struct Variant {
  PlannerKind kind = PlannerKind::GreedyBySize;
  std::optional<GreedyOrder> order;
  std::string name;
};

planrt::Result<MemoryPlan> plan_with(const Variant& v,
                                     std::span<const planrt::planning::TensorLifetime> tensors,
                                     uint64_t alignment) {
  if (v.order) return planrt::planning::plan_memory_greedy(tensors, alignment, *v.order);
  return planrt::planning::plan_memory(tensors, alignment, v.kind);
}

std::string current_commit() {
  std::string commit;
  if (FILE* p = popen("git rev-parse --short HEAD 2>/dev/null", "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, p) != nullptr) commit = buf;
    pclose(p);
  }
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r')) commit.pop_back();
  return commit.empty() ? "unknown" : commit;
}

// "cpu: <model name>" from /proc/cpuinfo; the planner runs on the host only.
std::string cpu_name() {
  std::string name = "cpu";
  if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::strncmp(line, "model name", 10) != 0) continue;
      const char* colon = std::strchr(line, ':');
      if (colon == nullptr) break;
      std::string model = colon + 1;
      while (!model.empty() && (model.back() == '\n' || model.back() == ' ')) model.pop_back();
      while (!model.empty() && model.front() == ' ') model.erase(model.begin());
      name += ": " + model;
      break;
    }
    std::fclose(f);
  }
  return name;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) out += ch;
  }
  return out;
}

using planrt::bench::median;

struct FamilyResult {
  double max_ratio = 0.0;
  double median_ratio = 0.0;
  double median_plan_us = 0.0;
  std::string worst_case;
  uint64_t total_arena_bytes = 0;
  uint64_t total_lower_bound_bytes = 0;
};

// Returns false (after printing why) when a plan fails or does not verify.
bool run_family(const std::vector<PlanCase>& cases, uint64_t alignment, const Variant& variant,
                int reps, FamilyResult* result) {
  std::vector<double> ratios;
  std::vector<double> times_us;
  for (const PlanCase& c : cases) {
    std::vector<double> rep_us;
    planrt::Result<MemoryPlan> plan = planrt::Status();
    for (int r = 0; r < reps; ++r) {
      const auto start = std::chrono::steady_clock::now();
      plan = plan_with(variant, c.tensors, alignment);
      const auto stop = std::chrono::steady_clock::now();
      rep_us.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
    }
    if (!plan.ok()) {
      std::fprintf(stderr, "%s: %s\n", planrt::test::describe(c).c_str(),
                   plan.status().to_string().c_str());
      return false;
    }
    if (planrt::Status s = planrt::planning::verify_plan(c.tensors, *plan, alignment); !s.ok()) {
      std::fprintf(stderr, "%s: %s\n", planrt::test::describe(c).c_str(),
                   s.to_string().c_str());
      return false;
    }
    times_us.push_back(median(rep_us));
    ratios.push_back(plan->ratio());
    if (plan->ratio() > result->max_ratio) {
      result->max_ratio = plan->ratio();
      result->worst_case = planrt::test::describe(c);
    }
    result->total_arena_bytes += plan->arena_bytes;
    result->total_lower_bound_bytes += plan->lower_bound_bytes;
  }
  result->median_ratio = median(ratios);
  result->median_plan_us = median(times_us);
  return true;
}

bool parse_size(const char* arg, const char* name, size_t* out) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *out = std::strtoull(arg + n + 1, nullptr, 10);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  std::string command = argv[0];
  bool out_given = false;
  for (int i = 1; i < argc; ++i) {
    command += std::string(" ") + argv[i];
    size_t reps = 0;
    if (std::strcmp(argv[i], "--smoke") == 0) {
      // CI: a few cases per family, one of 1000 tensors, every plan still verified; lines
      // printed, written only with --out (given after --smoke).
      opt.smoke = true;
      opt.out.clear();
      opt.cases = 20;
      opt.large_cases = 1;
      opt.large_tensors = 1000;
      opt.reps = 1;
    } else if (std::strncmp(argv[i], "--out=", 6) == 0) {
      opt.out = argv[i] + 6;
      out_given = true;
    } else if (std::strncmp(argv[i], "--command=", 10) == 0) {
      opt.command = argv[i] + 10;
    } else if (std::strncmp(argv[i], "--cases-dir=", 12) == 0) {
      opt.cases_dir = argv[i] + 12;
    } else if (std::strncmp(argv[i], "--budget-ms=", 12) == 0) {
      opt.budget_ms = std::strtod(argv[i] + 12, nullptr);
    } else if (std::strcmp(argv[i], "--minimize") == 0) {
      opt.minimize = true;
    } else if (std::strncmp(argv[i], "--device-note=", 14) == 0) {
      opt.device_note = argv[i] + 14;
    } else if (parse_size(argv[i], "--cases", &opt.cases) ||
               parse_size(argv[i], "--min-tensors", &opt.min_tensors) ||
               parse_size(argv[i], "--max-tensors", &opt.max_tensors) ||
               parse_size(argv[i], "--large-cases", &opt.large_cases) ||
               parse_size(argv[i], "--large-tensors", &opt.large_tensors)) {
    } else if (parse_size(argv[i], "--reps", &reps) && reps > 0) {
      opt.reps = static_cast<int>(reps);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--smoke] [--out=PATH] [--command=TEXT] [--device-note=TEXT] [--cases=N] [--min-tensors=N] [--max-tensors=N] "
                   "[--large-cases=N] [--large-tensors=N] [--reps=N] | --cases-dir=DIR [--budget-ms=N] [--minimize] [--out=PATH]\n",
                   argv[0]);
      return 2;
    }
  }
  if (opt.min_tensors > opt.max_tensors) {
    std::fprintf(stderr, "--min-tensors %zu exceeds --max-tensors %zu\n", opt.min_tensors,
                 opt.max_tensors);
    return 2;
  }

  if (!opt.cases_dir.empty() && !out_given && !opt.smoke) opt.out = "bench/results/planner_cases.jsonl";
  FILE* out = opt.out.empty() ? nullptr : std::fopen(opt.out.c_str(), "a");
  if (out == nullptr && !opt.out.empty()) {
    std::fprintf(stderr, "cannot open %s for writing: %s\n", opt.out.c_str(), std::strerror(errno));
    return 1;
  }
  const std::string commit = current_commit();
  const std::string device =
      opt.device_note.empty() ? cpu_name() : cpu_name() + " " + opt.device_note;
  if (!opt.command.empty()) command = opt.command;
  if (!opt.cases_dir.empty()) {
    planrt::bench::CsvRunContext context{commit, json_escape(command), json_escape(device),
                                         opt.budget_ms, opt.minimize, out};
    const bool ok = planrt::bench::run_csv_cases(opt.cases_dir, context);
    if (out != nullptr && std::fclose(out) != 0) return 1;
    return ok ? 0 : 1;
  }

  struct Batch {
    size_t cases, min_tensors, max_tensors;
    bool each_ordering;
  };
  const Batch batches[] = {{opt.cases, opt.min_tensors, opt.max_tensors, true},
                           {opt.large_cases, opt.large_tensors, opt.large_tensors, false}};
  bool ok = true;
  for (const Batch& batch : batches) {
    if (batch.cases == 0) continue;
    for (PlanFamily family : planrt::test::all_plan_families()) {
      const std::vector<PlanCase> cases = planrt::test::make_plan_cases(
          family, 1, batch.cases, batch.min_tensors, batch.max_tensors);
      for (uint64_t alignment : {uint64_t{64}, uint64_t{256}}) {
        std::vector<Variant> variants;
        for (PlannerKind kind : {PlannerKind::GreedyBySize, PlannerKind::NoReuse}) {
          variants.push_back({kind, std::nullopt, std::string(planrt::planning::planner_name(kind))});
        }
        if (batch.each_ordering) {
          for (GreedyOrder order : planrt::planning::greedy_orders()) {
            variants.push_back({PlannerKind::GreedyBySize, order,
                                fmt::format("greedy-by-size/{}",
                                            planrt::planning::greedy_order_name(order))});
          }
        }
        for (const Variant& variant : variants) {
          FamilyResult r;
          if (!run_family(cases, alignment, variant, opt.reps, &r)) {
            ok = false;
            continue;
          }
          const std::string line = fmt::format(
              R"({{"bench": "planner", "commit": "{}", "command": "{}", "device": "{}", )"
              R"("family": "{}", "planner": "{}", "alignment": {}, "min_tensors": {}, )"
              R"("max_tensors": {}, "cases": {}, "max_ratio": {:.4f}, "median_ratio": {:.4f}, )"
              R"("median_plan_us": {:.2f}, "total_arena_bytes": {}, )"
              R"("total_lower_bound_bytes": {}, "worst_case": "{}"}})",
              json_escape(commit), json_escape(command), json_escape(device),
              planrt::test::plan_family_name(family),
              variant.name, alignment, batch.min_tensors,
              batch.max_tensors, cases.size(), r.max_ratio, r.median_ratio, r.median_plan_us,
              r.total_arena_bytes, r.total_lower_bound_bytes, r.worst_case);
          if (out != nullptr) std::fprintf(out, "%s\n", line.c_str());
          std::printf("%s\n", line.c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  if (out != nullptr && std::fclose(out) != 0) {
    std::fprintf(stderr, "writing %s failed\n", opt.out.c_str());
    return 1;
  }
  return ok ? 0 : 1;
}
