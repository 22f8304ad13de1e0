// Fuzz target: .npy bytes -> parse_npy.
//
// Beyond "no crash": an accepted array holds exactly dtype size x shape bytes, and what the
// reader accepts the writer writes back (serialize_npy) and the reader reads again to the
// same dtype, shape and bytes.
#include <cstdint>
#include <span>

#include "format/npy.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace planrt;
  Result<format::HostTensor> tensor = format::parse_npy(std::span<const uint8_t>(data, size), "fuzz");
  if (!tensor.ok()) return 0;
  fuzz::require(tensor->data.size() == static_cast<uint64_t>(tensor->shape.numel()) * element_size(tensor->dtype),
                "an accepted array holds dtype size x shape bytes");

  Result<std::vector<uint8_t>> written = format::serialize_npy(*tensor);
  if (!written.ok()) {
    fuzz::require(false, "the writer writes what the reader read: " + written.status().to_string());
  }
  Result<format::HostTensor> reread = format::parse_npy(*written, "fuzz (written back)");
  if (!reread.ok()) {
    fuzz::require(false, "the reader reads what the writer wrote: " + reread.status().to_string());
  }
  fuzz::require(reread->dtype == tensor->dtype && reread->shape == tensor->shape &&
                    reread->data == tensor->data,
                "a written-back array is the same array");
  return 0;
}
