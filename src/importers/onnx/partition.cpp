// The import's partitions, named as the transformer template's (builder.h): every node on
// one backend, one segment per block, or one per node.
#include <map>

#include <fmt/format.h>

#include "importers/onnx/importer.h"

namespace planrt::importers::onnx {

Status apply_partition(ir::Method& method, const std::vector<std::string>& blocks,
                       const OnnxImportOptions& options) {
  struct Kind {
    std::string_view name;
    ir::Backend backend;
    enum { Whole, PerBlock, PerOp } split;
  };
  static constexpr Kind kKinds[] = {
      {"cpu", ir::Backend::Cpu, Kind::Whole},
      {"cuda", ir::Backend::Cuda, Kind::Whole},
      {"cuda-per-block", ir::Backend::Cuda, Kind::PerBlock},
      {"cuda-per-op", ir::Backend::Cuda, Kind::PerOp},
      {"engine", ir::Backend::Engine, Kind::Whole},
      {"engine-per-block", ir::Backend::Engine, Kind::PerBlock},
  };
  const Kind* kind = nullptr;
  for (const Kind& k : kKinds) {
    if (k.name == options.partition) kind = &k;
  }
  if (kind == nullptr) {
    return Status(ErrorCode::InvalidArgument,
                  fmt::format("partition '{}' is not one an imported model takes (accepted: cpu, "
                              "cuda, cuda-per-block, cuda-per-op, engine, engine-per-block)",
                              options.partition));
  }
  Result<Device> device = parse_device(options.device);
  if (!device.ok()) return device.status().with_context("device");
  if (kind->backend == ir::Backend::Cuda && device->is_cpu()) {
    return Status(ErrorCode::InvalidArgument,
                  fmt::format("partition '{}' makes cuda segments, which need a CUDA device, but "
                              "device is '{}' (give cuda:N, or use cpu, engine or "
                              "engine-per-block to run on the host)", options.partition,
                              options.device));
  }
  method.backend = kind->backend;
  if (kind->backend != ir::Backend::Cpu) method.device = *device;
  bool any_block = false;
  for (const std::string& b : blocks) any_block = any_block || !b.empty();
  const bool per_op = kind->split == Kind::PerOp || (kind->split == Kind::PerBlock && !any_block);
  std::map<std::string, size_t> block_index;
  std::string current = "head";  // nodes before the first block
  for (size_t i = 0; i < method.nodes.size(); ++i) {
    ir::Node& node = method.nodes[i];
    if (kind->split == Kind::Whole) {
      node.segment.clear();
    } else if (per_op) {
      node.segment = fmt::format("op{}", i);
    } else {
      // A node outside any block (embeddings, a final norm, reshapes between blocks) joins
      // the segment before it, so segments stay contiguous.
      if (i < blocks.size() && !blocks[i].empty()) {
        // A block seen before (exporters may hoist a node) stays in the current segment.
        auto [it, inserted] = block_index.emplace(blocks[i], block_index.size());
        if (inserted) current = fmt::format("block{}", it->second);
      }
      node.segment = current;
    }
  }
  return {};
}

}  // namespace planrt::importers::onnx
