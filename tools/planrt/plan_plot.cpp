#include "plan_plot.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "format_bytes.h"

namespace planrt::cli {
namespace {

constexpr double kPanelWidth = 900;
constexpr double kPanelHeight = 320;
constexpr double kLeft = 90;     // room for the byte axis labels
constexpr double kTop = 50;      // room for the panel title
constexpr double kBottom = 40;   // room for the instruction axis labels
constexpr double kRight = 30;

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A stable, distinguishable fill per tensor: hue from its value id.
std::string fill_for(uint32_t value) {
  double hue = std::fmod(value * 137.508, 360.0);
  return fmt::format("hsl({:.0f},60%,65%)", hue);
}

void draw_panel(std::string& svg, double y0, const BufferLayout& buffer) {
  double plot_w = kPanelWidth - kLeft - kRight;
  double plot_h = kPanelHeight - kTop - kBottom;
  double n_instr = std::max<double>(1.0, static_cast<double>(buffer.num_instructions));
  double max_bytes = std::max<double>(1.0, static_cast<double>(buffer.size_bytes));
  auto x_of = [&](double instr) { return kLeft + instr / n_instr * plot_w; };
  auto y_of = [&](double bytes) { return y0 + kTop + plot_h - bytes / max_bytes * plot_h; };

  std::string title = fmt::format("method {} · buffer #{} on {} · {}", buffer.method,
                                  buffer.index, to_string(buffer.device),
                                  format_bytes(buffer.size_bytes));
  if (buffer.lower_bound_bytes > 0) {
    title += fmt::format(" · lower bound {} · ratio {:.3f}", format_bytes(buffer.lower_bound_bytes),
                         static_cast<double>(buffer.size_bytes) / buffer.lower_bound_bytes);
  }
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="15" font-weight="bold">{}</text>)" "\n",
                     kLeft, y0 + 25, xml_escape(title));
  svg += fmt::format(
      R"(<rect x="{}" y="{}" width="{}" height="{}" fill="#fafafa" stroke="#888"/>)" "\n",
      kLeft, y0 + kTop, plot_w, plot_h);

  for (const PlacedTensor& t : buffer.tensors) {
    double x = x_of(static_cast<double>(t.first_use));
    double w = std::max(1.0, x_of(static_cast<double>(t.last_use + 1)) - x);
    double y = y_of(static_cast<double>(t.offset + t.size_bytes));
    double h = std::max(0.5, y_of(static_cast<double>(t.offset)) - y);
    svg += fmt::format(
        R"(<rect x="{:.2f}" y="{:.2f}" width="{:.2f}" height="{:.2f}" fill="{}" stroke="#333" stroke-width="0.4"><title>{} · {} at offset {} · instructions {}..{}</title></rect>)"
        "\n",
        x, y, w, h, fill_for(t.value), xml_escape(t.name), format_bytes(t.size_bytes), t.offset,
        t.first_use, t.last_use);
  }

  if (buffer.lower_bound_bytes > 0) {
    double y = y_of(static_cast<double>(buffer.lower_bound_bytes));
    svg += fmt::format(
        R"(<line x1="{}" y1="{:.2f}" x2="{}" y2="{:.2f}" stroke="#c00" stroke-width="1.5" stroke-dasharray="6,4"/>)"
        "\n",
        kLeft, y, kLeft + plot_w, y);
    svg += fmt::format(R"(<text x="{}" y="{:.2f}" font-size="11" fill="#c00" text-anchor="end">lower bound</text>)" "\n",
                       kLeft + plot_w - 4, y - 4);
  }

  // Axes: five byte ticks, up to ten instruction ticks.
  for (int i = 0; i <= 4; ++i) {
    double bytes = max_bytes * i / 4;
    svg += fmt::format(R"(<text x="{}" y="{:.2f}" font-size="11" text-anchor="end">{}</text>)" "\n",
                       kLeft - 6, y_of(bytes) + 4, format_bytes(static_cast<uint64_t>(bytes)));
  }
  int64_t step = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(n_instr / 10)));
  for (int64_t i = 0; i <= static_cast<int64_t>(n_instr); i += step) {
    svg += fmt::format(R"(<text x="{:.2f}" y="{}" font-size="11" text-anchor="middle">{}</text>)" "\n",
                       x_of(static_cast<double>(i)), y0 + kTop + plot_h + 16, i);
  }
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="12" text-anchor="middle">instruction</text>)" "\n",
                     kLeft + plot_w / 2, y0 + kTop + plot_h + 34);
}

}  // namespace

std::string render_plan_svg(const std::vector<BufferLayout>& layouts) {
  double height = static_cast<double>(std::max<size_t>(layouts.size(), 1)) * kPanelHeight + 20;
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif">)"
      "\n",
      kPanelWidth, height);
  svg += R"(<rect width="100%" height="100%" fill="white"/>)" "\n";
  double y0 = 0;
  for (const BufferLayout& b : layouts) {
    draw_panel(svg, y0, b);
    y0 += kPanelHeight;
  }
  if (layouts.empty()) {
    svg += R"(<text x="20" y="30" font-size="14">no planned buffers</text>)" "\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace planrt::cli
