#include "builder/rewrite.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "builder/check.h"
#include "builder/layout_chains.h"
#include "builder/rewrite_support.h"

namespace planrt::builder {
namespace {

// The layout whose head split `n` is, as a permute that makes the attention's [.., H, S, D]
// operand: "bshd" when it swaps the two dims before the last ([.., S, H, D] -> [.., H, S,
// D]), "sbhd" when it moves the first dim to the place before the last ([S, .., H, D] ->
// [.., H, S, D]); "" otherwise. At rank 3 ([S, H, D] -> [H, S, D]) both are one: bshd.
// The head merge (`merge`) is the inverse permute of the same layout.
std::string head_permute_layout(const ir::Node& n, bool merge) {
  if (n.op != "permute" || n.inputs.size() != 1 || n.outputs.size() != 1) return "";
  const std::vector<int64_t>* raw = permute_dims(n);
  if (raw == nullptr || raw->size() < 3) return "";
  const std::optional<std::vector<int64_t>> dims = normalised_dims(n, raw->size());
  if (!dims) return "";
  const auto r = static_cast<int64_t>(dims->size());
  auto at = [&](int64_t i) { return (*dims)[static_cast<size_t>(i)]; };
  bool swap = true, seq_first = true;
  for (int64_t i = 0; i < r; ++i) {
    swap = swap && at(i) == (i == r - 3 ? r - 2 : i == r - 2 ? r - 3 : i);
    const int64_t split = i < r - 2 ? i + 1 : i == r - 2 ? 0 : i;
    const int64_t merged = i == 0 ? r - 2 : i < r - 1 ? i - 1 : i;
    seq_first = seq_first && at(i) == (merge ? merged : split);
  }
  return swap ? "bshd" : seq_first ? "sbhd" : "";
}

// An attention over three operands q, k, v (not yet one packed input), with or without a
// mask (input 3).
bool attention_with_operands(const ir::Node& n) {
  return n.op == "scaled_dot_product_attention" && (n.inputs.size() == 3 || n.inputs.size() == 4) &&
         !n.inputs[1].empty() && !n.inputs[2].empty();
}
std::span<const std::string> operands_of(const ir::Node& attn) { return std::span(attn.inputs).first(3); }

int absorb_attention_permutes(ir::Method& method) {
  Uses uses(method);
  std::vector<bool> removed(method.nodes.size(), false);
  auto permute_producing = [&](const std::string& value) -> ir::Node* {
    auto it = uses.producer.find(value);
    if (it == uses.producer.end() || removed[it->second]) return nullptr;
    ir::Node& p = method.nodes[it->second];
    return head_permute_layout(p, false).empty() ? nullptr : &p;
  };
  auto index_of = [&](const ir::Node* n) { return static_cast<size_t>(n - method.nodes.data()); };

  int rewritten = 0;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    ir::Node& attn = method.nodes[i];
    if (!attention_with_operands(attn) || attn.outputs.size() != 1 || attn.attrs.contains("layout")) continue;
    // Each of q, k, v a head split read only by this attention (as often as it reads it); a
    // mask (input 3) means the same in every layout and stays.
    std::vector<ir::Node*> splits;
    for (const std::string& in : operands_of(attn)) {
      ir::Node* p = permute_producing(in);
      const auto reads_here = std::count(attn.inputs.begin(), attn.inputs.end(), in);
      if (p == nullptr || uses.read_count(in) != reads_here || !same_place(*p, attn)) break;
      splits.push_back(p);
    }
    if (splits.size() != 3) continue;
    const std::string layout = head_permute_layout(*splits[0], false);  // one layout for all three
    if (head_permute_layout(*splits[1], false) != layout || head_permute_layout(*splits[2], false) != layout) continue;
    // The output read once, by a head merge.
    const std::string& o = attn.outputs[0];
    if (uses.read_count(o) != 1) continue;
    ir::Node* merge = nullptr;
    for (size_t j = i + 1; j < method.nodes.size() && merge == nullptr; ++j) {
      ir::Node& n = method.nodes[j];
      if (!removed[j] && n.inputs.size() == 1 && n.inputs[0] == o) merge = &n;
    }
    if (merge == nullptr || head_permute_layout(*merge, true) != layout || !same_place(*merge, attn)) continue;
    // Every node from the first split to the merge in the attention's place: removing the
    // permutes then shortens one segment and never joins or drops one.
    size_t lo = index_of(merge);
    for (const ir::Node* p : splits) lo = std::min(lo, index_of(p));
    if (!one_run(method, removed, lo, index_of(merge), attn)) continue;
    for (size_t k = 0; k < 3; ++k) {
      attn.inputs[k] = splits[k]->inputs[0];
      removed[index_of(splits[k])] = true;
    }
    attn.outputs[0] = merge->outputs[0];
    attn.attrs["layout"] = layout;
    removed[index_of(merge)] = true;
    uses.producer[attn.outputs[0]] = i;  // a later attention sees who makes it now
    ++rewritten;
  }
  if (rewritten > 0) drop_removed(method, removed);
  return rewritten;
}

// conv2d read only by one relu, clip, hard_sigmoid or hard_swish of its run, linear read only
// by one relu or gelu, on the host: the producer applies it (oneDNN's post-ops,
// kernels/cpu/packed_conv.h, packed_linear.h).
int fuse_host_activations(ir::Method& method) {
  // The producers and the activations their host kernels run on the accumulator: oneDNN
  // post-ops (packed_conv.h, packed_linear.h), the plain kernels in a pass of their own.
  static const std::map<std::string, std::set<std::string, std::less<>>, std::less<>> kFusable = {
      {"conv2d", {"relu", "clip", "hard_sigmoid", "hard_swish"}},
      {"linear", {"relu", "gelu"}},
  };
  const Uses uses(method);
  std::vector<bool> removed(method.nodes.size(), false);
  int fused = 0;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    ir::Node& producer = method.nodes[i];
    auto fusable = kFusable.find(producer.op);
    auto act = producer.attrs.find("activation");
    const bool plain = act == producer.attrs.end() ||
                       (std::holds_alternative<std::string>(act->second) && std::get<std::string>(act->second) == "none");
    if (fusable == kFusable.end() || !plain || producer.outputs.size() != 1 ||
        uses.read_count(producer.outputs[0]) != 1 || !ir::node_device(method, producer).is_cpu()) {
      continue;
    }
    const std::vector<size_t>& readers = uses.readers_of(producer.outputs[0]);
    if (readers.size() != 1 || readers[0] <= i) continue;
    const size_t j = readers[0];
    ir::Node& reader = method.nodes[j];
    // Every node between them in the same place: no segment changes.
    if (fusable->second.contains(reader.op) && reader.inputs.size() == 1 && reader.outputs.size() == 1 &&
        same_place(reader, producer) && one_run(method, removed, i, j, producer)) {
      producer.attrs["activation"] = reader.op;
      for (const auto& [name, value] : reader.attrs) producer.attrs[name] = value;
      producer.outputs = reader.outputs;
      removed[j] = true;
      ++fused;
    }
  }
  if (fused > 0) drop_removed(method, removed);
  return fused;
}

