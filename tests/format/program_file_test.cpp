// ProgramFile: the file-level checks (header, regions, FlatBuffer, version, constants).
#include <sys/stat.h>

#include <cstring>

#include <gtest/gtest.h>

#include "format/program_corruption.h"
#include "format/safetensors.h"
#include "format/test_util.h"
#include "support/status_matchers.h"

namespace planrt::format {
namespace {

using ::planrt::testing::IsError;
using fixtures::FixtureProgram;
using fixtures::relu_add_program;

std::vector<uint8_t> good_file() {
  auto bytes = relu_add_program().serialize();
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

TEST(ProgramFileOpen, ReportsAMissingFileByPath) {
  TempDir dir;
  auto r = ProgramFile::open(dir.file("absent.prog"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::NotFound);
  EXPECT_NE(r.status().message().find("absent.prog"), std::string::npos) << r.status().message();
}

TEST(ProgramFileOpen, ReportsAnEmptyFile) {
  TempDir dir;
  write_bytes(dir.file("empty.prog"), {});
  auto r = ProgramFile::open(dir.file("empty.prog"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::IoError) << r.status().to_string();
  EXPECT_NE(r.status().message().find("is empty"), std::string::npos) << r.status().message();
}

TEST(ProgramFileOpen, RefusesADirectoryAndAFifoWithoutBlocking) {
  TempDir dir;
  auto r = ProgramFile::open(dir.path().string());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsError(r.status(), ErrorCode::IoError, {"not a regular file"}));
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = ProgramFile::open(fifo);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::IoError) << r.status().to_string();
  EXPECT_NE(r.status().message().find("not a regular file"), std::string::npos)
      << r.status().message();
}

TEST(ProgramFileOpen, ReportsAFileTooSmallForTheHeaderWithItsPath) {
  TempDir dir;
  write_bytes(dir.file("tiny.prog"), {'P', 'L', 'R', 'T'});
  auto r = ProgramFile::open(dir.file("tiny.prog"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::InvalidProgram);
  EXPECT_NE(r.status().message().find("tiny.prog"), std::string::npos);
  EXPECT_NE(r.status().message().find("too small (4 bytes)"), std::string::npos)
      << r.status().message();
}

TEST(ProgramFileHeader, RefusesBadMagic) {
  auto bytes = good_file();
  bytes[3] = 'X';
  expect_invalid(bytes, {"bad magic"});
}

TEST(ProgramFileHeader, RefusesAnUnknownHeaderVersionOrSize) {
  auto bytes = good_file();
  FileHeader h = read_header(bytes);
  h.header_version = 2;
  write_header(bytes, h);
  expect_invalid(bytes, {"header version 2, this build reads 1"});
  h.header_version = 1;
  h.header_size = 80;
  write_header(bytes, h);
  expect_invalid(bytes, {"header size 80"});
}

TEST(ProgramFileHeader, RefusesAFlatBufferRangeOutsideTheFile) {
  auto bytes = good_file();
  const FileHeader good = read_header(bytes);
  for (auto [offset, size] : {std::pair<uint64_t, uint64_t>{64, bytes.size()},
                              {UINT64_MAX - 7, 16},   // offset + size wraps
                              {64, UINT64_MAX - 32},  // size alone wraps
                              {0, 64},                // overlaps the header
                              {68, 64},               // misaligned
                              {64, 0}}) {
    FileHeader h = good;
    h.flatbuffer_offset = offset;
    h.flatbuffer_size = size;
    write_header(bytes, h);
    expect_invalid(bytes, {"FlatBuffer at offset"});
  }
}

TEST(ProgramFileHeader, RefusesASegmentOutsideTheFileOrMisaligned) {
  auto bytes = good_file();
  const FileHeader good = read_header(bytes);
  for (auto [offset, size] : {std::pair<uint64_t, uint64_t>{good.segment_offset, good.segment_size + 1},
                              {good.segment_offset + 64, 16},
                              {UINT64_MAX & ~uint64_t{4095}, 8192},
                              {0, 16}}) {
    FileHeader h = good;
    h.segment_offset = offset;
    h.segment_size = size;
    write_header(bytes, h);
    expect_invalid(bytes, {"data segment at offset"});
  }
}

TEST(ProgramFileHeader, RefusesAWrongFileIdentifier) {
  auto bytes = good_file();
  std::memcpy(bytes.data() + 64 + 4, "XXXX", 4);
  expect_invalid(bytes, {"not a valid program"});
}

TEST(ProgramFileHeader, RefusesAnUnknownFormatVersion) {
  expect_invalid(corrupt(relu_add_program(), [](fb::ProgramT& p) { p.format_version = 7; }),
                 {"format version 7, this build reads 1"});
}

TEST(ProgramFileConstants, RefusesAConstantRangePastTheSegment) {
  expect_invalid(corrupt(relu_add_program(), [](fb::ProgramT& p) { p.constants[0]->offset = 4096; }),
                 {"constant 0 'c'", "segment offset 4096 with 16 bytes", "16-byte data segment"});
  expect_invalid(corrupt(relu_add_program(),
                         [](fb::ProgramT& p) { p.constants[0]->offset = UINT64_MAX & ~uint64_t{63}; }),
                 {"constant 0 'c'", "past the end"});
}

TEST(ProgramFileConstants, RefusesAConstantRangePastTheFileEnd) {
  // The segment claims more than the file holds once the file is cut short.
  auto bytes = good_file();
  bytes.resize(bytes.size() - 8);
  expect_invalid(bytes, {"data segment at offset 4096 with 16 bytes", "file of"});
}

TEST(ProgramFileConstants, RefusesAMisalignedConstant) {
  expect_invalid(corrupt(relu_add_program(), [](fb::ProgramT& p) { p.constants[0]->offset = 4; }),
                 {"constant 0 'c'", "not 64-byte aligned"});
}

TEST(ProgramFileConstants, RefusesASizeThatIsNotDtypeTimesShape) {
  expect_invalid(corrupt(relu_add_program(), [](fb::ProgramT& p) { p.constants[0]->size_bytes = 8; }),
                 {"constant 0 'c' has size_bytes 8 but its dtype and shape make 16"});
  expect_invalid(corrupt(relu_add_program(),
                         [](fb::ProgramT& p) { p.constants[0]->shape = {INT64_MAX, INT64_MAX}; }),
                 {"constant 0 'c'", "overflows"});
  expect_invalid(corrupt(relu_add_program(),
                         [](fb::ProgramT& p) { p.constants[0]->dtype = static_cast<fb::DType>(42); }),
                 {"constant 0 'c' has an unknown dtype 42"});
}

TEST(ProgramFileConstants, RefusesDuplicateOrEmptyConstantNames) {
  auto two = [](fb::ProgramT& p) { p.constants.push_back(std::make_unique<fb::ConstantT>(*p.constants[0])); };
  expect_invalid(corrupt(relu_add_program(), two), {"two constants are named 'c'"});
  expect_invalid(corrupt(relu_add_program(), [](fb::ProgramT& p) { p.constants[0]->name = ""; }),
                 {"constant 0 has an empty name"});
}

TEST(ProgramFileConstants, RefusesBothASegmentAndExternalConstants) {
  expect_invalid(corrupt(relu_add_program(),
                         [](fb::ProgramT& p) { p.external_constants = "w.safetensors"; }),
                 {"both a data segment and external constants 'w.safetensors'"});
}

class ExternalConstants : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fixture_.write_with_external_weights(dir_.path().string(), "m.prog", "w.safetensors").ok());
  }
  // Replaces the weights file with one holding `tensor`.
  void rewrite_weights(const SafetensorsTensor& tensor) {
    ASSERT_TRUE(write_safetensors(dir_.file("w.safetensors"), std::span(&tensor, 1)).ok());
  }
  Status open_error() {
    auto r = ProgramFile::open(dir_.file("m.prog"));
    EXPECT_FALSE(r.ok());
    return r.ok() ? Status() : r.status();
  }

