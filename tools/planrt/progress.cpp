#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace planrt::cli {

ProgressBar::ProgressBar(std::string label, uint64_t total)
    : label_(std::move(label)),
      total_(total),
      enabled_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(uint64_t done) {
  if (!enabled_ || finished_ || total_ == 0) return;
  if (!drawn_ && std::chrono::steady_clock::now() - start_ < std::chrono::seconds(1)) return;
  int percent = static_cast<int>(done >= total_ ? 100 : done * 100 / total_);
  if (percent == last_percent_) return;
  last_percent_ = percent;
  constexpr int kWidth = 30;
  int filled = percent * kWidth / 100;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  std::fprintf(stderr, "\r%s [%s] %3d%%", label_.c_str(), bar.c_str(), percent);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (drawn_) {
    std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }
}

}  // namespace planrt::cli
