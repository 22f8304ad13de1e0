// The CSV planner cases (the MiniMalloc benchmark's format, ../shared/planner-cases): one
// buffer per line, "id,lower,upper,size" with the half-open lifetime [lower, upper), under a
// header line; the capacity a packing must fit is the number in the file name
// (A.1048576.csv). planner_bench --cases-dir=DIR plans each at alignment 1 with the greedy,
// then the search (planning/packing_search.h) within --budget-ms, told the capacity as its
// good-enough arena (as MiniMalloc is given it; --minimize: not told, so it looks for the
// smallest arena until the budget ends), verifies every plan and writes one JSON line per
// case.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "planning/planner.h"

namespace planrt::bench {

struct CsvCase {
  std::string name;       // the file name without ".csv"
  uint64_t capacity = 0;  // 0 when the name carries none
  std::vector<planning::TensorLifetime> tensors;
};

// Reads one case; an error names the file and line.
Result<CsvCase> read_csv_case(const std::string& path);

struct CsvRunContext {
  std::string commit, command, device;
  double budget_ms = 1000;
  bool minimize = false;  // true: no good-enough arena, the search minimizes within the budget
  FILE* out = nullptr;  // JSON lines also go here when set
};

// Every *.csv of `dir`, in name order. false when a case fails to read, plan or verify.
bool run_csv_cases(const std::string& dir, const CsvRunContext& context);

}  // namespace planrt::bench
