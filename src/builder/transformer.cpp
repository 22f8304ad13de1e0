// The `transformer` template (builder.h TransformerOptions; docs/model-format.md lists the
// graph and the weight names): pre-LN encoder blocks over x [1, S, d_model], f32, bf16 or f16
// (TransformerOptions::dtype: every weight and value in it).
//
//   a = LN1(x);  q, k, v = Wq a, Wk a, Wv a  -> [1, S, H, Dh] -> permute -> [1, H, S, Dh]
//   h = x + Wo (SDPA(q, k, v) -> permute -> [1, S, d_model])
//   y = h + W2 GELU(W1 LN2(h))
#include <charconv>
#include <optional>

#include <fmt/format.h>

#include "builder/check.h"
#include "builder/graph.h"
#include "builder/weights.h"
#include "planrt/builder/builder.h"

namespace planrt::builder {
namespace {

using ir::Dim;

Status invalid(std::string message) { return Status(ErrorCode::InvalidArgument, std::move(message)); }

Status check_options(const TransformerOptions& o) {
  auto positive = [](int64_t v, std::string_view name) -> Status {
    if (v <= 0) return invalid(fmt::format("transformer: {} must be > 0, got {}", name, v));
    return {};
  };
  PLANRT_RETURN_IF_ERROR(positive(o.layers, "layers"));
  PLANRT_RETURN_IF_ERROR(positive(o.d_model, "d_model"));
  PLANRT_RETURN_IF_ERROR(positive(o.heads, "heads"));
  PLANRT_RETURN_IF_ERROR(positive(o.ffn, "ffn"));
  PLANRT_RETURN_IF_ERROR(positive(o.max_seq, "max_seq"));
  if (o.d_model % o.heads != 0) {
    return invalid(fmt::format("transformer: d_model {} is not divisible by heads {}", o.d_model, o.heads));
  }
  if (!o.ffn_per_block.empty()) {
    if (static_cast<int64_t>(o.ffn_per_block.size()) != o.layers) {
      return invalid(fmt::format("transformer: ffn_per_block has {} entries for {} layers",
                                 o.ffn_per_block.size(), o.layers));
    }
    for (size_t i = 0; i < o.ffn_per_block.size(); ++i) {
      PLANRT_RETURN_IF_ERROR(positive(o.ffn_per_block[i], fmt::format("ffn_per_block[{}]", i)));
    }
  }
  return {};
}

// How the template's nodes are split into segments (builder.h TransformerOptions::partition).
enum class Segmenting {
  None,         // one segment for all nodes
  PerBlock,     // "block{i}"
  PerOp,        // "op{n}"
  Interleaved,  // "block{i}.attn" (the method's backend) and "block{i}.mlp" (cuda)
};

struct Partition {
  ir::Backend backend = ir::Backend::Cpu;
  Segmenting segmenting = Segmenting::None;
  bool needs_cuda = false;  // it makes cuda segments, which run on a GPU only
};

constexpr std::string_view kPartitionNames =
    "cpu, cuda, cuda-per-block, cuda-per-op, engine, engine-per-block, engine-cuda-interleaved";

Result<Partition> parse_partition(std::string_view partition) {
  using B = ir::Backend;
  using S = Segmenting;
  if (partition == "cpu") return Partition{B::Cpu, S::None, false};
  if (partition == "cuda") return Partition{B::Cuda, S::None, true};
  if (partition == "cuda-per-block") return Partition{B::Cuda, S::PerBlock, true};
  if (partition == "cuda-per-op") return Partition{B::Cuda, S::PerOp, true};
  if (partition == "engine") return Partition{B::Engine, S::None, false};
  if (partition == "engine-per-block") return Partition{B::Engine, S::PerBlock, false};
  if (partition == "engine-cuda-interleaved") return Partition{B::Engine, S::Interleaved, true};
  return invalid(fmt::format("transformer: unknown partition '{}' (accepted: {})", partition, kPartitionNames));
}

// Where each block's nodes begin, and where its MLP half (from LN2 on) begins.
struct BlockBounds {
  size_t begin = 0;
  size_t mlp = 0;
};

// Names the segment of every node (and, interleaved, gives the MLP halves the cuda
// backend). The partitioner makes one segment per name (src/builder/partition.h).
void name_segments(ir::Method& method, Segmenting segmenting, const std::vector<BlockBounds>& blocks) {
  if (segmenting == Segmenting::None) return;
  for (size_t n = 0, block = 0; n < method.nodes.size(); ++n) {
    while (block + 1 < blocks.size() && blocks[block + 1].begin <= n) ++block;
    ir::Node& node = method.nodes[n];
    switch (segmenting) {
      case Segmenting::PerOp: node.segment = fmt::format("op{}", n); break;
      case Segmenting::PerBlock: node.segment = fmt::format("block{}", block); break;
      case Segmenting::Interleaved:
        if (n < blocks[block].mlp) {
          node.segment = fmt::format("block{}.attn", block);
        } else {
          node.segment = fmt::format("block{}.mlp", block);
          node.backend = ir::Backend::Cuda;
        }
        break;
      case Segmenting::None: break;
    }
  }
}

// Appends nodes and declares their weights, naming values "blocks.{i}.<what>".
class GraphMaker {
 public:
  GraphMaker(ir::Model& model, ir::Method& method, DType dtype)
      : model_(model), method_(method), dtype_(dtype) {}

