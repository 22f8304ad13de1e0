// planrt build MODEL.json [--shared-scratch] [--save-model M.json] -o OUT.prog
// planrt build --template transformer [--layers N] [--partition P] [--device D] ... -o OUT.prog
#include <charconv>
#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "commands.h"
#include "format_bytes.h"
#include "planrt/builder/builder.h"
#include "planrt/importers/onnx.h"
#include "progress.h"

namespace planrt::cli {
namespace {

// "2048" or "1024,2048,4096": one width, or one per block.
std::optional<std::vector<int64_t>> parse_int_list(const std::string& text) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string_view part(text.data() + pos, (comma == std::string::npos ? text.size() : comma) - pos);
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc() || ptr != part.data() + part.size() || part.empty() || v <= 0) {
      return std::nullopt;
    }
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// "S=1..128" or "S=64".
std::optional<std::pair<std::string, importers::OnnxDimBound>> parse_dim_bound(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return std::nullopt;
  const std::string range = text.substr(eq + 1);
  const size_t dots = range.find("..");
  auto parse = [](std::string_view part, int64_t* out) {
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), *out);
    return ec == std::errc() && ptr == part.data() + part.size() && !part.empty() && *out >= 1;
  };
  importers::OnnxDimBound b;
  if (dots == std::string::npos) {
    if (!parse(range, &b.min)) return std::nullopt;
    b.max = b.min;
  } else if (!parse(std::string_view(range).substr(0, dots), &b.min) ||
             !parse(std::string_view(range).substr(dots + 2), &b.max) || b.max < b.min) {
    return std::nullopt;
  }
  return std::make_pair(text.substr(0, eq), b);
}

bool is_onnx(const std::string& path) { return path.ends_with(".onnx"); }

}  // namespace

