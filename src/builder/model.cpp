// The public Model handle and the weight export (builder.h).
#include <vector>

#include "builder/graph.h"
#include "format/safetensors.h"
#include "planrt/builder/builder.h"

namespace planrt::builder {

Model::Model(std::unique_ptr<ir::Model> graph) : graph_(std::move(graph)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

std::vector<std::string> Model::method_names() const {
  std::vector<std::string> names;
  for (const ir::Method& m : graph_->methods) names.push_back(m.name);
  return names;
}

size_t Model::num_constants() const { return graph_->constants.size(); }

uint64_t Model::constants_bytes() const {
  uint64_t total = 0;
  for (const ir::Constant& c : graph_->constants) total += c.nbytes();
  return total;
}

Status write_weights_safetensors(const Model& model, const std::string& path) {
  std::vector<format::SafetensorsTensor> tensors;
  for (const ir::Constant& c : model.graph().constants) {
    tensors.push_back({c.name, c.dtype, c.shape, c.bytes});
  }
  return write_safetensors(path, tensors, {{"producer", "planrt-builder"}});
}

}  // namespace planrt::builder