// `shape` without its leading unit dims ([1, S, E] -> [S, E]).
ir::SymShape without_leading_units(const ir::SymShape& shape) {
  size_t k = 0;
  while (k < shape.size() && shape[k] == ir::Dim::fixed(1)) ++k;
  return ir::SymShape(shape.begin() + static_cast<std::ptrdiff_t>(k), shape.end());
}

// An exporter's head split of a unit batch: y = reshape(p) adding only leading unit dims,
// p = permute(x) read only by it, y read by an attention: [S, H, D] -> [H, S, D] ->
// [1, H, S, D] (torch 2's nn.MultiheadAttention: [S, B * H, D], transposed, viewed as
// [B, H, S, D]). It becomes reshape then permute, x -> [1, S, H, D] -> [1, H, S, D], the
// same bytes in the form absorb_attention_permutes reads; when x is itself a reshape read
// only by p, the new reshape reads that one's input (one reshape, not two).
int lead_head_splits_with_their_permute(ir::Method& method, const ir::CheckedMethod& types) {
  const Uses uses(method);
  std::vector<bool> removed(method.nodes.size(), false);
  int moved = 0;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    ir::Node& r = method.nodes[i];
    if (r.op != "reshape" || r.inputs.size() != 1 || r.outputs.size() != 1) continue;
    const std::vector<size_t>& readers = uses.readers_of(r.outputs[0]);
    const bool to_attention = !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](size_t k) {
      return method.nodes[k].op == "scaled_dot_product_attention";
    });
    auto made = uses.producer.find(r.inputs[0]);
    if (!to_attention || made == uses.producer.end() || removed[made->second]) continue;
    const size_t pi = made->second;
    ir::Node& perm = method.nodes[pi];
    const std::vector<int64_t>* dims = permute_dims(perm);
    const ir::TensorType* x = perm.op == "permute" && perm.inputs.size() == 1 ? type_of(types, perm.inputs[0]) : nullptr;
    const ir::TensorType* p = type_of(types, r.inputs[0]);
    const ir::TensorType* y = type_of(types, r.outputs[0]);
    if (dims == nullptr || x == nullptr || p == nullptr || y == nullptr || uses.read_count(r.inputs[0]) != 1 ||
        !same_place(perm, r) || y->shape.size() <= p->shape.size() || dims->size() != p->shape.size()) {
      continue;
    }
    const size_t units = y->shape.size() - p->shape.size();
    bool adds_units = std::equal(p->shape.begin(), p->shape.end(), y->shape.begin() + static_cast<std::ptrdiff_t>(units));
    for (size_t k = 0; k < units; ++k) adds_units = adds_units && y->shape[k] == ir::Dim::fixed(1);
    if (!adds_units) continue;
    // Read x's own source when x is a reshape only this permute reads.
    std::string source = perm.inputs[0];
    std::optional<size_t> inner;
    if (auto xm = uses.producer.find(source); xm != uses.producer.end() && !removed[xm->second] &&
        method.nodes[xm->second].op == "reshape" && uses.read_count(source) == 1 &&
        same_place(method.nodes[xm->second], r)) {
      inner = xm->second;
      source = method.nodes[xm->second].inputs[0];
    }
    // Dropping the inner reshape must not empty a run of another place in between.
    if (inner && !one_run(method, removed, *inner, i, r)) continue;
    ir::SymShape lifted(units, ir::Dim::fixed(1));
    lifted.insert(lifted.end(), x->shape.begin(), x->shape.end());
    std::optional<ir::ShapeSpec> spec = spec_of(lifted, method);
    if (!spec) continue;
    std::vector<int64_t> lifted_dims;
    for (size_t k = 0; k < units; ++k) lifted_dims.push_back(static_cast<int64_t>(k));
    for (int64_t d : *dims) {
      const int64_t nd = d < 0 ? d + static_cast<int64_t>(dims->size()) : d;
      lifted_dims.push_back(nd + static_cast<int64_t>(units));
    }
    // The permute becomes the reshape (at its place), the reshape the permute.
    perm.op = "reshape";
    perm.inputs = {source};
    perm.attrs = {{"shape", *spec}};
    r.op = "permute";
    r.attrs = {{"dims", lifted_dims}};
    if (inner) removed[*inner] = true;
    ++moved;
  }
  if (moved > 0) drop_removed(method, removed);
  return moved;
}

