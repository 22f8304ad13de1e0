#include "builder/layout_chains.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "builder/rewrite_support.h"
#include "builder/sym_shape.h"

namespace planrt::builder {
namespace {

bool is_layout(const ir::Node& n) {
  return (n.op == "reshape" || n.op == "permute") && n.inputs.size() == 1 && n.outputs.size() == 1;
}

bool keeps_last(const std::vector<int64_t>& dims) {
  return !dims.empty() && dims.back() == static_cast<int64_t>(dims.size()) - 1;
}

// a / b and a * b when they are Dims (sym_shape.h).
std::optional<ir::Dim> quotient(ir::Dim a, ir::Dim b) {
  ir::Dim q;
  return ir::divide_dims(a, b, &q) ? std::optional<ir::Dim>(q) : std::nullopt;
}

std::optional<ir::Dim> product(ir::Dim a, ir::Dim b) {
  ir::Dim p;
  return ir::multiply_dims(a, b, &p) ? std::optional<ir::Dim>(p) : std::nullopt;
}

std::vector<int> flatten(const std::vector<std::vector<int>>& dims) {
  std::vector<int> flat;
  for (const std::vector<int>& d : dims) flat.insert(flat.end(), d.begin(), d.end());
  return flat;
}

// A chain as reshape(x, source_shape) -> permute(perm) -> reshape(y's shape).
struct Canonical {
  ir::SymShape source_shape;
  std::vector<int64_t> perm;
  ir::SymShape permuted_shape;
};

// A chain's first input as factors of its dims, each a constant or a multiple of one named
// dim, and each dim of the chain's current value as the factors it holds, in order. A factor
// a reshape needs only part of is split (row-major: the part the reshape's dim takes is the
// major one), in the source too; dims of one hold none.
class Factors {
 public:
  explicit Factors(const ir::SymShape& source) {
    for (const ir::Dim& d : source) {
      source_.emplace_back();
      if (!(d == ir::Dim::fixed(1))) source_.back().push_back(add(d));
    }
    view_ = source_;
  }

  bool permute(const std::vector<int64_t>& dims) {
    if (dims.size() != view_.size()) return false;
    std::vector<std::vector<int>> out;
    for (int64_t d : dims) out.push_back(view_[static_cast<size_t>(d)]);
    view_ = std::move(out);
    return true;
  }

  bool reshape(const ir::SymShape& to) {
    std::vector<int> flat = flatten(view_);
    std::vector<std::vector<int>> out;
    size_t k = 0;
    for (const ir::Dim& want : to) {
      out.emplace_back();
      ir::Dim rest = want;
      while (!(rest == ir::Dim::fixed(1))) {
        if (k == flat.size()) return false;
        const ir::Dim have = size_[static_cast<size_t>(flat[k])];
        if (std::optional<ir::Dim> left = quotient(rest, have)) {
          out.back().push_back(flat[k++]);
          rest = *left;
        } else if (std::optional<ir::Dim> minor = quotient(have, rest)) {
          auto [major_id, minor_id] = split(flat[k], rest, *minor);
          out.back().push_back(major_id);
          flat[k] = minor_id;
          rest = ir::Dim::fixed(1);
        } else {
          return false;
        }
      }
    }
    if (k != flat.size()) return false;
    view_ = std::move(out);
    return true;
  }

  // The current dims' sizes are `shape`.
  bool is(const ir::SymShape& shape) const {
    if (shape.size() != view_.size()) return false;
    for (size_t i = 0; i < shape.size(); ++i) {
      ir::Dim d = ir::Dim::fixed(1);
      for (int a : view_[i]) {
        std::optional<ir::Dim> p = product(d, size_[static_cast<size_t>(a)]);
        if (!p) return false;
        d = *p;
      }
      if (!(d == shape[i])) return false;
    }
    return true;
  }

  // Factors next to each other in both the source and the current order, in one current
  // dim, move as one. (Joined across current dims, the permute would need a reshape after it,
  // and the attention rewrites look for a permute that makes the attention's operand.)
  Canonical canonical() const {
    const std::vector<int> source = flatten(source_), current = flatten(view_);
    std::vector<size_t> at(size_.size(), 0), dim_of(size_.size(), 0);
    for (size_t i = 0; i < current.size(); ++i) at[static_cast<size_t>(current[i])] = i;
    for (size_t d = 0; d < view_.size(); ++d) {
      for (int a : view_[d]) dim_of[static_cast<size_t>(a)] = d;
    }
    std::vector<std::pair<ir::Dim, size_t>> groups;  // size, place in the current order
    size_t last = 0;
    for (int a : source) {
      const ir::Dim s = size_[static_cast<size_t>(a)];
      const size_t p = at[static_cast<size_t>(a)];
      const bool next = !groups.empty() && p == last + 1 && dim_of[static_cast<size_t>(current[last])] ==
                                                                   dim_of[static_cast<size_t>(a)];
      std::optional<ir::Dim> joined = next ? product(groups.back().first, s) : std::nullopt;
      if (joined) {
        groups.back().first = *joined;
      } else {
        groups.push_back({s, p});
      }
      last = p;
    }
    Canonical c;
    std::vector<size_t> order(groups.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return groups[a].second < groups[b].second; });
    for (const auto& g : groups) c.source_shape.push_back(g.first);
    for (size_t o : order) {
      c.perm.push_back(static_cast<int64_t>(o));
      c.permuted_shape.push_back(groups[o].first);
    }
    return c;
  }

