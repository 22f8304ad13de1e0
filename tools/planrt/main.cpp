// planrt: build, inspect and run programs. See docs/cli.md.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "commands.h"

namespace planrt::cli {

int report_error(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.message().c_str());
  return kExitRuntimeError;
}

int report_usage_error(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return kExitUsageError;
}

namespace {

int run_cli(int argc, char** argv) {
  CLI::App app{"planrt: build, inspect and run memory-planned inference programs"};
  app.require_subcommand(1);
#ifdef PLANRT_HAVE_CUDA
  // scripts/demo.sh reads "with CUDA" to decide whether a visible GPU can be used.
  app.set_version_flag("--version", "planrt 0.1.0 (with CUDA)");
#else
  app.set_version_flag("--version", "planrt 0.1.0 (CPU only)");
#endif

  BuildArgs build;
  CLI::App* build_cmd = app.add_subcommand("build", "Build a program from a model JSON or a template");
  build_cmd->add_option("model", build.model_path,
                        "Model: a description (JSON, docs/model-format.md) or an ONNX file "
                        "(.onnx, docs/onnx.md)");
  build_cmd->add_option("--template", build.template_name, "Build from a template instead: transformer");
  build_cmd->add_option("--layers", build.layers, "Template: number of encoder blocks")->check(CLI::PositiveNumber);
  build_cmd->add_option("--d-model", build.d_model, "Template: model width")->check(CLI::PositiveNumber);
  build_cmd->add_option("--heads", build.heads, "Template: attention heads")->check(CLI::PositiveNumber);
  build_cmd->add_option("--ffn", build.ffn, "Template: MLP width, or one per block as a comma-separated list");
  build_cmd->add_option("--max-seq", build.max_seq, "Template: maximum sequence length (dim S)")->check(CLI::PositiveNumber);
  build_cmd->add_option("--weights", build.weights, "Template: random:SEED or PATH.safetensors");
  build_cmd->add_option("--partition", build.partition,
                        "Template and ONNX: cpu, cuda (one cuda segment), cuda-per-block, cuda-per-op, engine "
                        "(one engine), engine-per-block or engine-cuda-interleaved");
  build_cmd->add_option("--device", build.device,
                        "Template and ONNX: where delegate segments run, cpu or cuda:N (default cuda:0); "
                        "engines run on either, cuda segments need cuda:N");
  build_cmd->add_option("--attention", build.attention,
                        "Template and ONNX: fused (one-pass CUDA attention, no [S, S] scores; the "
                        "default) or unfused (scores kept: GEMM, softmax, GEMM)")
      ->check(CLI::IsMember({"fused", "unfused"}));
  build_cmd->add_option("--dtype", build.dtype,
                        "Template: f32 (the default), bf16 or f16 (x, y, weights and activations; "
                        "the 16-bit ones CUDA only, fused attention with head dim 64)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  build_cmd->add_flag("--no-reuse", build.no_reuse, "Plan without reusing memory (debugging)");
  build_cmd->add_option("--plan-time-budget", build.plan_time_budget_ms,
                        "Milliseconds the planner may search for a smaller arena per planned "
                        "buffer whose greedy plan is above its lower bound (0: none; default 500)")
      ->check(CLI::NonNegativeNumber);
  build_cmd->add_flag("--external-weights", build.external_weights,
                      "Write weights to OUT.safetensors beside the program instead of inside it");
  build_cmd->add_flag("--shared-scratch", build.shared_scratch,
                      "Engines draw activation scratch from one shared pool per device (the "
                      "program's compile spec use_shared_activation_scratch=true)");
  build_cmd->add_option("--engine-scratch", build.engine_scratch,
                        "Engines' activation scratch: private (the default), pooled (as "
                        "--shared-scratch) or planned (a value of the method's arena, live only "
                        "while the engine runs)")
      ->check(CLI::IsMember({"private", "pooled", "planned"}));
  build_cmd->add_option("--conv-layout", build.conv_layout,
                        "Inside convolution regions: nhwc (the default: channels-last, weights "
                        "permuted at build, one permute at each region's edge) or nchw (every "
                        "tensor as the model wrote it); the model's inputs and outputs keep theirs")
      ->check(CLI::IsMember({"nhwc", "nchw"}));
  build_cmd->add_option("--cuda-scratch", build.cuda_scratch,
                        "cuda segments' intermediates: planned (the default: one scratch in the "
                        "method's arena, nothing allocated per call) or pool (the warm pool, per call)")
      ->check(CLI::IsMember({"planned", "pool"}));
  build_cmd->add_option("--save-model", build.save_model,
                        "Also write the model as JSON here, with its weights in a .safetensors "
                        "file beside it (e.g. for bench/torch_reference.py)");
  build_cmd->add_option("--dim", build.dims,
                        "ONNX: bounds of a named dim, NAME=MIN..MAX, or NAME=N to fix it (repeatable)");
  build_cmd->add_option("--input-value", build.input_values,
                        "ONNX: fix a graph input's value at build time, NAME=PATH.pb|PATH.npy "
                        "(an input that decides a shape; repeatable)");
  build_cmd->add_option("-o,--output", build.output, "Program file to write")->required();

  InspectArgs inspect;
  CLI::App* inspect_cmd = app.add_subcommand("inspect", "Show a program's methods, buffers, plan and memory");
  inspect_cmd->add_option("program", inspect.program, "Program file (.prog)")->required();
  inspect_cmd->add_flag("--json", inspect.json, "Print one JSON object");
  inspect_cmd->add_flag("--steps", inspect.steps,
                        "Also list each method's instructions and each segment's steps with their values "
                        "(kind, dtype, shape, planned offset; reshapes that are views marked)");
  inspect_cmd->add_option("--plot", inspect.plot, "Draw the memory plan to this SVG file");

  RunArgs run;
  CLI::App* run_cmd = app.add_subcommand("run", "Run a method and report outputs, latency and memory");
  run_cmd->add_option("program", run.program, "Program file (.prog)")->required();
  run_cmd->add_option("--method", run.method, "Method to run (default: forward, or the only one)");
  run_cmd->add_option("--input", run.inputs, "NAME=PATH.npy (repeatable)");
  run_cmd->add_option("--random-inputs", run.random_inputs_seed, "Fill inputs not given with random values from SEED");
  run_cmd->add_option("--dim", run.dims, "NAME=VALUE for a dynamic dim of random inputs (repeatable)");
  run_cmd->add_option("--iterations", run.iterations, "Timed runs")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40, "a positive count"));
  run_cmd->add_option("--warmup", run.warmup, "Untimed runs first")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40, "a non-negative count"));
  run_cmd->add_option("--output-dir", run.output_dir, "Write each output as NAME.npy here");
  run_cmd->add_option("--backend-option", run.backend_options,
                      "BACKEND.KEY=VALUE load-time option for a backend (repeatable), e.g. "
                      "cuda.use_private_pool=false");
  run_cmd->add_flag("--synchronize-each-step", run.synchronize_each_step,
                    "Debugging: wait for the device after every device step, so an error names "
                    "the step that caused it");
  run_cmd->add_flag("--profile", run.profile,
                    "Time every step (kernel, copy, delegate call) and report the time by op and the slowest "
                    "steps; device steps count their enqueue time unless --synchronize-each-step");
  run_cmd->add_flag("--json", run.json, "Print one JSON object");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive as "errors" with exit code 0: print them as CLI11 does.
    if (e.get_exit_code() == 0) return app.exit(e);
    return report_usage_error(fmt::format("{} (run 'planrt --help')", e.what()));
  }

  if (*build_cmd) return run_build(build);
  if (*inspect_cmd) return run_inspect(inspect);
  return run_run(run);
}

}  // namespace
}  // namespace planrt::cli

int main(int argc, char** argv) {
  // The library never throws; this catches what the standard library or CLI11 might
  // (allocation failure while formatting), so the process still exits with an error line.
  try {
    return planrt::cli::run_cli(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return planrt::cli::kExitRuntimeError;
  }
}
