// MappedFile: a whole file mapped read-only, unmapped when the owner goes away.
//
// Used for program files and safetensors weights so that constants are used in place.
// Only regular, non-empty files are mapped (a FIFO or a directory is refused rather than
// blocking or failing later). The bytes stay valid while the MappedFile lives; truncating
// the file underneath a live mapping is outside the contract (the OS raises SIGBUS).
// Move-only. bytes() is const and safe from several threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "planrt/core/result.h"

namespace planrt::format {

class MappedFile {
 public:
  // IoError naming the path and the OS reason (missing, unreadable, not a regular file,
  // empty, mmap failure).
  static Result<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(const uint8_t* data, size_t size, std::string path)
      : data_(data), size_(size), path_(std::move(path)) {}
  void release() noexcept;

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace planrt::format
