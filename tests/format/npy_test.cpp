#include <cstring>

#include <gtest/gtest.h>

#include "format/npy.h"
#include "format/test_util.h"

namespace planrt::format {
namespace {

HostTensor make_tensor(DType dtype, Shape shape) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.data.resize(static_cast<size_t>(shape.numel()) * element_size(dtype));
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<uint8_t>(i * 31 + 7);
  return t;
}

// The bytes NumPy 1.x writes for np.save(f, np.arange(6, dtype='<f4').reshape(2, 3)).
std::vector<uint8_t> numpy_written_2x3_f32() {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                              static_cast<uint8_t>(header.size()), 0};
  out.insert(out.end(), header.begin(), header.end());
  for (int i = 0; i < 6; ++i) {
    float f = static_cast<float>(i);
    uint8_t b[4];
    std::memcpy(b, &f, 4);
    out.insert(out.end(), b, b + 4);
  }
  return out;
}

std::vector<uint8_t> with_header(const std::string& dict, size_t data_bytes) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                              static_cast<uint8_t>(header.size() & 0xFF),
                              static_cast<uint8_t>(header.size() >> 8)};
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes);
  return out;
}

class NpyRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(NpyRoundTrip, WriteThenReadGivesTheSameTensor) {
  TempDir dir;
  for (Shape shape : {Shape{}, Shape{5}, Shape{2, 3}, Shape{2, 0, 4}, Shape{1, 2, 3, 4}}) {
    HostTensor t = make_tensor(GetParam(), shape);
    const std::string path = dir.file("t.npy");
    ASSERT_TRUE(write_npy(path, t).ok());
    std::vector<uint8_t> bytes = read_bytes(path);
    ASSERT_GE(bytes.size(), 64u);
    EXPECT_EQ((bytes.size() - t.data.size()) % 64, 0u) << "data starts 64-byte aligned";
    auto back = read_npy(path);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->dtype, t.dtype);
    EXPECT_EQ(back->shape, t.shape) << shape.to_string();
    EXPECT_EQ(back->data, t.data);
  }
}

INSTANTIATE_TEST_SUITE_P(EachDtype, NpyRoundTrip,
                         ::testing::Values(DType::F32, DType::F16, DType::I32, DType::I64, DType::U8,
                                           DType::Bool),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Npy, ReadsWhatNumPyWrites) {
  auto t = parse_npy(numpy_written_2x3_f32(), "arange.npy");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->dtype, DType::F32);
  EXPECT_EQ(t->shape, (Shape{2, 3}));
  float last = 0;
  std::memcpy(&last, t->data.data() + 20, 4);
  EXPECT_EQ(last, 5.0f);
}

TEST(Npy, ReadsVersion2Headers) {
  std::vector<uint8_t> v1 = numpy_written_2x3_f32();
  std::vector<uint8_t> v2(v1.begin(), v1.begin() + 8);
  v2[6] = 2;
  const uint32_t len = v1[8];
  v2.insert(v2.end(), {static_cast<uint8_t>(len), 0, 0, 0});
  v2.insert(v2.end(), v1.begin() + 10, v1.end());
  auto t = parse_npy(v2);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->shape, (Shape{2, 3}));
}

TEST(Npy, WritesVersion1ForOrdinaryHeaders) {
  // A header needing version 2.0 (> 64 KiB) is not reachable within kMaxRank dims.
  auto bytes = serialize_npy(make_tensor(DType::F32, Shape{3}));
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ((*bytes)[6], 1);
}

void expect_error(const Result<HostTensor>& r, ErrorCode code, const std::string& part) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
}

TEST(Npy, RefusesAWrongMagicNamingTheFile) {
  auto bytes = numpy_written_2x3_f32();
  bytes[1] = 'X';
  expect_error(parse_npy(bytes, "in.npy"), ErrorCode::InvalidArgument, "'in.npy': not a .npy");
}

TEST(Npy, RefusesTruncatedDataAndTrailingBytes) {
  auto bytes = numpy_written_2x3_f32();
  bytes.pop_back();
  expect_error(parse_npy(bytes, "in.npy"), ErrorCode::InvalidArgument, "(truncated)");
  bytes.push_back(0);
  bytes.push_back(0);
  expect_error(parse_npy(bytes, "in.npy"), ErrorCode::InvalidArgument, "needs 24 data bytes but the file has 25");
}

TEST(Npy, FailsCleanlyAtEveryTruncatedLength) {
  auto bytes = numpy_written_2x3_f32();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    SCOPED_TRACE(n);
    expect_error(parse_npy(cut), ErrorCode::InvalidArgument, "npy '<memory>': ");
  }
}

TEST(Npy, RefusesUnsupportedDtypes) {
  expect_error(parse_npy(with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16)),
               ErrorCode::InvalidArgument, "unsupported dtype '<f8'");
  expect_error(parse_npy(with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8)),
               ErrorCode::InvalidArgument, "unsupported dtype '>f4'");
}

TEST(Npy, RefusesToWriteBf16) {
  TempDir dir;
  Status st = write_npy(dir.file("b.npy"), make_tensor(DType::BF16, Shape{2}));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::NotSupported);
  EXPECT_NE(st.message().find("bf16"), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(dir.file("b.npy")));
}

TEST(Npy, RefusesToWriteDataThatDoesNotMatchTheShape) {
  HostTensor t = make_tensor(DType::F32, Shape{2, 2});
  t.data.pop_back();
  auto r = serialize_npy(t);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::InvalidArgument) << r.status().to_string();
  EXPECT_NE(r.status().message().find("needs 16 bytes but holds 15"), std::string::npos);
}

TEST(Npy, RefusesFortranOrder) {
  expect_error(parse_npy(with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16)),
               ErrorCode::NotSupported, "fortran_order");
}

TEST(Npy, RefusesGarbageHeaders) {
  const char* headers[] = {
      "",
      "{",
      "}",
      "{'descr': '<f4', 'fortran_order': False}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
      "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,}",
      "{'descr: '<f4', 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} trailing",
      "{'descr': '<f\\4', 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296)}",
  };
  for (const char* h : headers) {
    auto r = parse_npy(with_header(h, 8), "g.npy");
    ASSERT_FALSE(r.ok()) << h;
    EXPECT_EQ(r.status().code(), ErrorCode::InvalidArgument) << h << ": " << r.status().to_string();
    EXPECT_NE(r.status().message().find("'g.npy'"), std::string::npos) << r.status().message();
  }
}

TEST(Npy, RefusesAHeaderLengthPastTheEnd) {
  auto bytes = numpy_written_2x3_f32();
  bytes[8] = 0xFF;
  bytes[9] = 0xFF;
  expect_error(parse_npy(bytes), ErrorCode::InvalidArgument, "runs past the end");
}

TEST(Npy, RefusesUnknownVersions) {
  auto bytes = numpy_written_2x3_f32();
  bytes[6] = 9;
  expect_error(parse_npy(bytes), ErrorCode::InvalidArgument, "version 9.0");
}

TEST(Npy, ReportsAMissingFileByPath) {
  TempDir dir;
  auto r = read_npy(dir.file("none.npy"));
  expect_error(r, ErrorCode::NotFound, "none.npy");
}

}  // namespace
}  // namespace planrt::format