// An exporter's head merge of a unit batch: y = permute(o) of an attention's output that
// moves a unit dim as well as the heads, [1, H, S, D] -> [S, 1, H, D] (torch 2: permute(2, 0,
// 1, 3)), becomes the permute that keeps the unit dims in place, [1, H, S, D] -> [1, S, H, D],
// and a reshape to y's shape: the same bytes in the form absorb_attention_permutes reads.
int keep_unit_dims_in_head_merges(ir::Method& method, const ir::CheckedMethod& types) {
  const Uses uses(method);
  std::vector<ir::Node> out;
  out.reserve(method.nodes.size() + 4);
  int rewritten = 0;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    ir::Node& n = method.nodes[i];
    const std::vector<int64_t>* dims = n.op == "permute" && n.inputs.size() == 1 && n.outputs.size() == 1
                                           ? permute_dims(n)
                                           : nullptr;
    auto made = dims != nullptr ? uses.producer.find(n.inputs[0]) : uses.producer.end();
    const ir::TensorType* o = dims != nullptr ? type_of(types, n.inputs[0]) : nullptr;
    const ir::TensorType* y = dims != nullptr ? type_of(types, n.outputs[0]) : nullptr;
    std::vector<int64_t> kept;
    if (made != uses.producer.end() && method.nodes[made->second].op == "scaled_dot_product_attention" && o &&
        y && dims->size() == o->shape.size()) {
      // Non-unit input dims in the order the permute puts them; unit dims stay where they are.
      const auto rank = static_cast<int64_t>(dims->size());
      std::vector<int64_t> order;
      for (int64_t d : *dims) {
        const int64_t nd = d < 0 ? d + rank : d;
        if (nd < 0 || nd >= rank) {
          order.clear();
          break;
        }
        if (o->shape[static_cast<size_t>(nd)] != ir::Dim::fixed(1)) order.push_back(nd);
      }
      size_t next = 0;
      for (int64_t k = 0; k < rank; ++k) {
        kept.push_back(o->shape[static_cast<size_t>(k)] == ir::Dim::fixed(1) || next >= order.size() ? k : order[next++]);
      }
      if (next != order.size() || kept == *dims) kept.clear();
    }
    // Only where the result is a head merge the attention rewrites take in place: else the
    // pair would be one node more for nothing.
    if (!kept.empty()) {
      ir::Node probe = n;
      probe.attrs = {{"dims", kept}};
      if (head_permute_layout(probe, false) != "bshd") kept.clear();
    }
    std::optional<ir::ShapeSpec> spec = kept.empty() ? std::nullopt : spec_of(y->shape, method);
    // Copies, not moves: later nodes still look back at the method's (a producer's op).
    if (!spec) {
      out.push_back(n);
      continue;
    }
    ir::Node kept_permute = n;
    kept_permute.attrs = {{"dims", kept}};
    kept_permute.outputs[0] = n.outputs[0] + "#heads_kept";
    ir::Node reshape = n;
    reshape.op = "reshape";
    reshape.inputs = {kept_permute.outputs[0]};
    reshape.attrs = {{"shape", *spec}};
    out.push_back(std::move(kept_permute));
    out.push_back(std::move(reshape));
    ++rewritten;
  }
  if (rewritten > 0) method.nodes = std::move(out);
  return rewritten;
}

