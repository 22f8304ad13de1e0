#include "format/atomic_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace planrt::format {
namespace {

Status write_all(int fd, std::span<const uint8_t> bytes, const std::string& tmp) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(ErrorCode::IoError, "cannot write '{}': {}", tmp, std::strerror(errno));
    }
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
  return {};
}

}  // namespace

Status write_file_atomically(const std::string& path,
                             std::span<const std::span<const uint8_t>> pieces) {
  if (path.empty()) return make_error(ErrorCode::InvalidArgument, "cannot write: empty path");
  // The temporary sits beside the target so rename() never crosses a file system.
  std::vector<char> tmpl(path.begin(), path.end());
  const char suffix[] = ".tmp.XXXXXX";
  tmpl.insert(tmpl.end(), suffix, suffix + sizeof(suffix));  // includes the NUL
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) {
    return make_error(ErrorCode::IoError, "cannot create a temporary file for '{}': {}", path,
                      std::strerror(errno));
  }
  const std::string tmp(tmpl.data());
  Status st;
  for (auto piece : pieces) {
    st = write_all(fd, piece, tmp);
    if (!st.ok()) break;
  }
  // mkstemp creates 0600; a program or weights file is as readable as any file the user writes.
  if (st.ok() && ::fchmod(fd, 0644) != 0) {
    st = make_error(ErrorCode::IoError, "cannot set permissions of '{}': {}", tmp,
                    std::strerror(errno));
  }
  if (st.ok() && ::fsync(fd) != 0) {
    st = make_error(ErrorCode::IoError, "cannot flush '{}': {}", tmp, std::strerror(errno));
  }
  if (::close(fd) != 0 && st.ok()) {
    st = make_error(ErrorCode::IoError, "cannot close '{}': {}", tmp, std::strerror(errno));
  }
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    st = make_error(ErrorCode::IoError, "cannot rename '{}' to '{}': {}", tmp, path,
                    std::strerror(errno));
  }
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

}  // namespace planrt::format
