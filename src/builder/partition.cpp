#include "builder/partition.h"

#include <set>

#include <fmt/format.h>

namespace planrt::builder {

Result<std::vector<SegmentSpan>> partition_method(const ir::Method& method,
                                                  const ir::CheckedMethod& checked) {
  std::vector<SegmentSpan> out;
  std::set<std::string, std::less<>> closed;  // names of segments already finished
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    const ir::Node& node = method.nodes[i];
    const ir::CheckedNode& c = checked.nodes[i];
    if (!out.empty()) {
      SegmentSpan& last = out.back();
      // Unnamed nodes share the label "", so they group by backend and device alone.
      bool same_name = node.segment == method.nodes[last.begin].segment;
      if (same_name && last.backend == c.backend && last.device == c.device) {
        last.end = i + 1;
        continue;
      }
      if (same_name && !node.segment.empty()) {
        return make_error(ErrorCode::InvalidProgram,
                          "method '{}', {}: segment '{}' mixes backend {} on {} with backend {} on {}",
                          method.name, ir::node_label(node, i), node.segment, ir::backend_name(last.backend),
                          to_string(last.device), ir::backend_name(c.backend), to_string(c.device));
      }
      closed.insert(last.name);
    }
    if (!node.segment.empty() && closed.contains(node.segment)) {
      return make_error(ErrorCode::InvalidProgram,
                        "method '{}', {}: segment '{}' was already closed by other nodes; a "
                        "segment is one contiguous run of nodes",
                        method.name, ir::node_label(node, i), node.segment);
    }
    SegmentSpan s;
    s.backend = c.backend;
    s.device = c.device;
    s.begin = i;
    s.end = i + 1;
    s.name = node.segment.empty() ? fmt::format("{}{}", ir::backend_name(c.backend), out.size()) : node.segment;
    out.push_back(std::move(s));
  }
  // A generated name may equal a name the model chose for another segment.
  std::set<std::string, std::less<>> names;
  for (const SegmentSpan& s : out) {
    if (!names.insert(s.name).second) {
      return make_error(ErrorCode::InvalidProgram,
                        "method '{}': two segments are named '{}' (node {}); choose another "
                        "segment name", method.name, s.name, s.begin);
    }
  }
  return out;
}

}  // namespace planrt::builder