// A bshd attention whose q, k, v are reshapes [.., S, H * D] -> [.., S, H, D] read only by
// it (the flat operand may have more leading unit dims), and whose output only reshapes
// read, reads the flat rows itself (attribute heads = H) and writes [.., S, H * Dv] in q's
// leading dims: the same bytes, three copies fewer. The output's one reshape goes too when
// it makes exactly that type; otherwise it stays (a reshape reads any shape of its size).
int absorb_attention_reshapes(ir::Method& method, const ir::CheckedMethod& types) {
  Uses uses(method);
  std::vector<bool> removed(method.nodes.size(), false);
  auto index_of = [&](const ir::Node* n) { return static_cast<size_t>(n - method.nodes.data()); };
  // `to` is `from` with its last dim split into [H, D] (both static); sbhd: with the same
  // leading dims (a unit dim before the sequence's would become the sequence).
  auto splits_heads = [&](const std::string& from, const std::string& to, bool seq_first, int64_t& heads) {
    const ir::TensorType* f = type_of(types, from);
    const ir::TensorType* t = type_of(types, to);
    if (f == nullptr || t == nullptr || f->dtype != t->dtype || t->shape.size() < 3 || f->shape.empty()) return false;
    const ir::Dim h = t->shape[t->shape.size() - 2], d = t->shape.back(), flat = f->shape.back();
    if (!h.is_static() || !d.is_static() || !flat.is_static() || h.value <= 0 || flat.value != h.value * d.value) {
      return false;
    }
    const ir::SymShape lead_f(f->shape.begin(), f->shape.end() - 1), lead_t(t->shape.begin(), t->shape.end() - 2);
    if (lead_f.empty() || lead_t.empty() || lead_f.back() != lead_t.back() ||  // the sequence dim itself
        without_leading_units(lead_f) != without_leading_units(lead_t) || (seq_first && lead_f != lead_t)) {
      return false;
    }
    heads = h.value;
    return true;
  };
  int rewritten = 0;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    ir::Node& attn = method.nodes[i];
    auto layout = attn.attrs.find("layout");
    if (!attention_with_operands(attn) || attn.outputs.size() != 1 ||
        attn.attrs.contains("heads") || layout == attn.attrs.end() ||
        !std::holds_alternative<std::string>(layout->second) ||
        (std::get<std::string>(layout->second) != "bshd" && std::get<std::string>(layout->second) != "sbhd")) {
      continue;
    }
    const bool seq_first = std::get<std::string>(layout->second) == "sbhd";
    std::vector<ir::Node*> splits;
    int64_t heads = 0;
    for (const std::string& in : operands_of(attn)) {
      auto p = uses.producer.find(in);
      if (p == uses.producer.end() || removed[p->second]) break;
      ir::Node& split = method.nodes[p->second];
      const auto reads_here = std::count(attn.inputs.begin(), attn.inputs.end(), in);
      int64_t h = 0;
      if (split.op != "reshape" || split.inputs.size() != 1 || uses.read_count(in) != reads_here ||
          !same_place(split, attn) || !splits_heads(split.inputs[0], in, seq_first, h) || (heads != 0 && h != heads)) {
        break;
      }
      heads = h;
      splits.push_back(&split);
    }
    const std::string& out = attn.outputs[0];
    const ir::TensorType* out_type = type_of(types, out);
    const ir::TensorType* q_flat = splits.size() == 3 ? type_of(types, splits[0]->inputs[0]) : nullptr;
    if (q_flat == nullptr || q_flat->shape.size() < 2 || out_type == nullptr || out_type->shape.size() < 3) continue;
    // The three flat operands share their rank and batch dims (all but the sequence's and
    // the row's): the attention checks them against each other as they are.
    bool same_lead = true;
    for (size_t k = 1; k < 3 && same_lead; ++k) {
      const ir::TensorType* f = type_of(types, splits[k]->inputs[0]);
      const std::ptrdiff_t skip = seq_first ? 1 : 0;  // sbhd: [S, .., H * D]
      same_lead = f != nullptr && f->shape.size() == q_flat->shape.size() &&
                  std::equal(q_flat->shape.begin() + skip, q_flat->shape.end() - 2 + skip, f->shape.begin() + skip);
    }
    if (!same_lead) continue;
    // Every reader of the output a reshape of this run (the output's shape changes), none
    // a method output.
    std::vector<ir::Node*> readers;
    size_t last = i;
    for (size_t j : uses.readers_of(out)) {
      if (removed[j] || j <= i) continue;
      readers.push_back(&method.nodes[j]);
      last = std::max(last, j);
    }
    const bool readers_reshape = std::all_of(readers.begin(), readers.end(), [&](const ir::Node* n) {
      return n->op == "reshape" && n->outputs.size() == 1 && same_place(*n, attn);
    });
    if (readers.empty() || !readers_reshape || uses.read_count(out) != static_cast<int>(readers.size())) continue;
    const ir::Dim dv = out_type->shape.back();
    if (!dv.is_static()) continue;
    ir::TensorType flat_out{out_type->dtype, q_flat->shape};
    flat_out.shape.back() = ir::Dim::fixed(heads * dv.value);
    size_t lo = last;
    for (const ir::Node* p : splits) lo = std::min(lo, index_of(p));
    if (!one_run(method, removed, lo, last, attn)) continue;
    for (size_t k = 0; k < 3; ++k) {
      attn.inputs[k] = splits[k]->inputs[0];
      removed[index_of(splits[k])] = true;
    }
    attn.attrs["heads"] = heads;
    const ir::TensorType* merged = readers.size() == 1 ? type_of(types, readers[0]->outputs[0]) : nullptr;
    if (merged != nullptr && *merged == flat_out) {
      attn.outputs[0] = readers[0]->outputs[0];
      removed[index_of(readers[0])] = true;
      uses.producer[attn.outputs[0]] = i;
    }
    ++rewritten;
  }
  if (rewritten > 0) drop_removed(method, removed);
  return rewritten;
}

