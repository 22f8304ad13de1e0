// ProgramFile: the verifying reader of a .prog file (docs/design.md §3).
//
// File layout: a 64-byte FileHeader, the FlatBuffer (program.fbs), then an optional data
// segment holding the constants, starting at a multiple of kSegmentAlignment so it can be
// mapped. Files are untrusted: open()/from_bytes() verify the header, the FlatBuffer, the
// format version and every index and range the runtime will later use (value ids, buffer
// ids, offset + size within each planned buffer at the dims' maxima, constant ranges
// within the segment or the external safetensors file, dtype and rank limits, integer
// overflow, nested segment graphs). After a successful open nothing in the FlatBuffer
// needs checking again. Errors are InvalidProgram (or IoError/NotFound for the file system)
// and name what is wrong.
//
// What a loaded program guarantees (program_verifier.h has the full list): every enum is in
// range; method and dim names are unique and non-empty; 0 <= min <= max, max >= 1; every
// value has rank <= kMaxRank, dim refs < dims.size() with multiplier >= 1, and a max-shape
// size that fits in 64 bits; Planned values lie inside their buffer (method) or the graph's
// scratch (segment graph); Constant values match their constant's dtype and static shape;
// Temporary values occur only in segment graphs; method inputs/outputs are Planned on a CPU
// buffer; instruction operands are valid ids (inputs may be kNoValue, outputs never, and
// never a Constant); Kernel operands are in host memory (CPU buffer or constant); Copy is
// 1-in/1-out with equal dtype and shape; Delegate calls a segment with a verified Graph blob
// whose inputs/outputs match its operands in count, operands planned on the segment's
// device; graphs hold only Kernel instructions; constant_data(i) has size_bytes bytes.
// A vector written empty is absent (nullptr) even in a verified program: use count() and
// items() from fb_types.h.
//
// Ownership: a ProgramFile owns its bytes (a read-only mapping or a vector) and, when the
// program names one, the mapping of the external safetensors file. Move-only. All
// accessors are const and safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "planrt/core/result.h"
#include "planrt/format/program_generated.h"

namespace planrt::format {

inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint64_t kSegmentAlignment = 4096;
inline constexpr uint64_t kConstantAlignment = 64;  // each constant inside the segment
inline constexpr uint32_t kNoValue = 0xFFFFFFFFu;   // an absent optional operand
inline constexpr char kFileMagic[8] = {'P', 'L', 'R', 'T', 'P', 'R', 'O', 'G'};

struct FileHeader {
  char magic[8];              // kFileMagic
  uint32_t header_version;    // 1
  uint32_t header_size;       // sizeof(FileHeader) == 64
  uint64_t flatbuffer_offset;
  uint64_t flatbuffer_size;
  uint64_t segment_offset;    // 0 when there is no segment
  uint64_t segment_size;
  uint8_t reserved[16];
};
static_assert(sizeof(FileHeader) == 64);

// Limits on what a file may ask for, checked before anything is allocated.
struct ReadLimits {
  uint64_t max_planned_buffer_bytes = uint64_t{1} << 40;  // per buffer
};

class ProgramFile {
 public:
  // Maps `path` read-only (the constants are used in place, never copied).
  static Result<ProgramFile> open(const std::string& path, const ReadLimits& limits = {});
  // Takes ownership of bytes already in memory. External constants are resolved relative
  // to `base_dir`.
  static Result<ProgramFile> from_bytes(std::vector<uint8_t> bytes, const std::string& base_dir = ".",
                                        const ReadLimits& limits = {});

  ProgramFile(ProgramFile&&) noexcept;
  ProgramFile& operator=(ProgramFile&&) noexcept;
  ~ProgramFile();

  const fb::Program& program() const;
  // The bytes of program().constants()[index], wherever they live (segment or external file).
  std::span<const uint8_t> constant_data(uint32_t index) const;
  // Total bytes of all constants.
  uint64_t constants_bytes() const;
  // Where the program was read from ("" for from_bytes).
  const std::string& path() const;

 private:
  struct Impl;
  explicit ProgramFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Max-shape byte size of `value` under its method's dims (dims at their max). Fails on
// overflow or an out-of-range dim reference. Used by the reader, the runtime and inspect.
Result<uint64_t> value_max_nbytes(const fb::Value& value,
                                  const flatbuffers::Vector<flatbuffers::Offset<fb::DimSpec>>* dims);

}  // namespace planrt::format
