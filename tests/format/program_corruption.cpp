#include "format/program_corruption.h"

#include <cstring>

#include <gtest/gtest.h>

namespace planrt::format {

std::vector<uint8_t> assemble_file(const fb::ProgramT& program, const std::vector<uint8_t>& segment) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fb::Program::Pack(fbb, &program), fb::ProgramIdentifier());
  FileHeader h{};
  std::memcpy(h.magic, kFileMagic, 8);
  h.header_version = 1;
  h.header_size = 64;
  h.flatbuffer_offset = 64;
  h.flatbuffer_size = fbb.GetSize();
  std::vector<uint8_t> out(64 + fbb.GetSize());
  std::memcpy(out.data() + 64, fbb.GetBufferPointer(), fbb.GetSize());
  if (!segment.empty()) {
    h.segment_offset = (out.size() + kSegmentAlignment - 1) / kSegmentAlignment * kSegmentAlignment;
    h.segment_size = segment.size();
    out.resize(h.segment_offset);
    out.insert(out.end(), segment.begin(), segment.end());
  }
  write_header(out, h);
  return out;
}

std::vector<uint8_t> corrupt(const fixtures::FixtureProgram& fixture, const Mutation& mutate) {
  auto bytes = fixture.serialize();
  if (!bytes.ok()) {
    ADD_FAILURE() << bytes.status().to_string();
    return {};
  }
  FileHeader h = read_header(*bytes);
  std::vector<uint8_t> segment(bytes->begin() + static_cast<long>(h.segment_offset),
                               bytes->begin() + static_cast<long>(h.segment_offset + h.segment_size));
  auto file = ProgramFile::from_bytes(*bytes);
  if (!file.ok()) {
    ADD_FAILURE() << "the fixture does not load: " << file.status().to_string();
    return {};
  }
  std::unique_ptr<fb::ProgramT> program(file->program().UnPack());
  mutate(*program);
  return assemble_file(*program, segment);
}

void expect_invalid(std::vector<uint8_t> bytes, std::initializer_list<std::string> parts,
                    const ReadLimits& limits) {
  auto r = ProgramFile::from_bytes(std::move(bytes), ".", limits);
  ASSERT_FALSE(r.ok()) << "loaded, expected an error containing " << *parts.begin();
  EXPECT_EQ(r.status().code(), ErrorCode::InvalidProgram) << r.status().to_string();
  for (const auto& part : parts) {
    EXPECT_NE(r.status().message().find(part), std::string::npos)
        << "'" << part << "' not in: " << r.status().message();
  }
}

FileHeader read_header(const std::vector<uint8_t>& bytes) {
  FileHeader h{};
  std::memcpy(&h, bytes.data(), sizeof(h));
  return h;
}

void write_header(std::vector<uint8_t>& bytes, const FileHeader& header) {
  std::memcpy(bytes.data(), &header, sizeof(header));
}

}  // namespace planrt::format
