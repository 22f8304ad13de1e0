// Pattern rewrites over the imported IR (docs/onnx.md "Recognised patterns"): exporters
// decompose layer norm, GELU and attention into elementwise ops and matmuls; planrt has
// each as one fused kernel. A rewrite replaces the pattern's last node by the fused op
// (keeping its output name) and leaves the rest to dead-node removal. A pattern matches
// only when its inner values have no other readers and its constants are the exact ones
// (an eps is read from the graph; 0.5, 1 and sqrt(2) must be those numbers).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "builder/shape_inference.h"
#include "importers/onnx/importer.h"

namespace planrt::importers::onnx {
namespace {

class Graph {
 public:
  Graph(ir::Model& model, ir::Method& method, std::vector<std::string>& blocks)
      : model_(model), method_(method), blocks_(blocks) {
    refresh();
  }

  void refresh() {
    producer_.clear();
    readers_.clear();
    for (size_t i = 0; i < method_.nodes.size(); ++i) {
      const ir::Node& n = method_.nodes[i];
      if (dead_.contains(i)) continue;
      for (const std::string& o : n.outputs) producer_[o] = i;
      for (const std::string& in : n.inputs) {
        if (!in.empty()) ++readers_[in];
      }
    }
    for (const std::string& o : method_.outputs) ++readers_[o];
  }

  ir::Node* producer(const std::string& value, std::string_view op) {
    auto it = producer_.find(value);
    if (it == producer_.end()) return nullptr;
    ir::Node& n = method_.nodes[it->second];
    return n.op == op ? &n : nullptr;
  }
  size_t index_of(const ir::Node* n) const { return static_cast<size_t>(n - method_.nodes.data()); }
  int readers(const std::string& value) const {
    auto it = readers_.find(value);
    return it == readers_.end() ? 0 : it->second;
  }
  // The single node reading `value`, when it is exactly one node of op `op`.
  ir::Node* only_reader(const std::string& value, std::string_view op) {
    if (readers(value) != 1) return nullptr;
    for (size_t i = 0; i < method_.nodes.size(); ++i) {
      ir::Node& n = method_.nodes[i];
      if (dead_.contains(i) || n.op != op) continue;
      if (std::find(n.inputs.begin(), n.inputs.end(), value) != n.inputs.end()) return &n;
    }
    return nullptr;
  }
  std::vector<ir::Node*> readers_of(const std::string& value) {
    std::vector<ir::Node*> out;
    for (size_t i = 0; i < method_.nodes.size(); ++i) {
      ir::Node& n = method_.nodes[i];
      if (dead_.contains(i)) continue;
      if (std::find(n.inputs.begin(), n.inputs.end(), value) != n.inputs.end()) out.push_back(&n);
    }
    return out;
  }

  const ir::Constant* constant(const std::string& name) const { return model_.find_constant(name); }
  // The value of a one-element floating constant (f32, bf16 or f16).
  std::optional<double> scalar(const std::string& name) const {
    const ir::Constant* c = constant(name);
    if (c == nullptr || c->bytes.size() != element_size(c->dtype)) return std::nullopt;
    if (c->dtype == DType::F32) {
      float v;
      std::memcpy(&v, c->bytes.data(), 4);
      return v;
    }
    if (c->dtype == DType::BF16 || c->dtype == DType::F16) {
      uint16_t bits;
      std::memcpy(&bits, c->bytes.data(), 2);
      return c->dtype == DType::BF16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
    }
    return std::nullopt;
  }
  // How near a constant must be to an exact one: its dtype's rounding (bf16 keeps 8 bits,
  // f16 11), relative.
  double tolerance(const std::string& name) const {
    const ir::Constant* c = constant(name);
    if (c != nullptr && c->dtype == DType::BF16) return 1.0 / 128;
    if (c != nullptr && c->dtype == DType::F16) return 1.0 / 1024;
    return 1e-6;
  }
  // A constant holding `n` values (shape [n], or [1, ..., 1, n]).
  bool is_row(const std::string& name, int64_t n) const {
    const ir::Constant* c = constant(name);
    if (c == nullptr || c->shape.empty() || c->shape.back() != n) return false;
    for (size_t i = 0; i + 1 < c->shape.size(); ++i) {
      if (c->shape[i] != 1) return false;
    }
    return true;
  }
  // `name` as a constant of shape [n] (a new constant sharing the bytes when reshaped).
  std::string as_vector(const std::string& name, int64_t n) {
    const ir::Constant* c = constant(name);
    if (c->shape.size() == 1) return name;
    ir::Constant v = *c;
    v.name = name + ".vector";
    v.shape = {n};
    if (constant(v.name) == nullptr) model_.constants.push_back(v);
    return v.name;
  }

  // The other operand of a commutative binary node when one of them is `x`.
  static std::optional<std::string> other_operand(const ir::Node& n, const std::string& x) {
    if (n.inputs.size() != 2) return std::nullopt;
    if (n.inputs[0] == x) return n.inputs[1];
    if (n.inputs[1] == x) return n.inputs[0];
    return std::nullopt;
  }

  void kill(const ir::Node* n) { dead_.insert(index_of(n)); }
  // A new node placed just before `before` (executed before it, after its inputs).
  std::string insert_before(const ir::Node* before, ir::Node node) {
    const std::string out = node.outputs.at(0);
    inserted_[index_of(before)].push_back(std::move(node));
    return out;
  }