// y = reshape(x) keeping the last dim, read only by linears (as their x) whose outputs only
// reshapes read: the linears read x instead (a linear maps each row alone, and the rows keep
// their order), the reshape goes. What exporters write around attention (a [B, S, E] <->
// [S, B, E] transpose of a unit batch becomes a reshape) then no longer stands between the
// projections and the attention's head reshapes.
int move_row_reshapes_past_linears(ir::Method& method, const ir::CheckedMethod& types) {
  const Uses uses(method);
  std::vector<bool> removed(method.nodes.size(), false);
  int moved = 0;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    const ir::Node& r = method.nodes[i];
    if (r.op != "reshape" || r.inputs.size() != 1 || r.outputs.size() != 1) continue;
    const ir::TensorType* x = type_of(types, r.inputs[0]);
    const ir::TensorType* y = type_of(types, r.outputs[0]);
    if (x == nullptr || y == nullptr || x->shape.empty() || y->shape.empty() || x->shape.back() != y->shape.back()) {
      continue;
    }
    const std::vector<size_t>& users = uses.readers_of(r.outputs[0]);
    if (users.empty() || uses.read_count(r.outputs[0]) != static_cast<int>(users.size())) continue;
    bool ok = true;
    for (size_t u : users) {
      const ir::Node& lin = method.nodes[u];
      ok = ok && lin.op == "linear" && lin.inputs[0] == r.outputs[0] &&
           std::count(lin.inputs.begin(), lin.inputs.end(), r.outputs[0]) == 1 && lin.outputs.size() == 1 &&
           same_place(lin, r) && one_run(method, removed, i, u, r);
      const std::vector<size_t>& after = ok ? uses.readers_of(lin.outputs[0]) : users;
      ok = ok && !after.empty() && uses.read_count(lin.outputs[0]) == static_cast<int>(after.size()) &&
           std::all_of(after.begin(), after.end(), [&](size_t k) { return method.nodes[k].op == "reshape"; });
    }
    if (!ok) continue;
    for (size_t u : users) method.nodes[u].inputs[0] = r.inputs[0];
    removed[i] = true;
    ++moved;
  }
  if (moved > 0) drop_removed(method, removed);
  return moved;
}

