#include "planner/planner_csv.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "planning/packing_search.h"

namespace planrt::bench {

Result<CsvCase> read_csv_case(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(ErrorCode::IoError, "cannot open '{}'", path);
  CsvCase c;
  const std::filesystem::path p(path);
  c.name = p.stem().string();
  const std::string stem = c.name;
  const size_t dot = stem.find('.');
  if (dot != std::string::npos) c.capacity = std::strtoull(stem.c_str() + dot + 1, nullptr, 10);
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line.rfind("id", 0) == 0) continue;  // the header
    std::istringstream fields(line);
    long long id = 0, lower = 0, upper = 0;
    unsigned long long size = 0;
    char c1 = 0, c2 = 0, c3 = 0;
    if (!(fields >> id >> c1 >> lower >> c2 >> upper >> c3 >> size) || c1 != ',' || c2 != ',' ||
        c3 != ',' || upper <= lower) {
      return make_error(ErrorCode::InvalidArgument, "{}:{}: expected id,lower,upper,size with "
                        "lower < upper, got '{}'", path, number, line);
    }
    // [lower, upper) half-open -> the planner's inclusive [first_use, last_use].
    c.tensors.push_back({size, lower, upper - 1});
  }
  return c;
}

bool run_csv_cases(const std::string& dir, const CsvRunContext& context) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".csv") files.push_back(entry.path().string());
  }
  if (ec) {
    std::fprintf(stderr, "cannot list '%s': %s\n", dir.c_str(), ec.message().c_str());
    return false;
  }
  std::sort(files.begin(), files.end());
  bool ok = !files.empty();
  if (files.empty()) std::fprintf(stderr, "no .csv cases in '%s'\n", dir.c_str());
  for (const std::string& file : files) {
    Result<CsvCase> c = read_csv_case(file);
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", c.status().to_string().c_str());
      ok = false;
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    Result<planning::MemoryPlan> plan = planning::plan_memory(c->tensors, 1);
    if (!plan.ok()) {
      std::fprintf(stderr, "%s: %s\n", c->name.c_str(), plan.status().to_string().c_str());
      ok = false;
      continue;
    }
    const auto greedy_done = std::chrono::steady_clock::now();
    const uint64_t greedy = plan->arena_bytes;
    const planning::SearchReport search =
        planning::improve_plan(c->tensors, 1, context.budget_ms, *plan,
                               context.minimize ? 0 : c->capacity);
    const auto stop = std::chrono::steady_clock::now();
    if (Status s = planning::verify_plan(c->tensors, *plan, 1); !s.ok()) {
      std::fprintf(stderr, "%s: %s\n", c->name.c_str(), s.to_string().c_str());
      ok = false;
      continue;
    }
    const double greedy_ms = std::chrono::duration<double, std::milli>(greedy_done - start).count();
    const double total_ms = std::chrono::duration<double, std::milli>(stop - start).count();
    const std::string line = fmt::format(
        R"({{"bench": "planner_cases", "commit": "{}", "command": "{}", "device": "{}", )"
        R"("case": "{}", "tensors": {}, "capacity": {}, "lower_bound_bytes": {}, )"
        R"("greedy_arena_bytes": {}, "greedy_ratio": {:.4f}, "arena_bytes": {}, "ratio": {:.4f}, )"
        R"("fits_capacity": {}, "stop": "{}", "proven_impossible_bytes": {}, "search_nodes": {}, )"
        R"("budget_ms": {}, "good_enough_bytes": {}, "greedy_ms": {:.2f}, "total_ms": {:.2f}}})",
        context.commit, context.command, context.device, c->name, c->tensors.size(), c->capacity,
        plan->lower_bound_bytes, greedy, static_cast<double>(greedy) / plan->lower_bound_bytes,
        plan->arena_bytes, plan->ratio(),
        c->capacity == 0 ? "null" : (plan->arena_bytes <= c->capacity ? "true" : "false"),
        planning::search_stop_name(search.stop), search.proven_impossible_bytes, search.nodes,
        context.budget_ms, context.minimize ? 0 : c->capacity, greedy_ms, total_ms);
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    if (context.out != nullptr) std::fprintf(context.out, "%s\n", line.c_str());
  }
  return ok;
}

}  // namespace planrt::bench
