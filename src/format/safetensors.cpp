#include "format/safetensors.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "format/atomic_write.h"
#include "format/checked_math.h"
#include "format/mapped_file.h"

namespace planrt::format {
namespace {

using nlohmann::json;

// The reference implementation refuses larger headers; a bound keeps a crafted length
// from making us parse gigabytes of JSON.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
constexpr int kMaxTensorRank = 64;
constexpr const char* kMetadataKey = "__metadata__";

Status bad(const std::string& file, std::string message) {
  return Status(ErrorCode::InvalidArgument,
                fmt::format("safetensors '{}': {}", file, std::move(message)));
}

std::optional<DType> parse_st_dtype(std::string_view s) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8, DType::Bool}) {
    if (safetensors_dtype_name(d) == s) return d;
  }
  return std::nullopt;
}

std::optional<uint64_t> as_u64(const json& j) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer()) {
    auto v = j.get<int64_t>();
    if (v >= 0) return static_cast<uint64_t>(v);
  }
  return std::nullopt;
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

Result<SafetensorsTensor> parse_entry(const std::string& file, const std::string& name,
                                      const json& entry, std::span<const uint8_t> data) {
  if (!entry.is_object()) return bad(file, fmt::format("tensor '{}' is not a JSON object", name));
  auto dt = entry.find("dtype");
  auto sh = entry.find("shape");
  auto off = entry.find("data_offsets");
  if (dt == entry.end() || !dt->is_string() || sh == entry.end() || !sh->is_array() ||
      off == entry.end() || !off->is_array() || off->size() != 2) {
    return bad(file, fmt::format("tensor '{}' needs a string dtype, an array shape and "
                                 "data_offsets [begin, end]",
                                 name));
  }
  SafetensorsTensor t;
  t.name = name;
  const auto& dtype_text = dt->get_ref<const std::string&>();
  auto dtype = parse_st_dtype(dtype_text);
  if (!dtype) {
    return bad(file, fmt::format("tensor '{}' has dtype '{}'; planrt reads F32, F16, BF16, I32, I64, U8, BOOL",
                                 name, dtype_text));
  }
  t.dtype = *dtype;
  if (sh->size() > static_cast<size_t>(kMaxTensorRank)) {
    return bad(file, fmt::format("tensor '{}' has rank {}", name, sh->size()));
  }
  uint64_t expected = element_size(t.dtype);
  for (const json& d : *sh) {
    auto v = as_u64(d);
    std::optional<uint64_t> next;
    if (v && *v <= static_cast<uint64_t>(INT64_MAX)) next = checked_mul(expected, *v);
    if (!next) {
      return bad(file, fmt::format("tensor '{}' has a shape entry that is not a non-negative "
                                   "integer or whose size overflows",
                                   name));
    }
    expected = *next;
    t.shape.push_back(static_cast<int64_t>(*v));
  }
  auto begin = as_u64((*off)[0]);
  auto end = as_u64((*off)[1]);
  // The offsets are echoed only once known to be numbers: dumping whatever JSON the file
  // put there recurses once per nesting level, and a deeply nested array overflowed the
  // stack (tests/fuzz/regressions/safetensors).
  if (!begin || !end) {
    return bad(file, fmt::format("tensor '{}' has data_offsets that are not two non-negative "
                                 "integers [begin, end]",
                                 name));
  }
  if (*begin > *end || *end > data.size()) {
    return bad(file, fmt::format("tensor '{}' has data_offsets [{}, {}] outside the {}-byte data "
                                 "section (or begin > end)",
                                 name, *begin, *end, data.size()));
  }
  if (*end - *begin != expected) {
    return bad(file, fmt::format("tensor '{}' ({} with {} dims) needs {} bytes but its "
                                 "data_offsets span {}",
                                 name, dtype_text, t.shape.size(), expected, *end - *begin));
  }
  t.data = data.subspan(*begin, *end - *begin);
  return t;
}

}  // namespace

struct SafetensorsFile::Impl {
  MappedFile mapping;
  std::vector<uint8_t> owned;
  std::string path;
  std::vector<SafetensorsTensor> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;

  Status parse(std::span<const uint8_t> bytes);
};

