// Fuzz target: safetensors bytes -> SafetensorsFile::from_bytes -> every tensor's bytes.
//
// Beyond "no crash": what the reader accepts, the writer writes back (serialize_safetensors)
// and the reader reads again to the same tensors and metadata, so the two agree on the format.
#include <cstdint>
#include <vector>

#include "format/safetensors.h"
#include "fuzz/fuzz_check.h"

namespace planrt::fuzz {
namespace {

bool same_tensors(const format::SafetensorsFile& a, const format::SafetensorsFile& b) {
  auto ta = a.tensors();
  auto tb = b.tensors();
  if (ta.size() != tb.size() || a.metadata() != b.metadata()) return false;
  for (size_t i = 0; i < ta.size(); ++i) {
    if (ta[i].name != tb[i].name || ta[i].dtype != tb[i].dtype || ta[i].shape != tb[i].shape ||
        !std::equal(ta[i].data.begin(), ta[i].data.end(), tb[i].data.begin(), tb[i].data.end())) {
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace planrt::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace planrt;
  Result<format::SafetensorsFile> file =
      format::SafetensorsFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz");
  if (!file.ok()) return 0;
  uint64_t checksum = 0;  // reads every byte handed out, so ASan checks each span
  for (const format::SafetensorsTensor& t : file->tensors()) {
    fuzz::require(file->find(t.name) == &t, "find() returns the tensor of that name");
    for (uint8_t b : t.data) checksum += b;
  }
  (void)checksum;

  Result<std::vector<uint8_t>> written =
      format::serialize_safetensors(file->tensors(), file->metadata());
  if (!written.ok()) {
    fuzz::require(false, "the writer writes what the reader read: " + written.status().to_string());
  }
  Result<format::SafetensorsFile> reread =
      format::SafetensorsFile::from_bytes(std::move(written).value(), "fuzz (written back)");
  if (!reread.ok()) {
    fuzz::require(false, "the reader reads what the writer wrote: " + reread.status().to_string());
  }
  fuzz::require(fuzz::same_tensors(*file, *reread), "a written-back file holds the same tensors");
  return 0;
}
