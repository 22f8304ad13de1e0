#include "planrt/core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace planrt {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("PLANRT_LOG");
  LogLevel level = LogLevel::Warn;
  if (env != nullptr && !parse_log_level(env, &level)) {
    std::fprintf(stderr,
                 "planrt [warn] PLANRT_LOG='%s' is not one of debug, info, warn, error, off; "
                 "using warn\n",
                 env);
  }
  return level;
}

std::atomic<int>& level_storage() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warn: return "warn";
    case LogLevel::Error: return "error";
    case LogLevel::Off: return "off";
  }
  return "?";
}

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(level_storage().load(std::memory_order_relaxed)); }

void set_log_level(LogLevel level) {
  level_storage().store(static_cast<int>(level), std::memory_order_relaxed);
}

bool parse_log_level(std::string_view text, LogLevel* out) {
  for (LogLevel l : {LogLevel::Debug, LogLevel::Info, LogLevel::Warn, LogLevel::Error, LogLevel::Off}) {
    if (text == level_name(l)) {
      *out = l;
      return true;
    }
  }
  return false;
}

void log_message(LogLevel level, std::string_view message) {
  std::string line = fmt::format("planrt [{}] {}\n", level_name(level), message);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace planrt
