// The partitioner (docs/design.md §9): a method's nodes -> contiguous segments, one backend each.
//
// Consecutive nodes with the same backend and device form one segment, unless a node names
// a different "segment" (then it starts a new one; consecutive nodes naming the same
// segment stay together). Segments without a name are called "<backend><index>" ("cpu0",
// "cuda1"). A segment name may not be reused by a non-adjacent run of nodes, and nodes of
// one named segment must agree on backend and device. Errors name the method and node.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "builder/check.h"
#include "builder/graph.h"
#include "planrt/core/result.h"

namespace planrt::builder {

struct SegmentSpan {
  std::string name;
  ir::Backend backend = ir::Backend::Cpu;
  Device device;
  size_t begin = 0;  // first node
  size_t end = 0;    // one past the last node
};

Result<std::vector<SegmentSpan>> partition_method(const ir::Method& method,
                                                  const ir::CheckedMethod& checked);

}  // namespace planrt::builder