 private:
  int add(ir::Dim d) {
    size_.push_back(d);
    return static_cast<int>(size_.size()) - 1;
  }
  std::pair<int, int> split(int factor, ir::Dim major, ir::Dim minor) {
    const int a = add(major), b = add(minor);
    for (std::vector<int>& dim : source_) {
      auto it = std::find(dim.begin(), dim.end(), factor);
      if (it == dim.end()) continue;
      *it = b;
      dim.insert(it, a);
      break;
    }
    return {a, b};
  }

  std::vector<ir::Dim> size_;                 // by factor
  std::vector<std::vector<int>> source_, view_;  // per dim, its factors in order
};

bool is_identity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// A value name no value of the method has and no earlier call made.
class Names {
 public:
  explicit Names(const ir::CheckedMethod& types) : types_(types) {}
  std::string fresh(const std::string& base) {
    for (int i = 0;; ++i) {
      std::string name = base + (i == 0 ? "" : "." + std::to_string(i));
      if (!types_.values.contains(name) && made_.insert(name).second) return name;
    }
  }

 private:
  const ir::CheckedMethod& types_;
  std::set<std::string> made_;
};

ir::Node layout_node(const ir::Node& place, std::string op, std::string in, std::string out, ir::Attrs attrs) {
  ir::Node n;
  n.op = std::move(op);
  n.inputs = {std::move(in)};
  n.outputs = {std::move(out)};
  n.attrs = std::move(attrs);
  n.backend = place.backend;
  n.segment = place.segment;
  n.device = place.device;
  return n;
}

// The method's nodes without the removed ones, each `inserted[i]` placed before node i (i
// may be the node count: at the end).
void rebuild(ir::Method& method, const std::vector<bool>& removed, std::map<size_t, std::vector<ir::Node>>& inserted) {
  std::vector<ir::Node> out;
  out.reserve(method.nodes.size());
  for (size_t i = 0; i <= method.nodes.size(); ++i) {
    if (auto it = inserted.find(i); it != inserted.end()) {
      for (ir::Node& n : it->second) out.push_back(std::move(n));
    }
    if (i < method.nodes.size() && !removed[i]) out.push_back(std::move(method.nodes[i]));
  }
  method.nodes = std::move(out);
}

// One pass's edits: who reads and makes each value (as the method was before the pass),
// fresh names, the nodes it removes and those it inserts before an index.
struct Edits {
  Edits(const ir::Method& method, const ir::CheckedMethod& types)
      : uses(method), names(types), removed(method.nodes.size(), false) {}
  Uses uses;
  Names names;
  std::vector<bool> removed;
  std::map<size_t, std::vector<ir::Node>> inserted;
};

// `visit(i, edits)` on each node index in order; the edits applied at the end. Returns how
// many visits rewrote something (returned true).
template <class Visit>
int rewrite_each(ir::Method& method, const ir::CheckedMethod& types, Visit&& visit) {
  Edits edits(method, types);
  int rewritten = 0;
  for (size_t i = 0; i < method.nodes.size(); ++i) rewritten += visit(i, edits) ? 1 : 0;
  if (rewritten > 0) rebuild(method, edits.removed, edits.inserted);
  return rewritten;
}

// The only reader of `value`, when that is a layout node of `place`'s place not yet removed.
std::optional<size_t> next_layout(const ir::Method& method, const Uses& uses, const std::vector<bool>& removed,
                                  const std::string& value, const ir::Node& place) {
  const std::vector<size_t>& readers = uses.readers_of(value);
  if (readers.size() != 1 || uses.read_count(value) != 1 || removed[readers[0]]) return std::nullopt;
  const ir::Node& n = method.nodes[readers[0]];
  if (!is_layout(n) || !same_place(n, place)) return std::nullopt;
  return readers[0];
}

// `value` is read only by a chain of layout nodes of `place`'s place that holds a permute.
bool read_by_permuting_chain(const ir::Method& method, const Uses& uses, const std::vector<bool>& removed,
                             std::string value, const ir::Node& place) {
  while (std::optional<size_t> k = next_layout(method, uses, removed, value, place)) {
    if (method.nodes[*k].op == "permute") return true;
    value = method.nodes[*k].outputs[0];
  }
  return false;
}

// `value` is made by a chain of layout nodes of `place`'s place, each read only by the next,
// that holds a permute.
bool made_by_permuting_chain(const ir::Method& method, const Uses& uses, std::string value, const ir::Node& place) {
  for (;;) {
    auto it = uses.producer.find(value);
    if (it == uses.producer.end() || uses.read_count(value) != 1) return false;
    const ir::Node& n = method.nodes[it->second];
    if (!is_layout(n) || !same_place(n, place)) return false;
    if (n.op == "permute") return true;
    value = n.inputs[0];
  }
}

}  // namespace