  void weight(const std::string& name, std::vector<int64_t> shape, ir::Init init = ir::Init::Normal) {
    ir::Constant c;
    c.name = name;
    c.dtype = dtype_;
    c.shape = std::move(shape);
    c.init = init;
    model_.constants.push_back(std::move(c));
  }

  std::string node(std::string op, std::vector<std::string> inputs, std::string output,
                   ir::Attrs attrs = {}) {
    ir::Node n;
    n.op = std::move(op);
    n.inputs = std::move(inputs);
    n.outputs = {output};
    n.attrs = std::move(attrs);
    method_.nodes.push_back(std::move(n));
    return output;
  }

  std::string linear(const std::string& x, const std::string& prefix, int64_t out, int64_t in,
                     const std::string& output) {
    weight(prefix + ".weight", {out, in});
    weight(prefix + ".bias", {out}, ir::Init::Zeros);
    return node("linear", {x, prefix + ".weight", prefix + ".bias"}, output);
  }

  std::string layer_norm(const std::string& x, const std::string& prefix, int64_t d,
                         const std::string& output) {
    weight(prefix + ".weight", {d}, ir::Init::Ones);
    weight(prefix + ".bias", {d}, ir::Init::Zeros);
    return node("layer_norm", {x, prefix + ".weight", prefix + ".bias"}, output, {{"eps", 1e-5}});
  }

 private:
  ir::Model& model_;
  ir::Method& method_;
  DType dtype_;
};

// Appends block i; returns the index of its first MLP-half node (LN2). The attention half
// ends with the residual add after the output projection, so the two halves exchange
// one tensor (the residual stream h) and each half holds its own residual add.
size_t add_block(ir::Method& method, GraphMaker& g, const TransformerOptions& o, int64_t i, int64_t ffn,
                 const std::string& x, const std::string& y) {
  const std::string p = fmt::format("blocks.{}", i);
  const int64_t d = o.d_model, h = o.heads, dh = d / h;
  const ir::ShapeSpec heads_shape{{1, ""}, {0, "S"}, {h, ""}, {dh, ""}};
  const ir::ShapeSpec model_shape{{1, ""}, {0, "S"}, {d, ""}};
  const std::vector<int64_t> swap_s_h{0, 2, 1, 3};

  std::string a = g.layer_norm(x, p + ".ln1", d, p + ".ln1.out");
  auto project = [&](const std::string& which) {
    std::string flat = g.linear(a, p + ".attn." + which, d, d, p + ".attn." + which + ".out");
    std::string split = g.node("reshape", {flat}, p + ".attn." + which + ".heads", {{"shape", heads_shape}});
    return g.node("permute", {split}, p + ".attn." + which + ".bhsd", {{"dims", swap_s_h}});
  };
  std::string q = project("q"), k = project("k"), v = project("v");
  ir::Attrs sdpa_attrs;
  if (!o.fused_attention) sdpa_attrs["fused"] = false;  // absent means fused
  std::string att = g.node("scaled_dot_product_attention", {q, k, v}, p + ".attn.sdpa", sdpa_attrs);
  std::string back = g.node("permute", {att}, p + ".attn.bshd", {{"dims", swap_s_h}});
  std::string merged = g.node("reshape", {back}, p + ".attn.merged", {{"shape", model_shape}});
  std::string proj = g.linear(merged, p + ".attn.o", d, d, p + ".attn.o.out");
  std::string hid = g.node("add", {x, proj}, p + ".attn.residual");
  const size_t mlp = method.nodes.size();
  std::string b = g.layer_norm(hid, p + ".ln2", d, p + ".ln2.out");
  std::string f1 = g.linear(b, p + ".mlp.fc1", ffn, d, p + ".mlp.fc1.out");
  std::string act = g.node("gelu", {f1}, p + ".mlp.gelu", {{"approximate", std::string("none")}});
  std::string f2 = g.linear(act, p + ".mlp.fc2", d, ffn, p + ".mlp.fc2.out");
  g.node("add", {hid, f2}, y);
  return mlp;
}

Result<RandomWeights> parse_random(std::string_view spec) {
  std::string_view digits = spec.substr(std::string_view("random:").size());
  RandomWeights r;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), r.seed);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
    return invalid(fmt::format("transformer: weights '{}': expected random:SEED with SEED a "
                               "non-negative integer, or a path to a .safetensors file", spec));
  }
  return r;
}

