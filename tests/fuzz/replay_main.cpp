// Replays fuzz inputs without libFuzzer: feeds every file named on the command line, and
// every regular file under each directory named there, to LLVMFuzzerTestOneInput, in sorted
// order. Built with the normal compiler and run by ctest, so every input that once crashed
// a target (tests/fuzz/regressions/) and the seed corpus are replayed on every CI run; under
// the sanitizer build a memory error fails the test as it would fail the fuzzer.
//
//   program_fuzz_replay tests/fuzz/corpus/program tests/fuzz/regressions/program
//
// A path that does not exist is skipped with a note (a target with no finding yet has no
// regressions folder), but finding no input at all is an error: a replay that feeds nothing
// cannot fail. Each file's path is printed before it runs, so a crash names it.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Optional in a target, as in libFuzzer.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

namespace fs = std::filesystem;

bool collect_inputs(const fs::path& path, std::vector<fs::path>& inputs) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    inputs.push_back(path);
    return true;
  }
  if (!fs::exists(path, ec)) {
    // A target with no finding yet has no regressions folder.
    std::fprintf(stderr, "replay: '%s' does not exist: nothing to replay there\n", path.c_str());
    return true;
  }
  if (!fs::is_directory(path, ec)) {
    std::fprintf(stderr, "replay: '%s' is neither a file nor a directory\n", path.c_str());
    return false;
  }
  std::vector<fs::path> found;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(path, ec)) {
    if (entry.is_regular_file()) found.push_back(entry.path());
  }
  if (ec) {
    std::fprintf(stderr, "replay: cannot list '%s': %s\n", path.c_str(), ec.message().c_str());
    return false;
  }
  std::sort(found.begin(), found.end());
  inputs.insert(inputs.end(), found.begin(), found.end());
  return true;
}

bool read_file(const fs::path& path, std::vector<uint8_t>& bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!collect_inputs(argv[i], inputs)) return 1;
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs found\n");
    return 1;
  }
  std::vector<uint8_t> bytes;
  for (const fs::path& path : inputs) {
    if (!read_file(path, bytes)) {
      std::fprintf(stderr, "replay: cannot read '%s'\n", path.c_str());
      return 1;
    }
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
    // A copy the exact size of the input, as libFuzzer gives, so ASan sees a read past its end.
    std::vector<uint8_t> exact(bytes);
    LLVMFuzzerTestOneInput(exact.data(), exact.size());
  }
  std::fprintf(stderr, "replay: %zu inputs, none crashed\n", inputs.size());
  return 0;
}