int count_permutes(const ir::Method& method) {
  return static_cast<int>(std::count_if(method.nodes.begin(), method.nodes.end(),
                                        [](const ir::Node& n) { return n.op == "permute"; }));
}

int simplify_layout_chains(ir::Method& method, const ir::CheckedMethod& types) {
  return rewrite_each(method, types, [&](size_t i, Edits& e) {
    const ir::Node& first = method.nodes[i];
    if (e.removed[i] || !is_layout(first)) return false;
    // A chain starts where its input is not the output of a chain node continuing into it.
    if (auto p = e.uses.producer.find(first.inputs[0]); p != e.uses.producer.end() && is_layout(method.nodes[p->second]) &&
        next_layout(method, e.uses, e.removed, first.inputs[0], method.nodes[p->second]) == i) {
      return false;
    }
    std::vector<size_t> chain{i};
    while (auto k = next_layout(method, e.uses, e.removed, method.nodes[chain.back()].outputs[0], first)) chain.push_back(*k);
    if (chain.size() < 2 || !one_run(method, e.removed, chain.front(), chain.back(), first)) return false;
    const ir::TensorType* x = type_of(types, first.inputs[0]);
    const std::string& y_name = method.nodes[chain.back()].outputs[0];
    const ir::TensorType* y = type_of(types, y_name);
    if (x == nullptr || y == nullptr) return false;
    Factors factors(x->shape);
    bool factored = true;
    int permutes = 0;
    for (size_t j = 0; j < chain.size(); ++j) {
      const ir::Node& n = method.nodes[chain[j]];
      // Of reshapes in a row only the last one's shape matters (an importer may write rows
      // [S, B] as [B, S] between two reshapes: the same elements, and no factor of either).
      if (n.op == "reshape" && j + 1 < chain.size() && method.nodes[chain[j + 1]].op == "reshape") continue;
      if (n.op == "permute") {
        ++permutes;
        std::optional<std::vector<int64_t>> dims;
        if (const ir::TensorType* in = type_of(types, n.inputs[0])) dims = normalised_dims(n, in->shape.size());
        factored = dims && factors.permute(*dims);
      } else {
        const ir::TensorType* out = type_of(types, n.outputs[0]);
        factored = out != nullptr && factors.reshape(out->shape);
      }
      if (!factored) break;
    }
    if (!factored || !factors.is(y->shape)) return false;
    const Canonical c = factors.canonical();
    // Without a permute the chain is one reshape of x (kept even when it is the identity: it
    // carries y's name; drop_identity_reshapes may take it).
    const bool permute = !is_identity(c.perm);
    const bool reshape_first = permute && c.source_shape != x->shape;
    const bool reshape_last = !permute || c.permuted_shape != y->shape;
    const size_t nodes = size_t{reshape_first} + size_t{permute} + size_t{reshape_last};
    if (!(int{permute} < permutes || (int{permute} == permutes && nodes < chain.size()))) return false;
    std::optional<ir::ShapeSpec> first_spec, last_spec;
    if (reshape_first && !(first_spec = spec_of(c.source_shape, method, true))) return false;
    if (reshape_last && !(last_spec = spec_of(y->shape, method, true))) return false;
    std::vector<ir::Node> made;
    std::string value = first.inputs[0];
    auto next_name = [&](bool last) { return last ? y_name : e.names.fresh(y_name + "#layout"); };
    if (reshape_first) {
      made.push_back(layout_node(first, "reshape", value, next_name(!permute && !reshape_last), {{"shape", *first_spec}}));
      value = made.back().outputs[0];
    }
    if (permute) {
      made.push_back(layout_node(first, "permute", value, next_name(!reshape_last), {{"dims", c.perm}}));
      value = made.back().outputs[0];
    }
    if (reshape_last) made.push_back(layout_node(first, "reshape", value, y_name, {{"shape", *last_spec}}));
    for (size_t k : chain) e.removed[k] = true;
    e.inserted[chain.back()] = std::move(made);
    return true;
  });
}