// A reshape to the type it reads, not a method output, whose readers all follow in its run
// (so that no segment goes or joins another): its readers read its input.
int drop_identity_reshapes(ir::Method& method, const ir::CheckedMethod& types) {
  const Uses uses(method);
  std::vector<bool> removed(method.nodes.size(), false);
  std::map<std::string, std::string, std::less<>> renamed;
  int dropped = 0;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    ir::Node& n = method.nodes[i];
    for (std::string& in : n.inputs) {
      if (auto it = renamed.find(in); it != renamed.end()) in = it->second;
    }
    if (n.op != "reshape" || n.inputs.size() != 1 || n.outputs.size() != 1) continue;
    const std::vector<size_t>& readers = uses.readers_of(n.outputs[0]);
    if (readers.empty() || uses.read_count(n.outputs[0]) != static_cast<int>(readers.size())) continue;
    const ir::TensorType* x = type_of(types, n.inputs[0]);
    const ir::TensorType* y = type_of(types, n.outputs[0]);
    if (x == nullptr || y == nullptr || !(*x == *y)) continue;
    const size_t last = *std::max_element(readers.begin(), readers.end());
    if (last <= i || !one_run(method, removed, i, last, n)) continue;
    renamed[n.outputs[0]] = n.inputs[0];
    removed[i] = true;
    ++dropped;
  }
  if (dropped > 0) drop_removed(method, removed);
  return dropped;
}