  // Applies the insertions and drops dead nodes and every node nothing reads (repeatedly),
  // then constants nothing reads.
  void compact() {
    std::vector<ir::Node> nodes;
    std::vector<std::string> blocks;
    for (size_t i = 0; i < method_.nodes.size(); ++i) {
      const std::string block = i < blocks_.size() ? blocks_[i] : std::string();
      if (auto it = inserted_.find(i); it != inserted_.end()) {
        for (ir::Node& n : it->second) {
          nodes.push_back(std::move(n));
          blocks.push_back(block);
        }
      }
      if (dead_.contains(i)) continue;
      nodes.push_back(std::move(method_.nodes[i]));
      blocks.push_back(block);
    }
    inserted_.clear();
    dead_.clear();
    // Dead-node removal: a node none of whose outputs is read.
    bool changed = true;
    while (changed) {
      changed = false;
      std::map<std::string, int> reads;
      for (const ir::Node& n : nodes) {
        for (const std::string& in : n.inputs) ++reads[in];
      }
      for (const std::string& o : method_.outputs) ++reads[o];
      std::vector<ir::Node> kept;
      std::vector<std::string> kept_blocks;
      for (size_t i = 0; i < nodes.size(); ++i) {
        const bool used = std::any_of(nodes[i].outputs.begin(), nodes[i].outputs.end(),
                                      [&](const std::string& o) { return reads[o] > 0; });
        if (used) {
          kept.push_back(std::move(nodes[i]));
          kept_blocks.push_back(blocks[i]);
        } else {
          changed = true;
        }
      }
      nodes = std::move(kept);
      blocks = std::move(kept_blocks);
    }
    method_.nodes = std::move(nodes);
    blocks_ = std::move(blocks);
    std::set<std::string, std::less<>> read;
    for (const ir::Node& n : method_.nodes) read.insert(n.inputs.begin(), n.inputs.end());
    std::erase_if(model_.constants, [&](const ir::Constant& c) { return !read.contains(c.name); });
    refresh();
  }

  ir::Method& method() { return method_; }
  ir::Model& model() { return model_; }

