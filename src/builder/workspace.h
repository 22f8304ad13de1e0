// Kernel workspaces the builder plans: a kernel that needs temporary memory beyond its
// operands gets it as one more output, a value the plan places like any other and that lives
// only while its step runs (docs/design.md §4), so that the memory a method needs is what its
// plan says, never a hidden allocation at run time.
//
// Today only conv2d takes one (kernels/workspace.h): on the host the im2col matrix of the
// plain kernel, or the channels-last copies and scratch of oneDNN's; on a GPU cuDNN's
// algorithm workspace (and a padded copy for asymmetric pads). Its size is per image, so
// the value is [N, bytes per image / 4] f32 with N the batch's dim (named or fixed).
// Pure functions, thread-safe.
#pragma once

#include <optional>

#include "builder/check.h"
#include "builder/graph.h"
#include "planrt/core/device.h"
#include "planrt/core/result.h"

namespace planrt::builder {

// The workspace value node `n` of `method` needs when it runs on `device`, or nullopt.
// Errors: those of the op's plan for shapes the kernel would refuse.
Result<std::optional<ir::TensorType>> kernel_workspace_type(const ir::Model& model, const ir::Method& method,
                                                            const ir::CheckedMethod& checked, size_t n,
                                                            Device device);

// The name of node output `output`'s workspace value.
std::string workspace_value_name(const std::string& output);

}  // namespace planrt::builder
