#include <cstring>

#include <gtest/gtest.h>

#include "format/safetensors.h"
#include "format/test_util.h"
#include "support/status_matchers.h"

namespace planrt::format {
namespace {

using ::planrt::testing::IsError;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 13 + seed);
  return v;
}

// A file with the given JSON header and `data_bytes` of zeros after it.
std::vector<uint8_t> raw_file(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(uint64_t{header.size()} >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes);
  return out;
}

void expect_invalid(const Result<SafetensorsFile>& r, const std::string& part) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::InvalidArgument) << r.status().to_string();
  EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
}

TEST(Safetensors, RoundTripsEveryDtypeAndTheMetadata) {
  TempDir dir;
  const DType dtypes[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64};
  std::vector<std::vector<uint8_t>> data;
  std::vector<SafetensorsTensor> tensors;
  for (int i = 0; i < 5; ++i) {
    data.push_back(pattern(element_size(dtypes[i]) * 6, static_cast<uint8_t>(i)));
  }
  for (int i = 0; i < 5; ++i) {
    tensors.push_back({"t" + std::to_string(i), dtypes[i], {2, 3}, data[i]});
  }
  tensors.push_back({"scalar", DType::F32, {}, data[0]});
  tensors.back().data = std::span<const uint8_t>(data[0]).first(4);
  tensors.push_back({"empty", DType::I64, {0, 5}, {}});
  const std::string path = dir.file("w.safetensors");
  ASSERT_TRUE(write_safetensors(path, tensors, {{"format", "pt"}}).ok());

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->tensors().size(), tensors.size());
  EXPECT_EQ(file->metadata().at("format"), "pt");
  for (const auto& t : tensors) {
    const SafetensorsTensor* got = file->find(t.name);
    ASSERT_NE(got, nullptr) << t.name;
    EXPECT_EQ(got->dtype, t.dtype) << t.name;
    EXPECT_EQ(got->shape, t.shape) << t.name;
    ASSERT_EQ(got->data.size(), t.data.size()) << t.name;
    EXPECT_TRUE(std::equal(got->data.begin(), got->data.end(), t.data.begin())) << t.name;
  }
  EXPECT_EQ(file->find("missing"), nullptr);
  auto bytes = read_bytes(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ(header_len % 8, 0u) << "data section starts 8-byte aligned";
}

TEST(Safetensors, ReadsAHandWrittenFile) {
  std::vector<uint8_t> bytes = raw_file(
      R"({"__metadata__":{"k":"v"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})",
      16);
  const size_t data_start = bytes.size() - 16;
  bytes[data_start + 8] = 42;  // first byte of "b"
  auto file = SafetensorsFile::from_bytes(bytes);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->tensors()[0].name, "b") << "sorted by name";
  ASSERT_EQ(file->find("b")->data.size(), 8u);
  EXPECT_EQ(file->find("b")->data[0], 42);
  EXPECT_EQ(file->metadata().at("k"), "v");
}

TEST(Safetensors, RefusesAFileTooSmallForTheLength) {
  expect_invalid(SafetensorsFile::from_bytes({1, 2, 3}, "s.st"), "'s.st': file is too small");
}

TEST(Safetensors, RefusesAHeaderLengthPastTheEnd) {
  auto bytes = raw_file("{}", 0);
  bytes[0] = 200;
  expect_invalid(SafetensorsFile::from_bytes(bytes), "header length 200 exceeds");
  bytes[0] = 0;
  bytes[7] = 0xFF;  // 2^63-ish: must not wrap around
  expect_invalid(SafetensorsFile::from_bytes(bytes), "exceeds");
}

TEST(Safetensors, RefusesAHeaderThatIsNotJson) {
  expect_invalid(SafetensorsFile::from_bytes(raw_file("{not json", 0)), "not a JSON object");
  expect_invalid(SafetensorsFile::from_bytes(raw_file("[1, 2]", 0)), "not a JSON object");
  expect_invalid(SafetensorsFile::from_bytes(raw_file("{\"a\": 1}", 0)), "'a' is not a JSON object");
  expect_invalid(SafetensorsFile::from_bytes(raw_file(R"({"a": {"dtype": "F32"}})", 0)),
                 "tensor 'a' needs");
  expect_invalid(SafetensorsFile::from_bytes(raw_file(R"({"__metadata__": {"k": 1}})", 0)),
                 "__metadata__ 'k'");
}

