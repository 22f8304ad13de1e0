#include "builder/rewrite.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace planrt::builder {
namespace {

// permute's dims swap the two dims before the last and keep the others: [.., S, H, D] <->
// [.., H, S, D].
bool swaps_seq_and_heads(const ir::Node& n) {
  if (n.op != "permute" || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
  auto it = n.attrs.find("dims");
  if (it == n.attrs.end()) return false;
  const auto* dims = std::get_if<std::vector<int64_t>>(&it->second);
  if (dims == nullptr || dims->size() < 3) return false;
  const auto r = static_cast<int64_t>(dims->size());
  for (int64_t i = 0; i < r; ++i) {
    const int64_t expected = i == r - 3 ? r - 2 : i == r - 2 ? r - 3 : i;
    const int64_t d = (*dims)[i] < 0 ? (*dims)[i] + r : (*dims)[i];  // permute takes -1 = last
    if (d != expected) return false;
  }
  return true;
}

bool same_place(const ir::Node& a, const ir::Node& b) {
  return a.backend == b.backend && a.segment == b.segment && a.device == b.device;
}

int absorb_attention_permutes(ir::Method& method) {
  std::map<std::string, size_t, std::less<>> producer;
  std::map<std::string, int, std::less<>> reads;  // by nodes, plus one per method output
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    for (const std::string& in : method.nodes[i].inputs) {
      if (!in.empty()) ++reads[in];
    }
    for (const std::string& out : method.nodes[i].outputs) producer[out] = i;
  }
  for (const std::string& out : method.outputs) ++reads[out];
  std::vector<bool> removed(method.nodes.size(), false);
  auto permute_producing = [&](const std::string& value) -> ir::Node* {
    auto it = producer.find(value);
    if (it == producer.end() || removed[it->second]) return nullptr;
    ir::Node& p = method.nodes[it->second];
    return swaps_seq_and_heads(p) ? &p : nullptr;
  };
  auto index_of = [&](const ir::Node* n) { return static_cast<size_t>(n - method.nodes.data()); };

  int rewritten = 0;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    ir::Node& attn = method.nodes[i];
    if (attn.op != "scaled_dot_product_attention" || attn.inputs.size() != 3 ||
        attn.outputs.size() != 1 || attn.attrs.contains("layout")) {
      continue;
    }
    // Each input a head split read only by this attention (as often as it reads it).
    std::vector<ir::Node*> splits;
    for (const std::string& in : attn.inputs) {
      ir::Node* p = permute_producing(in);
      const auto uses = std::count(attn.inputs.begin(), attn.inputs.end(), in);
      if (p == nullptr || reads[in] != uses || !same_place(*p, attn)) break;
      splits.push_back(p);
    }
    if (splits.size() != 3) continue;
    // The output read once, by a head merge.
    const std::string& o = attn.outputs[0];
    if (reads[o] != 1) continue;
    ir::Node* merge = nullptr;
    for (size_t j = i + 1; j < method.nodes.size() && merge == nullptr; ++j) {
      ir::Node& n = method.nodes[j];
      if (!removed[j] && n.inputs.size() == 1 && n.inputs[0] == o) merge = &n;
    }
    if (merge == nullptr || !swaps_seq_and_heads(*merge) || !same_place(*merge, attn)) continue;
    // Every node from the first split to the merge in the attention's place: removing the
    // permutes then shortens one segment and never joins or drops one.
    size_t lo = index_of(merge);
    for (const ir::Node* p : splits) lo = std::min(lo, index_of(p));
    bool one_run = true;
    for (size_t j = lo; j <= index_of(merge) && one_run; ++j) {
      one_run = removed[j] || same_place(method.nodes[j], attn);
    }
    if (!one_run) continue;
    for (size_t k = 0; k < 3; ++k) {
      attn.inputs[k] = splits[k]->inputs[0];
      removed[index_of(splits[k])] = true;
    }
    attn.outputs[0] = merge->outputs[0];
    attn.attrs["layout"] = std::string("bshd");
    removed[index_of(merge)] = true;
    producer[attn.outputs[0]] = i;  // a later attention sees who makes it now
    ++rewritten;
  }
  if (rewritten == 0) return 0;
  std::vector<ir::Node> kept;
  kept.reserve(method.nodes.size());
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    if (!removed[i]) kept.push_back(std::move(method.nodes[i]));
  }
  method.nodes = std::move(kept);
  return rewritten;
}

// conv2d read only by one relu, clip, hard_sigmoid or hard_swish of its run, on the host:
// the convolution applies it (oneDNN's post-ops, kernels/cpu/packed_conv.h).
int fuse_host_conv_activations(ir::Method& method) {
  static const std::set<std::string, std::less<>> kFusable = {"relu", "clip", "hard_sigmoid", "hard_swish"};
  std::map<std::string, int, std::less<>> reads;
  for (const ir::Node& n : method.nodes) {
    for (const std::string& in : n.inputs) {
      if (!in.empty()) ++reads[in];
    }
  }
  for (const std::string& out : method.outputs) ++reads[out];
  std::vector<bool> removed(method.nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    ir::Node& conv = method.nodes[i];
    auto act = conv.attrs.find("activation");
    const bool plain = act == conv.attrs.end() ||
                       (std::holds_alternative<std::string>(act->second) && std::get<std::string>(act->second) == "none");
    if (conv.op != "conv2d" || !plain || conv.outputs.size() != 1 || reads[conv.outputs[0]] != 1 ||
        !ir::node_device(method, conv).is_cpu()) {
      continue;
    }
    for (size_t j = i + 1; j < method.nodes.size(); ++j) {
      ir::Node& reader = method.nodes[j];
      if (std::find(reader.inputs.begin(), reader.inputs.end(), conv.outputs[0]) == reader.inputs.end()) continue;
      if (kFusable.contains(reader.op) && reader.inputs.size() == 1 && reader.outputs.size() == 1 &&
          same_place(reader, conv)) {
        bool one_run = true;  // every node between them in the same place: no segment changes
        for (size_t k = i + 1; k < j && one_run; ++k) one_run = removed[k] || same_place(method.nodes[k], conv);
        if (one_run) {
          conv.attrs["activation"] = reader.op;
          for (const auto& [name, value] : reader.attrs) conv.attrs[name] = value;
          conv.outputs = reader.outputs;
          removed[j] = true;
          ++fused;
        }
      }
      break;
    }
  }
  if (fused == 0) return 0;
  std::vector<ir::Node> kept;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    if (!removed[i]) kept.push_back(std::move(method.nodes[i]));
  }
  method.nodes = std::move(kept);
  return fused;
}

}  // namespace

int rewrite_method(ir::Method& method) {
  const int attentions = absorb_attention_permutes(method);
  return attentions + fuse_host_conv_activations(method);
}

}  // namespace planrt::builder
