#include <cstring>

#include <gtest/gtest.h>

#include "format/program_file.h"
#include "format/test_util.h"
#include "format/writer.h"
#include "support/program_fixtures.h"

namespace planrt::format {
namespace {

using fixtures::FixtureProgram;

FileHeader header_of(const std::vector<uint8_t>& bytes) {
  FileHeader h{};
  std::memcpy(&h, bytes.data(), sizeof(h));
  return h;
}

// A program with three constants of awkward sizes, so alignment padding is exercised.
FixtureProgram three_constants() {
  FixtureProgram f = fixtures::relu_add_program();
  for (int64_t n : {3, 17}) {
    auto c = std::make_unique<fb::ConstantT>();
    c->name = "extra" + std::to_string(n);
    c->dtype = fb::DType::F16;
    c->shape = {n};
    f.program.constants.push_back(std::move(c));
    std::vector<uint8_t> data(static_cast<size_t>(n) * 2);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + n);
    f.constants.push_back(std::move(data));
  }
  return f;
}

TEST(Writer, LaysConstantsIntoAnAlignedSegment) {
  FixtureProgram f = three_constants();
  auto bytes = f.serialize();
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  FileHeader h = header_of(*bytes);
  EXPECT_EQ(std::memcmp(h.magic, kFileMagic, 8), 0);
  EXPECT_EQ(h.header_version, 1u);
  EXPECT_EQ(h.header_size, 64u);
  EXPECT_EQ(h.flatbuffer_offset, 64u);
  EXPECT_EQ(h.segment_offset % kSegmentAlignment, 0u);
  EXPECT_GE(h.segment_offset, h.flatbuffer_offset + h.flatbuffer_size);
  EXPECT_EQ(h.segment_offset + h.segment_size, bytes->size());

  auto file = ProgramFile::from_bytes(*bytes);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const auto* constants = file->program().constants();
  ASSERT_EQ(constants->size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(constants->Get(i)->offset() % kConstantAlignment, 0u) << i;
    EXPECT_EQ(constants->Get(i)->size_bytes(), f.constants[i].size()) << i;
    auto data = file->constant_data(i);
    ASSERT_EQ(data.size(), f.constants[i].size());
    EXPECT_EQ(std::memcmp(data.data(), f.constants[i].data(), data.size()), 0) << i;
    // The bytes sit in the file where the Constant entry says.
    EXPECT_EQ(std::memcmp(bytes->data() + h.segment_offset + constants->Get(i)->offset(),
                          f.constants[i].data(), data.size()),
              0)
        << i;
  }
  EXPECT_EQ(file->program().format_version(), kFormatVersion);
  EXPECT_EQ(file->constants_bytes(), 16u + 6u + 34u);
}

TEST(Writer, SerializationIsDeterministicAndRoundTripsTheProgram) {
  FixtureProgram f = fixtures::two_method_program();
  auto a = f.serialize();
  auto b = f.serialize();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  auto file = ProgramFile::from_bytes(*a);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  // Unpack and pack again: the same FlatBuffer, so the same file.
  std::unique_ptr<fb::ProgramT> unpacked(file->program().UnPack());
  std::vector<std::span<const uint8_t>> spans;
  for (uint32_t i = 0; i < file->program().constants()->size(); ++i) {
    spans.push_back(file->constant_data(i));
  }
  auto again = serialize_program(*unpacked, spans);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *a);
}

TEST(Writer, WritesTheFileAtomicallyAndOpenMapsIt) {
  TempDir dir;
  FixtureProgram f = fixtures::relu_add_program();
  const std::string path = dir.file("model.prog");
  ASSERT_TRUE(f.write(path).ok());
  auto expected = f.serialize();
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(read_bytes(path), *expected);
  // Nothing but the target is left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);
  auto file = ProgramFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->path(), path);
  auto data = file->constant_data(0);
  ASSERT_EQ(data.size(), 16u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data.data()) % kConstantAlignment, 0u)
      << "a mapped segment keeps the constants aligned in memory";
  std::vector<float> c(4);
  std::memcpy(c.data(), data.data(), 16);
  EXPECT_EQ(c, fixtures::constant_c(4));
}

TEST(Writer, RefusesAConstantCountMismatch) {
  FixtureProgram f = fixtures::relu_add_program();
  auto r = serialize_program(f.program, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(r.status().message().find("declares 1 constants but 0"), std::string::npos)
      << r.status().message();
}

TEST(Writer, RefusesConstantBytesThatDoNotMatchDtypeAndShape) {
  FixtureProgram f = fixtures::relu_add_program();
  f.constants[0].resize(12);
  auto r = f.serialize();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("constant 0 'c'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("needs 16 bytes but 12"), std::string::npos);
}

TEST(Writer, RefusesANegativeConstantDim) {
  FixtureProgram f = fixtures::relu_add_program();
  f.program.constants[0]->shape = {-4};
  auto r = f.serialize();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("constant 0 'c'"), std::string::npos) << r.status().message();
}

TEST(Writer, ExternalConstantsWriteNoSegmentAndTakeNoBytes) {
  FixtureProgram f = fixtures::relu_add_program();
  f.program.external_constants = "weights.safetensors";
  EXPECT_FALSE(f.serialize().ok()) << "constant bytes given with external constants";
  auto r = serialize_program(f.program, {});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  FileHeader h = header_of(*r);
  EXPECT_EQ(h.segment_offset, 0u);
  EXPECT_EQ(h.segment_size, 0u);
  EXPECT_EQ(r->size(), 64 + h.flatbuffer_size);
}

TEST(Writer, NamesThePathWhenTheDirectoryDoesNotExist) {
  TempDir dir;
  const std::string path = dir.file("missing/model.prog");
  Status st = fixtures::relu_add_program().write(path);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::IoError);
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("No such file"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace planrt::format