// Shares the bytes of `parts` when they lie back to back in one owner's memory, else copies
// them into one new buffer; nullopt when a part has no bytes yet or memory runs out.
std::optional<std::pair<std::span<const uint8_t>, std::shared_ptr<const void>>> joined_bytes(
    const std::vector<const ir::Constant*>& parts) {
  bool adjacent = true;
  size_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i]->bytes.size() != parts[i]->nbytes()) return std::nullopt;
    total += parts[i]->bytes.size();
    if (i > 0) {
      adjacent = adjacent && parts[i]->owner == parts[0]->owner &&
                 parts[i]->bytes.data() == parts[i - 1]->bytes.data() + parts[i - 1]->bytes.size();
    }
  }
  if (adjacent) return std::make_pair(std::span<const uint8_t>(parts[0]->bytes.data(), total), parts[0]->owner);
  auto bytes = std::shared_ptr<std::vector<uint8_t>>(new (std::nothrow) std::vector<uint8_t>());
  if (bytes == nullptr) return std::nullopt;
  try {
    bytes->resize(total);
  } catch (const std::bad_alloc&) {
    return std::nullopt;
  }
  size_t at = 0;
  for (const ir::Constant* p : parts) {
    std::memcpy(bytes->data() + at, p->bytes.data(), p->bytes.size());
    at += p->bytes.size();
  }
  std::span<const uint8_t> span(bytes->data(), bytes->size());
  return std::make_pair(span, std::shared_ptr<const void>(std::move(bytes)));
}

// An attention with attribute heads whose q, k and v are three linears of one input, over
// constant weights of one shape [N, K] (biases all constant or all absent), each read only
// by it: one linear over the weights' rows stacked [3N, K] writes the packed q|k|v rows the
// attention reads (one GEMM three times as wide instead of three; the weights are stacked
// once at build, shared between methods, and share the source bytes when those already lie
// back to back, as an ONNX in_proj split by the importer does).
int pack_attention_projections(ir::Model& model, ir::Method& method, RewriteState& state) {
  state.names.note(model, method);
  auto fresh = [&](const std::string& base) { return state.names.fresh(base, "#qkv"); };
  Uses uses(method);
  std::vector<bool> removed(method.nodes.size(), false);
  auto index_of = [&](const ir::Node* n) { return static_cast<size_t>(n - method.nodes.data()); };
  int packed = 0;
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    ir::Node& attn = method.nodes[i];
    if (!attention_with_operands(attn) || !attn.attrs.contains("heads")) continue;
    std::vector<ir::Node*> proj;
    std::vector<const ir::Constant*> weights, biases;
    for (const std::string& in : operands_of(attn)) {
      auto p = uses.producer.find(in);
      if (p == uses.producer.end() || removed[p->second] || uses.read_count(in) != 1) break;
      ir::Node& lin = method.nodes[p->second];
      if (lin.op != "linear" || lin.inputs.size() < 2 || !lin.attrs.empty() || !same_place(lin, attn)) break;
      const ir::Constant* w = model.find_constant(lin.inputs[1]);
      const ir::Constant* b = lin.inputs.size() > 2 && !lin.inputs[2].empty() ? model.find_constant(lin.inputs[2]) : nullptr;
      const bool has_bias = lin.inputs.size() > 2 && !lin.inputs[2].empty();
      if (w == nullptr || w->shape.size() != 2 || (has_bias && b == nullptr)) break;
      if (!proj.empty() && (lin.inputs[0] != proj[0]->inputs[0] || w->shape != weights[0]->shape ||
                            w->dtype != weights[0]->dtype || has_bias != (biases[0] != nullptr) ||
                            (b != nullptr && b->dtype != w->dtype))) {
        break;
      }
      proj.push_back(&lin);
      weights.push_back(w);
      biases.push_back(b);
    }
    if (proj.size() != 3 || !one_run(method, removed, std::min({index_of(proj[0]), index_of(proj[1]), index_of(proj[2])}), i, attn)) {
      continue;
    }
    // The stacked weight and bias, made once per model for these sources.
    std::string key = weights[0]->name + "\n" + weights[1]->name + "\n" + weights[2]->name;
    if (biases[0] != nullptr) key += "\n" + biases[0]->name + "\n" + biases[1]->name + "\n" + biases[2]->name;
    auto made = state.packed.find(key);
    if (made == state.packed.end()) {
      std::vector<ir::Constant> stacked;
      for (const std::vector<const ir::Constant*>* parts : {&weights, &biases}) {
        if ((*parts)[0] == nullptr) continue;
        auto bytes = joined_bytes(*parts);
        if (!bytes) break;
        ir::Constant c;
        c.name = fresh((*parts)[0]->name);
        c.dtype = (*parts)[0]->dtype;
        c.shape = (*parts)[0]->shape;
        c.shape[0] *= 3;
        c.init = (*parts)[0]->init;
        c.bytes = bytes->first;
        c.owner = bytes->second;
        stacked.push_back(std::move(c));
      }
      if (stacked.size() != (biases[0] != nullptr ? 2u : 1u)) continue;
      std::vector<std::string> names;
      for (ir::Constant& c : stacked) {
        names.push_back(c.name);
        model.constants.push_back(std::move(c));  // `weights` and `biases` may dangle from here
      }
      made = state.packed.emplace(key, names).first;
    }
    // The q projection becomes the packed one, in its place; k's and v's go.
    ir::Node& q = *proj[0];
    q.inputs = {q.inputs[0], made->second[0]};
    if (made->second.size() > 1) q.inputs.push_back(made->second[1]);
    q.outputs = {fresh(q.outputs[0])};
    removed[index_of(proj[1])] = removed[index_of(proj[2])] = true;
    // One packed input; with a mask, k and v absent before it (kernels::attention_is_packed).
    attn.inputs = attn.inputs.size() > 3 ? std::vector<std::string>{q.outputs[0], "", "", attn.inputs[3]}
                                         : std::vector<std::string>{q.outputs[0]};
    ++packed;
  }
  if (packed > 0) drop_removed(method, removed);
  return packed;
}

}  // namespace