 private:
  ir::Model& model_;
  ir::Method& method_;
  std::vector<std::string>& blocks_;
  std::map<std::string, size_t> producer_;
  std::map<std::string, int> readers_;
  std::set<size_t> dead_;
  std::map<size_t, std::vector<ir::Node>> inserted_;
};

// The constant `name` is the number `want`, within its dtype's rounding.
bool near(const Graph& g, const std::string& name, double want) {
  const std::optional<double> v = g.scalar(name);
  return v && std::fabs(*v - want) <= g.tolerance(name) * std::fabs(want);
}

// ---- linear + bias ------------------------------------------------------------------------

// linear(x, W) read only by add(., b) with b a constant [N]: linear(x, W, b).
void fuse_linear_bias(Graph& g) {
  for (ir::Node& lin : g.method().nodes) {
    if (lin.op != "linear" || lin.inputs.size() != 2) continue;
    const ir::Constant* w = g.constant(lin.inputs[1]);
    if (w == nullptr || w->shape.size() != 2) continue;
    ir::Node* add = g.only_reader(lin.outputs[0], "add");
    if (add == nullptr) continue;
    std::optional<std::string> b = Graph::other_operand(*add, lin.outputs[0]);
    if (!b || !g.is_row(*b, w->shape[0])) continue;
    const ir::Constant* bc = g.constant(*b);
    if (bc->dtype != w->dtype) continue;
    ir::Node fused = lin;
    fused.inputs.push_back(g.as_vector(*b, w->shape[0]));
    fused.outputs = add->outputs;
    g.kill(&lin);
    *add = std::move(fused);
    g.refresh();
  }
}

// ---- convolutions ----------------------------------------------------------------------------

// The K per-channel values of a constant that broadcasts over [N, K, H, W] along dim 1
// ([K, 1, 1] or [1, K, 1, 1]), as doubles; nullopt for anything else.
std::optional<std::vector<double>> per_channel(const Graph& g, const std::string& name, int64_t k) {
  const ir::Constant* c = g.constant(name);
  if (c == nullptr || c->dtype != DType::F32 || c->bytes.size() != static_cast<size_t>(k) * sizeof(float)) {
    return std::nullopt;
  }
  std::vector<int64_t> shape = c->shape;
  if (shape.size() == 4 && shape[0] == 1) shape.erase(shape.begin());
  if (shape != std::vector<int64_t>{k, 1, 1}) return std::nullopt;
  std::vector<double> out(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    float v;
    std::memcpy(&v, c->bytes.data() + i * sizeof(float), sizeof v);
    out[i] = v;
  }
  return out;
}

std::vector<float> f32_values(const ir::Constant& c) {
  std::vector<float> v(c.bytes.size() / sizeof(float));
  std::memcpy(v.data(), c.bytes.data(), v.size() * sizeof(float));
  return v;
}

// A new f32 constant owning `values`.
std::string add_f32_constant(Graph& g, std::string name, std::vector<int64_t> shape, std::vector<float> values) {
  auto owner = std::make_shared<std::vector<float>>(std::move(values));
  ir::Constant c;
  c.name = std::move(name);
  c.dtype = DType::F32;
  c.shape = std::move(shape);
  c.bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(owner->data()), owner->size() * sizeof(float));
  c.owner = owner;
  g.model().constants.push_back(std::move(c));
  return g.model().constants.back().name;
}

// conv2d(x, W, b) read only by mul(., s) and/or add(., t) with s and t per output channel
// (batch normalization after a convolution, as an exporter or the BatchNormalization
// handler writes it): conv2d(x, W * s, b * s + t), one pass instead of three. The new
// weights are computed in double and rounded once.
void fold_conv_affine(Graph& g) {
  for (ir::Node& conv : g.method().nodes) {
    if (conv.op != "conv2d") continue;
    const ir::Constant* w = g.constant(conv.inputs[1]);
    if (w == nullptr || w->dtype != DType::F32 || w->shape.size() != 4) continue;
    const int64_t k = w->shape[0];
    const ir::Constant* b = conv.inputs.size() > 2 && !conv.inputs[2].empty() ? g.constant(conv.inputs[2]) : nullptr;
    if (conv.inputs.size() > 2 && !conv.inputs[2].empty() && (b == nullptr || b->dtype != DType::F32)) continue;
    std::vector<double> scale(static_cast<size_t>(k), 1.0), shift(static_cast<size_t>(k), 0.0);
    ir::Node* last = nullptr;
    std::string value = conv.outputs[0];
    if (ir::Node* mul = g.only_reader(value, "mul")) {
      std::optional<std::string> s = Graph::other_operand(*mul, value);
      if (auto v = s ? per_channel(g, *s, k) : std::nullopt) {
        scale = *v;
        last = mul;
        value = mul->outputs[0];
      }
    }
    if (ir::Node* add = g.only_reader(value, "add")) {
      std::optional<std::string> t = Graph::other_operand(*add, value);
      if (auto v = t ? per_channel(g, *t, k) : std::nullopt) {
        shift = *v;
        last = add;
      }
    }
    if (last == nullptr) continue;
    std::vector<float> weights = f32_values(*w);
    const size_t per_channel_count = weights.size() / static_cast<size_t>(k);
    for (size_t i = 0; i < weights.size(); ++i) {
      weights[i] = static_cast<float>(weights[i] * scale[i / per_channel_count]);
    }
    std::vector<float> bias(static_cast<size_t>(k), 0.0f);
    const std::vector<float> old_bias = b != nullptr ? f32_values(*b) : std::vector<float>(static_cast<size_t>(k), 0.0f);
    for (int64_t i = 0; i < k; ++i) bias[i] = static_cast<float>(old_bias[i] * scale[i] + shift[i]);
    ir::Node fused = conv;
    fused.inputs.resize(3);
    fused.inputs[1] = add_f32_constant(g, conv.inputs[1] + ".folded", w->shape, std::move(weights));
    fused.inputs[2] = add_f32_constant(g, last->outputs[0] + ".bias", {k}, std::move(bias));
    fused.outputs = last->outputs;
    g.kill(&conv);
    *last = std::move(fused);
    g.refresh();
  }
}

// conv2d read only by relu: the convolution applies it (oneDNN fuses it as a post-op; the
// plain kernel in its bias pass).
void fuse_conv_relu(Graph& g) {
  for (ir::Node& conv : g.method().nodes) {
    if (conv.op != "conv2d" || conv.attrs.contains("activation")) continue;
    ir::Node* relu = g.only_reader(conv.outputs[0], "relu");
    if (relu == nullptr) continue;
    ir::Node fused = conv;
    fused.attrs["activation"] = std::string("relu");
    fused.outputs = relu->outputs;
    g.kill(&conv);
    *relu = std::move(fused);
    g.refresh();
  }
}

// ---- data movement ---------------------------------------------------------------------------

// An integer attribute of `n`, when it has one.
std::optional<int64_t> int_attr(const ir::Node& n, const char* name) {
  auto it = n.attrs.find(name);
  const int64_t* v = it == n.attrs.end() ? nullptr : std::get_if<int64_t>(&it->second);
  return v ? std::optional<int64_t>(*v) : std::nullopt;
}

// linear(lin's input, W rows [start, end), b[start, end)) writing `outputs`: the rows are
// contiguous bytes of W, so the new constants share W's (and b's) bytes, not copies.
ir::Node linear_over_rows(Graph& g, const ir::Node& lin, const ir::Constant& w, const ir::Constant* b,
                          int64_t start, int64_t end, std::vector<std::string> outputs) {
  const size_t es = element_size(w.dtype);
  ir::Constant ws = w;
  ws.name = fmt::format("{}.rows{}_{}", w.name, start, end);
  ws.shape = {end - start, w.shape[1]};
  ws.bytes = w.bytes.subspan(static_cast<size_t>(start * w.shape[1]) * es,
                             static_cast<size_t>((end - start) * w.shape[1]) * es);
  ir::Node split;
  split.op = "linear";
  split.inputs = {lin.inputs[0], ws.name};
  if (b != nullptr) {
    ir::Constant bs = *b;
    bs.name = fmt::format("{}.rows{}_{}", b->name, start, end);
    bs.shape = {end - start};
    bs.bytes = b->bytes.subspan(static_cast<size_t>(start) * es, static_cast<size_t>(end - start) * es);
    split.inputs.push_back(bs.name);
    if (g.constant(bs.name) == nullptr) g.model().constants.push_back(std::move(bs));
  }
  if (g.constant(ws.name) == nullptr) g.model().constants.push_back(std::move(ws));
  split.outputs = std::move(outputs);
  return split;
}

// linear(x, W[N, K], b) read only by slices of its last dim (a packed QKV projection split
// into q, k, v): one linear per slice over W's rows [start, end), which are contiguous bytes
// of W, so the weights are shared, not copied, and the slices' copies go away.
void split_packed_linear(Graph& g, const std::map<std::string, ir::TensorType>& types) {
  for (size_t i = 0; i < g.method().nodes.size(); ++i) {
    ir::Node& lin = g.method().nodes[i];
    if (lin.op != "linear") continue;
    const ir::Constant* w = g.constant(lin.inputs[1]);
    const ir::Constant* b = lin.inputs.size() > 2 ? g.constant(lin.inputs[2]) : nullptr;
    auto yt = types.find(lin.outputs[0]);
    if (w == nullptr || w->shape.size() != 2 || (lin.inputs.size() > 2 && b == nullptr) || yt == types.end()) {
      continue;
    }
    const int64_t last = static_cast<int64_t>(yt->second.shape.size()) - 1;
    std::vector<ir::Node*> slices = g.readers_of(lin.outputs[0]);
    if (slices.empty() || g.readers(lin.outputs[0]) != static_cast<int>(slices.size())) continue;
    bool ok = true;
    for (const ir::Node* sl : slices) {
      const auto dim = int_attr(*sl, "dim"), start = int_attr(*sl, "start"), end = int_attr(*sl, "end");
      ok = ok && sl->op == "slice" && dim && (*dim == last || *dim == -1) && start && end &&
           *start >= 0 && *start < *end && *end <= w->shape[0];
    }
    if (!ok) continue;
    // Copies: linear_over_rows appends constants, which may move the ones w and b point to.
    const ir::Constant wc = *w;
    const std::optional<ir::Constant> bc = b ? std::optional<ir::Constant>(*b) : std::nullopt;
    for (ir::Node* sl : slices) {
      const int64_t start = std::get<int64_t>(sl->attrs.at("start"));
      const int64_t end = std::get<int64_t>(sl->attrs.at("end"));
      *sl = linear_over_rows(g, lin, wc, bc ? &*bc : nullptr, start, end, sl->outputs);
    }
    g.refresh();
  }
}

// The same split in the form torch 2.x's exporter writes for nn.MultiheadAttention:
//   y = linear(x, W[P*E, K], b) [.., N]  ->  reshape to [.., P, E] (unit dims anywhere)
//   -> permute bringing P first (E stays last, the other dims keep their order)
//   -> reshape to [P, ..] -> slices [k, k+1) of dim 0, each read only by reshapes.
// Slice k holds, in order, the elements of linear(x, W rows [k*E, (k+1)*E)): that linear
// replaces it (its readers are reshapes, so the shape it carries does not matter), and the
// packed linear and the layout ops between go with their last reader.
void split_packed_linear_through_layout(Graph& g, const std::map<std::string, ir::TensorType>& types) {
  auto shape_of = [&](const std::string& v) -> const ir::SymShape* {
    auto it = types.find(v);
    return it == types.end() ? nullptr : &it->second.shape;
  };
  auto non_unit = [](const ir::SymShape& s) {
    ir::SymShape out;
    for (const ir::Dim& d : s) {
      if (!(d == ir::Dim::fixed(1))) out.push_back(d);
    }
    return out;
  };
  for (size_t i = 0; i < g.method().nodes.size(); ++i) {
    ir::Node& lin = g.method().nodes[i];
    if (lin.op != "linear") continue;
    const ir::Constant* w = g.constant(lin.inputs[1]);
    const ir::Constant* b = lin.inputs.size() > 2 ? g.constant(lin.inputs[2]) : nullptr;
    const ir::SymShape* y = shape_of(lin.outputs[0]);
    if (w == nullptr || w->shape.size() != 2 || (lin.inputs.size() > 2 && b == nullptr) ||
        y == nullptr || y->empty()) {
      continue;
    }
    ir::Node* r1 = g.only_reader(lin.outputs[0], "reshape");
    ir::Node* pm = r1 == nullptr ? nullptr : g.only_reader(r1->outputs[0], "permute");
    ir::Node* r2 = pm == nullptr ? nullptr : g.only_reader(pm->outputs[0], "reshape");
    const ir::SymShape* s1 = r1 == nullptr ? nullptr : shape_of(r1->outputs[0]);
    const ir::SymShape* s2 = r2 == nullptr ? nullptr : shape_of(r2->outputs[0]);
    const ir::SymShape* sp = pm == nullptr ? nullptr : shape_of(pm->outputs[0]);
    if (s1 == nullptr || s2 == nullptr || sp == nullptr || s1->size() < 2) continue;
    const size_t q = s1->size();
    const ir::Dim packs = (*s1)[q - 2], each = (*s1)[q - 1];
    if (!packs.is_static() || !each.is_static() || packs.value * each.value != w->shape[0] ||
        !(y->back() == ir::Dim::fixed(w->shape[0]))) {
      continue;
    }
    // [.., P, E]: the leading dims are y's leading dims, up to unit dims.
    ir::SymShape lead1(s1->begin(), s1->end() - 2), lead_y(y->begin(), y->end() - 1);
    if (non_unit(lead1) != non_unit(lead_y)) continue;
    const auto* perm = std::get_if<std::vector<int64_t>>(&pm->attrs.at("dims"));
    if (perm == nullptr || perm->size() != q || (*perm)[0] != static_cast<int64_t>(q - 2) ||
        perm->back() != static_cast<int64_t>(q - 1)) {
      continue;
    }
    // The non-unit dims other than P keep their order through the permute.
    int64_t last = -1;
    bool ordered = true;
    for (size_t k = 1; k < q; ++k) {
      const int64_t d = (*perm)[k];
      if (d < 0 || d >= static_cast<int64_t>(q)) ordered = false;
      if (!ordered || (*s1)[static_cast<size_t>(d)] == ir::Dim::fixed(1)) continue;
      ordered = d > last;
      last = d;
    }
    if (!ordered || s2->empty() || !((*s2)[0] == packs)) continue;
    ir::SymShape rest2(s2->begin() + 1, s2->end()), restp(sp->begin() + 1, sp->end());
    if (non_unit(rest2) != non_unit(restp)) continue;
    std::vector<ir::Node*> slices = g.readers_of(r2->outputs[0]);
    if (slices.empty() || g.readers(r2->outputs[0]) != static_cast<int>(slices.size())) continue;
    bool ok = true;
    for (const ir::Node* sl : slices) {
      const auto dim = int_attr(*sl, "dim"), start = int_attr(*sl, "start"), end = int_attr(*sl, "end");
      ok = ok && sl->op == "slice" && dim && *dim == 0 && start && end && *start >= 0 &&
           *end == *start + 1 && *end <= packs.value;
      for (const ir::Node* reader : ok ? g.readers_of(sl->outputs[0]) : std::vector<ir::Node*>{}) {
        ok = ok && reader->op == "reshape";
      }
      ok = ok && g.readers(sl->outputs[0]) > 0 &&
           std::find(g.method().outputs.begin(), g.method().outputs.end(), sl->outputs[0]) ==
               g.method().outputs.end();
    }
    if (!ok) continue;
    const ir::Constant wc = *w;  // as in split_packed_linear
    const std::optional<ir::Constant> bc = b ? std::optional<ir::Constant>(*b) : std::nullopt;
    for (ir::Node* sl : slices) {
      const int64_t k = std::get<int64_t>(sl->attrs.at("start"));
      *sl = linear_over_rows(g, lin, wc, bc ? &*bc : nullptr, k * each.value, (k + 1) * each.value,
                             sl->outputs);
    }
    g.refresh();
  }
}

// A permute that moves only dims of size 1 keeps the bytes in order: a reshape.
void permutes_of_unit_dims_to_reshapes(Graph& g, const std::map<std::string, ir::TensorType>& types) {
  for (ir::Node& n : g.method().nodes) {
    if (n.op != "permute") continue;
    auto xt = types.find(n.inputs[0]);
    auto yt = types.find(n.outputs[0]);
    const auto* perm = std::get_if<std::vector<int64_t>>(&n.attrs.at("dims"));
    if (xt == types.end() || yt == types.end() || perm == nullptr) continue;
    std::vector<int64_t> moved;
    for (int64_t p : *perm) {
      const int64_t d = p < 0 ? p + static_cast<int64_t>(perm->size()) : p;
      if (d < 0 || d >= static_cast<int64_t>(xt->second.shape.size())) {
        moved.clear();
        moved.push_back(-1);
        break;
      }
      if (xt->second.shape[d] != ir::Dim::fixed(1)) moved.push_back(d);
    }
    if (!std::is_sorted(moved.begin(), moved.end()) || (!moved.empty() && moved[0] < 0)) continue;
    ir::ShapeSpec spec;
    int inferred = 0;
    for (const ir::Dim& d : yt->second.shape) {
      if (d.is_static()) {
        spec.push_back({d.value, ""});
      } else if (d.value == 1) {
        spec.push_back({0, g.method().dims[d.dim].name});
      } else {
        spec.push_back({-1, ""});
        ++inferred;
      }
    }
    if (inferred > 1) continue;
    n.op = "reshape";
    n.attrs = {{"shape", spec}};
  }
}

// reshape(reshape(x)) with the inner one read only there: one reshape of x.
void collapse_reshape_chains(Graph& g) {
  for (ir::Node& n : g.method().nodes) {
    if (n.op != "reshape") continue;
    for (ir::Node* inner = g.producer(n.inputs[0], "reshape");
         inner != nullptr && g.readers(inner->outputs[0]) == 1; inner = g.producer(n.inputs[0], "reshape")) {
      n.inputs[0] = inner->inputs[0];
      g.kill(inner);
      g.refresh();
    }
  }
}

// ---- layer norm ------------------------------------------------------------------------------

bool reduces_last(const ir::Node& n, const ir::TensorType& x) {
  auto dims = n.attrs.find("dims");
  auto keep = n.attrs.find("keepdim");
  if (dims == n.attrs.end() || keep == n.attrs.end()) return false;
  const auto* d = std::get_if<std::vector<int64_t>>(&dims->second);
  const auto* k = std::get_if<bool>(&keep->second);
  return d && k && *k && d->size() == 1 && (*d)[0] == static_cast<int64_t>(x.shape.size()) - 1;
}

// mean = reduce_mean(x); d = x - mean; var = reduce_mean(d^2); y = d / sqrt(var + eps)
// [* w] [+ b]  ->  layer_norm(x, w, b, eps).
void fuse_layer_norm(Graph& g, const std::map<std::string, ir::TensorType>& types) {
  for (size_t i = 0; i < g.method().nodes.size(); ++i) {
    ir::Node& mean = g.method().nodes[i];
    if (mean.op != "reduce_mean" || mean.outputs.empty()) continue;
    const std::string x = mean.inputs[0];
    auto xt = types.find(x);
    if (xt == types.end() || xt->second.shape.empty() || !reduces_last(mean, xt->second)) continue;
    const ir::Dim features = xt->second.shape.back();
    if (!features.is_static()) continue;
    ir::Node* sub = g.only_reader(mean.outputs[0], "sub");
    if (sub == nullptr || sub->inputs[0] != x || sub->inputs[1] != mean.outputs[0]) continue;
    const std::string d = sub->outputs[0];
    if (g.readers(d) != 2) continue;
    ir::Node* sq = nullptr;
    ir::Node* div = nullptr;
    for (ir::Node* r : g.readers_of(d)) {
      if (r->op == "pow" && r->inputs[0] == d && near(g, r->inputs[1], 2.0)) sq = r;
      if (r->op == "mul" && r->inputs[0] == d && r->inputs[1] == d) sq = r;
      if (r->op == "div" && r->inputs[0] == d) div = r;
    }
    if (sq == nullptr || div == nullptr) continue;
    ir::Node* var = g.only_reader(sq->outputs[0], "reduce_mean");
    if (var == nullptr || !reduces_last(*var, xt->second)) continue;
    ir::Node* add_eps = g.only_reader(var->outputs[0], "add");
    if (add_eps == nullptr) continue;
    std::optional<std::string> eps_name = Graph::other_operand(*add_eps, var->outputs[0]);
    std::optional<double> eps = eps_name ? g.scalar(*eps_name) : std::nullopt;
    if (!eps || *eps < 0) continue;
    ir::Node* root = g.only_reader(add_eps->outputs[0], "sqrt");
    if (root == nullptr || g.readers(root->outputs[0]) != 1 || div->inputs[1] != root->outputs[0]) continue;
    // Optional affine part.
    ir::Node* last = div;
    std::string weight, bias;
    if (ir::Node* mul = g.only_reader(div->outputs[0], "mul")) {
      std::optional<std::string> w = Graph::other_operand(*mul, div->outputs[0]);
      if (w && g.is_row(*w, features.value)) {
        weight = g.as_vector(*w, features.value);
        last = mul;
        if (ir::Node* add = g.only_reader(mul->outputs[0], "add")) {
          std::optional<std::string> b = Graph::other_operand(*add, mul->outputs[0]);
          if (b && g.is_row(*b, features.value)) {
            bias = g.as_vector(*b, features.value);
            last = add;
          }
        }
      }
    }
    if (weight.empty() && !bias.empty()) continue;
    ir::Node fused;
    fused.op = "layer_norm";
    fused.inputs = {x};
    if (!weight.empty()) fused.inputs.push_back(weight);
    if (!bias.empty()) fused.inputs.push_back(bias);
    fused.attrs["eps"] = *eps;
    fused.outputs = last->outputs;
    *last = std::move(fused);
    g.refresh();
  }
}

// ---- GELU ------------------------------------------------------------------------------------

// y = h * 0.5 * (1 + erf(h / sqrt(2))) in any association -> gelu(h).
void fuse_gelu(Graph& g) {
  for (size_t i = 0; i < g.method().nodes.size(); ++i) {
    ir::Node& erf = g.method().nodes[i];
    if (erf.op != "erf") continue;
    ir::Node* scale = nullptr;
    std::string h;
    for (std::string_view op : {"div", "mul"}) {
      if (ir::Node* p = g.producer(erf.inputs[0], op)) {
        const bool ok = op == "div" ? near(g, p->inputs[1], std::sqrt(2.0))
                                    : near(g, p->inputs[1], std::sqrt(0.5));
        if (ok && g.readers(p->outputs[0]) == 1) {
          scale = p;
          h = p->inputs[0];
        }
      }
    }
    if (scale == nullptr) continue;
    ir::Node* one = g.only_reader(erf.outputs[0], "add");
    if (one == nullptr) continue;
    std::optional<std::string> c1 = Graph::other_operand(*one, erf.outputs[0]);
    if (!c1 || !near(g, *c1, 1.0)) continue;
    const std::string a = one->outputs[0];  // 1 + erf(.)
    ir::Node* m1 = g.only_reader(a, "mul");
    if (m1 == nullptr) continue;
    std::optional<std::string> x = Graph::other_operand(*m1, a);
    ir::Node* last = nullptr;
    if (x && *x == h) {
      // (h * a) * 0.5
      ir::Node* m2 = g.only_reader(m1->outputs[0], "mul");
      std::optional<std::string> half = m2 ? Graph::other_operand(*m2, m1->outputs[0]) : std::nullopt;
      if (half && near(g, *half, 0.5)) last = m2;
    } else if (x && near(g, *x, 0.5)) {
      // h * (a * 0.5)
      ir::Node* m2 = g.only_reader(m1->outputs[0], "mul");
      std::optional<std::string> hh = m2 ? Graph::other_operand(*m2, m1->outputs[0]) : std::nullopt;
      if (hh && *hh == h) last = m2;
    } else if (x) {
      // (h * 0.5) * a
      ir::Node* half = g.producer(*x, "mul");
      std::optional<std::string> hv = half ? Graph::other_operand(*half, h) : std::nullopt;
      if (half && g.readers(*x) == 1 && hv && near(g, *hv, 0.5)) last = m1;
    }
    if (last == nullptr) continue;
    ir::Node fused;
    fused.op = "gelu";
    fused.inputs = {h};
    fused.attrs["approximate"] = std::string("none");
    fused.outputs = last->outputs;
    *last = std::move(fused);
    g.refresh();
  }
}

// ---- attention -------------------------------------------------------------------------------

// Strips scalar multiplications and divisions off `value` (each read once), multiplying
// their factors into `scale`.
std::string strip_scale(Graph& g, std::string value, double& scale) {
  for (;;) {
    ir::Node* p = nullptr;
    for (std::string_view op : {"mul", "div"}) {
      if (ir::Node* n = g.producer(value, op)) p = n;
    }
    if (p == nullptr || g.readers(value) != 1) return value;
    std::optional<double> s = g.scalar(p->inputs[1]);
    std::string x = p->inputs[0];
    if (!s && p->op == "mul") {
      s = g.scalar(p->inputs[0]);
      x = p->inputs[1];
    }
    if (!s || *s == 0) return value;
    scale *= p->op == "mul" ? *s : 1.0 / *s;
    value = x;
  }
}

// The product with v that reads softmax output `p`: directly, or through transformers'
// guard against fully masked rows, where(isnan(p), 0, p) (the fused attention gives those
// rows zeros, which is what the guard makes of them).
ir::Node* product_with_v(Graph& g, const std::string& p) {
  auto reads_first = [](ir::Node* n, const std::string& value) { return n != nullptr && n->inputs[0] == value ? n : nullptr; };
  if (ir::Node* pv = reads_first(g.only_reader(p, "matmul"), p)) return pv;
  if (g.readers(p) != 2) return nullptr;
  ir::Node* isnan = nullptr;
  for (ir::Node* n : g.readers_of(p)) {
    if (n->op == "isnan") isnan = n;
  }
  if (isnan == nullptr || g.readers(isnan->outputs[0]) != 1) return nullptr;
  ir::Node* guard = g.only_reader(isnan->outputs[0], "where");
  if (guard == nullptr || guard->inputs.size() != 3 || guard->inputs[0] != isnan->outputs[0] ||
      guard->inputs[2] != p) {
    return nullptr;
  }
  std::optional<double> zero = g.scalar(guard->inputs[1]);
  if (!zero || *zero != 0.0) return nullptr;
  return reads_first(g.only_reader(guard->outputs[0], "matmul"), guard->outputs[0]);
}

// The mask an additive term `m` of the scores stands for: where(c, 0, fill) with a fill
// small enough that e^(fill + s) is 0 in f32 (-1e4 and below: BERT's -10000, f16's and f32's
// lowest, -inf) is the bool mask c (where(c, fill, 0): not c); any other term is additive.
// Rows whose keys are all masked then give zeros where the softmax of finite fills would
// average v (the only difference; docs/onnx.md).
struct MaskTerm {
  std::string value;
  bool negate = false;  // the mask is not(value)
};
MaskTerm mask_of(Graph& g, const std::map<std::string, ir::TensorType>& types, const std::string& m) {
  constexpr double kMaskingFill = -1e4;
  ir::Node* w = g.producer(m, "where");
  auto ct = w != nullptr ? types.find(w->inputs[0]) : types.end();
  if (w == nullptr || ct == types.end() || ct->second.dtype != DType::Bool) return {m};
  std::optional<double> a = g.scalar(w->inputs[1]), b = g.scalar(w->inputs[2]);
  if (a && b && *a == 0.0 && *b <= kMaskingFill) return {w->inputs[0]};
  if (a && b && *b == 0.0 && *a <= kMaskingFill) return {w->inputs[0], true};
  return {m};
}

// o = matmul(softmax(scale * matmul(q, kT) [+ mask]), v)  ->  scaled_dot_product_attention(q,
// k, v [, mask]); the mask as kernels/attention_layout.h takes it (bool or additive,
// broadcast to the scores).
void fuse_attention(Graph& g, const std::map<std::string, ir::TensorType>& types, bool fused,
                    const std::set<std::string>& causal_softmax) {
  for (size_t i = 0; i < g.method().nodes.size(); ++i) {
    ir::Node& sm = g.method().nodes[i];
    if (sm.op != "softmax") continue;
    auto st = types.find(sm.inputs[0]);
    if (st == types.end() || st->second.shape.size() < 3) continue;
    const int64_t rank = static_cast<int64_t>(st->second.shape.size());
    auto dim = sm.attrs.find("dim");
    const int64_t* d = dim == sm.attrs.end() ? nullptr : std::get_if<int64_t>(&dim->second);
    if (d == nullptr || (*d != -1 && *d != rank - 1)) continue;
    ir::Node* pv = product_with_v(g, sm.outputs[0]);
    if (pv == nullptr) continue;
    double scale = 1.0;
    std::string scores = strip_scale(g, sm.inputs[0], scale);
    std::string added;  // the scores' additive term, when softmax reads scores + term
    if (ir::Node* add = g.producer(sm.inputs[0], "add"); add != nullptr && g.readers(sm.inputs[0]) == 1) {
      for (size_t side : {0u, 1u}) {
        double s = 1.0;
        std::string x = strip_scale(g, add->inputs[side], s);
        if (g.producer(x, "matmul") != nullptr && g.readers(x) == 1) {
          scores = x, scale = s, added = add->inputs[1 - side];
          break;
        }
      }
    }
    ir::Node* qk = g.producer(scores, "matmul");
    if (qk == nullptr || g.readers(scores) != 1) continue;
    std::string q = strip_scale(g, qk->inputs[0], scale);
    std::string kt = strip_scale(g, qk->inputs[1], scale);
    const std::string v = pv->inputs[1];
    auto qt = types.find(q), ktt = types.find(kt), vt = types.find(v);
    if (qt == types.end() || ktt == types.end() || vt == types.end()) continue;
    const ir::SymShape& qs = qt->second.shape;
    const ir::SymShape& ks = ktt->second.shape;
    const ir::SymShape& vs = vt->second.shape;
    if (qs.size() != static_cast<size_t>(rank) || ks.size() != qs.size() || vs.size() != qs.size()) continue;
    if (!std::equal(qs.begin(), qs.end() - 2, ks.begin()) || !std::equal(qs.begin(), qs.end() - 2, vs.begin())) continue;
    if (ks[rank - 2] != qs[rank - 1] || vs[rank - 2] != ks[rank - 1]) continue;
    // bf16 and f16 attention runs fused only (head dim 64; the unfused path keeps f32 scores
    // and is f32 only): other 16-bit attention keeps its decomposed form, whose matmuls,
    // softmax and scale the CUDA kernels compute in the 16-bit dtype. A causal one is still
    // fused (its mask was taken off the softmax for the attention to apply), and the kernel
    // refuses it naming the head dims.
    const bool sixteen_bit = qt->second.dtype == DType::BF16 || qt->second.dtype == DType::F16;
    const bool runs_fused = fused && qs[rank - 1] == ir::Dim::fixed(64) && vs[rank - 1] == ir::Dim::fixed(64);
    if (sixteen_bit && !runs_fused && !causal_softmax.contains(sm.outputs[0])) continue;
    MaskTerm mask;
    if (!added.empty()) {
      // Only a mask the attention takes as it is (shape inference's rule): else the
      // decomposed form stays, which computes the same.
      mask = mask_of(g, types, added);
      auto mt = types.find(mask.value);
      ir::TensorType k_type = ktt->second;
      std::swap(k_type.shape[rank - 1], k_type.shape[rank - 2]);
      if (mt == types.end()) continue;
      const std::vector<ir::Operand> operands{{q, &qt->second}, {kt, &k_type}, {v, &vt->second}, {mask.value, &mt->second}};
      if (!ir::infer_node("scaled_dot_product_attention", operands, {}, g.method().dims).ok()) continue;
      if (mask.negate) {
        ir::Node n;
        n.op = "logical_not";
        n.inputs = {mask.value};
        n.outputs = {mask.value + ".keep"};
        mask.value = g.insert_before(pv, std::move(n));
      }
    }
    // k = kT with its last two dims swapped: compose with kT's own permute when it has one.
    std::vector<int64_t> swap(static_cast<size_t>(rank));
    for (int64_t j = 0; j < rank; ++j) swap[j] = j;
    std::swap(swap[rank - 1], swap[rank - 2]);
    std::string k;
    ir::Node* perm = g.producer(kt, "permute");
    if (perm != nullptr && g.readers(kt) == 1) {
      const auto* p = std::get_if<std::vector<int64_t>>(&perm->attrs.at("dims"));
      std::vector<int64_t> composed(static_cast<size_t>(rank));
      for (int64_t j = 0; j < rank; ++j) composed[j] = (*p)[swap[j]];
      bool identity = true;
      for (int64_t j = 0; j < rank; ++j) identity = identity && composed[j] == j;
      if (identity) {
        k = perm->inputs[0];
      } else {
        ir::Node n;
        n.op = "permute";
        n.inputs = {perm->inputs[0]};
        n.attrs["dims"] = composed;
        n.outputs = {kt + ".k"};
        k = g.insert_before(pv, std::move(n));
      }
    } else {
      ir::Node n;
      n.op = "permute";
      n.inputs = {kt};
      n.attrs["dims"] = swap;
      n.outputs = {kt + ".k"};
      k = g.insert_before(pv, std::move(n));
    }
    ir::Node attn;
    attn.op = "scaled_dot_product_attention";
    attn.inputs = {q, k, v};
    if (!mask.value.empty()) attn.inputs.push_back(mask.value);
    attn.attrs["scale"] = scale;
    attn.attrs["causal"] = causal_softmax.contains(sm.outputs[0]);
    attn.attrs["fused"] = fused;
    attn.outputs = pv->outputs;
    *pv = std::move(attn);
    g.refresh();
  }
}

// Every value's IR type, by planrt's shape inference over the nodes in order.
Result<std::map<std::string, ir::TensorType>> infer_types(const ir::Model& model, const ir::Method& method) {
  std::map<std::string, ir::TensorType> types;
  for (const ir::ValueDecl& in : method.inputs) types[in.name] = in.type;
  for (const ir::Constant& c : model.constants) {
    ir::TensorType t{c.dtype, {}};
    for (int64_t d : c.shape) t.shape.push_back(ir::Dim::fixed(d));
    types[c.name] = t;
  }
  for (const ir::Node& n : method.nodes) {
    std::vector<ir::Operand> operands;
    for (const std::string& in : n.inputs) {
      auto it = types.find(in);
      operands.push_back({in, in.empty() || it == types.end() ? nullptr : &it->second});
    }
    PLANRT_ASSIGN_OR_RETURN(ir::InferredNode out, ir::infer_node(n.op, operands, n.attrs, method.dims));
    for (size_t i = 0; i < n.outputs.size() && i < out.outputs.size(); ++i) types[n.outputs[i]] = out.outputs[i];
  }
  return types;
}

}  // namespace