Status SafetensorsFile::Impl::parse(std::span<const uint8_t> bytes) {
  if (bytes.size() < 8) {
    return bad(path, fmt::format("file is too small ({} bytes) to hold the 8-byte header length",
                                 bytes.size()));
  }
  const uint64_t header_len = read_le64(bytes.data());
  if (header_len > bytes.size() - 8 || header_len > kMaxHeaderBytes) {
    return bad(path, fmt::format("header length {} exceeds the file ({} bytes) or the {}-byte limit",
                                 header_len, bytes.size(), kMaxHeaderBytes));
  }
  const auto* header_begin = reinterpret_cast<const char*>(bytes.data() + 8);
  const std::span<const uint8_t> data = bytes.subspan(8 + header_len);
  try {
    json header = json::parse(header_begin, header_begin + header_len, nullptr,
                              /*allow_exceptions=*/false);
    if (header.is_discarded() || !header.is_object()) {
      return bad(path, "header is not a JSON object");
    }
    for (const auto& [key, entry] : header.items()) {
      if (key == kMetadataKey) {
        if (!entry.is_object()) return bad(path, "__metadata__ is not a JSON object");
        for (const auto& [mk, mv] : entry.items()) {
          if (!mv.is_string()) return bad(path, fmt::format("__metadata__ '{}' is not a string", mk));
          metadata[mk] = mv.get<std::string>();
        }
        continue;
      }
      auto t = parse_entry(path, key, entry, data);
      if (!t.ok()) return t.status();
      tensors.push_back(std::move(t).value());
    }
  } catch (const std::exception& e) {
    return bad(path, fmt::format("malformed header: {}", e.what()));
  }
  // json objects iterate in key order already; sorting keeps find() right regardless.
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return {};
}

SafetensorsFile::SafetensorsFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto mapping = MappedFile::open(path);
  if (!mapping.ok()) return mapping.status();
  auto impl = std::make_unique<Impl>();
  impl->mapping = std::move(mapping).value();
  impl->path = path;
  PLANRT_RETURN_IF_ERROR(impl->parse(impl->mapping.bytes()));
  return SafetensorsFile(std::move(impl));
}

Result<SafetensorsFile> SafetensorsFile::from_bytes(std::vector<uint8_t> bytes,
                                                    const std::string& name) {
  auto impl = std::make_unique<Impl>();
  impl->owned = std::move(bytes);
  impl->path = name;
  PLANRT_RETURN_IF_ERROR(impl->parse(impl->owned));
  return SafetensorsFile(std::move(impl));
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(impl_->tensors.begin(), impl_->tensors.end(), name,
                             [](const SafetensorsTensor& t, std::string_view n) { return t.name < n; });
  return it != impl_->tensors.end() && it->name == name ? &*it : nullptr;
}

std::span<const SafetensorsTensor> SafetensorsFile::tensors() const { return impl_->tensors; }
const std::map<std::string, std::string>& SafetensorsFile::metadata() const {
  return impl_->metadata;
}
const std::string& SafetensorsFile::path() const { return impl_->path; }

std::string_view safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
    case DType::Bool: return "BOOL";
  }
  return "?";
}

namespace {

// The header bytes (length prefix + padded JSON), or an error naming the bad tensor.
Result<std::vector<uint8_t>> build_header(std::span<const SafetensorsTensor> tensors,
                                          const std::map<std::string, std::string>& metadata) {
  try {
    json header = json::object();
    if (!metadata.empty()) header[kMetadataKey] = metadata;
    uint64_t cursor = 0;
    for (const SafetensorsTensor& t : tensors) {
      if (t.name == kMetadataKey || header.contains(t.name)) {
        return make_error(ErrorCode::InvalidArgument, "tensor name '{}' is reserved or repeated",
                          t.name);
      }
      uint64_t expected = element_size(t.dtype);
      for (int64_t d : t.shape) {
        auto next = d < 0 ? std::nullopt : checked_mul(expected, static_cast<uint64_t>(d));
        if (!next) {
          return make_error(ErrorCode::InvalidArgument, "tensor '{}' has an invalid shape", t.name);
        }
        expected = *next;
      }
      if (expected != t.data.size()) {
        return make_error(ErrorCode::InvalidArgument,
                          "tensor '{}' ({}, {} dims) needs {} bytes but {} were given", t.name,
                          safetensors_dtype_name(t.dtype), t.shape.size(), expected,
                          t.data.size());
      }
      header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                        {"shape", t.shape},
                        {"data_offsets", {cursor, cursor + expected}}};
      cursor += expected;
    }
    // replace: a name that is not valid UTF-8 is written with U+FFFD instead of throwing.
    std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
    text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
    std::vector<uint8_t> out(8 + text.size());
    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
    std::memcpy(out.data() + 8, text.data(), text.size());
    return out;
  } catch (const std::exception& e) {
    return make_error(ErrorCode::InvalidArgument, "cannot build the safetensors header: {}",
                      e.what());
  }
}

}  // namespace

Result<std::vector<uint8_t>> serialize_safetensors(
    std::span<const SafetensorsTensor> tensors, const std::map<std::string, std::string>& metadata) {
  PLANRT_ASSIGN_OR_RETURN(std::vector<uint8_t> out, build_header(tensors, metadata));
  for (const SafetensorsTensor& t : tensors) out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

Status write_safetensors(const std::string& path, std::span<const SafetensorsTensor> tensors,
                         const std::map<std::string, std::string>& metadata) {
  auto header = build_header(tensors, metadata);
  if (!header.ok()) return header.status().with_context(fmt::format("writing '{}'", path));
  std::vector<std::span<const uint8_t>> pieces;
  pieces.emplace_back(*header);
  for (const SafetensorsTensor& t : tensors) pieces.push_back(t.data);
  return write_file_atomically(path, pieces);
}

}  // namespace planrt::format
