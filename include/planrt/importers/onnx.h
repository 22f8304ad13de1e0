// ONNX import (docs/onnx.md): an .onnx file -> a checked builder::Model, which
// builder::build_program turns into a program like any other model.
//
//   Model read_model_onnx(path, options)
//
// What is read: the main graph of the default ("ai.onnx") domain at opsets 7 to 18, its
// initializers (in the file, or as external data beside it), its inputs (dim_param names
// become planrt dims, bounded by `dims`) and outputs. Shape computations are evaluated
// when the program is built; the compute graph's decomposed patterns (layer norm, GELU,
// attention) become planrt's fused ops.
//
// Errors (nothing throws, nothing is written): a file that is not an ONNX model or is
// truncated, an unsupported opset, every unsupported op at once (node name, op type, domain,
// opset), an unsupported attribute, a dim without a bound (naming the flag to pass), an
// external-data path outside the model's folder, an initializer whose bytes disagree with
// its shape. Thread safety: no global state; any number of imports may run at once.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "planrt/builder/builder.h"
#include "planrt/core/result.h"

namespace planrt::importers {

struct OnnxDimBound {
  int64_t min = 1;
  int64_t max = 1;
};

struct OnnxImportOptions {
  // Bounds of the model's named dims (ONNX dim_param): planned memory is sized at max. A
  // bound with min == max makes the dim that fixed size (a static dim of the program).
  std::map<std::string, OnnxDimBound, std::less<>> dims;
  // Graph inputs whose values are fixed at build time (a shape or an index an op needs
  // before it runs): input name -> path of a serialized TensorProto (.pb) or a .npy file.
  // The input is no longer an input of the program.
  std::map<std::string, std::string, std::less<>> input_values;
  // As the transformer template's (builder.h TransformerOptions::partition): "cpu", "cuda",
  // "cuda-per-block", "cuda-per-op", "engine", "engine-per-block". Blocks are told apart
  // by the exporter's node names ("/layers.3/...") or, where those carry no module path
  // (torch 2's dynamo exporter), by each node's metadata "pkg.torch.onnx.name_scopes";
  // without any, "-per-block" is per op.
  std::string partition = "cpu";
  // Where delegate segments run: "cpu", "cuda" or "cuda:N".
  std::string device = "cuda:0";
  // Attention found in the graph keeps its [S, S] scores when false (fused=false).
  bool fused_attention = true;
  // The name of the program's method.
  std::string method = "forward";
  // How the caller spells `dims` and `input_values`, for the errors that say what to pass:
  // the CLI's flags (`--dim S=MIN..MAX`, `--input-value NAME=FILE`) or the Python module's
  // keywords (`dims={'S': (MIN, MAX)}`, `input_values={'NAME': FILE}`).
  enum class Spelling { Cli, Python };
  Spelling spelling = Spelling::Cli;
};

// `path`'s folder is where external data is looked up.
Result<builder::Model> read_model_onnx(const std::string& path,
                                       const OnnxImportOptions& options = {});

// The same from the bytes of an .onnx file in memory; external data resolves against
// `base_dir`.
Result<builder::Model> parse_model_onnx(std::span<const uint8_t> bytes, const std::string& base_dir,
                                        const OnnxImportOptions& options = {});

// A serialized ONNX TensorProto (the input_N.pb / output_N.pb files of ONNX's tests), for
// callers that feed such files to a program: its dtype (a planrt one: NotSupported for
// other element types), shape and bytes (row-major, little-endian).
struct OnnxTensorFile {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
Result<OnnxTensorFile> read_onnx_tensor(const std::string& path);

}  // namespace planrt::importers
