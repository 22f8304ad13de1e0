// End-to-end tests of the planrt CLI: exit codes (0 ok, 1 runtime error, 2 usage error),
// "error:" lines on stderr, and the JSON shapes other tools read.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "format/npy.h"
#include "planrt/core/dtype.h"
#include "support/gpu.h"

namespace {

namespace fs = std::filesystem;

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class CliTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("planrt_cli_" + std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // The CLI under test: PLANRT_CLI where set (a build carried to another machine, run by
  // scripts/gpu-test.sh), else the one this test was built beside.
  static std::string cli_path() {
    const char* env = std::getenv("PLANRT_CLI");
    return env != nullptr && *env != '\0' ? std::string(env) : std::string(PLANRT_CLI_PATH);
  }

  static std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  CommandResult planrt(const std::string& args) const { return planrt_env("", args); }

  // `env` is prepended to the command line ("NAME=VALUE ..."), for the process alone.
  CommandResult planrt_env(const std::string& env, const std::string& args) const {
    std::string out = path("stdout.txt"), err = path("stderr.txt");
    std::string cmd = env + " " + cli_path() + " " + args + " >" + out + " 2>" + err;
    int status = std::system(cmd.c_str());
    CommandResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  // A small transformer program, built once per test that needs it.
  std::string build_small_program(const std::string& extra = "") {
    std::string prog = path("small.prog");
    CommandResult r = planrt("build --template transformer --layers 2 --d-model 32 --heads 4 "
                             "--ffn 64 --max-seq 16 --weights random:1 " + extra + " -o " + prog);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return prog;
  }

  fs::path dir_;
};

TEST_F(CliTest, NoSubcommandIsAUsageError) {
  CommandResult r = planrt("");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
}

TEST_F(CliTest, UnknownFlagIsAUsageError) {
  CommandResult r = planrt("inspect --no-such-flag x.prog");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
}

TEST_F(CliTest, ABadOnnxModelIsARuntimeErrorAndWritesNothing) {
  {
    std::ofstream junk(path("bad.onnx"), std::ios::binary);
    junk << "\x08\x07\x12\xff truncated";
  }
  CommandResult r = planrt("build " + path("bad.onnx") + " -o " + path("out.prog"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("error: '" + path("bad.onnx") + "' is not an ONNX model"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("out.prog")));
}

TEST_F(CliTest, OnnxFlagsAreCheckedAsUsage) {
  CommandResult r = planrt("build " + path("m.onnx") + " --dim seq=9..2 -o " + path("o.prog"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--dim 'seq=9..2' must be NAME=MIN..MAX"), std::string::npos) << r.err;
  r = planrt("build " + path("m.onnx") + " --input-value shape -o " + path("o.prog"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--input-value 'shape' must be NAME=PATH"), std::string::npos) << r.err;
  r = planrt("build " + path("m.json") + " --dim seq=1..2 -o " + path("o.prog"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("apply to an ONNX model"), std::string::npos) << r.err;
}

TEST_F(CliTest, ANegativePlanTimeBudgetIsAUsageError) {
  CommandResult r = planrt("build " + path("m.json") + " --plan-time-budget -5 -o " + path("o.prog"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--plan-time-budget"), std::string::npos) << r.err;
}

TEST_F(CliTest, HelpExitsZero) {
  CommandResult r = planrt("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("inspect"), std::string::npos);
}

TEST_F(CliTest, VersionSaysWhetherTheBuildHasCuda) {
  CommandResult r = planrt("--version");
  EXPECT_EQ(r.exit_code, 0);
#ifdef PLANRT_HAVE_CUDA
  EXPECT_NE(r.out.find("with CUDA"), std::string::npos) << r.out;
#else
  EXPECT_NE(r.out.find("CPU only"), std::string::npos) << r.out;
#endif
}

// The CUDA math libraries are opened on first CUDA use (kernels/cuda/cublas_library.h), so
// CPU work in a CUDA build never loads them. LD_DEBUG=files makes the dynamic loader list
// every library it loads, linked or opened, on stderr.
TEST_F(CliTest, CpuWorkNeverLoadsTheCudaMathLibraries) {
  std::string prog = build_small_program();  // partition cpu
  const std::string runs[] = {
      "--version", "inspect " + prog, "inspect --json " + prog,
      "build --template transformer --layers 1 --d-model 32 --heads 4 --ffn 64 --max-seq 16 "
      "--weights random:2 -o " + path("other.prog"),
      "run " + prog + " --random-inputs 1 --dim S=8 --iterations 2"};
  for (const std::string& args : runs) {
    SCOPED_TRACE(args);
    CommandResult r = planrt_env("LD_DEBUG=files", args);
    ASSERT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);
    // The loader did list what it loaded, so the absence below means something.
    ASSERT_NE(r.err.find("file=libc.so"), std::string::npos) << r.err.substr(0, 2000);
    EXPECT_EQ(r.err.find("libcublas"), std::string::npos);
  }
}

TEST_F(CliTest, TheFirstCudaRunOpensTheCudaMathLibraries) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  std::string prog = build_small_program("--partition cuda");
  CommandResult r = planrt_env("LD_DEBUG=files", "run " + prog + " --random-inputs 1 --dim S=8 --iterations 1");
  ASSERT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);
  EXPECT_NE(r.err.find("file=libcublasLt.so"), std::string::npos);
  EXPECT_NE(r.err.find("file=libcublas.so"), std::string::npos);
}

// Missing at that moment: the method's load fails naming the library and where it looked.
TEST_F(CliTest, ACudaRunWithoutTheMathLibrariesFailsNamingThem) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  std::string prog = build_small_program("--partition cuda");
  CommandResult r = planrt_env("PLANRT_CUDA_MATH_LIBRARY_DIR=/nonexistent/planrt-cuda",
                               "run " + prog + " --random-inputs 1 --dim S=8 --iterations 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot load the CUDA math library libcublasLt.so"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/planrt-cuda/libcublasLt.so"), std::string::npos) << r.err;
}

TEST_F(CliTest, MissingProgramIsARuntimeError) {
  CommandResult r = planrt("inspect " + path("missing.prog"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("missing.prog"), std::string::npos) << r.err;
}

TEST_F(CliTest, RandomBytesAreRefusedByInspectAndRun) {
  std::mt19937 rng(7);
  std::string junk(4096, '\0');
  for (char& c : junk) c = static_cast<char>(rng());
  std::ofstream(path("junk.prog"), std::ios::binary) << junk;
  for (const char* cmd : {"inspect ", "run "}) {
    CommandResult r = planrt(cmd + path("junk.prog"));
    EXPECT_EQ(r.exit_code, 1) << cmd << r.err;
    EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
  }
}

TEST_F(CliTest, TruncatedProgramIsRefused) {
  std::string prog = build_small_program();
  std::string bytes = slurp(prog);
  ASSERT_GT(bytes.size(), 200u);
  std::ofstream(path("cut.prog"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  CommandResult r = planrt("run " + path("cut.prog") + " --random-inputs 0");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
}

TEST_F(CliTest, BuildTemplateThenInspectJsonReportsThePlan) {
  std::string prog = build_small_program();
  CommandResult r = planrt("inspect --json " + prog);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["methods"].size(), 1u);
  const nlohmann::json& m = j["methods"][0];
  EXPECT_EQ(m["name"], "forward");
  ASSERT_FALSE(m["planned_buffers"].empty());
  EXPECT_EQ(m["planned_buffers"][0]["device"], "cpu");
  EXPECT_GT(m["planned_buffers"][0]["size_bytes"].get<uint64_t>(), 0u);
  ASSERT_FALSE(m["plan"].empty());
  uint64_t lower = m["plan"][0]["lower_bound_bytes"];
  uint64_t planned = m["plan"][0]["planned_bytes"];
  EXPECT_GE(planned, lower);
  EXPECT_LE(static_cast<double>(planned), 1.05 * static_cast<double>(lower));
}

TEST_F(CliTest, InspectPlotWritesAnSvgWithOneBoxPerTensor) {
  std::string prog = build_small_program();
  CommandResult r = planrt("inspect " + prog + " --plot " + path("plan.svg"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string svg = slurp(path("plan.svg"));
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("lower bound"), std::string::npos);
  EXPECT_GT(std::count(svg.begin(), svg.end(), '\n'), 20);
}

TEST_F(CliTest, NoReuseBuildPlansMoreBytes) {
  std::string reuse = build_small_program();
  CommandResult b = planrt("build --template transformer --layers 2 --d-model 32 --heads 4 "
                           "--ffn 64 --max-seq 16 --no-reuse -o " + path("noreuse.prog"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto planned = [&](const std::string& p) {
    CommandResult r = planrt("inspect --json " + p);
    return nlohmann::json::parse(r.out)["methods"][0]["plan"][0]["planned_bytes"].get<uint64_t>();
  };
  EXPECT_GT(planned(path("noreuse.prog")), planned(reuse));
}

TEST_F(CliTest, RunJsonReportsOutputsLatencyAndMemory) {
  std::string prog = build_small_program();
  CommandResult r = planrt("run " + prog + " --random-inputs 3 --dim S=8 --iterations 3 "
                           "--warmup 1 --json --output-dir " + path("outs"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["outputs"].size(), 1u);
  EXPECT_EQ(j["outputs"][0]["name"], "y");
  EXPECT_EQ(j["outputs"][0]["shape"], nlohmann::json::array({1, 8, 32}));
  EXPECT_GT(j["latency_ms"]["median"].get<double>(), 0.0);
  EXPECT_TRUE(j.contains("memory"));
  EXPECT_TRUE(fs::exists(path("outs/y.npy")));
}

// --profile: the text report sums the timed runs' steps by op and names the slowest; the
// JSON one lists every step with the timed runs only (warm-ups left out) as its calls.
TEST_F(CliTest, RunProfileReportsTheTimedRunsStepByStep) {
  std::string prog = build_small_program();
  CommandResult text = planrt("run " + prog + " --random-inputs 3 --dim S=8 --iterations 4 --warmup 2 --profile");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("profile over the 4 timed run(s)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("kernel    linear"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("slowest steps:"), std::string::npos) << text.out;
  CommandResult r = planrt("run " + prog + " --random-inputs 3 --dim S=8 --iterations 3 --warmup 1 --profile --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("profile"));
  ASSERT_GT(j["profile"].size(), 5u);
  double total = 0;
  for (const nlohmann::json& step : j["profile"]) {
    EXPECT_EQ(step["calls"], 3) << step.dump();
    EXPECT_EQ(step["kind"], "kernel") << step.dump();
    EXPECT_FALSE(step["op"].get<std::string>().empty()) << step.dump();
    EXPECT_GE(step["total_ms"].get<double>(), 0.0) << step.dump();
    total += step["total_ms"].get<double>();
  }
  EXPECT_GT(total, 0.0);
  // Without the flag, no profile.
  CommandResult plain = planrt("run " + prog + " --random-inputs 3 --dim S=8 --json");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(nlohmann::json::parse(plain.out).contains("profile"));
}

TEST_F(CliTest, RunWithTheSameSeedGivesTheSameOutput) {
  std::string prog = build_small_program();
  auto mean = [&]() {
    CommandResult r = planrt("run " + prog + " --random-inputs 5 --dim S=4 --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["outputs"][0]["mean"].get<double>();
  };
  EXPECT_EQ(mean(), mean());
}

TEST_F(CliTest, RunInputFromNpyRoundTripsThroughOutputDir) {
  std::string prog = build_small_program();
  CommandResult first = planrt("run " + prog + " --random-inputs 2 --dim S=4 --output-dir " +
                               path("a") + " --json");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // Feed the output back in as the input: shapes match ([1, S, d_model]).
  CommandResult second = planrt("run " + prog + " --input x=" + path("a/y.npy") + " --json");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(nlohmann::json::parse(second.out)["outputs"][0]["shape"],
            nlohmann::json::array({1, 4, 32}));
}

TEST_F(CliTest, RunRejectsDimOutsideItsBounds) {
  std::string prog = build_small_program();
  CommandResult r = planrt("run " + prog + " --random-inputs 0 --dim S=17");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("S"), std::string::npos) << r.err;
}

TEST_F(CliTest, RunRejectsNpyOfWrongShape) {
  std::string prog = build_small_program();
  CommandResult first = planrt("run " + prog + " --random-inputs 2 --dim S=4 --output-dir " + path("a"));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  CommandResult other = planrt("build --template transformer --layers 1 --d-model 16 --heads 4 "
                               "--ffn 32 --max-seq 16 -o " + path("narrow.prog"));
  ASSERT_EQ(other.exit_code, 0) << other.err;
  CommandResult r = planrt("run " + path("narrow.prog") + " --input x=" + path("a/y.npy"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
}

TEST_F(CliTest, RunRejectsMalformedInputFlag) {
  std::string prog = build_small_program();
  CommandResult r = planrt("run " + prog + " --input no-equals-sign");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
}

TEST_F(CliTest, RunRejectsMalformedBackendOptions) {
  std::string prog = build_small_program();
  for (const char* bad : {"cuda", "cuda=1", ".allow_tf32=true", "cuda.=true", "cuda.allow_tf32="}) {
    CommandResult r = planrt("run " + prog + " --random-inputs 1 --backend-option " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("BACKEND.KEY=VALUE"), std::string::npos) << r.err;
  }
}

TEST_F(CliTest, HostProgramRunsWithoutStreamsOrWaits) {
  std::string prog = build_small_program();
  // An option for a backend the program does not use is accepted and changes nothing.
  CommandResult r = planrt("run " + prog + " --random-inputs 1 --dim S=4 --json "
                           "--backend-option engine.use_shared_activation_scratch=true");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["streams"], 0);
  EXPECT_EQ(j["synchronizations_per_run"], 0);
}

// On the GPU: a cuda-per-op program (many delegates) runs on one stream, the host waits
// once per run, and the report carries the device's own figures and the pool's.
TEST_F(CliTest, CudaRunReportsStreamsWaitsPoolAndDeviceMemory) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  {
    // Planned scratch (the default): the pool is reported, and nothing came from it.
    std::string planned = build_small_program("--partition cuda-per-op");
    CommandResult r = planrt("run " + planned + " --random-inputs 1 --dim S=8 --iterations 3 --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const nlohmann::json& d : nlohmann::json::parse(r.out)["memory"]["devices"]) {
      if (d["device"] != "cuda:0") continue;
      ASSERT_TRUE(d.contains("pool")) << r.out;
      EXPECT_EQ(d["pool"]["allocations"].get<int64_t>(), 0);
      // The ledger: its lines, which with the remainder make the measured delta.
      ASSERT_TRUE(d.contains("ledger")) << r.out;
      const nlohmann::json& l = d["ledger"];
      std::vector<std::string> names;
      uint64_t named = 0;
      for (const nlohmann::json& line : l["lines"]) {
        names.push_back(line["name"]);
        named += line["bytes"].get<uint64_t>();
      }
      EXPECT_EQ(names, (std::vector<std::string>{"weights", "arenas", "engine scratch", "scratch pool",
                                                 "warm pool", "library handles", "CUDA graphs"}));
      EXPECT_EQ(l["named_bytes"].get<uint64_t>(), named);
      EXPECT_EQ(l["measured_bytes"].get<int64_t>(), static_cast<int64_t>(named) + l["remainder_bytes"].get<int64_t>());
    }
    CommandResult text = planrt("run " + planned + " --random-inputs 1 --dim S=8 --iterations 3");
    EXPECT_NE(text.out.find("ledger, since before the load: measured"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("remainder"), std::string::npos) << text.out;
  }
  std::string prog = build_small_program("--partition cuda-per-op --cuda-scratch pool");
  for (const char* pool : {"true", "false"}) {
    CommandResult r = planrt("run " + prog + " --random-inputs 1 --dim S=8 --iterations 3 --json "
                             "--backend-option cuda.use_private_pool=" + std::string(pool));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["streams"], 1);
    EXPECT_EQ(j["synchronizations_per_run"], 1);
    const nlohmann::json* cuda = nullptr;
    for (const nlohmann::json& d : j["memory"]["devices"]) {
      if (d["device"] == "cuda:0") cuda = &d;
    }
    ASSERT_NE(cuda, nullptr) << r.out;
    EXPECT_GT((*cuda)["device_used_after_load_bytes"].get<uint64_t>(), 0u);
    EXPECT_GT((*cuda)["device_total_bytes"].get<uint64_t>(), 0u);
    ASSERT_TRUE(cuda->contains("pool")) << r.out;
    EXPECT_EQ((*cuda)["pool"]["private"], std::string(pool) == "true");
    EXPECT_GT((*cuda)["pool"]["allocations"].get<int64_t>(), 0);
    EXPECT_GT((*cuda)["pool"]["used_high_bytes"].get<uint64_t>(), 0u);
  }
}

// A bf16 and an f16 model end to end: built from the template, fed an f32 .npy (rounded on
// the way in), the bf16 output written widened to f32 and the f16 one as an f16 .npy, each
// close to the same model in f32 (same random weights, rounded) on the same input: within
// its dtype's rounding over two blocks, f16 (10 mantissa bits) closer than bf16 (7).
TEST_F(CliTest, Bf16ModelRunsFromF32NpyAndAgreesWithF32) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  const std::string base = "build --template transformer --layers 2 --d-model 128 --heads 2 "
                           "--ffn 256 --max-seq 64 --weights random:3 ";
  for (const char* partition : {"cuda", "engine-per-block"}) {
    SCOPED_TRACE(partition);
    for (const char* dtype : {"f32", "bf16", "f16"}) {
      CommandResult b = planrt(base + "--partition " + partition + " --dtype " + dtype + " -o " +
                               path(std::string(dtype) + ".prog"));
      ASSERT_EQ(b.exit_code, 0) << b.err;
    }
    CommandResult seed = planrt("run " + path("f32.prog") + " --random-inputs 4 --dim S=64 "
                                "--output-dir " + path("in"));
    ASSERT_EQ(seed.exit_code, 0) << seed.err;
    std::vector<float> outs[3];
    int i = 0;
    for (const char* dtype : {"f32", "bf16", "f16"}) {
      CommandResult r = planrt("run " + path(std::string(dtype) + ".prog") + " --input x=" +
                               path("in/y.npy") + " --json --output-dir " + path(dtype));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      nlohmann::json j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["inputs"][0]["dtype"], dtype);
      EXPECT_EQ(j["outputs"][0]["dtype"], dtype);
      EXPECT_TRUE(j["outputs"][0].contains("mean"));
      planrt::Result<planrt::format::HostTensor> y =
          planrt::format::read_npy(path(std::string(dtype) + "/y.npy"));
      ASSERT_TRUE(y.ok()) << y.status().to_string();
      const bool half = std::string(dtype) == "f16";
      // bf16 written widened; f16 as NumPy's float16.
      ASSERT_EQ(y->dtype, half ? planrt::DType::F16 : planrt::DType::F32);
      ASSERT_EQ(y->shape.numel(), 64 * 128);
      outs[i].resize(64 * 128);
      for (size_t k = 0; k < outs[i].size(); ++k) {
        if (half) {
          uint16_t bits = 0;
          std::memcpy(&bits, y->data.data() + k * sizeof(bits), sizeof(bits));
          outs[i][k] = planrt::f16_bits_to_f32(bits);
        } else {
          std::memcpy(&outs[i][k], y->data.data() + k * sizeof(float), sizeof(float));
        }
      }
      ++i;
    }
    auto error_of = [&](const std::vector<float>& got) {
      double diff = 0, norm = 0;
      for (size_t k = 0; k < outs[0].size(); ++k) {
        diff += double(got[k] - outs[0][k]) * (got[k] - outs[0][k]);
        norm += double(outs[0][k]) * outs[0][k];
      }
      return std::sqrt(diff / norm);
    };
    const double bf16_error = error_of(outs[1]), f16_error = error_of(outs[2]);
    EXPECT_LT(bf16_error, 2e-2);
    EXPECT_GT(bf16_error, 0.0);  // it did compute in bf16
    EXPECT_LT(f16_error, 5e-3);
    EXPECT_GT(f16_error, 0.0);  // and in f16
    EXPECT_LT(f16_error, bf16_error / 2) << "f16 no closer to f32 than bf16";
  }
}

TEST_F(CliTest, BadCudaOptionValueIsARuntimeErrorNamingTheKey) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  std::string prog = build_small_program("--partition cuda");
  CommandResult r = planrt("run " + prog + " --random-inputs 1 --backend-option cuda.use_private_pool=maybe");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("use_private_pool"), std::string::npos) << r.err;
}

// gemm_algorithm (CUDA linears' cuBLASLt choice) and attention (cuDNN's or planrt's bf16
// attention) are read by every engine, so a bad value fails the load naming the key on the CPU
// lane too; the good ones change nothing on a host.
TEST_F(CliTest, EngineCudaKernelOptionsAreCheckedOnEveryEngine) {
  std::string prog = path("engines_gemm.prog");
  CommandResult built = planrt("build --template transformer --layers 1 --d-model 32 --heads 4 "
                               "--ffn 64 --max-seq 8 --partition engine --device cpu -o " + prog);
  ASSERT_EQ(built.exit_code, 0) << built.err;
  struct Option {
    std::string key;
    std::vector<std::string> good;
    std::string bad, expected;
  };
  const Option options[] = {{"gemm_algorithm", {"timed", "heuristic"}, "fastest", "\"timed\" or \"heuristic\""},
                            {"attention", {"cudnn", "planrt"}, "flash", "\"cudnn\" or \"planrt\""}};
  for (const Option& o : options) {
    for (const std::string& good : o.good) {
      CommandResult r = planrt("run " + prog + " --random-inputs 1 --dim S=8 --backend-option engine." + o.key +
                               "=" + good);
      EXPECT_EQ(r.exit_code, 0) << o.key << "=" << good << ": " << r.err;
    }
    CommandResult bad = planrt("run " + prog + " --random-inputs 1 --dim S=8 --backend-option engine." + o.key +
                               "=" + o.bad);
    EXPECT_EQ(bad.exit_code, 1) << bad.err;
    EXPECT_NE(bad.err.find(o.key), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find(o.expected), std::string::npos) << bad.err;
  }
}

// Engines on the host: run reports every context's scratch and, pooled, the pool's figures;
// the load-time option decides, and a bad value is an error naming the key.
TEST_F(CliTest, RunReportsEngineScratchPrivateAndPooled) {
  std::string prog = path("engines.prog");
  CommandResult built = planrt("build --template transformer --layers 2 --d-model 32 --heads 4 "
                               "--ffn 64,128 --max-seq 16 --partition engine-per-block --device cpu -o " + prog);
  ASSERT_EQ(built.exit_code, 0) << built.err;
  auto devices = [&](const std::string& option) {
    CommandResult r = planrt("run " + prog + " --random-inputs 1 --dim S=16 --json --backend-option "
                             "engine.use_shared_activation_scratch=" + option);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out.empty() ? "{}" : r.out);
    for (const nlohmann::json& d : j["memory"]["devices"]) {
      if (d["device"] == "cpu") return d;
    }
    return nlohmann::json();
  };
  nlohmann::json priv = devices("false");
  ASSERT_FALSE(priv.is_null());
  EXPECT_GT(priv["scratch_private_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(priv["scratch"]["contexts"].size(), 2u);
  EXPECT_EQ(priv["scratch"]["private_contexts"], 2);
  nlohmann::json pooled = devices("true");
  ASSERT_FALSE(pooled.is_null());
  EXPECT_EQ(pooled["scratch"]["pooled_contexts"], 2);
  EXPECT_EQ(pooled["scratch_private_bytes"], 0u);
  uint64_t largest = 0;
  for (const nlohmann::json& c : pooled["scratch"]["contexts"]) {
    largest = std::max(largest, c["scratch_bytes"].get<uint64_t>());
  }
  // S=16 of max 16: the largest call is the profile max, so the pool holds the largest.
  EXPECT_EQ(pooled["scratch_pool_capacity_bytes"].get<uint64_t>(), largest);
  EXPECT_EQ(pooled["scratch_pool_high_water_bytes"].get<uint64_t>(), largest);
  CommandResult bad = planrt("run " + prog + " --random-inputs 1 --backend-option "
                             "engine.use_shared_activation_scratch=maybe");
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_NE(bad.err.find("use_shared_activation_scratch"), std::string::npos) << bad.err;
}

// --save-model writes the template as a model description whose build runs to the same
// outputs (the round trip bench/torch_reference.py relies on).
TEST_F(CliTest, SavedModelBuildsToTheSameProgramOutputs) {
  std::string prog = path("t.prog"), again = path("again.prog"), model = path("t.json");
  CommandResult built = planrt("build --template transformer --layers 2 --d-model 32 --heads 4 "
                               "--ffn 64 --max-seq 16 --weights random:4 --save-model " + model +
                               " -o " + prog);
  ASSERT_EQ(built.exit_code, 0) << built.err;
  EXPECT_TRUE(fs::exists(path("t.safetensors")));
  CommandResult rebuilt = planrt("build " + model + " -o " + again);
  ASSERT_EQ(rebuilt.exit_code, 0) << rebuilt.err;
  auto mean = [&](const std::string& p) {
    CommandResult r = planrt("run " + p + " --random-inputs 9 --dim S=5 --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["outputs"][0]["mean"].get<double>();
  };
  EXPECT_EQ(mean(prog), mean(again));
}

// --attention unfused marks every attention node fused=false, and the saved model keeps it.
TEST_F(CliTest, UnfusedAttentionIsWrittenIntoTheSavedModel) {
  for (const char* attention : {"fused", "unfused"}) {
    SCOPED_TRACE(attention);
    std::string model = path(std::string(attention) + ".json");
    CommandResult built = planrt(std::string("build --template transformer --layers 2 --d-model 32 "
                                             "--heads 4 --ffn 64 --max-seq 16 --attention ") +
                                 attention + " --save-model " + model + " -o " + path("a.prog"));
    ASSERT_EQ(built.exit_code, 0) << built.err;
    nlohmann::json m = nlohmann::json::parse(std::ifstream(model));
    int unfused = 0;
    for (const auto& node : m["methods"][0]["nodes"]) {
      if (node["op"] == "scaled_dot_product_attention" && node.contains("attrs") &&
          node["attrs"].value("fused", true) == false) {
        ++unfused;
      }
    }
    EXPECT_EQ(unfused, std::string(attention) == "unfused" ? 2 : 0);
  }
}

TEST_F(CliTest, BuildRejectsUnknownTemplateAndBadJson) {
  CommandResult r = planrt("build --template resnet -o " + path("x.prog"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
  std::ofstream(path("bad.json")) << "{ not json";
  r = planrt("build " + path("bad.json") + " -o " + path("x.prog"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
  EXPECT_FALSE(fs::exists(path("x.prog")));
}

TEST_F(CliTest, BuildRejectsBadTemplateFlagsAsUsageErrors) {
  for (const char* flags : {"--partition gpu", "--weights random:abc", "--ffn 0", "--ffn 64,x",
                            "--layers 0", "--attention flash"}) {
    CommandResult r = planrt(std::string("build --template transformer ") + flags + " -o " +
                             path("x.prog"));
    EXPECT_EQ(r.exit_code, 2) << flags << ": " << r.err;
    EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
  }
}

TEST_F(CliTest, BuildWithMissingWeightsFileIsARuntimeError) {
  CommandResult r = planrt("build --template transformer --d-model 32 --heads 4 --ffn 64 "
                           "--weights " + path("none.safetensors") + " -o " + path("x.prog"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("none.safetensors"), std::string::npos) << r.err;
}

TEST_F(CliTest, ExternalWeightsAreWrittenBesideTheProgramAndRun) {
  CommandResult b = planrt("build --template transformer --layers 1 --d-model 32 --heads 4 "
                           "--ffn 64 --max-seq 8 --external-weights -o " + path("ext.prog"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_TRUE(fs::exists(path("ext.safetensors")));
  CommandResult r = planrt("run " + path("ext.prog") + " --random-inputs 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  fs::remove(path("ext.safetensors"));
  r = planrt("run " + path("ext.prog") + " --random-inputs 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("ext.safetensors"), std::string::npos) << r.err;
}

// A model whose output name tries to climb out of --output-dir.
TEST_F(CliTest, OutputNamesCannotEscapeTheOutputDir) {
  std::ofstream(path("escape.json")) << R"({
    "format": "planrt-model/1",
    "weights": {"random": {"seed": 1}},
    "constants": {"w": {"dtype": "f32", "shape": [4, 4]}},
    "methods": [{"name": "forward", "backend": "cpu",
      "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 4]}],
      "outputs": ["../escaped"],
      "nodes": [{"op": "linear", "inputs": ["x", "w"], "outputs": ["../escaped"]}]}]})";
  CommandResult b = planrt("build " + path("escape.json") + " -o " + path("escape.prog"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  fs::create_directories(path("od"));
  CommandResult r = planrt("run " + path("escape.prog") + " --random-inputs 0 --output-dir " + path("od"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cannot be used as a file name"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("escaped.npy")));
}

// A float32 .npy with the right shape but the wrong dtype for an i32 input, and the
// reverse: an int32 .npy for the transformer's f32 input.
TEST_F(CliTest, RunRejectsNpyOfWrongDtype) {
  std::string prog = build_small_program();
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 4, 32), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string npy = std::string("\x93NUMPY\x01\x00", 8);
  npy += static_cast<char>(header.size() & 0xff);
  npy += static_cast<char>(header.size() >> 8);
  npy += header;
  npy.append(4 * 4 * 32, '\0');
  std::ofstream(path("ints.npy"), std::ios::binary) << npy;
  CommandResult r = planrt("run " + prog + " --input x=" + path("ints.npy"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("i32"), std::string::npos) << r.err;
}

TEST_F(CliTest, DimOutsideBoundsIsRefusedBeforeAllocatingInputs) {
  std::string prog = build_small_program();
  // 10^15 rows would be petabytes: refused by the bound, not by the allocator.
  CommandResult r = planrt("run " + prog + " --random-inputs 0 --dim S=1000000000000000");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("outside the bounds [1, 16]"), std::string::npos) << r.err;
}

TEST_F(CliTest, NothingOnStderrWhenItIsNotATerminal) {
  // No progress bar and no log lines at the default level when stderr is a file.
  CommandResult b = planrt("build --template transformer --layers 1 --d-model 32 --heads 4 "
                           "--ffn 64 --max-seq 16 -o " + path("quiet.prog"));
  ASSERT_EQ(b.exit_code, 0);
  EXPECT_EQ(b.err, "");
  CommandResult r = planrt("run " + path("quiet.prog") + " --random-inputs 0 --iterations 3");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
}

// On a terminal, work that takes more than a second draws a progress bar. `script` gives
// the CLI a pseudo-terminal; 24 blocks of d512 random weights (300 MB) take seconds.
TEST_F(CliTest, ProgressBarIsDrawnOnATerminalForLongWork) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "util-linux 'script' is not installed (needed for a pseudo-terminal)";
  }
  std::string inner = cli_path() +
                      " build --template transformer --layers 24 --max-seq 16 -o " +
                      path("big.prog");
  std::string cmd = "script -qec '" + inner + "' /dev/null > " + path("tty.txt") + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(path("tty.txt"));
  std::string tty = slurp(path("tty.txt"));
  EXPECT_NE(tty.find("generating weights ["), std::string::npos) << tty;
  EXPECT_NE(tty.find("100%"), std::string::npos) << tty;
}

TEST_F(CliTest, PlanrtLogLevelComesFromTheEnvironment) {
  std::string prog = build_small_program();
  CommandResult info = planrt_env("PLANRT_LOG=info", "inspect " + prog);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.err.find("planrt [info] loaded program"), std::string::npos) << info.err;
  CommandResult bogus = planrt_env("PLANRT_LOG=loud", "inspect " + prog);
  ASSERT_EQ(bogus.exit_code, 0) << bogus.err;
  EXPECT_NE(bogus.err.find("PLANRT_LOG='loud' is not one of"), std::string::npos) << bogus.err;
}

TEST_F(CliTest, ZeroIterationsIsAUsageErrorThatSaysWhy) {
  std::string prog = build_small_program();
  CommandResult r = planrt("run " + prog + " --random-inputs 0 --iterations 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not in range 1"), std::string::npos) << r.err;
}

// --- build --partition engine*/--device/--shared-scratch and inspect's engine report ---

TEST_F(CliTest, InspectShowsEachEnginesProfileAndScratch) {
  std::string prog = path("engines.prog");
  CommandResult b = planrt("build --template transformer --layers 2 --d-model 32 --heads 4 --ffn 64,512 "
                           "--max-seq 16 --partition engine-per-block --device cpu -o " + prog);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  CommandResult r = planrt("inspect --json " + prog);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["compile_specs"], nlohmann::json::array());
  const nlohmann::json& m = j["methods"][0];
  ASSERT_EQ(m["engines"].size(), 2u);
  uint64_t sum = 0;
  for (size_t i = 0; i < 2; ++i) {
    const nlohmann::json& e = m["engines"][i];
    EXPECT_EQ(e["segment"], "block" + std::to_string(i));
    EXPECT_EQ(e["device"], "cpu");
    EXPECT_EQ(e["shared_scratch"], false);
    EXPECT_EQ(e["profile"], nlohmann::json::parse(R"([{"dim": "S", "min": 1, "max": 16}])"));
    EXPECT_EQ(e["scratch_bytes"], m["segments"][i]["scratch_bytes"]);
    // The plan's lower bound and ratio: a bound at most the plan, the ratio theirs.
    const uint64_t bound = e["scratch_lower_bound_bytes"].get<uint64_t>();
    EXPECT_GT(bound, 0u);
    EXPECT_LE(bound, e["scratch_bytes"].get<uint64_t>());
    EXPECT_DOUBLE_EQ(e["scratch_ratio"].get<double>(),
                     static_cast<double>(e["scratch_bytes"].get<uint64_t>()) / static_cast<double>(bound));
    sum += e["scratch_bytes"].get<uint64_t>();
  }
  // The wider block asks for more.
  EXPECT_LT(m["engines"][0]["scratch_bytes"].get<uint64_t>(), m["engines"][1]["scratch_bytes"].get<uint64_t>());
  ASSERT_EQ(m["memory_estimate"].size(), 1u);
  EXPECT_EQ(m["memory_estimate"][0]["engine_scratch_bytes"].get<uint64_t>(), sum);

  CommandResult text = planrt("inspect " + prog);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("  engines\n"), std::string::npos) << text.out;
  std::string first = fmt::format("{} B, private)  lower bound ", m["engines"][0]["scratch_bytes"].get<uint64_t>());
  EXPECT_NE(text.out.find(first), std::string::npos) << text.out;
  first = fmt::format("ratio {:.3f}  profile S in [1, 16]", m["engines"][0]["scratch_ratio"].get<double>());
  EXPECT_NE(text.out.find(first), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("block1"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("compile specs"), std::string::npos) << text.out;
}

// --engine-scratch planned / --cuda-scratch (docs/cli.md): planned engines are marked in
// inspect and cost nothing in the estimate's scratch (it is in the planned bytes); the
// flags refuse what disagrees with --shared-scratch.
TEST_F(CliTest, PlannedScratchFlagsShowInInspectAndDisagreementsAreUsageErrors) {
  std::string base = "build --template transformer --layers 2 --d-model 32 --heads 4 --ffn 64 "
                     "--max-seq 16 ";
  CommandResult b = planrt(base + "--partition engine-per-block --engine-scratch planned -o " + path("planned.prog"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  CommandResult r = planrt("inspect --json " + path("planned.prog"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json m = nlohmann::json::parse(r.out)["methods"][0];
  for (const nlohmann::json& e : m["engines"]) {
    EXPECT_EQ(e["planned_scratch"], true);
    EXPECT_EQ(e["shared_scratch"], false);
  }
  for (const nlohmann::json& e : m["memory_estimate"]) EXPECT_EQ(e["engine_scratch_bytes"], 0u);
  CommandResult text = planrt("inspect " + path("planned.prog"));
  EXPECT_NE(text.out.find("B, planned)  lower bound "), std::string::npos) << text.out;
  // cuda segments: planned by default, the pool form on request.
  ASSERT_EQ(planrt(base + "--partition cuda -o " + path("cuda.prog")).exit_code, 0);
  ASSERT_EQ(planrt(base + "--partition cuda --cuda-scratch pool -o " + path("pool.prog")).exit_code, 0);
  auto segment0 = [&](const std::string& p) {
    return nlohmann::json::parse(planrt("inspect --json " + p).out)["methods"][0]["segments"][0];
  };
  EXPECT_EQ(segment0(path("cuda.prog"))["planned_scratch"], true);
  EXPECT_EQ(segment0(path("pool.prog"))["planned_scratch"], false);
  EXPECT_NE(planrt("inspect " + path("cuda.prog")).out.find("planned in the method's arena"), std::string::npos);
  CommandResult both = planrt(base + "--partition engine --shared-scratch --engine-scratch planned -o " + path("x.prog"));
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("--shared-scratch and --engine-scratch planned disagree"), std::string::npos) << both.err;
  CommandResult bad = planrt(base + "--partition cuda --cuda-scratch heap -o " + path("x.prog"));
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

// inspect --steps: each instruction and each segment step with its values; in a torch 2
// export's cuda segment the reshapes left between intermediates are views (their output at
// their input's offset).
TEST_F(CliTest, InspectStepsListsEverySegmentStepAndMarksReshapesThatAreViews) {
  const char* data = std::getenv("PLANRT_TEST_DATA");
  ASSERT_NE(data, nullptr) << "PLANRT_TEST_DATA is set by ctest";
  const std::string model = std::string(data) + "/onnx/encoder_torch2_export.onnx";
  CommandResult b = planrt("build " + model + " --dim S=16 --partition cuda -o " + path("t2.prog"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  CommandResult plain = planrt("inspect " + path("t2.prog"));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("steps ("), std::string::npos) << "steps only when asked";
  CommandResult r = planrt("inspect --steps " + path("t2.prog"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("segment 'cuda0' (cuda)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("copy  x@cuda:0 f32 [1, 16, 64] @#1+0 <- x f32 [1, 16, 64] @#0+0"), std::string::npos) << r.out;
  size_t views = 0;
  for (size_t at = r.out.find("reshape (view)"); at != std::string::npos; at = r.out.find("reshape (view)", at + 1)) {
    ++views;
  }
  EXPECT_GE(views, 2u) << r.out;
  EXPECT_EQ(r.out.find("  permute  "), std::string::npos) << "the head split and merge are the attention's";
  EXPECT_NE(r.out.find("scaled_dot_product_attention"), std::string::npos);
  EXPECT_NE(r.out.find(" const"), std::string::npos) << "weights are marked";
}

TEST_F(CliTest, SharedScratchIsACompileSpecAndTheEstimateIsTheLargestEngine) {
  std::string base = "build --template transformer --layers 3 --d-model 32 --heads 4 --ffn 64,512,128 "
                     "--max-seq 16 --partition engine-per-block ";
  ASSERT_EQ(planrt(base + "-o " + path("private.prog")).exit_code, 0);
  CommandResult b = planrt(base + "--shared-scratch -o " + path("pooled.prog"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto inspect = [&](const std::string& p) {
    CommandResult r = planrt("inspect --json " + p);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  nlohmann::json priv = inspect(path("private.prog"));
  nlohmann::json pooled = inspect(path("pooled.prog"));
  EXPECT_EQ(priv["compile_specs"], nlohmann::json::array());
  EXPECT_EQ(pooled["compile_specs"],
            nlohmann::json::parse(R"([{"key": "use_shared_activation_scratch", "value": "true"}])"));
  uint64_t sum = 0, largest = 0;
  for (const nlohmann::json& e : pooled["methods"][0]["engines"]) {
    EXPECT_EQ(e["shared_scratch"], true);
    EXPECT_EQ(e["device"], "cuda:0");
    sum += e["scratch_bytes"].get<uint64_t>();
    largest = std::max(largest, e["scratch_bytes"].get<uint64_t>());
  }
  auto scratch_on_cuda = [](const nlohmann::json& j) {
    for (const nlohmann::json& e : j["methods"][0]["memory_estimate"]) {
      if (e["device"] == "cuda:0") return e["engine_scratch_bytes"].get<uint64_t>();
    }
    return uint64_t{0};
  };
  EXPECT_LT(largest, sum);
  EXPECT_EQ(scratch_on_cuda(pooled), largest);
  EXPECT_EQ(scratch_on_cuda(priv), sum);
  CommandResult text = planrt("inspect " + path("pooled.prog"));
  EXPECT_NE(text.out.find("compile specs use_shared_activation_scratch=true"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("shared pool)"), std::string::npos) << text.out;
}

TEST_F(CliTest, EngineCudaInterleavedAlternatesEnginesAndCudaSegments) {
  CommandResult b = planrt("build --template transformer --layers 2 --d-model 32 --heads 4 --ffn 64 "
                           "--max-seq 16 --partition engine-cuda-interleaved --device cuda:1 -o " +
                           path("mixed.prog"));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  CommandResult r = planrt("inspect --json " + path("mixed.prog"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json m = nlohmann::json::parse(r.out)["methods"][0];
  std::vector<std::string> segments;
  for (const nlohmann::json& s : m["segments"]) {
    segments.push_back(s["name"].get<std::string>() + ":" + s["backend"].get<std::string>() + "@" +
                       s["device"].get<std::string>());
  }
  EXPECT_EQ(segments, (std::vector<std::string>{"block0.attn:engine@cuda:1", "block0.mlp:cuda@cuda:1",
                                                 "block1.attn:engine@cuda:1", "block1.mlp:cuda@cuda:1"}));
  ASSERT_EQ(m["engines"].size(), 2u);
  EXPECT_EQ(m["engines"][0]["segment"], "block0.attn");
  EXPECT_EQ(m["backends"], nlohmann::json::parse(R"(["engine", "cuda"])"));
}

TEST_F(CliTest, BuildDeviceErrorsAreUsageErrorsThatSayWhatToChange) {
  // --heads and --ffn are left to the cases (CLI11 refuses a flag given twice).
  const std::string base = "build --template transformer --layers 1 --d-model 32 --max-seq 16 ";
  struct Case {
    std::string flags;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"--partition cuda --device cpu", "partition 'cuda' makes cuda segments, which need a CUDA device"},
           {"--partition engine-cuda-interleaved --device cpu", "give cuda:N, or use partition cpu, engine"},
           {"--partition engine --device gpu", "unknown device 'gpu' (expected cpu, cuda or cuda:N"},
           {"--partition engine --device cuda:256", "unknown device 'cuda:256'"},
           {"--partition engine-per-op", "unknown partition 'engine-per-op' (accepted: cpu, cuda, "
                                         "cuda-per-block, cuda-per-op, engine, engine-per-block, "
                                         "engine-cuda-interleaved)"},
           {"--ffn 64,64", "ffn_per_block has 2 entries for 1 layers"},
           {"--heads 5", "d_model 32 is not divisible by heads 5"},
           {"--dtype bf16 --partition cpu", "dtype bf16 runs on the CUDA kernels only"},
           {"--dtype bf16 --partition engine --device cpu", "on device 'cpu' runs on the host"},
           {"--dtype bf16 --partition cuda", "dtype bf16 needs head dim 64"},
           {"--dtype f16 --partition cpu", "dtype f16 runs on the CUDA kernels only"},
           {"--dtype i32", "--dtype"}}) {
    CommandResult r = planrt(base + c.flags + " -o " + path("x.prog"));
    EXPECT_EQ(r.exit_code, 2) << c.flags << ": " << r.err;
    EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.flags << ": " << r.err;
    EXPECT_FALSE(fs::exists(path("x.prog")));
  }
  // --device belongs to the template; a model JSON names its devices itself.
  std::ofstream(path("m.json")) << R"({"format": "planrt-model/1", "methods": [{"name": "f",
      "backend": "engine", "device": "cpu", "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 4]}],
      "outputs": ["y"], "nodes": [{"op": "relu", "inputs": ["x"], "outputs": ["y"]}]}]})";
  CommandResult r = planrt("build " + path("m.json") + " --device cpu -o " + path("x.prog"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--device applies to --template"), std::string::npos) << r.err;
  // Without the flag the model's own "device" places its engine on the host.
  r = planrt("build " + path("m.json") + " --shared-scratch -o " + path("m.prog"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CommandResult i = planrt("inspect --json " + path("m.prog"));
  ASSERT_EQ(i.exit_code, 0) << i.err;
  nlohmann::json j = nlohmann::json::parse(i.out);
  EXPECT_EQ(j["methods"][0]["engines"][0]["device"], "cpu");
  EXPECT_EQ(j["methods"][0]["engines"][0]["profile"], nlohmann::json::array());
  EXPECT_EQ(j["methods"][0]["engines"][0]["scratch_bytes"], 0);
  EXPECT_EQ(j["methods"][0]["engines"][0]["shared_scratch"], true);
}

// --- end of build/inspect engine tests ---

}  // namespace
