// What the graph rewrites (rewrite.cpp, layout_chains.cpp) share: who reads and makes each
// value, whether nodes share a place (backend, segment, device), and the attributes they
// write. Internal to the builder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "builder/check.h"
#include "builder/graph.h"

namespace planrt::builder {

inline bool same_place(const ir::Node& a, const ir::Node& b) {
  return a.backend == b.backend && a.segment == b.segment && a.device == b.device;
}

// Who reads each value (nodes, plus one per method output) and who makes it.
// (As the method was when it was made: a pass that renames values keeps it current itself.)
struct Uses {
  std::map<std::string, size_t, std::less<>> producer;
  std::map<std::string, std::vector<size_t>, std::less<>> readers;  // node indices, one per read
  std::map<std::string, int, std::less<>> output_reads;             // as method outputs

  explicit Uses(const ir::Method& method) {
    for (size_t i = 0; i < method.nodes.size(); ++i) {
      for (const std::string& in : method.nodes[i].inputs) {
        if (!in.empty()) readers[in].push_back(i);
      }
      for (const std::string& out : method.nodes[i].outputs) producer[out] = i;
    }
    for (const std::string& out : method.outputs) ++output_reads[out];
  }
  const std::vector<size_t>& readers_of(const std::string& v) const {
    static const std::vector<size_t> kNone;
    auto it = readers.find(v);
    return it == readers.end() ? kNone : it->second;
  }
  // Reads by nodes plus one per method output.
  int read_count(const std::string& v) const {
    auto it = output_reads.find(v);
    return static_cast<int>(readers_of(v).size()) + (it == output_reads.end() ? 0 : it->second);
  }
};

// Every node from `lo` to `hi` (indices) that is not removed shares `place`'s place.
inline bool one_run(const ir::Method& method, const std::vector<bool>& removed, size_t lo, size_t hi,
                    const ir::Node& place) {
  for (size_t j = lo; j <= hi; ++j) {
    if (!removed[j] && !same_place(method.nodes[j], place)) return false;
  }
  return true;
}

inline void drop_removed(ir::Method& method, const std::vector<bool>& removed) {
  std::vector<ir::Node> kept;
  kept.reserve(method.nodes.size());
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    if (!removed[i]) kept.push_back(std::move(method.nodes[i]));
  }
  method.nodes = std::move(kept);
}

inline const ir::TensorType* type_of(const ir::CheckedMethod& types, const std::string& v) {
  auto it = types.values.find(v);
  return it == types.values.end() ? nullptr : &it->second;
}

// The reshape spec that makes `shape`: integers and dim names, and, when `allow_inferred`, one
// -1 for a multiple of a named dim (reshape infers it from the element count). nullopt when
// the shape needs more than that.
inline std::optional<ir::ShapeSpec> spec_of(const ir::SymShape& shape, const ir::Method& method,
                                            bool allow_inferred = false) {
  ir::ShapeSpec spec;
  bool inferred = false;
  for (const ir::Dim& d : shape) {
    if (d.is_static()) {
      spec.push_back({d.value, ""});
    } else if (d.value == 1 && static_cast<size_t>(d.dim) < method.dims.size()) {
      spec.push_back({0, method.dims[static_cast<size_t>(d.dim)].name});
    } else if (allow_inferred && !inferred) {
      spec.push_back({-1, ""});
      inferred = true;
    } else {
      return std::nullopt;
    }
  }
  return spec;
}

inline const std::vector<int64_t>* permute_dims(const ir::Node& n) {
  auto it = n.attrs.find("dims");
  return it == n.attrs.end() ? nullptr : std::get_if<std::vector<int64_t>>(&it->second);
}

// A permute's dims with negative entries counted from the end (-1: the last); nullopt unless
// they are a permutation of `rank` dims.
inline std::optional<std::vector<int64_t>> normalised_dims(const ir::Node& n, size_t rank) {
  const std::vector<int64_t>* dims = permute_dims(n);
  if (dims == nullptr || dims->size() != rank) return std::nullopt;
  const auto r = static_cast<int64_t>(rank);
  std::vector<bool> seen(rank, false);
  std::vector<int64_t> out;
  for (int64_t d : *dims) {
    const int64_t v = d < 0 ? d + r : d;
    if (v < 0 || v >= r || seen[static_cast<size_t>(v)]) return std::nullopt;
    seen[static_cast<size_t>(v)] = true;
    out.push_back(v);
  }
  return out;
}

}  // namespace planrt::builder
