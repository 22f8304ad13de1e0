// Reading and writing safetensors files (the weights format of the Hugging Face ecosystem).
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON mapping each tensor name
// to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data section
// that follows the header), then the data section. "__metadata__" is an optional
// string-to-string map. planrt reads and writes the dtypes F32, F16, BF16, I32, I64, U8 and BOOL; a
// file holding any other dtype is refused with an error naming the tensor.
//
// Files are untrusted: the header length, every offset (within the data section,
// begin <= end) and every size (== dtype size x shape product, overflow-checked) are
// verified before a tensor is handed out, and JSON exceptions never escape. Errors are
// InvalidArgument (malformed file) or IoError/NotFound (the file system) and name the file.
//
// Ownership: SafetensorsFile owns its bytes (a read-only mapping or a vector); the spans of
// its tensors point into them and live as long as it does. Move-only; const accessors are
// safe from several threads. Tensor data is not aligned beyond what the file gives.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planrt/core/dtype.h"
#include "planrt/core/result.h"

namespace planrt::format {

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const uint8_t> data;
};

class SafetensorsFile {
 public:
  // Maps `path` read-only.
  static Result<SafetensorsFile> open(const std::string& path);
  // Takes ownership of bytes in memory; `name` appears in error messages.
  static Result<SafetensorsFile> from_bytes(std::vector<uint8_t> bytes,
                                            const std::string& name = "<memory>");

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  // nullptr when there is no tensor of that name.
  const SafetensorsTensor* find(std::string_view name) const;
  // Sorted by name.
  std::span<const SafetensorsTensor> tensors() const;
  const std::map<std::string, std::string>& metadata() const;
  // The path given to open(), or the name given to from_bytes().
  const std::string& path() const;

 private:
  struct Impl;
  explicit SafetensorsFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "F32", "F16", "BF16", "I32", "I64", "U8", "BOOL".
std::string_view safetensors_dtype_name(DType dtype);

// Lays the tensors out contiguously in the order given (the header is padded to 8 bytes).
// Fails on a duplicate or reserved name, or data whose size is not dtype x shape.
Result<std::vector<uint8_t>> serialize_safetensors(
    std::span<const SafetensorsTensor> tensors,
    const std::map<std::string, std::string>& metadata = {});
// Writes atomically (temporary file + rename).
Status write_safetensors(const std::string& path, std::span<const SafetensorsTensor> tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace planrt::format
