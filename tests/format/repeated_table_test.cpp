// Resource limits from input (issue 6, item 5), the counts side: a FlatBuffer vector of
// tables may repeat one offset, so a few bytes per entry can stand for a whole table, and
// the loader builds a slot per entry (load_method reserves one ValueSlot per value). The
// verifier's table budget (verifier_options().max_tables, counted per visit) is what
// bounds that amplification: a file repeating one Value past it is refused at load, before
// anything is sized by the count.
#include <gtest/gtest.h>

#include <cstring>

#include "format/program_file.h"
#include "format/program_verifier.h"
#include "planrt/format/program_generated.h"

namespace planrt::format {
namespace {

// A program whose one method lists the same Value table `repeats` times.
std::vector<uint8_t> repeated_value_program(size_t repeats) {
  flatbuffers::FlatBufferBuilder b;
  auto value = fb::CreateValue(b, b.CreateString("v"), fb::ValueKind::Planned, fb::DType::F32,
                               b.CreateVectorOfStructs(std::vector<fb::DimRef>{fb::DimRef(4, -1)}),
                               0, 0, 0);
  std::vector<flatbuffers::Offset<fb::Value>> values(repeats, value);
  fb::DeviceRef cpu(fb::DeviceType::CPU, 0);
  std::vector<flatbuffers::Offset<fb::PlannedBuffer>> buffers{fb::CreatePlannedBuffer(b, 64, &cpu)};
  auto method = fb::CreateMethod(b, b.CreateString("m"), 0, b.CreateVector(values), 0, 0, 0,
                                 b.CreateVector(buffers));
  std::vector<flatbuffers::Offset<fb::Method>> methods{method};
  auto program = fb::CreateProgram(b, kFormatVersion, b.CreateVector(methods));
  fb::FinishProgramBuffer(b, program);

  FileHeader h{};
  std::memcpy(h.magic, kFileMagic, sizeof(kFileMagic));
  h.header_version = 1;
  h.header_size = sizeof(FileHeader);
  h.flatbuffer_offset = sizeof(FileHeader);
  h.flatbuffer_size = b.GetSize();
  std::vector<uint8_t> file(sizeof(FileHeader) + b.GetSize());
  std::memcpy(file.data(), &h, sizeof(h));
  std::memcpy(file.data() + sizeof(h), b.GetBufferPointer(), b.GetSize());
  return file;
}

TEST(RepeatedTables, AFewRepeatsOfOneValueTableLoad) {
  // The control: the same construction under the budget is a valid program, so the
  // refusal below is the budget's.
  Result<ProgramFile> f = ProgramFile::from_bytes(repeated_value_program(1000));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->program().methods()->Get(0)->values()->size(), 1000u);
}

TEST(RepeatedTables, OneValueTableRepeatedPastTheTableBudgetIsRefused) {
  const size_t repeats = size_t{verifier_options().max_tables} + 1;  // 16 MiB of offsets
  std::vector<uint8_t> bytes = repeated_value_program(repeats);
  // With the budget raised the same bytes verify: it is the budget that refuses them.
  flatbuffers::Verifier::Options raised = verifier_options();
  raised.max_tables = static_cast<flatbuffers::uoffset_t>(repeats + 16);
  flatbuffers::Verifier v(bytes.data() + sizeof(FileHeader), bytes.size() - sizeof(FileHeader), raised);
  EXPECT_TRUE(v.VerifyBuffer<fb::Program>(fb::ProgramIdentifier()));

  Result<ProgramFile> f = ProgramFile::from_bytes(std::move(bytes));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), ErrorCode::InvalidProgram);
  EXPECT_NE(f.status().message().find("not a valid program"), std::string::npos)
      << f.status().to_string();
}

}  // namespace
}  // namespace planrt::format
