#include "format/writer.h"

#include <cstring>

#include "format/atomic_write.h"
#include "format/checked_math.h"
#include "format/fb_types.h"
#include "format/program_file.h"

namespace planrt::format {
namespace {

// Where each constant goes in the data segment, and how the file is laid out.
struct Layout {
  std::vector<uint8_t> head;  // FileHeader + FlatBuffer + padding up to the segment
  uint64_t segment_size = 0;
};

// The byte size dtype x shape implies; an error naming the constant when it has none.
Result<uint64_t> constant_nbytes(const fb::ConstantT& c, size_t index) {
  auto dtype = to_dtype(c.dtype);
  if (!dtype) {
    return make_error(ErrorCode::InvalidArgument, "constant {} '{}' has an unknown dtype {}",
                      index, c.name, static_cast<int>(c.dtype));
  }
  if (c.shape.size() > static_cast<size_t>(kMaxRank)) {
    return make_error(ErrorCode::InvalidArgument, "constant {} '{}' has rank {} > {}", index,
                      c.name, c.shape.size(), kMaxRank);
  }
  uint64_t size = element_size(*dtype);
  for (int64_t d : c.shape) {
    auto next = d < 0 ? std::nullopt : checked_mul(size, static_cast<uint64_t>(d));
    if (!next) {
      return make_error(ErrorCode::InvalidArgument,
                        "constant {} '{}' has an invalid shape (negative dim or size overflow)",
                        index, c.name);
    }
    size = *next;
  }
  return size;
}

// Fills each Constant's offset/size, stamps the version and builds header + FlatBuffer.
Result<Layout> lay_out(fb::ProgramT& program, std::span<const std::span<const uint8_t>> constants) {
  const bool external = !program.external_constants.empty();
  if (external && !constants.empty()) {
    return make_error(ErrorCode::InvalidArgument,
                      "program names external constants '{}' but {} constant buffers were given",
                      program.external_constants, constants.size());
  }
  if (!external && constants.size() != program.constants.size()) {
    return make_error(ErrorCode::InvalidArgument,
                      "program declares {} constants but {} constant buffers were given",
                      program.constants.size(), constants.size());
  }
  uint64_t cursor = 0;
  for (size_t i = 0; i < program.constants.size(); ++i) {
    auto& c = program.constants[i];
    if (!c) return make_error(ErrorCode::InvalidArgument, "constant {} is null", i);
    PLANRT_ASSIGN_OR_RETURN(uint64_t expected, constant_nbytes(*c, i));
    if (external) {
      // Sized from dtype and shape so that a reader can check the external tensor against it.
      c->offset = 0;
      c->size_bytes = expected;
      continue;
    }
    if (expected != constants[i].size()) {
      return make_error(ErrorCode::InvalidArgument,
                        "constant {} '{}' ({}, rank {}) needs {} bytes but {} were given", i,
                        c->name, dtype_name(*to_dtype(c->dtype)), c->shape.size(), expected,
                        constants[i].size());
    }
    auto at = align_up(cursor, kConstantAlignment);
    auto end = at ? checked_add(*at, constants[i].size()) : std::nullopt;
    if (!end) return make_error(ErrorCode::InvalidArgument, "constants exceed 2^64 bytes");
    c->offset = *at;
    c->size_bytes = constants[i].size();
    cursor = *end;
  }
  program.format_version = kFormatVersion;

  flatbuffers::FlatBufferBuilder fbb(4096);
  fbb.Finish(fb::Program::Pack(fbb, &program), fb::ProgramIdentifier());
  const uint64_t fb_size = fbb.GetSize();
  if (fb_size >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return make_error(ErrorCode::InvalidArgument, "program FlatBuffer is {} bytes, over the limit",
                      fb_size);
  }

  Layout layout;
  layout.segment_size = cursor;
  const uint64_t fb_end = sizeof(FileHeader) + fb_size;
  uint64_t segment_offset = 0;
  uint64_t head_size = fb_end;
  if (!external && !program.constants.empty()) {
    segment_offset = *align_up(fb_end, kSegmentAlignment);
    head_size = segment_offset;
  }

  FileHeader header{};
  std::memcpy(header.magic, kFileMagic, sizeof(header.magic));
  header.header_version = 1;
  header.header_size = sizeof(FileHeader);
  header.flatbuffer_offset = sizeof(FileHeader);
  header.flatbuffer_size = fb_size;
  header.segment_offset = segment_offset;
  header.segment_size = layout.segment_size;

  layout.head.assign(head_size, 0);
  std::memcpy(layout.head.data(), &header, sizeof(header));
  std::memcpy(layout.head.data() + sizeof(FileHeader), fbb.GetBufferPointer(), fb_size);
  return layout;
}

// The pieces of the file in order: head, then each constant preceded by its padding.
std::vector<std::span<const uint8_t>> pieces_of(const Layout& layout, const fb::ProgramT& program,
                                                std::span<const std::span<const uint8_t>> constants) {
  static const uint8_t kZeros[kConstantAlignment] = {};
  std::vector<std::span<const uint8_t>> pieces;
  pieces.reserve(1 + 2 * constants.size());
  pieces.emplace_back(layout.head);
  uint64_t cursor = 0;
  for (size_t i = 0; i < constants.size(); ++i) {
    uint64_t pad = program.constants[i]->offset - cursor;
    if (pad > 0) pieces.emplace_back(kZeros, pad);
    pieces.push_back(constants[i]);
    cursor = program.constants[i]->offset + constants[i].size();
  }
  return pieces;
}

}  // namespace

Result<std::vector<uint8_t>> serialize_program(fb::ProgramT program,
                                               std::span<const std::span<const uint8_t>> constants) {
  PLANRT_ASSIGN_OR_RETURN(Layout layout, lay_out(program, constants));
  std::vector<uint8_t> out;
  out.reserve(layout.head.size() + layout.segment_size);
  for (auto piece : pieces_of(layout, program, constants)) {
    out.insert(out.end(), piece.begin(), piece.end());
  }
  return out;
}

Status write_program(fb::ProgramT program, std::span<const std::span<const uint8_t>> constants,
                     const std::string& path) {
  auto layout = lay_out(program, constants);
  if (!layout.ok()) return layout.status().with_context(fmt::format("writing '{}'", path));
  auto pieces = pieces_of(*layout, program, constants);
  return write_file_atomically(path, pieces);
}

}  // namespace planrt::format