int run_build(const BuildArgs& args) {
  if (args.model_path.empty() == args.template_name.empty()) {
    return report_usage_error("give either a model JSON file or --template NAME, not both or neither");
  }

  // Weight generation or loading of a large model takes a while: show progress on a tty.
  std::optional<ProgressBar> bar;
  auto progress = [&bar](const builder::WeightProgress& p) {
    if (!bar) bar.emplace(p.stage == "load" ? "loading weights" : "generating weights", p.total_bytes);
    bar->update(p.done_bytes);
  };

  Result<builder::Model> model = Status(ErrorCode::Internal, "no model");
  if (!args.template_name.empty()) {
    if (args.template_name != "transformer") {
      return report_usage_error(
          fmt::format("unknown template '{}' (available: transformer)", args.template_name));
    }
    std::optional<std::vector<int64_t>> ffn = parse_int_list(args.ffn);
    if (!ffn) {
      return report_usage_error(fmt::format(
          "--ffn '{}' must be a positive integer or a comma-separated list of them", args.ffn));
    }
    builder::TransformerOptions t;
    t.layers = args.layers;
    t.d_model = args.d_model;
    t.heads = args.heads;
    t.max_seq = args.max_seq;
    if (ffn->size() == 1) {
      t.ffn = ffn->front();
    } else {
      t.ffn_per_block = *ffn;
    }
    t.weights = args.weights;
    t.partition = args.partition;
    t.fused_attention = args.attention == "fused";
    Result<DType> dtype = parse_dtype(args.dtype);
    if (!dtype.ok()) return report_usage_error(fmt::format("--dtype: {}", dtype.status().message()));
    t.dtype = *dtype;
    if (!args.device.empty()) t.device = args.device;
    t.progress = progress;
    // Options that cannot work together (a cuda partition on --device cpu) are flag
    // errors too: the builder's own checks, so the CLI does not keep a second copy.
    Status options_ok = builder::check_transformer_options(t);
    if (!options_ok.ok()) return report_usage_error(options_ok.message());
    model = builder::make_transformer(t);
  } else if (is_onnx(args.model_path)) {
    importers::OnnxImportOptions o;
    for (const std::string& spec : args.dims) {
      auto bound = parse_dim_bound(spec);
      if (!bound) {
        return report_usage_error(fmt::format("--dim '{}' must be NAME=MIN..MAX or NAME=N with "
                                              "1 <= MIN <= MAX", spec));
      }
      o.dims[bound->first] = bound->second;
    }
    for (const std::string& spec : args.input_values) {
      const size_t eq = spec.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
        return report_usage_error(fmt::format("--input-value '{}' must be NAME=PATH", spec));
      }
      o.input_values[spec.substr(0, eq)] = spec.substr(eq + 1);
    }
    o.partition = args.partition;
    if (!args.device.empty()) o.device = args.device;
    o.fused_attention = args.attention == "fused";
    if (args.dtype != "f32") {
      return report_usage_error("--dtype applies to --template; an ONNX model keeps its own types");
    }
    model = importers::read_model_onnx(args.model_path, o);
  } else {
    if (!args.dims.empty() || !args.input_values.empty()) {
      return report_usage_error("--dim and --input-value apply to an ONNX model; a model JSON "
                                "declares its dims (docs/model-format.md)");
    }
    if (!args.device.empty()) {
      // Silently ignoring it would place the segments somewhere the user did not ask for.
      return report_usage_error("--device applies to --template; a model JSON gives \"device\" "
                                "per method or node (docs/model-format.md)");
    }
    builder::ReadOptions r;
    r.progress = progress;
    model = builder::read_model_json(args.model_path, r);
  }
  if (bar) bar->finish();
  if (!model.ok()) return report_error(model.status());

  builder::BuildOptions options;
  options.no_reuse = args.no_reuse;
  options.external_weights = args.external_weights;
  options.shared_scratch = args.shared_scratch || args.engine_scratch == "pooled";
  options.plan_engine_scratch = args.engine_scratch == "planned";
  options.plan_cuda_scratch = args.cuda_scratch == "planned";
  options.channels_last = args.conv_layout == "nhwc";
  if (args.shared_scratch && !args.engine_scratch.empty() && args.engine_scratch != "pooled") {
    return report_usage_error(fmt::format("--shared-scratch and --engine-scratch {} disagree", args.engine_scratch));
  }
  options.plan_time_budget_ms = args.plan_time_budget_ms;
  Result<builder::BuiltProgram> built = builder::build_program(*model, options);
  if (!built.ok()) return report_error(built.status());
  Status written = built->write(args.output);
  if (!written.ok()) return report_error(written);

  fmt::print("wrote {} ({} constants, {})\n", args.output, built->num_constants(),
             format_bytes(built->constants_bytes()));
  if (!args.save_model.empty()) {
    // The model itself, for other tools (bench/torch_reference.py): JSON + its weights beside.
    std::filesystem::path json_path(args.save_model);
    std::filesystem::path weights = json_path;
    weights.replace_extension(".safetensors");
    Result<std::string> text = builder::model_to_json(*model, weights.filename().string());
    if (!text.ok()) return report_error(text.status());
    Status w = builder::write_weights_safetensors(*model, weights.string());
    if (!w.ok()) return report_error(w);
    std::ofstream out(json_path, std::ios::binary | std::ios::trunc);
    out << *text << "\n";
    if (!out.good()) {
      return report_error(make_error(ErrorCode::IoError, "cannot write '{}'", json_path.string()));
    }
    fmt::print("wrote {} and {} (the model and its weights)\n", json_path.string(), weights.string());
  }
  for (const builder::PlanSummary& p : built->plans()) {
    fmt::print("  plan {} on {}: {} planned, lower bound {}, ratio {:.3f} ({} tensors, {})\n",
               p.method, to_string(p.device), format_bytes(p.planned_bytes),
               format_bytes(p.lower_bound_bytes), p.ratio(), p.num_tensors, p.planner);
  }
  return kExitOk;
}

}  // namespace planrt::cli
