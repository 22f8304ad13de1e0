// planrt's CPU `linear` against a raw cblas_sgemm of the same size, in one run, so that the
// ratio is measured under the same machine load. x[2048, 512] @ weight[2048, 512]^T (+ bias
// for planrt). Appends one JSON line to bench/results/cpu_linear.jsonl (or --out=PATH) with
// the commit, the machine, the command, the median time and GFLOP/s of both and their ratio.
//
// Repetitions run interleaved in random order by default (Google Benchmark's
// --benchmark_enable_random_interleaving), so drifting load from other processes spreads
// over both rather than biasing one. Before timing, planrt's output is checked against the
// sgemm's plus the bias (relative error at most 1e-5); a mismatch fails the benchmark.
// --smoke (CI): 2 repetitions of at least 10 ms each, the check still made, a line only
// with --out. Exit 0: done; 1: an error or a wrong output.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench_stats.h"
#include "kernels/kernel.h"

namespace {

constexpr int64_t kRows = 2048;  // M: tokens
constexpr int64_t kIn = 512;     // K
constexpr int64_t kOut = 2048;   // N
constexpr double kFlops = 2.0 * kRows * kIn * kOut;

struct Operands {
  std::vector<float> x, w, b, y;
  Operands() : x(kRows * kIn), w(kOut * kIn), b(kOut), y(kRows * kOut) {
    std::mt19937 gen(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto* v : {&x, &w, &b}) {
      for (float& f : *v) f = dist(gen);
    }
  }
};

Operands& operands() {
  static Operands ops;
  return ops;
}

// planrt's linear against cblas_sgemm + bias on the benchmark's operands: the relative
// (Frobenius) error, or a negative value when the kernel fails.
double linear_error() {
  using namespace planrt;
  Operands& o = operands();
  auto fn = kernels::find_cpu_kernel("linear");
  if (!fn.ok()) return -1;
  std::vector<float> y(o.y.size()), ref(o.y.size());
  const TensorView inputs[] = {
      TensorView::contiguous(o.x.data(), DType::F32, {kRows, kIn}),
      TensorView::contiguous(o.w.data(), DType::F32, {kOut, kIn}),
      TensorView::contiguous(o.b.data(), DType::F32, {kOut}),
  };
  const TensorView outputs[] = {TensorView::contiguous(y.data(), DType::F32, {kRows, kOut})};
  if (!(*fn)(kernels::OpAttrs{}, std::span<const TensorView>(inputs), std::span<const TensorView>(outputs)).ok()) {
    return -1;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kRows, kOut, kIn, 1.0f, o.x.data(), kIn,
              o.w.data(), kIn, 0.0f, ref.data(), kOut);
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double want = static_cast<double>(ref[i]) + o.b[i % kOut];
    num += (y[i] - want) * (y[i] - want);
    den += want * want;
  }
  return std::sqrt(num / den);
}

void BM_planrt_linear(benchmark::State& state) {
  using namespace planrt;
  Operands& o = operands();
  auto fn = kernels::find_cpu_kernel("linear");
  if (!fn.ok()) {
    state.SkipWithError(fn.status().to_string().c_str());
    return;
  }
  const TensorView inputs[] = {
      TensorView::contiguous(o.x.data(), DType::F32, {kRows, kIn}),
      TensorView::contiguous(o.w.data(), DType::F32, {kOut, kIn}),
      TensorView::contiguous(o.b.data(), DType::F32, {kOut}),
  };
  const TensorView outputs[] = {TensorView::contiguous(o.y.data(), DType::F32, {kRows, kOut})};
  const kernels::OpAttrs attrs;
  for (auto _ : state) {
    Status s =
        (*fn)(attrs, std::span<const TensorView>(inputs), std::span<const TensorView>(outputs));
    if (!s.ok()) {
      state.SkipWithError(s.to_string().c_str());
      return;
    }
    benchmark::ClobberMemory();
  }
}

void BM_cblas_sgemm(benchmark::State& state) {
  Operands& o = operands();
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kRows, kOut, kIn, 1.0f, o.x.data(), kIn,
                o.w.data(), kIn, 0.0f, o.y.data(), kOut);
    benchmark::ClobberMemory();
  }
}

// Prints as usual and keeps each benchmark's median (milliseconds) and coefficient of
// variation (a fraction) over the repetitions for the JSON line.
class MedianReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Aggregate || run.error_occurred) continue;
      const std::string& name = run.run_name.function_name;
      if (run.aggregate_name == "median") medians_ms[name] = run.GetAdjustedRealTime();
      // A percentage statistic is stored unscaled in the accumulated time.
      if (run.aggregate_name == "cv") cvs[name] = run.real_accumulated_time;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> medians_ms;
  std::map<std::string, double> cvs;
};