struct ParsedOptions {
  Partition partition;
  Device device;
  std::optional<RandomWeights> random;  // unset: weights from a safetensors file
};

// Every check that needs the options alone, so a caller (the CLI) can tell a bad option
// from a failure while building.
Result<ParsedOptions> parse_options(const TransformerOptions& o) {
  PLANRT_RETURN_IF_ERROR(check_options(o));
  ParsedOptions out;
  PLANRT_ASSIGN_OR_RETURN(out.partition, parse_partition(o.partition));
  Result<Device> device = parse_device(o.device);
  if (!device.ok()) return invalid(fmt::format("transformer: device: {}", device.status().message()));
  out.device = *device;
  if (out.partition.needs_cuda && out.device.is_cpu()) {
    return invalid(fmt::format("transformer: partition '{}' makes cuda segments, which need a CUDA "
                               "device, but device is '{}' (give cuda:N, or use partition cpu, engine "
                               "or engine-per-block to run on the host)", o.partition, o.device));
  }
  if (o.dtype != DType::F32 && o.dtype != DType::BF16 && o.dtype != DType::F16) {
    return invalid(fmt::format("transformer: dtype {} is not supported (f32, bf16 or f16)", dtype_name(o.dtype)));
  }
  if (o.dtype != DType::F32) {
    // Only the CUDA kernels compute in bf16 and f16: every node must run on a GPU.
    const std::string_view name = dtype_name(o.dtype);
    if (out.device.is_cpu() || o.partition == "cpu") {
      return invalid(fmt::format("transformer: dtype {} runs on the CUDA kernels only, but partition "
                                 "'{}' on device '{}' runs on the host (give a cuda device and a "
                                 "partition other than cpu, or use f32)", name, o.partition, o.device));
    }
    if (!o.fused_attention) {
      return invalid(fmt::format("transformer: dtype {} needs fused attention (the unfused path is f32 only)", name));
    }
    if (o.d_model / o.heads != 64) {
      return invalid(fmt::format("transformer: dtype {} needs head dim 64 (the fused kernel's), but "
                                 "d_model {} / heads {} = {}", name, o.d_model, o.heads, o.d_model / o.heads));
    }
  }
  if (o.weights.starts_with("random:")) {
    PLANRT_ASSIGN_OR_RETURN(out.random, parse_random(o.weights));
  } else if (o.weights.empty()) {
    return invalid("transformer: weights must be random:SEED or a path to a .safetensors file");
  }
  return out;
}

}  // namespace

Status check_transformer_options(const TransformerOptions& options) {
  return parse_options(options).status();
}

Result<Model> make_transformer(const TransformerOptions& o) {
  PLANRT_ASSIGN_OR_RETURN(ParsedOptions parsed, parse_options(o));
  const Partition& partition = parsed.partition;
  auto model = std::make_unique<ir::Model>();
  ir::Method& m = model->methods.emplace_back();
  m.name = "forward";
  m.backend = partition.backend;
  // Where the delegate segments run (cpu nodes run on the host regardless).
  if (partition.backend != ir::Backend::Cpu) m.device = parsed.device;
  m.dims = {{"S", 1, o.max_seq}};
  m.inputs = {{"x", {o.dtype, {Dim::fixed(1), Dim::named(0), Dim::fixed(o.d_model)}}}};
  m.outputs = {"y"};
  GraphMaker g(*model, m, o.dtype);
  std::string x = "x";
  std::vector<BlockBounds> blocks;
  for (int64_t i = 0; i < o.layers; ++i) {
    BlockBounds& bounds = blocks.emplace_back();
    bounds.begin = m.nodes.size();
    std::string y = i + 1 == o.layers ? "y" : fmt::format("blocks.{}.out", i);
    int64_t ffn = o.ffn_per_block.empty() ? o.ffn : o.ffn_per_block[static_cast<size_t>(i)];
    bounds.mlp = add_block(m, g, o, i, ffn, x, y);
    x = y;
  }
  name_segments(m, partition.segmenting, blocks);
  PLANRT_RETURN_IF_ERROR(ir::check_model(*model).with_context("transformer"));
  if (parsed.random) {
    PLANRT_RETURN_IF_ERROR(generate_random_weights(*model, *parsed.random, o.progress));
  } else {
    PLANRT_RETURN_IF_ERROR(load_safetensors_weights(*model, o.weights, {}, o.progress));
  }
  return Model(std::move(model));
}

}  // namespace planrt::builder
