#include "format/npy.h"

#include <cstring>
#include <optional>
#include <string_view>

#include "format/atomic_write.h"
#include "format/checked_math.h"
#include "format/mapped_file.h"

namespace planrt::format {
namespace {

constexpr char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

struct NpyDtype {
  std::string_view descr;
  DType dtype;
};
constexpr NpyDtype kDtypes[] = {
    {"<f4", DType::F32}, {"<f2", DType::F16}, {"<i4", DType::I32}, {"<i8", DType::I64},
    {"|u1", DType::U8},  {"|b1", DType::Bool}};

// The dict NumPy writes, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
struct Header {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<int64_t>> shape;
};

// A cursor over the header text; every method fails (returns false) rather than reading
// past the end, so garbage cannot make it misbehave.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : s_(text) {}

  // Empty on success, else what went wrong.
  std::string parse(Header& h) {
    skip_ws();
    if (!eat('{')) return "header does not start with '{'";
    skip_ws();
    while (!peek('}')) {
      std::string key;
      if (!string_literal(key)) return "expected a quoted key";
      skip_ws();
      if (!eat(':')) return fmt::format("expected ':' after '{}'", key);
      skip_ws();
      if (key == "descr") {
        std::string v;
        if (h.descr || !string_literal(v)) return "bad or repeated 'descr'";
        h.descr = v;
      } else if (key == "fortran_order") {
        bool v = false;
        if (h.fortran_order || !boolean(v)) return "bad or repeated 'fortran_order'";
        h.fortran_order = v;
      } else if (key == "shape") {
        std::vector<int64_t> v;
        if (h.shape || !tuple(v)) return "bad or repeated 'shape'";
        h.shape = std::move(v);
      } else {
        return fmt::format("unexpected key '{}'", key);
      }
      skip_ws();
      if (!eat(',')) break;
      skip_ws();
    }
    if (!eat('}')) return "header does not end with '}'";
    skip_ws();
    if (pos_ != s_.size()) return "unexpected text after the header dict";
    return {};
  }

 private:
  bool peek(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  bool eat(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t')) ++pos_;
  }
  bool string_literal(std::string& out) {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return false;
    const char quote = s_[pos_++];
    size_t end = s_.find(quote, pos_);
    if (end == std::string_view::npos) return false;
    out = std::string(s_.substr(pos_, end - pos_));
    if (out.find('\\') != std::string::npos) return false;  // NumPy never writes escapes here
    pos_ = end + 1;
    return true;
  }
  bool boolean(bool& out) {
    if (eat(std::string_view("True"))) return out = true, true;
    if (eat(std::string_view("False"))) return out = false, true;
    return false;
  }
  bool integer(int64_t& out) {
    size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[pos_] - '0', &v)) {
        return false;
      }
      ++pos_;
    }
    if (pos_ == start) return false;
    eat('L');  // Python 2 longs
    out = v;
    return true;
  }
  bool tuple(std::vector<int64_t>& out) {
    if (!eat('(')) return false;
    skip_ws();
    while (!peek(')')) {
      int64_t v = 0;
      if (!integer(v) || out.size() >= 64) return false;
      out.push_back(v);
      skip_ws();
      if (!eat(',')) break;
      skip_ws();
    }
    return eat(')');
  }

  std::string_view s_;
  size_t pos_ = 0;
};

Status bad(const std::string& name, std::string message) {
  return Status(ErrorCode::InvalidArgument, fmt::format("npy '{}': {}", name, std::move(message)));
}

std::string_view descr_of(DType dtype) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dtype) return d.descr;
  }
  return {};
}

}  // namespace

