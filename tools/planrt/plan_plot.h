// `planrt inspect --plot PLAN.svg`: the memory plan drawn, one panel per (method, planned
// buffer): instructions along x, byte offsets along y, one box per tensor over its
// lifetime (hover shows name, bytes, offset, lifetime), and the plan's lower bound as a
// dashed line — where a user looks to see where the bytes go. Plain SVG, opens in a browser.
#pragma once

#include <string>

#include <vector>

#include "plan_layout.h"

namespace planrt::cli {

std::string render_plan_svg(const std::vector<BufferLayout>& layouts);

}  // namespace planrt::cli
