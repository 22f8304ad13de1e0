// What a fuzz target checks beyond "does not crash": a property of the library's answer
// (a program the builder wrote must load; a file the writer wrote must read back the same).
// A failed check aborts, so libFuzzer saves the input as a crash and the replayer's ctest
// test fails on it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace planrt::fuzz {

inline void require(bool holds, std::string_view what) {
  if (holds) return;
  std::fprintf(stderr, "fuzz property violated: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

}  // namespace planrt::fuzz