Status fuse_patterns(ir::Model& model, ir::Method& method, std::vector<std::string>& blocks,
                     bool fused_attention, const std::set<std::string>& causal_softmax) {
  Graph g(model, method, blocks);
  fold_conv_affine(g);
  g.compact();
  fuse_conv_relu(g);
  g.compact();
  PLANRT_ASSIGN_OR_RETURN(auto types, infer_types(model, method));
  fuse_layer_norm(g, types);
  fuse_gelu(g);
  g.compact();
  PLANRT_ASSIGN_OR_RETURN(types, infer_types(model, method));
  fuse_attention(g, types, fused_attention, causal_softmax);
  g.compact();
  // A causal mask is applied only by a causal attention: a masked softmax left over would
  // compute without its mask.
  for (const ir::Node& n : method.nodes) {
    if (n.op == "softmax" && causal_softmax.contains(n.outputs[0])) {
      return Status(ErrorCode::NotSupported,
                    fmt::format("the softmax '{}' reads causally masked scores, but the attention "
                                "around it (matmul(softmax(scale * q @ k^T), v) with q, k, v of one "
                                "layout) was not recognised", n.outputs[0]));
    }
  }
  fuse_linear_bias(g);
  g.compact();
  PLANRT_ASSIGN_OR_RETURN(types, infer_types(model, method));
  split_packed_linear(g, types);
  permutes_of_unit_dims_to_reshapes(g, types);
  g.compact();
  collapse_reshape_chains(g);
  g.compact();
  // After the chains collapsed: torch 2.x writes its reshape as unsqueeze + reshape.
  PLANRT_ASSIGN_OR_RETURN(types, infer_types(model, method));
  split_packed_linear_through_layout(g, types);
  g.compact();
  collapse_reshape_chains(g);
  g.compact();
  return {};
}

}  // namespace planrt::importers::onnx
