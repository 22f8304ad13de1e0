#include "builder/layout.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "builder/check.h"

namespace planrt::builder {
namespace {

using Perm = std::array<int64_t, 4>;
// permute dims taking an NCHW tensor to NHWC, and back.
constexpr Perm kToLast{0, 2, 3, 1};
constexpr Perm kToFirst{0, 3, 1, 2};
// Where NCHW axis a lies in the NHWC tensor.
constexpr std::array<int64_t, 4> kAxisInLast{0, 3, 1, 2};

bool same_place(const ir::Node& a, const ir::Node& b) {
  return a.backend == b.backend && a.segment == b.segment && a.device == b.device;
}

const std::set<std::string, std::less<>>& elementwise_ops() {
  static const std::set<std::string, std::less<>> ops = {
      "add", "sub", "mul", "div", "pow", "relu", "silu", "sqrt", "neg", "exp", "erf", "tanh",
      "sigmoid", "gelu", "clip", "hard_sigmoid", "hard_swish"};
  return ops;
}

const std::vector<int64_t>* ints_attr(const ir::Attrs& attrs, std::string_view name) {
  auto it = attrs.find(name);
  return it == attrs.end() ? nullptr : std::get_if<std::vector<int64_t>>(&it->second);
}

std::optional<int64_t> int_attr(const ir::Attrs& attrs, std::string_view name) {
  auto it = attrs.find(name);
  if (it == attrs.end()) return std::nullopt;
  if (const auto* v = std::get_if<int64_t>(&it->second)) return *v;
  return std::nullopt;
}

bool is_default_layout(const ir::Node& n) {
  auto it = n.attrs.find("layout");
  if (it == n.attrs.end()) return true;
  const auto* s = std::get_if<std::string>(&it->second);
  return s != nullptr && *s == "nchw";
}

// `shape` padded with leading 1s to rank 4 (broadcasting aligns trailing dims).
std::optional<ir::SymShape> as_rank4(const ir::SymShape& shape) {
  if (shape.size() > 4) return std::nullopt;
  ir::SymShape out(4 - shape.size(), ir::Dim::fixed(1));
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

ir::SymShape permuted(const ir::SymShape& shape, const Perm& perm) {
  ir::SymShape out;
  for (int64_t d : perm) out.push_back(shape[d]);
  return out;
}

// Permuting `shape` by `perm` keeps the element order: only size-1 dims move, so the permute
// is a reshape.
bool keeps_element_order(const ir::SymShape& shape, const Perm& perm) {
  int64_t last = -1;
  for (int64_t d : perm) {
    if (shape[d].is_static() && shape[d].value == 1) continue;
    if (d < last) return false;
    last = d;
  }
  return true;
}

// A reshape's shape attribute for `shape`: sizes, dim names, at most one -1 for an entry that
// is a multiple of a dim.
std::optional<ir::ShapeSpec> spec_of(const ir::SymShape& shape, const std::vector<ir::DimDecl>& dims) {
  ir::ShapeSpec spec;
  bool inferred = false;
  for (const ir::Dim& d : shape) {
    if (d.is_static()) {
      spec.push_back({d.value, {}});
    } else if (d.value == 1 && d.dim < static_cast<int32_t>(dims.size())) {
      spec.push_back({0, dims[d.dim].name});
    } else if (!inferred) {
      spec.push_back({-1, {}});
      inferred = true;
    } else {
      return std::nullopt;
    }
  }
  return spec;
}

class ChannelsLast {
 public:
  ChannelsLast(ir::Model& model, ir::Method& method, const ir::CheckedMethod& types, ChannelsLastNames& names)
      : model_(model), method_(method), types_(types), names_(names.names), derived_(names.derived) {
    names.names.note(model, method);
    for (const std::string& o : method.outputs) method_outputs_.insert(o);
  }

  Result<int> run() {
    const std::vector<ir::Node>& nodes = method_.nodes;
    bool any_conv = false;
    for (const ir::Node& n : nodes) any_conv = any_conv || (n.op == "conv2d" && is_default_layout(n));
    if (!any_conv) return 0;
    // Which runs read each value (a twin may only replace a value read inside one run).
    std::vector<size_t> run_of(nodes.size());
    for (size_t i = 0, run = 0; i < nodes.size(); ++i) {
      if (i > 0 && !same_place(nodes[i], nodes[i - 1])) ++run;
      run_of[i] = run;
      for (const std::string& in : nodes[i].inputs) read_in_runs_[in].insert(run);
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (i == 0 || run_of[i] != run_of[i - 1]) {
        twin_.clear();
        rename_.clear();
        size_t end = i;
        while (end < nodes.size() && run_of[end] == run_of[i]) ++end;
        run_converts_ = prefers_channels_last(i, end);
      }
      current_run_ = run_of[i];
      if (!run_converts_) {
        emit(nodes[i]);
        continue;
      }
      ir::Node node = nodes[i];
      for (std::string& in : node.inputs) {
        if (auto it = rename_.find(in); it != rename_.end()) in = it->second;
      }
      PLANRT_RETURN_IF_ERROR(visit(std::move(node), i));
    }
    materialize();
    method_.nodes = drop_unread();
    return converted_;
  }

 private:
  // Where channels-last was measured faster (docs/performance.md, "Channels-last"): on the
  // host always (oneDNN's convolutions are channels-last; NCHW ones reorder every call); on
  // a GPU for two or more 16-bit convolutions (cuDNN's tensor-core kernels: resnet50 bf16 at
  // batch 32 3.5x faster), depthwise ones included since channels-last they run planrt's own
  // kernel (kernels/workspace.h; cuDNN's channels-last depthwise kernels had made mobilenet_v2
  // and convnext_tiny 1.5x slower). In f32 on a GPU cuDNN's channels-last kernels take twice as
  // long as its NCHW ones (TF32 off), so an f32 run converts only where the model itself
  // moves tensors between the layouts (permutes NCHW <-> NHWC, e.g. ConvNeXt's around each
  // layer norm) at least as often as it has dense convolutions: those permutes go, and the
  // dense convolutions are few.
  bool prefers_channels_last(size_t begin, size_t end) const {
    const Device device = ir::node_device(method_, method_.nodes[begin]);
    int convs = 0, dense = 0, layout_permutes = 0;
    bool sixteen_bit = false;
    for (size_t i = begin; i < end; ++i) {
      const ir::Node& n = method_.nodes[i];
      if (n.op == "permute") {
        const std::vector<int64_t>* dims = ints_attr(types_.nodes[i].attrs, "dims");  // normalised
        if (dims != nullptr && dims->size() == 4 &&
            (std::equal(dims->begin(), dims->end(), kToLast.begin()) ||
             std::equal(dims->begin(), dims->end(), kToFirst.begin()))) {
          ++layout_permutes;
        }
      }
      if (!convertible_conv(n)) continue;
      ++convs;
      const ir::TensorType* x = type_of(n.inputs[0]);
      sixteen_bit = sixteen_bit || x->dtype == DType::BF16 || x->dtype == DType::F16;
      const auto groups = int_attr(types_.nodes[i].attrs, "groups");
      const bool per_channel = groups && *groups > 1 && x->shape[1].is_static() && x->shape[1].value == *groups;
      // A depthwise convolution with a channel multiplier (K = m * C) has no planrt kernel:
      // channels-last it would take cuDNN's NHWC grouped path, the slow one above.
      if (per_channel && constant(n.inputs[1])->shape[0] != *groups && !device.is_cpu()) return false;
      if (!per_channel) ++dense;
    }
    // On the host a lone convolution costs nothing more channels-last (oneDNN's NCHW call
    // reorders anyway); on a GPU it would pay two permutes for one kernel (vit_b_16's patch
    // embedding, bf16 batch 32: 6.03 ms channels-last against 5.80).
    if (device.is_cpu()) return convs > 0;
    return convs > 1 && (sixteen_bit || (layout_permutes > 0 && layout_permutes >= dense));
  }

  // A conv2d the rewrite can run channels-last: NCHW as written, over a constant rank-4 weight.
  bool convertible_conv(const ir::Node& n) const {
    if (n.op != "conv2d" || !is_default_layout(n) || n.outputs.size() != 1 || n.inputs.size() < 2 ||
        n.inputs[0].empty() || !rank4(n.inputs[0])) {
      return false;
    }
    const ir::Constant* w = constant(n.inputs[1]);
    return w != nullptr && w->shape.size() == 4;
  }

  struct Emitted {
    ir::Node node;
    std::vector<ir::Node> after;  // NCHW copies of its outputs, made right after it
  };

  const ir::TensorType* type_of(const std::string& value) const {
    auto it = types_.values.find(value);
    return it == types_.values.end() ? nullptr : &it->second;
  }
  bool rank4(const std::string& value) const {
    const ir::TensorType* t = type_of(value);
    return t != nullptr && t->shape.size() == 4;
  }
  const ir::Constant* constant(const std::string& name) const {
    const ir::Constant* c = model_.find_constant(name);
    return c != nullptr && c->bytes.size() == c->nbytes() ? c : nullptr;
  }

  std::string fresh(const std::string& base) { return names_.fresh(base, "#nhwc"); }

  ir::Node node_like(const ir::Node& place, std::string op, std::string in, std::string out) {
    ir::Node n;
    n.op = std::move(op);
    n.inputs = {std::move(in)};
    n.outputs = {std::move(out)};
    n.backend = place.backend;
    n.segment = place.segment;
    n.device = place.device;
    return n;
  }

  void emit(ir::Node node) { out_.push_back({std::move(node), {}}); }

  // The constant `name` (rank <= 4, broadcast like an NCHW operand) as the NHWC operand,
  // permuted at build: "<name>#nhwc", made once per model.
  Result<std::optional<std::string>> constant_twin(const std::string& name) {
    const ir::Constant* c = constant(name);
    if (c == nullptr || c->shape.size() > 4) return std::optional<std::string>{};
    std::vector<int64_t> s4(4 - c->shape.size(), 1);
    s4.insert(s4.end(), c->shape.begin(), c->shape.end());
    std::vector<int64_t> t4;
    for (int64_t d : kToLast) t4.push_back(s4[d]);
    ir::SymShape sym;
    for (int64_t d : s4) sym.push_back(ir::Dim::fixed(d));
    if (keeps_element_order(sym, kToLast) && c->shape.size() < 4) {
      // Entries of a lower rank that stay in place broadcast the same: the constant itself.
      const auto lead = static_cast<std::ptrdiff_t>(4 - c->shape.size());
      if (std::equal(c->shape.begin(), c->shape.end(), t4.begin() + lead) &&
          std::all_of(t4.begin(), t4.begin() + lead, [](int64_t v) { return v == 1; })) {
        return std::optional<std::string>{name};
      }
    }
    // Nothing moves: the same shape and only unit dims permuted ([K, 1, 1, 1]). The same
    // shape alone is not enough: [8, 3, 3, 3] permutes into [8, 3, 3, 3] with its elements moved.
    if (t4 == c->shape && keeps_element_order(sym, kToLast)) return std::optional<std::string>{name};
    if (auto it = derived_.find(name); it != derived_.end()) return std::optional<std::string>{it->second};
    const std::string derived = fresh(name);
    std::span<const uint8_t> data = c->bytes;
    std::shared_ptr<const void> owner = c->owner;
    if (!keeps_element_order(sym, kToLast)) {
      std::shared_ptr<std::vector<uint8_t>> bytes;
      try {
        bytes = std::make_shared<std::vector<uint8_t>>(c->bytes.size());
      } catch (const std::bad_alloc&) {
        return make_error(ErrorCode::OutOfMemory, "channels-last rewrite: cannot allocate the {} bytes of '{}'",
                          c->bytes.size(), derived);
      }
      // dst[a, y, x, k] (NHWC) = src[a, k, y, x] (NCHW).
      const size_t es = element_size(c->dtype);
      const int64_t n = s4[0], ch = s4[1], h = s4[2], w = s4[3];
      for (int64_t a = 0; a < n; ++a) {
        for (int64_t y = 0; y < h; ++y) {
          for (int64_t x = 0; x < w; ++x) {
            for (int64_t k = 0; k < ch; ++k) {
              const auto src = static_cast<size_t>(((a * ch + k) * h + y) * w + x) * es;
              const auto dst = static_cast<size_t>(((a * h + y) * w + x) * ch + k) * es;
              std::memcpy(bytes->data() + dst, c->bytes.data() + src, es);
            }
          }
        }
      }
      data = std::span<const uint8_t>(bytes->data(), bytes->size());
      owner = bytes;
    }
    ir::Constant made;
    made.name = derived;
    made.dtype = c->dtype;
    made.shape = t4;
    made.init = c->init;
    made.bytes = data;  // the source's own bytes when only size-1 dims move
    made.owner = std::move(owner);
    model_.constants.push_back(std::move(made));
    derived_.emplace(name, derived);
    return std::optional<std::string>{derived};
  }

  // The NHWC operand for `value` as an input of `user`, or nullopt when there is none to be
  // had cheaply: its twin; a derived constant; a value broadcast like it (rank <= 4) through
  // a reshape when only size-1 dims move, or as is when nothing moves. With `copy`, any
  // rank-4 value through a permute.
  Result<std::optional<std::string>> operand(const std::string& value, const ir::Node& user, bool copy) {
    if (auto it = twin_.find(value); it != twin_.end()) return std::optional<std::string>{it->second};
    if (model_.find_constant(value) != nullptr) return constant_twin(value);
    const ir::TensorType* t = type_of(value);
    if (t == nullptr) return std::optional<std::string>{};
    std::optional<ir::SymShape> s4 = as_rank4(t->shape);
    if (!s4) return std::optional<std::string>{};
    const ir::SymShape target = permuted(*s4, kToLast);
    if (keeps_element_order(*s4, kToLast)) {
      // Entries of a lower rank that stay where they are broadcast the same.
      const size_t lead = 4 - t->shape.size();
      bool unchanged = std::equal(t->shape.begin(), t->shape.end(), target.begin() + static_cast<std::ptrdiff_t>(lead));
      for (size_t d = 0; d < lead; ++d) unchanged = unchanged && target[d] == ir::Dim::fixed(1);
      if (unchanged) return std::optional<std::string>{value};
      std::optional<ir::ShapeSpec> spec = spec_of(target, method_.dims);
      if (!spec) return std::optional<std::string>{};
      const std::string twin = fresh(value);
      ir::Node reshape = node_like(user, "reshape", value, twin);
      reshape.attrs["shape"] = *spec;
      emit(std::move(reshape));
      // Only a rank-4 value's twin is an image later nodes may read as one; a broadcast
      // operand of lower rank ([C, 1, 1]) is reshaped again for each reader.
      if (t->shape.size() == 4) twin_[value] = twin;
      return std::optional<std::string>{twin};
    }
    if (!copy || t->shape.size() != 4) return std::optional<std::string>{};
    const std::string twin = fresh(value);
    ir::Node permute = node_like(user, "permute", value, twin);
    permute.attrs["dims"] = std::vector<int64_t>(kToLast.begin(), kToLast.end());
    emit(std::move(permute));
    twin_[value] = twin;
    return std::optional<std::string>{twin};
  }

  // The node now writes its output's twin; the NCHW name is made later if still read.
  void write_twin(ir::Node& node) {
    const std::string& out = node.outputs[0];
    const std::string twin = fresh(out);
    twin_[out] = twin;
    converted_values_[out] = twin;
    node.outputs[0] = twin;
  }

  bool any_twin(const ir::Node& node) const {
    return std::any_of(node.inputs.begin(), node.inputs.end(), [&](const std::string& in) { return twin_.contains(in); });
  }

  // What an operand of a converted node costs: nothing (a twin, a constant permuted at
  // build, a value broadcast the same or through a reshape), a copy (a rank-4 value
  // permuted), or it cannot be had.
  enum class Cost { Free, Copy, Impossible };
  Cost cost_of(const std::string& value) const {
    if (value.empty() || twin_.contains(value)) return Cost::Free;
    if (const ir::Constant* c = model_.find_constant(value)) {
      return c->shape.size() <= 4 && constant(value) != nullptr ? Cost::Free : Cost::Impossible;
    }
    const ir::TensorType* t = type_of(value);
    if (t == nullptr) return Cost::Impossible;
    std::optional<ir::SymShape> s4 = as_rank4(t->shape);
    if (!s4) return Cost::Impossible;
    if (keeps_element_order(*s4, kToLast)) {
      return spec_of(permuted(*s4, kToLast), method_.dims) ? Cost::Free : Cost::Impossible;
    }
    return t->shape.size() == 4 ? Cost::Copy : Cost::Impossible;
  }

  // Every input replaced by its NHWC operand; false (node untouched) when one cannot be had,
  // or when the copies it takes are not fewer than the twins it reads (converting would only
  // move a permute, and keeping the region going is not worth more than that).
  Result<bool> take_operands(ir::Node& node) {
    int twins = 0, copies = 0;
    for (const std::string& in : node.inputs) {
      if (twin_.contains(in)) ++twins;
      const Cost c = cost_of(in);
      if (c == Cost::Impossible) return false;
      if (c == Cost::Copy) ++copies;
    }
    if (copies > 0 && copies >= twins) return false;
    std::vector<std::string> ins = node.inputs;
    for (std::string& in : ins) {
      if (in.empty()) continue;
      PLANRT_ASSIGN_OR_RETURN(std::optional<std::string> twin, operand(in, node, /*copy=*/true));
      if (!twin) return false;
      in = *twin;
    }
    node.inputs = std::move(ins);
    return true;
  }

  Status visit(ir::Node node, size_t index) {
    const ir::Attrs& checked = types_.nodes[index].attrs;
    const bool one_out = node.outputs.size() == 1 && !node.inputs.empty() && !node.inputs[0].empty();
    if (!one_out) {
      emit(std::move(node));
      return {};
    }
    const std::string& x = node.inputs[0];
    if (convertible_conv(node)) {
      PLANRT_ASSIGN_OR_RETURN(std::optional<std::string> weight, constant_twin(node.inputs[1]));
      if (weight) {
        PLANRT_ASSIGN_OR_RETURN(std::optional<std::string> image, operand(x, node, /*copy=*/true));
        node.inputs[0] = *image;  // a rank-4 value always has one (a permute at worst)
        node.inputs[1] = *weight;
        node.attrs["layout"] = std::string("nhwc");
        write_twin(node);
        ++converted_;
      }
      emit(std::move(node));
      return {};
    }
    if (!twin_.contains(x) && !(elementwise_ops().contains(node.op) && any_twin(node))) {
      if (node.op == "permute") note_permute_into_last(node, checked);
      emit(std::move(node));
      return {};
    }
    if (elementwise_ops().contains(node.op) && rank4(node.outputs[0])) {
      PLANRT_ASSIGN_OR_RETURN(bool done, take_operands(node));
      if (done) write_twin(node);
    } else if ((node.op == "max_pool2d" || node.op == "avg_pool2d") && is_default_layout(node)) {
      node.inputs[0] = twin_.at(x);
      node.attrs["layout"] = std::string("nhwc");
      write_twin(node);
    } else if (node.op == "permute") {
      return visit_permute(std::move(node), checked);
    } else if (node.op == "reshape") {
      const ir::TensorType* t = type_of(x);
      if (t != nullptr && keeps_element_order(t->shape, kToLast)) node.inputs[0] = twin_.at(x);
    } else if (node.op == "concat" || node.op == "slice") {
      std::optional<int64_t> dim = int_attr(checked, "dim");
      if (dim && *dim < 0) *dim += 4;
      if (dim && *dim >= 0 && *dim < 4 && rank4(node.outputs[0])) {
        PLANRT_ASSIGN_OR_RETURN(bool done, take_operands(node));
        if (done) {
          node.attrs["dim"] = kAxisInLast[static_cast<size_t>(*dim)];
          write_twin(node);
        }
      }
    } else if (node.op == "pad") {
      const std::vector<int64_t>* pads = ints_attr(node.attrs, "pads");
      if (pads != nullptr && pads->size() == 8) {
        std::vector<int64_t> moved(8);
        for (size_t i = 0; i < 4; ++i) {
          moved[i] = (*pads)[static_cast<size_t>(kToLast[i])];
          moved[4 + i] = (*pads)[4 + static_cast<size_t>(kToLast[i])];
        }
        node.attrs["pads"] = moved;
        node.inputs[0] = twin_.at(x);
        write_twin(node);
      }
    } else if (node.op == "reduce_mean") {
      visit_reduce(node, checked);
    }
    emit(std::move(node));
    return {};
  }

  // reduce_mean over a twin: its dims renumbered, when they stay adjacent; the output is a
  // twin when kept as size 1, plain when the dims are dropped and the rest keeps its order.
  void visit_reduce(ir::Node& node, const ir::Attrs& checked) {
    const std::vector<int64_t>* dims = ints_attr(checked, "dims");
    auto keep = checked.find("keepdim");
    if (dims == nullptr || keep == checked.end() || !std::holds_alternative<bool>(keep->second)) return;
    const bool keepdim = std::get<bool>(keep->second);
    std::vector<int64_t> moved;
    for (int64_t d : *dims) {
      if (d < 0 || d >= 4) return;
      moved.push_back(kAxisInLast[static_cast<size_t>(d)]);
    }
    std::sort(moved.begin(), moved.end());
    for (size_t i = 1; i < moved.size(); ++i) {
      if (moved[i] != moved[i - 1] + 1) return;
    }
    if (!keepdim) {
      // The kept NCHW axes, in the order the NHWC tensor holds them, must be ascending.
      int64_t last = -1;
      for (int64_t d : kToLast) {
        if (std::find(dims->begin(), dims->end(), d) != dims->end()) continue;
        if (d < last) return;
        last = d;
      }
    }
    node.inputs[0] = twin_.at(node.inputs[0]);
    node.attrs["dims"] = moved;
    if (keepdim) write_twin(node);
  }

  // permute(x, kToLast) of a value without a twin makes its twin; so does one that undoes a
  // twin's permute.
  void note_permute_into_last(const ir::Node& node, const ir::Attrs& checked) {
    const std::vector<int64_t>* dims = ints_attr(checked, "dims");
    if (dims == nullptr || dims->size() != 4) return;
    if (std::equal(dims->begin(), dims->end(), kToLast.begin())) {
      twin_[node.inputs[0]] = node.outputs[0];
    } else if (std::equal(dims->begin(), dims->end(), kToFirst.begin()) && !twin_.contains(node.outputs[0])) {
      // out = permute(x, to NCHW): x is out's twin.
      twin_[node.outputs[0]] = node.inputs[0];
    }
  }

  // permute(x, D) with x = permute(x', kToFirst): permute(x', D after kToFirst), or x' itself
  // when that is the identity and the output is only read in this run.
  Status visit_permute(ir::Node node, const ir::Attrs& checked) {
    const std::vector<int64_t>* dims = ints_attr(checked, "dims");
    if (dims == nullptr || dims->size() != 4) {
      emit(std::move(node));
      return {};
    }
    const std::string twin = twin_.at(node.inputs[0]);
    std::vector<int64_t> composed;
    for (int64_t d : *dims) composed.push_back(kToFirst[static_cast<size_t>(d)]);
    const bool identity = composed == std::vector<int64_t>{0, 1, 2, 3};
    const std::string& out = node.outputs[0];
    const auto runs = read_in_runs_.find(out);
    const bool read_here_only = !method_outputs_.contains(out) &&
                                (runs == read_in_runs_.end() || (runs->second.size() == 1 && *runs->second.begin() == current_run_));
    if (identity && read_here_only) {
      rename_[out] = twin;
      return {};
    }
    node.inputs[0] = twin;
    node.attrs["dims"] = composed;
    if (std::equal(composed.begin(), composed.end(), kToFirst.begin())) twin_[out] = twin;  // out is NHWC of nothing new
    emit(std::move(node));
    return {};
  }

  // Each converted value still read by its NCHW name gets it back right after its twin's
  // producer.
  void materialize() {
    std::set<std::string, std::less<>> read(method_outputs_.begin(), method_outputs_.end());
    for (const Emitted& e : out_) {
      for (const std::string& in : e.node.inputs) read.insert(in);
    }
    for (Emitted& e : out_) {
      for (const std::string& o : e.node.outputs) {
        for (const auto& [value, twin] : converted_values_) {
          if (twin != o || !read.contains(value)) continue;
          const ir::TensorType* t = type_of(value);
          ir::Node back = node_like(e.node, "permute", twin, value);
          back.attrs["dims"] = std::vector<int64_t>(kToFirst.begin(), kToFirst.end());
          if (t != nullptr && t->shape.size() == 4 && keeps_element_order(t->shape, kToLast)) {
            if (std::optional<ir::ShapeSpec> spec = spec_of(t->shape, method_.dims)) {
              back.op = "reshape";
              back.attrs.clear();
              back.attrs["shape"] = *spec;
            }
          }
          e.after.push_back(std::move(back));
        }
      }
    }
  }

  // Flattens the emitted nodes, dropping permutes and reshapes whose outputs nobody reads.
  std::vector<ir::Node> drop_unread() {
    std::vector<ir::Node> flat;
    for (Emitted& e : out_) {
      flat.push_back(std::move(e.node));
      for (ir::Node& a : e.after) flat.push_back(std::move(a));
    }
    for (bool changed = true; changed;) {
      changed = false;
      std::set<std::string, std::less<>> read(method_outputs_.begin(), method_outputs_.end());
      for (const ir::Node& n : flat) {
        for (const std::string& in : n.inputs) read.insert(in);
      }
      std::vector<ir::Node> kept;
      for (ir::Node& n : flat) {
        const bool pure = n.op == "permute" || n.op == "reshape";
        if (pure && n.outputs.size() == 1 && !read.contains(n.outputs[0])) {
          changed = true;
          continue;
        }
        kept.push_back(std::move(n));
      }
      flat = std::move(kept);
    }
    return flat;
  }

  ir::Model& model_;
  ir::Method& method_;
  const ir::CheckedMethod& types_;
  MadeNames& names_;
  std::map<std::string, std::string, std::less<>>& derived_;  // source constant -> its NHWC copy
  std::set<std::string, std::less<>> method_outputs_;
  std::map<std::string, std::set<size_t>, std::less<>> read_in_runs_;
  size_t current_run_ = 0;
  bool run_converts_ = false;
  std::map<std::string, std::string, std::less<>> twin_;    // NCHW value -> its NHWC twin, this run
  std::map<std::string, std::string, std::less<>> rename_;  // value -> the twin that replaced it
  std::map<std::string, std::string, std::less<>> converted_values_;  // NCHW value no node makes now -> twin
  std::vector<Emitted> out_;
  int converted_ = 0;
};

}  // namespace

Result<int> rewrite_channels_last(ir::Model& model, ir::Method& method, ChannelsLastNames& names) {
  Result<ir::CheckedMethod> types = ir::check_method(model, method);
  if (!types.ok()) return 0;
  try {
    ChannelsLast pass(model, method, *types, names);
    return pass.run();
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::OutOfMemory, "out of memory in the channels-last rewrite of method '{}'", method.name);
  }
}

}  // namespace planrt::builder
