// Logging to stderr with a level the user sets: PLANRT_LOG=debug|info|warn|error
// (default warn).
//
// Thread safety: every function may be called from any thread. The level is an atomic
// (read on every call, PLANRT_LOG read once, at first use), and each message is written to
// stderr with one call, so lines from different threads do not interleave.
#pragma once

#include <string_view>

#include <fmt/format.h>

namespace planrt {

enum class LogLevel : int { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

// The level in force: PLANRT_LOG at first use, unless set_log_level was called.
LogLevel log_level();
void set_log_level(LogLevel level);
// Parses "debug", "info", "warn", "error", "off".
bool parse_log_level(std::string_view text, LogLevel* out);

void log_message(LogLevel level, std::string_view message);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (level < log_level()) return;
  log_message(level, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace planrt

#define PLANRT_LOG_DEBUG(...) ::planrt::log(::planrt::LogLevel::Debug, __VA_ARGS__)
#define PLANRT_LOG_INFO(...) ::planrt::log(::planrt::LogLevel::Info, __VA_ARGS__)
#define PLANRT_LOG_WARN(...) ::planrt::log(::planrt::LogLevel::Warn, __VA_ARGS__)
#define PLANRT_LOG_ERROR(...) ::planrt::log(::planrt::LogLevel::Error, __VA_ARGS__)
