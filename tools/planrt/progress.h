// A progress bar on stderr for work that takes more than a second.
//
// Drawn only when stderr is a terminal, and only once the work has run for a second, so
// short work and redirected output (logs, CI, pipes) stay clean. Not thread-safe: one
// owner updates it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace planrt::cli {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total);
  ~ProgressBar();  // finishes the line if one was drawn
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(uint64_t done);
  void finish();

 private:
  std::string label_;
  uint64_t total_;
  bool enabled_;
  bool drawn_ = false;
  bool finished_ = false;
  int last_percent_ = -1;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace planrt::cli