TEST(Safetensors, RefusesOffsetsPastTheDataSection) {
  expect_invalid(SafetensorsFile::from_bytes(raw_file(
                     R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 12)),
                 "outside the 12-byte data section");
  expect_invalid(SafetensorsFile::from_bytes(raw_file(
                     R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 12)),
                 "begin > end");
  expect_invalid(SafetensorsFile::from_bytes(raw_file(
                     R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 12)),
                 "not two non-negative integers");
}

// The reader once echoed malformed offsets with json::dump, which recurses once per level:
// an array nested a million deep overflowed the stack (tests/fuzz/regressions/safetensors).
TEST(Safetensors, RefusesDeeplyNestedOffsetsWithoutOverflowingTheStack) {
  const size_t depth = 1'000'000;
  std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[)";
  header += std::string(depth, '[') + std::string(depth, ']') + ",4]}}";
  expect_invalid(SafetensorsFile::from_bytes(raw_file(header, 4)), "not two non-negative integers");
}

TEST(Safetensors, RefusesASizeThatDoesNotMatchDtypeAndShape) {
  expect_invalid(SafetensorsFile::from_bytes(raw_file(
                     R"({"w":{"dtype":"F16","shape":[2,3],"data_offsets":[0,8]}})", 16)),
                 "needs 12 bytes but its data_offsets span 8");
  expect_invalid(SafetensorsFile::from_bytes(raw_file(
                     R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0)),
                 "overflows");
  expect_invalid(SafetensorsFile::from_bytes(raw_file(
                     R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0)),
                 "non-negative");
}

TEST(Safetensors, RefusesDtypesPlanrtDoesNotRead) {
  expect_invalid(SafetensorsFile::from_bytes(raw_file(
                     R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8)),
                 "tensor 'w' has dtype 'F64'");
}

TEST(Safetensors, FailsCleanlyAtEveryTruncatedLength) {
  SafetensorsTensor t{"w", DType::F32, {3}, {}};
  auto data = pattern(12, 1);
  t.data = data;
  auto bytes = serialize_safetensors(std::span(&t, 1));
  ASSERT_TRUE(bytes.ok());
  for (size_t n = 0; n < bytes->size(); ++n) {
    std::vector<uint8_t> cut(bytes->begin(), bytes->begin() + static_cast<long>(n));
    SCOPED_TRACE(n);
    expect_invalid(SafetensorsFile::from_bytes(cut), "safetensors '<memory>': ");
  }
  EXPECT_TRUE(SafetensorsFile::from_bytes(*bytes).ok());
}

TEST(Safetensors, WriterRefusesBadTensors) {
  auto data = pattern(8, 0);
  std::vector<SafetensorsTensor> dup = {{"a", DType::F32, {2}, data}, {"a", DType::F32, {2}, data}};
  auto r = serialize_safetensors(dup);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::InvalidArgument) << r.status().to_string();
  EXPECT_NE(r.status().message().find("'a' is reserved or repeated"), std::string::npos);
  std::vector<SafetensorsTensor> reserved = {{"__metadata__", DType::F32, {2}, data}};
  EXPECT_TRUE(IsError(serialize_safetensors(reserved).status(), ErrorCode::InvalidArgument,
                      {"tensor name '__metadata__' is reserved or repeated"}));
  std::vector<SafetensorsTensor> short_data = {{"a", DType::F32, {3}, data}};
  r = serialize_safetensors(short_data);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::InvalidArgument) << r.status().to_string();
  EXPECT_NE(r.status().message().find("needs 12 bytes but 8"), std::string::npos);
}

TEST(Safetensors, ReportsAMissingFileByPath) {
  TempDir dir;
  auto r = SafetensorsFile::open(dir.file("nope.safetensors"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::NotFound);
  EXPECT_NE(r.status().message().find("nope.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace planrt::format
