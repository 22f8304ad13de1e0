// Reading and writing NumPy .npy files (format versions 1.0 and 2.0).
//
// Supported element types are the little-endian '<f4', '<f2', '<i4' and '<i8' (f32, f16,
// i32, i64) and the one-byte '|u1' and '|b1' (u8, bool), C order only. bf16 has no NumPy dtype: writing it is refused (convert to f32
// first), as is reading any other descr or fortran_order True. The header is untrusted:
// it is parsed by a strict reader of the dict NumPy writes (no eval, no recursion) and the
// data size must equal dtype size x shape product exactly (overflow-checked).
// Errors are InvalidArgument (malformed or unsupported content), NotSupported (fortran
// order, bf16) or IoError/NotFound (the file system), and name the file. Stateless,
// thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "format/host_tensor.h"
#include "planrt/core/result.h"

namespace planrt::format {

Result<HostTensor> read_npy(const std::string& path);
// `name` appears in error messages.
Result<HostTensor> parse_npy(std::span<const uint8_t> bytes, const std::string& name = "<memory>");

// Version 1.0 unless the header needs more than 65535 bytes; the header is padded so the
// data starts at a multiple of 64 bytes, as NumPy does.
Result<std::vector<uint8_t>> serialize_npy(const HostTensor& tensor);
// Writes atomically (temporary file + rename).
Status write_npy(const std::string& path, const HostTensor& tensor);

}  // namespace planrt::format
