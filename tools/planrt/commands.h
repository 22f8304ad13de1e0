// The planrt CLI's subcommands. Each returns the process exit code:
// 0 success, 1 a runtime error (bad file, failed load or run), 2 a usage error.
// Errors go to stderr as one line beginning "error:".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planrt/core/status.h"

namespace planrt::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntimeError = 1;
inline constexpr int kExitUsageError = 2;

// Prints "error: <message>" and returns kExitRuntimeError.
int report_error(const Status& status);
// Prints "error: <message>" and returns kExitUsageError.
int report_usage_error(const std::string& message);

struct BuildArgs {
  std::string model_path;  // MODEL.json; empty with --template
  std::string template_name;
  int64_t layers = 2;
  int64_t d_model = 512;
  int64_t heads = 8;
  std::string ffn = "2048";  // one size, or a comma-separated list with one per block
  int64_t max_seq = 2048;
  std::string weights = "random:0";
  std::string partition = "cpu";
  std::string device;  // where delegate segments run; empty: not given (cuda:0)
  bool no_reuse = false;
  bool external_weights = false;
  bool shared_scratch = false;
  std::string engine_scratch;            // private | pooled | planned (empty: as --shared-scratch says)
  std::string cuda_scratch = "planned";  // planned | pool
  std::string conv_layout = "nhwc";      // nhwc | nchw
  double plan_time_budget_ms = 500;  // BuildOptions::plan_time_budget_ms
  std::string attention = "fused";  // template: fused | unfused
  std::string dtype = "f32";        // template: f32 | bf16
  std::string save_model;  // also write the model as JSON (+ .safetensors weights) here
  std::vector<std::string> dims;          // ONNX: NAME=MIN..MAX or NAME=N
  std::vector<std::string> input_values;  // ONNX: NAME=PATH (.pb or .npy)
  std::string output;
};
int run_build(const BuildArgs& args);

struct InspectArgs {
  std::string program;
  bool json = false;
  bool steps = false;  // also every instruction and segment step (text only)
  std::string plot;  // SVG path, empty for none
};
int run_inspect(const InspectArgs& args);

struct RunArgs {
  std::string program;
  std::string method;  // empty: the only method, or "forward"
  std::vector<std::string> inputs;  // NAME=PATH.npy
  std::optional<uint64_t> random_inputs_seed;
  std::vector<std::string> dims;  // NAME=VALUE
  int64_t iterations = 1;
  int64_t warmup = 0;
  std::string output_dir;
  std::vector<std::string> backend_options;  // BACKEND.KEY=VALUE
  bool synchronize_each_step = false;
  bool profile = false;
  bool json = false;
};
int run_run(const RunArgs& args);

}  // namespace planrt::cli