  TempDir dir_;
  FixtureProgram fixture_ = relu_add_program();
};

TEST_F(ExternalConstants, LoadsConstantsFromTheFileBesideTheProgram) {
  auto r = ProgramFile::open(dir_.file("m.prog"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->constants_bytes(), 16u);
  ASSERT_EQ(r->constant_data(0).size(), 16u);
  EXPECT_EQ(std::memcmp(r->constant_data(0).data(), fixture_.constants[0].data(), 16), 0);
  EXPECT_TRUE(r->constant_data(1).empty()) << "out of range index gives an empty span";
}

TEST_F(ExternalConstants, ReportsAMissingWeightsFile) {
  std::filesystem::remove(dir_.file("w.safetensors"));
  Status st = open_error();
  EXPECT_EQ(st.code(), ErrorCode::NotFound);
  EXPECT_NE(st.message().find("external constants 'w.safetensors'"), std::string::npos) << st.message();
}

TEST_F(ExternalConstants, RefusesAMismatchedDtype) {
  std::vector<uint8_t> data(8);
  rewrite_weights({"c", DType::F16, {4}, data});
  Status st = open_error();
  EXPECT_EQ(st.code(), ErrorCode::InvalidProgram);
  EXPECT_NE(st.message().find("constant 0 'c' is f32 with 1 dims (16 bytes)"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("as f16"), std::string::npos) << st.message();
}

TEST_F(ExternalConstants, RefusesAMismatchedShape) {
  std::vector<uint8_t> data(16);
  rewrite_weights({"c", DType::F32, {2, 2}, data});
  EXPECT_NE(open_error().message().find("with 2 dims"), std::string::npos);
}

TEST_F(ExternalConstants, RefusesAMissingTensor) {
  std::vector<uint8_t> data(16);
  rewrite_weights({"other", DType::F32, {4}, data});
  EXPECT_NE(open_error().message().find("constant 0 'c' is not in the external constants file"),
            std::string::npos);
}

TEST_F(ExternalConstants, RefusesAConstantNotAlignedToItsElements) {
  // A 2-byte tensor first puts the f32 constant at data offset 2: readable bytes, but not
  // at a 4-byte boundary, and kernels read constants in place.
  std::vector<uint8_t> pad(2), data(16);
  std::vector<SafetensorsTensor> tensors = {{"a_pad", DType::F16, {1}, pad},
                                            {"c", DType::F32, {4}, data}};
  ASSERT_TRUE(write_safetensors(dir_.file("w.safetensors"), tensors).ok());
  Status st = open_error();
  EXPECT_EQ(st.code(), ErrorCode::InvalidProgram);
  EXPECT_NE(st.message().find("not aligned to its 4-byte elements"), std::string::npos)
      << st.message();
}

TEST_F(ExternalConstants, ReportsACorruptWeightsFile) {
  write_bytes(dir_.file("w.safetensors"), {1, 0, 0, 0, 0, 0, 0, 0, '{'});
  EXPECT_NE(open_error().message().find("not a JSON object"), std::string::npos);
}

TEST(ProgramFileConstants, FromBytesResolvesExternalConstantsAgainstBaseDir) {
  TempDir dir;
  FixtureProgram f = relu_add_program();
  ASSERT_TRUE(f.write_with_external_weights(dir.path().string(), "m.prog", "w.safetensors").ok());
  auto bytes = read_bytes(dir.file("m.prog"));
  EXPECT_TRUE(IsError(ProgramFile::from_bytes(bytes, "/nonexistent-dir").status(), ErrorCode::NotFound,
                      {"external constants 'w.safetensors'", "/nonexistent-dir/w.safetensors"}));
  auto r = ProgramFile::from_bytes(bytes, dir.path().string());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->path(), "");
}

TEST(ProgramFileMove, MovedFileKeepsItsBytes) {
  auto a = ProgramFile::from_bytes(good_file());
  ASSERT_TRUE(a.ok());
  ProgramFile b = std::move(a).value();
  ProgramFile c = std::move(b);
  EXPECT_EQ(c.program().methods()->Get(0)->name()->str(), "forward");
  EXPECT_EQ(c.constant_data(0).size(), 16u);
}

}  // namespace
}  // namespace planrt::format
