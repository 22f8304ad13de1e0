#include "format/program_file.h"

#include <cstring>
#include <optional>
#include <set>

#include "format/checked_math.h"
#include "format/fb_types.h"
#include "format/mapped_file.h"
#include "format/program_verifier.h"
#include "format/safetensors.h"

namespace planrt::format {

namespace {

// What verification yields: the root table and where each constant's bytes are.
struct Contents {
  const fb::Program* program = nullptr;
  std::vector<std::span<const uint8_t>> constants;
  uint64_t constants_bytes = 0;
  std::unique_ptr<SafetensorsFile> external;  // when the program names one
};

Status invalid(std::string message) { return Status(ErrorCode::InvalidProgram, std::move(message)); }

struct Regions {
  std::span<const uint8_t> flatbuffer;
  std::span<const uint8_t> segment;
  bool has_segment = false;
};

Result<Regions> check_header(std::span<const uint8_t> bytes) {
  if (bytes.size() < sizeof(FileHeader)) {
    return invalid(fmt::format("file is too small ({} bytes) to hold the {}-byte header",
                               bytes.size(), sizeof(FileHeader)));
  }
  FileHeader h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (std::memcmp(h.magic, kFileMagic, sizeof(kFileMagic)) != 0) {
    return invalid("bad magic: not a planrt program file");
  }
  if (h.header_version != 1) {
    return invalid(fmt::format("header version {}, this build reads 1", h.header_version));
  }
  if (h.header_size != sizeof(FileHeader)) {
    return invalid(fmt::format("header size {}, expected {}", h.header_size, sizeof(FileHeader)));
  }
  const uint64_t file_size = bytes.size();
  if (h.flatbuffer_offset < sizeof(FileHeader) || h.flatbuffer_offset % 8 != 0 ||
      h.flatbuffer_size == 0 || !range_within(h.flatbuffer_offset, h.flatbuffer_size, file_size)) {
    return invalid(fmt::format(
        "FlatBuffer at offset {} with {} bytes does not fit in the file of {} bytes "
        "(or is misaligned or empty)",
        h.flatbuffer_offset, h.flatbuffer_size, file_size));
  }
  if (h.flatbuffer_size >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return invalid(fmt::format("FlatBuffer of {} bytes is over the 2 GiB limit", h.flatbuffer_size));
  }
  Regions r;
  r.flatbuffer = bytes.subspan(h.flatbuffer_offset, h.flatbuffer_size);
  if (h.segment_offset != 0 || h.segment_size != 0) {
    const uint64_t fb_end = h.flatbuffer_offset + h.flatbuffer_size;
    if (h.segment_offset % kSegmentAlignment != 0 || h.segment_offset < fb_end ||
        !range_within(h.segment_offset, h.segment_size, file_size)) {
      return invalid(fmt::format(
          "data segment at offset {} with {} bytes is not {}-aligned after the FlatBuffer "
          "(ends at {}) inside the file of {} bytes",
          h.segment_offset, h.segment_size, kSegmentAlignment, fb_end, file_size));
    }
    r.segment = bytes.subspan(h.segment_offset, h.segment_size);
    r.has_segment = true;
  }
  return r;
}

// dtype x shape of a constant in bytes, or an error naming it.
Result<uint64_t> constant_nbytes(const fb::Constant& c, uint32_t index) {
  auto dtype = to_dtype(c.dtype());
  if (!dtype) {
    return invalid(fmt::format("constant {} '{}' has an unknown dtype {}", index,
                               c.name()->string_view(), static_cast<int>(c.dtype())));
  }
  if (!elements_aligned(c.shape())) {
    return invalid(fmt::format("constant {} '{}' has a misaligned shape vector", index,
                               c.name()->string_view()));
  }
  const uint32_t rank = c.shape() ? c.shape()->size() : 0;
  if (rank > static_cast<uint32_t>(kMaxRank)) {
    return invalid(fmt::format("constant {} '{}' has rank {}, above the maximum {}", index,
                               c.name()->string_view(), rank, kMaxRank));
  }
  uint64_t size = element_size(*dtype);
  for (uint32_t i = 0; i < rank; ++i) {
    int64_t d = c.shape()->Get(i);
    auto next = d < 0 ? std::nullopt : checked_mul(size, static_cast<uint64_t>(d));
    if (!next) {
      return invalid(fmt::format("constant {} '{}' has dim {} = {}: negative or the size overflows",
                                 index, c.name()->string_view(), i, d));
    }
    size = *next;
  }
  return size;
}

// The checks every constant passes wherever its bytes live.
Status check_constants(const fb::Program& program) {
  const auto* constants = program.constants();
  std::set<std::string_view> names;
  for (uint32_t i = 0; i < (constants ? constants->size() : 0); ++i) {
    const fb::Constant& c = *constants->Get(i);
    std::string_view name = c.name()->string_view();
    if (name.empty()) return invalid(fmt::format("constant {} has an empty name", i));
    if (!names.insert(name).second) return invalid(fmt::format("two constants are named '{}'", name));
    PLANRT_ASSIGN_OR_RETURN(uint64_t expected, constant_nbytes(c, i));
    if (c.size_bytes() != expected) {
      return invalid(fmt::format("constant {} '{}' has size_bytes {} but its dtype and shape make {}",
                                 i, name, c.size_bytes(), expected));
    }
  }
  return {};
}

Status bind_segment_constants(Contents& out, const Regions& regions) {
  const auto* constants = out.program->constants();
  for (uint32_t i = 0; i < (constants ? constants->size() : 0); ++i) {
    const fb::Constant& c = *constants->Get(i);
    std::string_view name = c.name()->string_view();
    if (c.offset() % kConstantAlignment != 0) {
      return invalid(fmt::format("constant {} '{}' at segment offset {} is not {}-byte aligned", i,
                                 name, c.offset(), kConstantAlignment));
    }
    if (!range_within(c.offset(), c.size_bytes(), regions.segment.size())) {
      return invalid(fmt::format(
          "constant {} '{}' at segment offset {} with {} bytes is past the end of the {}-byte "
          "data segment",
          i, name, c.offset(), c.size_bytes(), regions.segment.size()));
    }
    out.constants.push_back(regions.segment.subspan(c.offset(), c.size_bytes()));
    out.constants_bytes += c.size_bytes();
  }
  return {};
}

Status bind_external_constants(Contents& out, const std::string& base_dir) {
  const std::string name = out.program->external_constants()->str();
  const std::string path = name.front() == '/' ? name : base_dir + "/" + name;
  auto file = SafetensorsFile::open(path);
  if (!file.ok()) {
    return file.status().with_context(fmt::format("external constants '{}'", name));
  }
  out.external = std::make_unique<SafetensorsFile>(std::move(file).value());
  const auto* constants = out.program->constants();
  for (uint32_t i = 0; i < (constants ? constants->size() : 0); ++i) {
    const fb::Constant& c = *constants->Get(i);
    std::string_view cname = c.name()->string_view();
    const SafetensorsTensor* t = out.external->find(cname);
    if (t == nullptr) {
      return invalid(fmt::format("constant {} '{}' is not in the external constants file '{}'", i,
                                 cname, path));
    }
    const uint32_t rank = c.shape() ? c.shape()->size() : 0;
    bool same_shape = rank == t->shape.size();
    for (uint32_t d = 0; same_shape && d < rank; ++d) same_shape = c.shape()->Get(d) == t->shape[d];
    if (to_dtype(c.dtype()) != t->dtype || !same_shape || t->data.size() != c.size_bytes()) {
      return invalid(fmt::format(
          "constant {} '{}' is {} with {} dims ({} bytes) but '{}' holds it as {} with {} dims "
          "({} bytes)",
          i, cname, dtype_name(*to_dtype(c.dtype())), rank, c.size_bytes(), path,
          dtype_name(t->dtype), t->shape.size(), t->data.size()));
    }
    // Kernels read constants in place: an element split across its natural alignment is
    // undefined behaviour, and safetensors data offsets are arbitrary.
    if (reinterpret_cast<uintptr_t>(t->data.data()) % element_size(t->dtype) != 0) {
      return invalid(fmt::format(
          "constant {} '{}' in '{}' is not aligned to its {}-byte elements (it is read in place)",
          i, cname, path, element_size(t->dtype)));
    }
    out.constants.push_back(t->data);
    out.constants_bytes += c.size_bytes();
  }
  return {};
}

Result<Contents> load(std::span<const uint8_t> bytes, const std::string& base_dir,
                      const ReadLimits& limits) {
  Contents impl;
  PLANRT_ASSIGN_OR_RETURN(Regions regions, check_header(bytes));
  // Segment blobs are verified by verify_methods, which can say which segment is broken.
  flatbuffers::Verifier::Options options = verifier_options();
  options.check_nested_flatbuffers = false;
  flatbuffers::Verifier verifier(regions.flatbuffer.data(), regions.flatbuffer.size(), options);
  if (!verifier.VerifyBuffer<fb::Program>(fb::ProgramIdentifier())) {
    return invalid(fmt::format("the {}-byte FlatBuffer at offset {} is not a valid program "
                               "(wrong identifier, out-of-bounds or corrupt tables)",
                               regions.flatbuffer.size(),
                               regions.flatbuffer.data() - bytes.data()));
  }
  impl.program = fb::GetProgram(regions.flatbuffer.data());
  if (impl.program->format_version() != kFormatVersion) {
    return invalid(fmt::format("format version {}, this build reads {}",
                               impl.program->format_version(), kFormatVersion));
  }
  PLANRT_RETURN_IF_ERROR(check_constants(*impl.program));
  PLANRT_RETURN_IF_ERROR(verify_methods(*impl.program, limits));
  const auto* external = impl.program->external_constants();
  if (external != nullptr && external->size() > 0) {
    if (regions.has_segment) {
      return invalid(fmt::format("program has both a data segment and external constants '{}'",
                                 external->string_view()));
    }
    PLANRT_RETURN_IF_ERROR(bind_external_constants(impl, base_dir));
  } else {
    PLANRT_RETURN_IF_ERROR(bind_segment_constants(impl, regions));
  }
  return impl;
}

}  // namespace

struct ProgramFile::Impl {
  MappedFile mapping;          // open(): the file's bytes
  std::vector<uint8_t> owned;  // from_bytes(): the bytes handed over
  std::string path;
  Contents contents;
};

ProgramFile::ProgramFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProgramFile::ProgramFile(ProgramFile&&) noexcept = default;
ProgramFile& ProgramFile::operator=(ProgramFile&&) noexcept = default;
ProgramFile::~ProgramFile() = default;

Result<ProgramFile> ProgramFile::open(const std::string& path, const ReadLimits& limits) {
  auto mapping = MappedFile::open(path);
  if (!mapping.ok()) return mapping.status();
  auto impl = std::make_unique<Impl>();
  impl->mapping = std::move(mapping).value();
  impl->path = path;
  auto slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  auto contents = load(impl->mapping.bytes(), dir, limits);
  if (!contents.ok()) return contents.status().with_context(fmt::format("program '{}'", path));
  impl->contents = std::move(contents).value();
  return ProgramFile(std::move(impl));
}

Result<ProgramFile> ProgramFile::from_bytes(std::vector<uint8_t> bytes, const std::string& base_dir,
                                            const ReadLimits& limits) {
  auto impl = std::make_unique<Impl>();
  impl->owned = std::move(bytes);
  auto contents = load(impl->owned, base_dir, limits);
  if (!contents.ok()) return contents.status().with_context("program in memory");
  impl->contents = std::move(contents).value();
  return ProgramFile(std::move(impl));
}

const fb::Program& ProgramFile::program() const { return *impl_->contents.program; }

std::span<const uint8_t> ProgramFile::constant_data(uint32_t index) const {
  if (index >= impl_->contents.constants.size()) return {};
  return impl_->contents.constants[index];
}

uint64_t ProgramFile::constants_bytes() const { return impl_->contents.constants_bytes; }

const std::string& ProgramFile::path() const { return impl_->path; }

}  // namespace planrt::format
