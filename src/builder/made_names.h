// Names for what the builder's rewrites make (derived constants, twin values): a name made
// for one method must meet no name anywhere in the model -- no constant, and no input or node
// output of any method -- or a later method's rewrite could read the wrong tensor. One
// MadeNames per model build, shared by every method's rewrite of one kind; not thread-safe.
// Internal to the builder.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "builder/graph.h"

namespace planrt::builder {

class MadeNames {
 public:
  // Takes every name of `model` as written on the first call, and on every call the names
  // of `method` (which a rewrite run before this one may have added to).
  void note(const ir::Model& model, const ir::Method& method) {
    if (!initialised_) {
      for (const ir::Constant& c : model.constants) taken_.insert(c.name);
      for (const ir::Method& m : model.methods) note_values(m);
      initialised_ = true;
    }
    note_values(method);
  }

  // `base` + `suffix`, or `base` + `suffix` + k for the first k = 2, 3, ... not taken; the
  // name is taken from then on.
  std::string fresh(std::string_view base, std::string_view suffix) {
    std::string name = fmt::format("{}{}", base, suffix);
    for (int k = 2; taken_.contains(name); ++k) name = fmt::format("{}{}{}", base, suffix, k);
    taken_.insert(name);
    return name;
  }

 private:
  void note_values(const ir::Method& m) {
    for (const ir::ValueDecl& v : m.inputs) taken_.insert(v.name);
    for (const ir::Node& n : m.nodes) taken_.insert(n.outputs.begin(), n.outputs.end());
  }

  bool initialised_ = false;
  std::set<std::string, std::less<>> taken_;
};

}  // namespace planrt::builder