std::string run_command(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

// The 1-, 5- and 15-minute load averages: a shared machine's load explains a noisy run.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return in ? one + " " + five + " " + fifteen : "unknown";
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path source_dir = std::filesystem::path(__FILE__).parent_path();
  std::string out_flag;  // --out=PATH
  std::string command;
  bool interleave_set = false;
  bool smoke = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    command += (i ? " " : "") + a;
    if (a.rfind("--out=", 0) == 0) {
      out_flag = a.substr(6);
      continue;
    }
    if (a == "--smoke") {
      smoke = true;
      continue;
    }
    if (a.rfind("--benchmark_enable_random_interleaving", 0) == 0) interleave_set = true;
    args.push_back(argv[i]);
  }
  std::string interleave = "--benchmark_enable_random_interleaving=true";
  if (!interleave_set) args.push_back(interleave.data());
  std::string min_time = "--benchmark_min_time=0.01";
  if (smoke) args.push_back(min_time.data());
  const std::string out_path =
      planrt::bench::results_path(out_flag, smoke, (source_dir / "results" / "cpu_linear.jsonl").string());
  const double error = linear_error();
  std::printf("planrt linear vs cblas_sgemm + bias: relative error %.2e\n", error);
  if (error < 0 || error > 1e-5) {
    std::fprintf(stderr, "cpu_linear_bench: planrt's linear %s\n",
                 error < 0 ? "failed" : "disagrees with cblas_sgemm + bias");
    return 1;
  }
  int bargc = static_cast<int>(args.size());
  benchmark::Initialize(&bargc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bargc, args.data())) return 2;

  const int kRepetitions = smoke ? 2 : 15;
  for (auto* b : {benchmark::RegisterBenchmark("planrt_linear", BM_planrt_linear),
                  benchmark::RegisterBenchmark("cblas_sgemm", BM_cblas_sgemm)}) {
    b->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Repetitions(kRepetitions)
        ->ReportAggregatesOnly(true);
  }
  const std::string load_before = load_average();  // others' load, before ours adds to it
  MedianReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  auto planrt_it = reporter.medians_ms.find("planrt_linear");
  auto sgemm_it = reporter.medians_ms.find("cblas_sgemm");
  if (planrt_it == reporter.medians_ms.end() || sgemm_it == reporter.medians_ms.end()) {
    std::fprintf(stderr,
                 "cpu_linear_bench: a benchmark failed or was filtered out; no result written\n");
    return 1;
  }
  const double planrt_ms = planrt_it->second;
  const double sgemm_ms = sgemm_it->second;
  const double planrt_gflops = kFlops / (planrt_ms * 1e-3) / 1e9;
  const double sgemm_gflops = kFlops / (sgemm_ms * 1e-3) / 1e9;
  std::string commit =
      run_command("git -C '" + source_dir.string() + "' rev-parse --short HEAD 2>/dev/null");
  if (commit.empty()) commit = "unknown";

  try {
    nlohmann::json line = {
        {"bench", "cpu_linear"},
        {"date", utc_now()},
        {"commit", commit},
        {"machine",
         {{"nproc", sysconf(_SC_NPROCESSORS_ONLN)},
          {"cpu", cpu_model()},
          {"load_average_before", load_before},
          {"openblas_threads", openblas_get_num_threads()},
          {"openblas_config", openblas_get_config()}}},
        {"command", command},
        {"shape", {{"x", {kRows, kIn}}, {"weight", {kOut, kIn}}, {"bias", {kOut}}}},
        {"repetitions", kRepetitions},
        {"planrt_linear",
         {{"median_ms", planrt_ms},
          {"gflops", planrt_gflops},
          {"cv", reporter.cvs["planrt_linear"]}}},
        {"cblas_sgemm",
         {{"median_ms", sgemm_ms}, {"gflops", sgemm_gflops}, {"cv", reporter.cvs["cblas_sgemm"]}}},
        // Rate ratio: 1.0 means planrt's linear runs as fast as the bare sgemm.
        {"ratio_gflops_planrt_over_sgemm", planrt_gflops / sgemm_gflops},
        {"relative_error", error},
        {"smoke", smoke},
    };
    if (out_path.empty()) return 0;
    std::ofstream out(out_path, std::ios::app);
    out << line.dump() << "\n";
    if (!out) {
      std::fprintf(stderr, "cpu_linear_bench: cannot write %s\n", out_path.c_str());
      return 1;
    }
    std::printf("%s\nappended to %s\n", line.dump(2).c_str(), out_path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpu_linear_bench: cannot format the result: %s\n", e.what());
    return 1;
  }
  return 0;
}
