// Constant mapping: does Program::load map a program's weights or copy them?
//
// Writes a program whose constants total 1 GiB (16 constants of 64 MiB, [262144, 64] f32
// embedding tables) to a temporary directory, then measures the process's resident memory
// (VmRSS) before Program::load, after it, after load_method of a method that reads every
// constant (16 embedding lookups), and after one execute. Resident memory must not grow by
// the constant size at load: the weights are mapped, and an execute touches only the rows
// it gathers. Program::load time is the median of --runs loads of the same file.
// Appends one JSON line to bench/results/load.jsonl (or --out=PATH) and deletes the file.
// Checks, in every mode: the gathered rows are the tables' rows, and resident memory after
// load and load_method grew by less than half the constants (exit 2 otherwise).
// --smoke (CI): 16 constants of 4 MiB, 3 loads; a line only with --out.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench_stats.h"
#include "format/writer.h"
#include "planrt/runtime/program.h"

namespace {

using namespace planrt;

constexpr int kConstants = 16;
int64_t table_rows = 262144;  // rows per table (--smoke: 16384); set once by main
constexpr int64_t kCols = 64;  // 262144 * 64 * 4 bytes = 64 MiB per constant
constexpr int64_t kMaxIds = 8;

int64_t vm_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // kB
  }
  return -1;
}