int move_permutes_past_linears(ir::Method& method, const ir::CheckedMethod& types) {
  return rewrite_each(method, types, [&](size_t i, Edits& e) {
    const ir::Node& p = method.nodes[i];
    if (p.op != "permute" || !is_layout(p)) return false;
    const ir::TensorType* x = type_of(types, p.inputs[0]);
    std::optional<std::vector<int64_t>> dims = x == nullptr ? std::nullopt : normalised_dims(p, x->shape.size());
    if (!dims || !keeps_last(*dims)) return false;
    const std::string& xp = p.outputs[0];
    const std::vector<size_t>& readers = e.uses.readers_of(xp);
    if (readers.empty() || e.uses.read_count(xp) != static_cast<int>(readers.size())) return false;
    const bool all_linears = std::all_of(readers.begin(), readers.end(), [&](size_t u) {
      const ir::Node& lin = method.nodes[u];
      return !e.removed[u] && lin.op == "linear" && lin.outputs.size() == 1 && lin.inputs[0] == xp &&
             std::count(lin.inputs.begin(), lin.inputs.end(), xp) == 1 && same_place(lin, p) &&
             one_run(method, e.removed, i, u, p) && read_by_permuting_chain(method, e.uses, e.removed, lin.outputs[0], lin);
    });
    if (!all_linears) return false;
    for (size_t u : readers) {
      ir::Node& lin = method.nodes[u];
      const std::string rows = e.names.fresh(lin.outputs[0] + "#rows");
      e.inserted[u + 1].push_back(layout_node(lin, "permute", rows, lin.outputs[0], {{"dims", *dims}}));
      lin.inputs[0] = p.inputs[0];
      lin.outputs[0] = rows;
    }
    e.removed[i] = true;
    return true;
  });
}

int move_layout_chains_before_linears(ir::Method& method, const ir::CheckedMethod& types) {
  return rewrite_each(method, types, [&](size_t i, Edits& e) {
    ir::Node& lin = method.nodes[i];
    if (e.removed[i] || lin.op != "linear" || lin.outputs.size() != 1 || lin.inputs.empty()) return false;
    const ir::TensorType* x = type_of(types, lin.inputs[0]);
    if (x == nullptr || x->shape.empty() || !made_by_permuting_chain(method, e.uses, lin.inputs[0], lin)) return false;
    // The chain after the linear while it keeps the last dim whole and last.
    std::vector<size_t> after;
    bool permutes = false;
    std::string value = lin.outputs[0];
    while (std::optional<size_t> k = next_layout(method, e.uses, e.removed, value, lin)) {
      const ir::Node& n = method.nodes[*k];
      const ir::TensorType* in = type_of(types, value);
      const ir::TensorType* out = type_of(types, n.outputs[0]);
      if (in == nullptr || out == nullptr || in->shape.empty() || out->shape.empty()) break;
      if (n.op == "permute") {
        std::optional<std::vector<int64_t>> dims = normalised_dims(n, in->shape.size());
        if (!dims || !keeps_last(*dims)) break;
        permutes = true;
      } else if (!(in->shape.back() == out->shape.back())) {
        break;
      }
      after.push_back(*k);
      value = n.outputs[0];
    }
    if (!permutes || !one_run(method, e.removed, i, after.back(), lin)) return false;
    // The same chain over x's rows: its reshapes end in x's last dim.
    std::vector<ir::Node> made;
    std::string in = lin.inputs[0];
    bool written = true;
    for (size_t k : after) {
      const ir::Node& n = method.nodes[k];
      ir::Attrs attrs = n.attrs;
      if (n.op == "reshape") {
        ir::SymShape shape = type_of(types, n.outputs[0])->shape;
        shape.back() = x->shape.back();
        std::optional<ir::ShapeSpec> spec = spec_of(shape, method, true);
        if (!spec) {
          written = false;
          break;
        }
        attrs = {{"shape", *spec}};
      }
      made.push_back(layout_node(n, n.op, in, e.names.fresh(n.outputs[0] + "#in"), std::move(attrs)));
      in = made.back().outputs[0];
    }
    if (!written) return false;
    lin.inputs[0] = in;
    lin.outputs[0] = method.nodes[after.back()].outputs[0];
    for (size_t k : after) e.removed[k] = true;
    e.inserted[i] = std::move(made);
    return true;
  });
}

}  // namespace planrt::builder