Result<HostTensor> parse_npy(std::span<const uint8_t> bytes, const std::string& name) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return bad(name, "not a .npy file (bad magic)");
  }
  const uint8_t major = bytes[6];
  size_t prefix = 0;
  uint64_t header_len = 0;
  if (major == 1) {
    prefix = 10;
    header_len = bytes[8] | (uint32_t{bytes[9]} << 8);
  } else if (major == 2) {
    if (bytes.size() < 12) return bad(name, "file ends inside the header length");
    prefix = 12;
    for (int i = 3; i >= 0; --i) header_len = (header_len << 8) | bytes[8 + i];
  } else {
    return bad(name, fmt::format("format version {}.{} is not supported (1.0 and 2.0 are)", major,
                                 bytes[7]));
  }
  if (!range_within(prefix, header_len, bytes.size())) {
    return bad(name, fmt::format("header of {} bytes runs past the end of the {}-byte file",
                                 header_len, bytes.size()));
  }
  std::string_view text(reinterpret_cast<const char*>(bytes.data() + prefix), header_len);
  Header h;
  std::string err = HeaderParser(text).parse(h);
  if (!err.empty()) return bad(name, "malformed header: " + err);
  if (!h.descr || !h.fortran_order || !h.shape) {
    return bad(name, "header lacks 'descr', 'fortran_order' or 'shape'");
  }
  if (*h.fortran_order) {
    return Status(ErrorCode::NotSupported,
                  fmt::format("npy '{}': fortran_order True is not supported (save C order)", name));
  }
  HostTensor t;
  bool known = false;
  for (const auto& d : kDtypes) {
    if (d.descr == *h.descr) t.dtype = d.dtype, known = true;
  }
  if (!known) {
    return bad(name, fmt::format("unsupported dtype '{}' (planrt reads '<f4', '<f2', '<i4', "
                                 "'<i8', '|u1', '|b1'; bf16 has no NumPy dtype)",
                                 *h.descr));
  }
  if (h.shape->size() > static_cast<size_t>(kMaxRank)) {
    return bad(name, fmt::format("rank {} exceeds the maximum rank {}", h.shape->size(), kMaxRank));
  }
  uint64_t size = element_size(t.dtype);
  for (int64_t d : *h.shape) {
    auto next = checked_mul(size, static_cast<uint64_t>(d));
    if (!next) return bad(name, "shape size overflows");
    size = *next;
    (void)t.shape.push_back(d);  // within kMaxRank, checked above
  }
  const uint64_t available = bytes.size() - prefix - header_len;
  if (available != size) {
    return bad(name, fmt::format("shape {} of {} needs {} data bytes but the file has {}{}",
                                 t.shape.to_string(), *h.descr, size, available,
                                 available < size ? " (truncated)" : ""));
  }
  const uint8_t* data = bytes.data() + prefix + header_len;
  t.data.assign(data, data + size);
  return t;
}

Result<HostTensor> read_npy(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file.ok()) return file.status();
  return parse_npy(file->bytes(), path);
}

namespace {

Result<std::vector<uint8_t>> header_bytes(const HostTensor& t) {
  std::string_view descr = descr_of(t.dtype);
  if (descr.empty()) {
    return make_error(ErrorCode::NotSupported,
                      "cannot write {} as .npy: it has no NumPy dtype (convert to f32 first)",
                      dtype_name(t.dtype));
  }
  uint64_t size = element_size(t.dtype);
  for (int64_t d : t.shape.dims()) {
    auto next = d < 0 ? std::nullopt : checked_mul(size, static_cast<uint64_t>(d));
    if (!next) return make_error(ErrorCode::InvalidArgument, "invalid shape {}", t.shape.to_string());
    size = *next;
  }
  if (size != t.data.size()) {
    return make_error(ErrorCode::InvalidArgument, "tensor {} {} needs {} bytes but holds {}",
                      dtype_name(t.dtype), t.shape.to_string(), size, t.data.size());
  }
  std::string shape = "(";
  for (int64_t d : t.shape.dims()) shape += fmt::format("{}, ", d);
  if (t.shape.rank() == 1) shape.pop_back();  // "(3,)"
  else if (t.shape.rank() > 1) shape.resize(shape.size() - 2);
  shape += ")";
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
  size_t prefix = 10;
  size_t total = *align_up(prefix + dict.size() + 1, 64);
  if (total - prefix > 0xFFFF) {
    prefix = 12;
    total = *align_up(prefix + dict.size() + 1, 64);
  }
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::vector<uint8_t> out(prefix);
  std::memcpy(out.data(), kMagic, sizeof(kMagic));
  out[6] = prefix == 10 ? 1 : 2;
  out[7] = 0;
  for (size_t i = 0; i < prefix - 8; ++i) out[8 + i] = static_cast<uint8_t>(dict.size() >> (8 * i));
  out.insert(out.end(), dict.begin(), dict.end());
  return out;
}

}  // namespace

Result<std::vector<uint8_t>> serialize_npy(const HostTensor& tensor) {
  PLANRT_ASSIGN_OR_RETURN(std::vector<uint8_t> out, header_bytes(tensor));
  out.insert(out.end(), tensor.data.begin(), tensor.data.end());
  return out;
}

Status write_npy(const std::string& path, const HostTensor& tensor) {
  auto header = header_bytes(tensor);
  if (!header.ok()) return header.status().with_context(fmt::format("writing '{}'", path));
  const std::span<const uint8_t> pieces[] = {*header, tensor.data};
  return write_file_atomically(path, pieces);
}

}  // namespace planrt::format