int rewrite_method(ir::Model& model, ir::Method& method, RewriteState& state) {
  // A method that does not check is the caller's to report: the typed rewrites skip it.
  Result<ir::CheckedMethod> types = ir::check_method(model, method);
  if (!types.ok()) return absorb_attention_permutes(method) + fuse_host_activations(method);
  // Each rewrite keeps a checked method checked; one that would not (a case its conditions
  // missed) is undone, so a rewrite can cost a fusion but never a model that builds.
  int rewritten = 0;
  auto apply = [&](auto&& pass) {
    ir::Method before = method;
    const int n = pass();
    if (n == 0) return;
    Result<ir::CheckedMethod> after = ir::check_method(model, method);
    if (!after.ok()) {
      method = std::move(before);
      return;
    }
    types = std::move(after);
    rewritten += n;
  };
  // The layout moves pay only when the chains they join then simplify to fewer permutes
  // (layout_chains.h); otherwise the method goes back to before them and only simplifies.
  {
    const ir::Method before = method;
    const ir::CheckedMethod before_types = *types;
    const int before_rewritten = rewritten, before_permutes = count_permutes(method);
    apply([&] { return move_permutes_past_linears(method, *types); });
    apply([&] { return move_layout_chains_before_linears(method, *types); });
    apply([&] { return simplify_layout_chains(method, *types); });
    if (rewritten > before_rewritten && count_permutes(method) >= before_permutes) {
      method = before;
      types = before_types;
      rewritten = before_rewritten;
      apply([&] { return simplify_layout_chains(method, *types); });
    }
  }
  apply([&] { return lead_head_splits_with_their_permute(method, *types); });
  apply([&] { return keep_unit_dims_in_head_merges(method, *types); });
  apply([&] { return absorb_attention_permutes(method); });
  apply([&] { return move_row_reshapes_past_linears(method, *types); });
  apply([&] { return absorb_attention_reshapes(method, *types); });
  apply([&] { return move_row_reshapes_past_linears(method, *types); });
  apply([&] { return drop_identity_reshapes(method, *types); });
  apply([&] { return pack_attention_projections(model, method, state); });
  apply([&] { return fold_scales_into_linears(model, method, *types, state.names, state.scales); });
  apply([&] { return fuse_host_activations(method); });
  return rewritten;
}

}  // namespace planrt::builder