std::string run_command(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

fb::DimRef fixed(int64_t v) { return fb::DimRef(v, -1); }

// Method "lookup": ids [N] i64 (N in [1, 8]); y_i = embedding(ids, table_i) for every table.
fb::ProgramT make_program() {
  fb::ProgramT program;
  program.producer = "load_bench";
  auto m = std::make_unique<fb::MethodT>();
  m->name = "lookup";
  auto n = std::make_unique<fb::DimSpecT>();
  n->name = "N";
  n->min = 1;
  n->max = kMaxIds;
  m->dims.push_back(std::move(n));
  auto ids = std::make_unique<fb::ValueT>();
  ids->name = "ids";
  ids->kind = fb::ValueKind::Planned;
  ids->dtype = fb::DType::I64;
  ids->shape = {fb::DimRef(1, 0)};
  m->values.push_back(std::move(ids));
  m->inputs = {0};
  const uint64_t slot = 4096;  // room for ids or one [8, 64] f32 output
  for (int i = 0; i < kConstants; ++i) {
    auto c = std::make_unique<fb::ConstantT>();
    c->name = "table" + std::to_string(i);
    c->dtype = fb::DType::F32;
    c->shape = {table_rows, kCols};
    program.constants.push_back(std::move(c));

    auto table = std::make_unique<fb::ValueT>();
    table->name = "table" + std::to_string(i);
    table->kind = fb::ValueKind::Constant;
    table->shape = {fixed(table_rows), fixed(kCols)};
    table->constant = static_cast<uint32_t>(i);
    auto y = std::make_unique<fb::ValueT>();
    y->name = "y" + std::to_string(i);
    y->kind = fb::ValueKind::Planned;
    y->shape = {fb::DimRef(1, 0), fixed(kCols)};
    y->buffer = 0;
    y->offset = slot * static_cast<uint64_t>(i + 1);
    auto table_id = static_cast<uint32_t>(m->values.size());
    m->values.push_back(std::move(table));
    auto y_id = static_cast<uint32_t>(m->values.size());
    m->values.push_back(std::move(y));
    auto ins = std::make_unique<fb::InstructionT>();
    ins->kind = fb::InstructionKind::Kernel;
    ins->op = "embedding";
    ins->inputs = {0, table_id};
    ins->outputs = {y_id};
    ins->node = "lookup" + std::to_string(i);
    m->instructions.push_back(std::move(ins));
    m->outputs.push_back(y_id);
  }
  auto buffer = std::make_unique<fb::PlannedBufferT>();
  buffer->size_bytes = slot * (kConstants + 1);
  buffer->device = std::make_unique<fb::DeviceRef>(fb::DeviceType::CPU, 0);
  m->planned_buffers.push_back(std::move(buffer));
  program.methods.push_back(std::move(m));
  return program;
}

int fail(const Status& s) {
  std::fprintf(stderr, "load_bench: %s\n", s.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path source_dir = std::filesystem::path(__FILE__).parent_path();
  std::string out_flag;  // --out=PATH
  std::filesystem::path dir = std::filesystem::temp_directory_path();
  int runs = 15;
  bool smoke = false;
  std::string command;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    command += (i ? " " : "") + a;
    if (a.rfind("--out=", 0) == 0) out_flag = a.substr(6);
    else if (a.rfind("--dir=", 0) == 0) dir = a.substr(6);
    else if (a.rfind("--runs=", 0) == 0) runs = std::max(1, std::stoi(a.substr(7)));
    else if (a == "--smoke") smoke = true;
    else if (i > 0) {
      std::fprintf(stderr, "load_bench: unknown argument %s\n", a.c_str());
      return 1;
    }
  }
  if (smoke) {
    table_rows = 16384;
    runs = 3;
  }
  const std::string out_path =
      planrt::bench::results_path(out_flag, smoke, (source_dir / "results" / "load.jsonl").string());
  const std::string path = (dir / ("planrt_load_bench_" + std::to_string(getpid()) + ".prog")).string();
  const uint64_t constants_bytes = uint64_t{kConstants} * table_rows * kCols * 4;
  // The 1 GiB file goes on every exit path.
  struct RemoveOnExit {
    std::string path;
    ~RemoveOnExit() { std::filesystem::remove(path); }
  } remove_on_exit{path};

  {
    // One table repeated, element i holding i % 1024 (what the check after the execute
    // expects). Freed (and returned to the OS) before the first measurement.
    std::vector<float> table(static_cast<size_t>(table_rows * kCols));
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i % 1024);
    std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(table.data()), table.size() * 4);
    std::vector<std::span<const uint8_t>> constants(kConstants, bytes);
    Status written = format::write_program(make_program(), constants, path);
    if (!written.ok()) return fail(written);
  }

  std::vector<double> load_ms;
  for (int r = 0; r < runs; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    Result<Program> p = Program::load(path);
    auto t1 = std::chrono::steady_clock::now();
    if (!p.ok()) return fail(p.status());
    load_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(load_ms.begin(), load_ms.end());

  const int64_t rss_before = vm_rss_bytes();
  Result<Program> program = Program::load(path);
  if (!program.ok()) return fail(program.status());
  const int64_t rss_after_load = vm_rss_bytes();
  Result<Method> method = program->load_method("lookup");
  if (!method.ok()) return fail(method.status());
  const int64_t rss_after_load_method = vm_rss_bytes();
  std::vector<int64_t> ids = {0, 1, table_rows / 2, table_rows - 1};
  TensorView in = TensorView::contiguous(ids.data(), DType::I64, {static_cast<int64_t>(ids.size())});
  Result<std::vector<Tensor>> out = method->execute({&in, 1});
  if (!out.ok()) return fail(out.status());
  const int64_t rss_after_execute = vm_rss_bytes();
  if (program->constants_bytes() != constants_bytes) {
    return fail(make_error(ErrorCode::Internal, "the program holds {} constant bytes, expected {}",
                           program->constants_bytes(), constants_bytes));
  }
  // Row r of every table holds (r * kCols + c) % 1024.
  for (size_t t = 0; t < out->size(); ++t) {
    auto y = (*out)[t].values<float>();
    for (size_t r = 0; r < ids.size(); ++r) {
      for (int64_t c = 0; c < kCols; ++c) {
        const float want = static_cast<float>((ids[r] * kCols + c) % 1024);
        if (y[r * kCols + static_cast<size_t>(c)] != want) {
          return fail(make_error(ErrorCode::Internal, "y{}[{}, {}] is {}, expected {}", t, r, c,
                                 y[r * kCols + static_cast<size_t>(c)], want));
        }
      }
    }
  }

  nlohmann::json line = {
      {"bench", "load"},
      {"commit", [&] {
         std::string c = run_command("git -C '" + source_dir.string() + "' rev-parse --short HEAD 2>/dev/null");
         return c.empty() ? std::string("unknown") : c;
       }()},
      {"command", command},
      {"device", "cpu"},
      {"constants_bytes", constants_bytes},
      {"load_runs", runs},
      {"load_ms", load_ms[load_ms.size() / 2]},
      {"rss_before", rss_before},
      {"rss_after_load", rss_after_load},
      {"rss_growth_bytes", rss_after_load - rss_before},
      {"rss_after_load_method", rss_after_load_method},
      {"rss_after_execute", rss_after_execute},
      {"rss_growth_ratio_to_constants",
       static_cast<double>(rss_after_execute - rss_before) / static_cast<double>(constants_bytes)},
  };
  // Load and load_method map the constants; the first execute adds a fixed cost of its own
  // (the kernels' libraries initialising, ~34 MB here whatever the constants), not a copy.
  const double growth = static_cast<double>(rss_after_load_method - rss_before) / static_cast<double>(constants_bytes);
  line["smoke"] = smoke;
  std::printf("%s\n", line.dump().c_str());
  if (growth >= 0.5) {
    std::fprintf(stderr, "load_bench: resident memory grew by %.2f of the constants: they were copied, not mapped\n",
                 growth);
    return 2;
  }
  if (out_path.empty()) return 0;
  std::ofstream out_file(out_path, std::ios::app);
  if (!out_file) {
    std::fprintf(stderr, "load_bench: cannot append to %s\n", out_path.c_str());
    return 1;
  }
  out_file << line.dump() << "\n";
  return 0;
}
